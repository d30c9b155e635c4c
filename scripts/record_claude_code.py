"""Record the Claude Code session files the corpus tests read (tests/replay/corpus/data/).

Real sessions, nothing written by hand: the Claude Agent SDK (its bundled Claude Code) runs through the
real gateway in front of a running engine, with capture in `descriptor` mode; Claude Code writes its own
session files, and the gateway's descriptors of the same calls are exported beside them
(`captures.jsonl`, one `CapturedDecision` a line). Into `claude-code/`: a tool that fails once
(`is_error`), and a main loop that may only delegate through Claude Code's `Agent` tool, at 64 output
tokens (the 135M model's inputs to it are cut: Claude Code keeps them as `__unparsedToolInput`). Into
`claude-code-subagents/`: the same delegation at 1,000 tokens, where subagents run (their files and
descriptors kept for the first `--subagents` of those the main loop started, by name, to keep the
fixture small; the main file whole). It takes 10 to 30 minutes on a CPU engine: the subagents run in
the background until the main loop's context fills. Run it again when the runtime's version changes,
and commit what it writes:

    python scripts/record_claude_code.py --engine http://127.0.0.1:8000   # `worker-serve engine` running
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.canonical import message_digest  # noqa: E402
from core.capture_store import read_decisions  # noqa: E402
from core.errors import WorkerTierError  # noqa: E402
from demo.agent import WORKSPACE, agent_session  # noqa: E402
from tests.support.gateway_harness import RunningGateway, write_config  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "replay" / "corpus" / "data"
HOME = Path("/tmp/worker-tier-agent")


def record(engine: str, out: Path, sessions: list[dict[str, Any]], subagents: int | None = None) -> None:
    """Run `sessions` (agent_session's options) through a capturing gateway; write their files to `out`."""
    with tempfile.TemporaryDirectory(prefix="record-claude-code-") as scratch:
        work = Path(scratch)
        (work / "adapters").mkdir()
        config = write_config(work / "gw", [engine], work / "adapters", gateway='forced_tool_routes = ["worker"]',
                              extra=f'[capture]\nmode = "descriptor"\nworkspaces = ["{WORKSPACE}"]\n'
                                    'sample_rate = 1.0\n')
        corpus = work / "corpus"
        shutil.rmtree(HOME, ignore_errors=True)
        HOME.mkdir()
        with RunningGateway(config) as gw:
            for options in sessions:
                try:
                    asyncio.run(agent_session(gw.url, HOME, corpus, **options))
                except WorkerTierError as exc:  # e.g. the context filled up: the files are what we keep
                    print(f"the session ended with: {exc}")
            db = gw.config.capture.db
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(corpus / WORKSPACE / "projects", out / WORKSPACE / "projects")
        rows = [asdict(d) for d in read_decisions(db)]
    if subagents is not None:
        files = sorted(out.glob(f"{WORKSPACE}/projects/*/*/subagents/agent-*.jsonl"), key=spawned_by_a_subagent)
        for dropped in files[subagents:]:
            dropped.unlink()
            dropped.with_suffix(".meta.json").unlink(missing_ok=True)
        threads = {first_thread(f) for f in out.glob(f"{WORKSPACE}/projects/**/*.jsonl")}
        rows = [r for r in rows if r["thread"] in threads]
    (out / "captures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{out}: {len(rows)} captured descriptors, {len(list(out.rglob('*.jsonl'))) - 1} session files")


def spawned_by_a_subagent(path: Path) -> tuple[bool, str]:
    """Sort key: subagents the main loop started first (their `.meta.json` names no parent agent), then by name."""
    meta = json.loads(path.with_suffix(".meta.json").read_text())
    return "parentAgentId" in meta, path.name


def first_thread(path: Path) -> str:
    """The thread the gateway gives a session file's calls: its first message's canonical hash."""
    first = next(r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == "user")
    return message_digest("messages", first["message"])[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", required=True, help="a running engine's base URL")
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--subagents", type=int, default=2, help="subagent runs kept in claude-code-subagents/")
    args = parser.parse_args()
    record(args.engine, args.out / "claude-code", [{"fail_first": True}, {"delegate": True}])
    record(args.engine, args.out / "claude-code-subagents", [{"delegate": True, "max_output_tokens": 1000}],
           subagents=args.subagents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
