"""`worker-serve trial start|status|suspend|resume|abort|gate|evidence`: the trial admin API from
the command line (the gateway must be running; the token is the gateway config's admin token).

`trial gate ID --verdict FILE` reads the verdict `worker-replay gate` wrote and sends what binds
it: its candidate, its gate policy's sha256, how many conditions passed, and the evidence window
of the canary evidence it was judged on (the `canary` file of its `evidence_paths`, as
`trial evidence` wrote it), and the disputed rules its results carried; the gateway refuses a verdict that is
not the trial's, or that rests on a disputed rule.
`trial evidence ID --out DIR` writes `canary.json` from the trial's own cohorts for that gate.
The gateway is the config's `[gateway]` address, or `--gateway URL` for one started elsewhere (another port).

Every failure — the gateway unreachable or answering something that is not the trial API's
JSON, a file that cannot be read or written — is one `error:` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from core.atomicwrite import write_text_atomic
from core.attestation import VERDICT_PREDICATE, Statement
from core.evidence import CanaryEvidence
from core.names import excerpt
from core.tomlfile import ConfigError, read_regular
from serve.admin_client import AdminAnswer, Answer, admin_call
from serve.gateway.config import load_gateway_config
from serve.trials.trial_policy import TrialError

MAX_FILE_BYTES = 64 << 20


class ConditionStatus(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str


class VerdictFile(BaseModel):
    """The fields of a gate verdict (replay/analysis/gates/policy.py `Verdict`) a trial needs."""

    model_config = ConfigDict(extra="ignore")

    policy: str
    policy_sha256: str
    candidate: str
    passed: bool
    conditions: list[ConditionStatus]
    evidence_paths: dict[str, str] = {}
    tainted_rule_ids: list[str] = []


class VerdictStatement(BaseModel):
    """The predicate of the verdict's in-toto Statement (`core.attestation`), as far as a trial reads it."""

    model_config = ConfigDict(extra="ignore")

    verdict: VerdictFile


class EvidenceRow(AdminAnswer):
    e_value: float
    candidate_bad: int
    candidate_exposure: int
    control_bad: int
    control_exposure: int


class StatusAnswer(AdminAnswer):
    """A trial's status as the admin API answers it (the fields the command line prints)."""

    id: str
    route: str
    candidate: str
    phase: str
    step: int
    steps: int
    percent: float
    suspended: bool
    reason: str | None
    alpha_per_signal: float
    enforced: list[str]
    evidence: dict[str, EvidenceRow]


class TrialRow(AdminAnswer):
    id: str
    route: str
    candidate: str
    phase: str
    updated_at: str


class TrialsAnswer(AdminAnswer):
    trials: list[TrialRow]


def _call(args: argparse.Namespace, method: str, path: str, model: type[Answer],
          body: dict[str, Any] | None = None) -> Answer:
    config = load_gateway_config(args.config)
    token = config.admin.resolved_token()
    if not token:
        raise TrialError(f"{args.config}: no admin token (set ${config.admin.token_env} or admin.token)")
    host = "127.0.0.1" if config.gateway.host in ("0.0.0.0", "::") else config.gateway.host
    url = args.gateway or f"http://{host}:{config.gateway.port}"
    return admin_call(url.rstrip("/"), f"/admin/trials{path}", token, method, model, body,
                      timeout=60, what="the trial API", error=TrialError)


def _read(path: Path, what: str) -> bytes:
    try:
        return read_regular(path, MAX_FILE_BYTES)
    except ConfigError as exc:
        raise TrialError(f"cannot read {what}: {exc}") from exc


def _gate_body(path: Path) -> dict[str, Any]:
    """What binds a verdict file to a trial, as the gate endpoint takes it."""
    try:
        statement = Statement.model_validate_json(_read(path, "the verdict"))
        if statement.predicateType != VERDICT_PREDICATE:
            raise TrialError(f"{path}: not a gate verdict (its predicate type is {excerpt(statement.predicateType)})")
        verdict = VerdictStatement.model_validate(statement.predicate).verdict
    except ValidationError as exc:
        raise TrialError(f"{path}: not a gate verdict: {str(exc).splitlines()[0]}") from exc
    window = None
    if "canary" in verdict.evidence_paths:
        canary = Path(verdict.evidence_paths["canary"])
        try:
            evidence = CanaryEvidence.model_validate_json(_read(canary, "the verdict's canary evidence"))
        except ValidationError as exc:
            raise TrialError(f"{canary}: not canary evidence: {str(exc).splitlines()[0]}") from exc
        window = evidence.window.model_dump() if evidence.window is not None else None
    passed = sum(c.status == "pass" for c in verdict.conditions)
    weights = next((s.digest.get("sha256") for s in statement.subject if s.name.startswith("weights:")), None)
    return {"passed": verdict.passed, "policy_sha256": verdict.policy_sha256, "candidate": verdict.candidate,
            "conditions_passed": passed, "conditions": len(verdict.conditions), "window": window,
            "summary": f"{verdict.policy}: {passed}/{len(verdict.conditions)} conditions passed ({path})"[:2000],
            "tainted_rule_ids": verdict.tainted_rule_ids, "weights": weights}


