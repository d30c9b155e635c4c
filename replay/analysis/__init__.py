"""Reading results: paired statistics, comparisons, pre-registered gates and reports.

- `compare.py`: the paired comparison of two arms from `results.jsonl` alone
- `stages.py`: the same arms on both sides of a stage (quantisation), each against itself (pure)
- `plan.py`: `worker-replay plan`: a suite sized from a pilot run
- `provenance.py`: what compare, report and gate record in the outcome ledger (the run, its comparisons, verdicts)
- `contamination.py`: which suite decisions a candidate's training rows reach (session, request, near-copy; pure)
- `training_lineage.py`: an arm's training lineage from the files (adapter → training record → curated set), checked
- `gates/`: pre-registered gate policies evaluated on a run
- `report/`: `report.md`, `report.html` and the plot
"""
