"""The fast loop read by replay: memory files, their injection, the provenance ledger, lesson verdicts.

- `files.py`: workspace memory files read (`load_memory`)
- `contract.py`: `check_memory`, the memory contract's checks
- `scaffold.py`: `memory init`: an empty memory tree for workspaces recorded without one
- `inject.py`: an arm's memory condition, injected into a request as production does
- `ledger.py`: the provenance ledger: which results and verdicts depended on which rule
- `lessons.py`: the lesson gate: promote, evict or hold each rule
- `uptake.py`: rule uptake: does a rule move the chosen call (pure)
- `counters.py`: `memory stats`: the fast loop's counters over a fleet
- `churn.py`: rules added, merged and retired per ISO week; the git cross-check
"""
