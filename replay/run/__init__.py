"""A run against a served model: what `worker-replay run`, `sandbox run` and `qa review` share.

Each of the three is a plan of work items and a coroutine that turns one item into one result line; the
executor does the rest the same way for all three (served models checked, one writer, resume of the same run
only, a torn last line cut, lines appended and flushed one at a time, the status line).

- `run_config.py`: the run config (`RUN.toml`)
- `endpoint.py`: the endpoint client: auth, served models, one request with retries
- `directory.py`: the run directory: lock, resume, done pairs, `run.json` and its seal, reading `results.jsonl` back
- `progress.py`: a run's status line
- `executor.py`: the one resumable executor: check, lock, plan, append each result line, progress
- `decisions.py`: the decision replay (`worker-replay run`): every arm × decision, memory injected per arm
"""