def _line(status: StatusAnswer) -> str:
    where = f", step {status.step}/{status.steps} at {status.percent:g}%" if status.phase in ("step", "awaiting_gate") \
        else ""
    head = (f"trial {status.id} ({status.candidate} on {status.route}): {status.phase}{where}"
            + (" (suspended)" if status.suspended else "") + (f" — {status.reason}" if status.reason else ""))
    rows = [f"  {name:<20} e = {e.e_value:<10.4g} candidate {e.candidate_bad}/{e.candidate_exposure}  "
            f"control {e.control_bad}/{e.control_exposure}" + ("  (enforced)" if name in status.enforced else "")
            for name, e in status.evidence.items()]
    return "\n".join([head, f"  abort at e ≥ {1 / status.alpha_per_signal:.4g}", *rows])


def _run(args: argparse.Namespace) -> int:
    action = args.action
    if action == "start":
        status = _call(args, "POST", "", StatusAnswer, {"id": args.id, "policy": str(args.policy.resolve())})
    elif action == "status" and args.id is None:
        for row in _call(args, "GET", "", TrialsAnswer).trials:
            print(f"{row.id}\t{row.route}\t{row.candidate}\t{row.phase}\t{row.updated_at}")
        return 0
    elif action == "status":
        status = _call(args, "GET", f"/{args.id}", StatusAnswer)
    elif action in ("suspend", "resume"):
        status = _call(args, "POST", f"/{args.id}/{action}", StatusAnswer)
    elif action == "abort":
        status = _call(args, "POST", f"/{args.id}/abort", StatusAnswer, {"reason": args.reason})
    elif action == "gate":
        status = _call(args, "POST", f"/{args.id}/gate", StatusAnswer, _gate_body(args.verdict))
    else:  # evidence
        evidence = _call(args, "GET", f"/{args.id}/evidence", CanaryEvidence)
        target = args.out / "canary.json"
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            write_text_atomic(target, json.dumps(evidence.model_dump(mode="json"), indent=2) + "\n")
        except OSError as exc:
            raise TrialError(f"cannot write {target}: {exc.strerror or exc}") from exc
        print(f"wrote {target} (use as --evidence canary=...)")
        return 0
    print(_line(status))
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except TrialError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def add_parser(sub: Any) -> None:
    """`trial` and its actions on `worker-serve`'s subparsers."""
    trial = sub.add_parser("trial", help="progressive adapter trials (through the gateway's admin API)")
    actions = trial.add_subparsers(dest="action", required=True)

    def action(name: str, help_: str, needs_id: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(name, help=help_)
        p.add_argument("--config", type=Path, default=Path("configs/gateway.toml"),
                       help="the gateway's config (its admin token, and its address unless --gateway)")
        p.add_argument("--gateway", metavar="URL", default=None,
                       help="the gateway's address when it is not the config's [gateway] host and port (a second "
                            "checkout's gateway on another port)")
        if needs_id:
            p.add_argument("id", help="the trial's name")
        p.set_defaults(func=run)
        return p

    start = action("start", "start a trial from a policy (configs/trials/*.toml)")
    start.add_argument("--policy", type=Path, required=True, help="the trial policy (configs/trials/*.toml)")
    status = action("status", "every trial, or one trial's phase and evidence", needs_id=False)
    status.add_argument("id", nargs="?", help="the trial's name")
    action("suspend", "candidate weight 0; the trial keeps its state")
    action("resume", "the current step again")
    action("abort", "end the trial; every cohort back to production").add_argument(
        "--reason", required=True, help="why it ends (kept with the trial)")
    action("gate", "hand the gate's verdict to a trial awaiting it").add_argument(
        "--verdict", type=Path, required=True, help="the JSON `worker-replay gate` wrote into the run directory")
    action("evidence", "write the trial's canary.json for the gate").add_argument(
        "--out", type=Path, required=True, help="the directory canary.json is written into")
