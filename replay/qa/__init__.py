"""Stop-QA on the worker tier (DESIGN §13): a finished run checked deterministically, then judged by a reviewer
whose agreement with people is measured before any enforce mode is switched on.

The commands are `replay/cli/qa.py`.

- `finished_run.py`: a finished run read from the corpus: thread, calls, the guard's verdicts, final answer
- `checks.py`: the deterministic checks (pure)
- `check_config.py`: the checks' config (`configs/qa/`)
- `findings_report.py`: `qa check`: findings per run, counts per workspace and kind
- `labels.py`: `reviews.jsonl`: labelled runs, modes, verdicts, dispositions
- `verdicts.py`: reviewer verdicts per run
- `prompt.py`: reviewer replay's evidence-bound prompt and its `verdict` tool (pure)
- `answer.py`: a reviewer's answer read into a verdict or a named outcome (pure)
- `review.py`: `qa review`: the resumable, locked reviewer replay run
- `agreement.py`: `qa agree`: reviewer against people, the gate's evidence (pure)
- `gate.py`: `qa gate`: a reviewer judged by a `reviewer_agreement` policy through the gates' evaluation
- `planted_reviewer.py`: the planted reviewer, with known error rates
- `coverage.py`: modes per workspace and the runs with a verdict and a disposition (`memory stats --qa-modes`)
- `qa_files.py`: how Stop-QA's files are read and written
- `errors.py`: `QAError`, Stop-QA's branch of the error tree
"""
