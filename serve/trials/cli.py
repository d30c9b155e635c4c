"""`worker-serve trial start|status|suspend|resume|abort|gate|evidence`: the trial admin API from
the command line (the gateway must be running; the token is the gateway config's admin token).

`trial gate ID --verdict FILE` reads the verdict `worker-replay gate` wrote (its `passed` and
`policy_sha256`; the gateway refuses a verdict for another gate policy than the trial's).
`trial evidence ID --out DIR` writes `canary.json` from the trial's own cohorts for that gate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from core.jsonfile import JsonFileError, read_json
from serve.gateway.config import load_gateway_config
from serve.trials.policy import TrialError


class VerdictFile(BaseModel):
    """The fields of a gate verdict (replay/analysis/gates.py `Verdict`) a trial needs."""

    model_config = ConfigDict(extra="ignore")
    policy: str
    policy_sha256: str
    candidate: str
    passed: bool
    conditions: list[dict[str, Any]]


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    config = load_gateway_config(args.config)
    token = config.admin.resolved_token()
    if not token:
        raise TrialError(f"{args.config}: no admin token (set ${config.admin.token_env} or admin.token)")
    host = "127.0.0.1" if config.gateway.host in ("0.0.0.0", "::") else config.gateway.host
    url = f"http://{host}:{config.gateway.port}/admin/trials{path}"
    try:
        response = httpx.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    except httpx.HTTPError as exc:
        raise TrialError(f"the gateway at {url} cannot be reached: {exc}") from exc
    data: dict[str, Any] = response.json()
    if response.status_code >= 400:
        raise TrialError(data.get("error", {}).get("message", response.text))
    return data


def _line(status: dict[str, Any]) -> str:
    where = (f", step {status['step']}/{status['steps']} at {status['percent']:g}%"
             if status["phase"] in ("step", "awaiting_gate") else "")
    head = (f"trial {status['id']} ({status['candidate']} on {status['route']}): {status['phase']}{where}"
            + (" (suspended)" if status["suspended"] else "") + (f" — {status['reason']}" if status["reason"] else ""))
    rows = [f"  {name:<20} e = {e['e_value']:<10.4g} candidate {e['candidate_bad']}/{e['candidate_exposure']}  "
            f"control {e['control_bad']}/{e['control_exposure']}"
            + ("  (enforced)" if name in status["enforced"] else "")
            for name, e in status["evidence"].items()]
    return "\n".join([head, f"  abort at e ≥ {1 / status['alpha_per_signal']:.4g}", *rows])


def _run(args: argparse.Namespace) -> int:
    action = args.action
    if action == "start":
        status = _call(args, "POST", "", {"id": args.id, "policy": str(args.policy.resolve())})
    elif action == "status" and args.id is None:
        for row in _call(args, "GET", "")["trials"]:
            print(f"{row['id']}\t{row['route']}\t{row['candidate']}\t{row['phase']}\t{row['updated_at']}")
        return 0
    elif action == "status":
        status = _call(args, "GET", f"/{args.id}")
    elif action in ("suspend", "resume"):
        status = _call(args, "POST", f"/{args.id}/{action}")
    elif action == "abort":
        status = _call(args, "POST", f"/{args.id}/abort", {"reason": args.reason})
    elif action == "gate":
        try:
            verdict = read_json(args.verdict, VerdictFile)
        except JsonFileError as exc:
            raise TrialError(f"not a gate verdict: {exc}") from exc
        passed = sum(c.get("status") == "pass" for c in verdict.conditions)
        summary = f"{verdict.policy}: {passed}/{len(verdict.conditions)} conditions passed ({args.verdict})"
        status = _call(args, "POST", f"/{args.id}/gate",
                       {"passed": verdict.passed, "policy_sha256": verdict.policy_sha256, "summary": summary})
    else:  # evidence
        evidence = _call(args, "GET", f"/{args.id}/evidence")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "canary.json").write_text(json.dumps(evidence, indent=2) + "\n")
        print(f"wrote {args.out / 'canary.json'} (use as --evidence canary=...)")
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
        p.add_argument("--config", type=Path, default=Path("configs/gateway.toml"), help="the gateway's config")
        if needs_id:
            p.add_argument("id", help="the trial's name")
        p.set_defaults(func=run)
        return p

    start = action("start", "start a trial from a policy (configs/trials/*.toml)")
    start.add_argument("--policy", type=Path, required=True)
    status = action("status", "every trial, or one trial's phase and evidence", needs_id=False)
    status.add_argument("id", nargs="?", help="the trial's name")
    action("suspend", "candidate weight 0; the trial keeps its state")
    action("resume", "the current step again")
    action("abort", "end the trial; every cohort back to production").add_argument("--reason", required=True)
    action("gate", "hand the gate's verdict to a trial awaiting it").add_argument(
        "--verdict", type=Path, required=True, help="the JSON `worker-replay gate` wrote into the run directory")
    action("evidence", "write the trial's canary.json for the gate").add_argument("--out", type=Path, required=True)
