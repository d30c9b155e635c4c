"""Deferred-replay half of worker-tier: suites, scoring, paired statistics, gates and reports.

- `cli/`: `worker-replay`, one module per command group
- `run/`: runs against a served model: config, endpoint client, run directory, the one executor, decision replay
- `corpus/`: the platform's records of its sessions, read off the serving host; suites built from them
- `privacy/`: redaction with tenant-scoped pseudonyms, and the privacy check
- `memory/`: workspace memory: files, checks, injection, the provenance ledger, the lesson gate, counters
- `analysis/`: reading results: comparison, planning, gates, reports
- `calibration/`: the planted-effect instruments and `worker-replay calibrate`
- `sandbox/`: sandboxed task replay: worlds, scenario packs, episodes, measures, evidence
- `curation/`: the slow loop's input: training sets from a corpus and replay-proven corrections
- `qa/`: Stop-QA: deterministic checks of finished runs, and reviewer agreement
- `suite.py`: frozen decision suites: validate, load, freeze
- `suite_checks.py`: checks of suite decisions beyond their schema (pure)
- `stats/`: the statistics (pure): exact paired tests and intervals, Clopper–Pearson, κ, power
- `errors.py`: `ReplayError`, the replay branch of the exception root
- `__main__.py`: `python -m replay`
"""
