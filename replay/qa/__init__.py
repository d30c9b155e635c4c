"""Stop-QA on the worker tier (DESIGN §13): a finished run checked deterministically, then judged by a reviewer
whose agreement with people is measured before any enforce mode is switched on.

`run.py` (a finished run read from the corpus), `checks.py` (the deterministic checks, pure) with `config.py`
(`configs/qa/`) and `report.py` (`qa check`); `labels.py` (`reviews.jsonl`: modes, verdicts, dispositions) and
`verdicts.py` (reviewer verdicts per run); reviewer replay: `prompt.py` (the evidence-bound prompt and the
`verdict` tool, pure), `answer.py` (an answer read into a verdict or a named outcome, pure), `review.py` (the
resumable run, `qa review`); `stats.py` and `agreement.py` (reviewer against people, exactly, pure: the
`reviewer_agreement` gate's evidence); `planted.py` (the planted reviewer that calibrates them). Coverage
counters come later, beside these. The commands are `replay/cli/qa.py`.
"""
