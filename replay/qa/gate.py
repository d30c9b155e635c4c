"""The reviewer gate (DESIGN §13; `worker-replay qa gate`): a reviewer judged by a pre-registered policy of
`reviewer_agreement` conditions on `qa agree`'s evidence, through the gates' own evaluation."""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.evidence import AgreementReport
from core.jsonfile import read_json
from core.regularfile import read_regular_bytes
from core.tomlfile import MAX_TOML_BYTES
from replay.analysis.compare import Comparison
from replay.analysis.gates import Verdict, evaluate, load_policy
from replay.analysis.gates.conditions import ReviewerAgreement
from replay.qa.errors import QAError
from replay.stats import overhead

PEOPLE = "people"
"""The baseline a reviewer is judged against: the dispositions people gave."""


def evaluate_reviewer_gate(policy_path: Path, agreement_path: Path, reviewer: str) -> Verdict:
    """A reviewer judged by a pre-registered policy of `reviewer_agreement` conditions on `qa agree`'s evidence,
    through the gates' own evaluation, so its verdict is a gate verdict like any other: candidate the reviewer,
    baseline the people who labelled the runs. A reviewer is judged from labels, not from a replay run, so the
    comparison beside it is empty, and a policy holding any other kind of condition is refused (it judges a
    replay run: `worker-replay gate`). The agreement file is read first: a file that is not one, or a reviewer
    it does not name, is a `QAError`, not a condition not run."""
    sha256 = hashlib.sha256(read_regular_bytes(policy_path, MAX_TOML_BYTES)).hexdigest()
    policy = load_policy(policy_path)
    others = [c.id for c in policy.conditions if not isinstance(c, ReviewerAgreement)]
    if others:
        raise QAError(f"{policy_path}: condition(s) {', '.join(others)} judge a replay run, not a reviewer: "
                      "evaluate this policy with `worker-replay gate`")
    report = read_json(agreement_path, AgreementReport)
    known = sorted({r.reviewer for r in report.rows})
    if reviewer not in known:
        raise QAError(f"{agreement_path}: no verdicts of reviewer {reviewer!r} (it has: {', '.join(known) or 'none'})")
    empty = Comparison(baseline=PEOPLE, candidate=reviewer, decisions=0, correctness=[], repeats=[],
                       overhead=overhead([], [], [], []), comparisons_made=0)
    evidence = {c.evidence: agreement_path for c in policy.conditions if isinstance(c, ReviewerAgreement)}
    return evaluate(policy, empty, evidence, policy_path=policy_path, policy_sha256=sha256)
