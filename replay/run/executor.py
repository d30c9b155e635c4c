"""The one resumable executor behind `worker-replay run`, `sandbox run` and `qa review`.

A kind of run describes itself as a `Job`: its `run.json`, the results file its lines go to, how to read which
items that file already holds, how to plan the rest, and a coroutine that turns one item into one line. The
executor does everything else, once for all three, so a fix to resume or locking is made in one place:

1. the served models are fetched and every arm's model checked (`replay.run.endpoint`), and what serves each arm
   (its served identity: the version and the adapter weights' fingerprint) goes into `run.json`'s `served`;
2. under the run directory's lock (one writer), a directory holding another run is refused with what changed,
   a torn last line is cut, and the whole plan is made before anything is written (a plan error writes nothing,
   so a corrected config is a new run, not a refused mix);
3. `run.json` is written (or kept, on a resume), and each line is appended and flushed as soon as it exists,
   so a run killed at any point resumes with exactly one line per item;
4. a unit of work whose endpoint still fails after its retries may `Halt` the run: no new item is taken, the
   ones in flight finish and are written, and the caller is told why;
5. a run that did everything is sealed (`replay.run.directory.seal_run`): the results file's digest goes into
   `run.json`, written here once for all three kinds of run, and every reader checks it.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import aiohttp
from pydantic import BaseModel

from replay.run.directory import SERVED, check_resumable, check_run_dir, open_seal, prepare_run_dir, run_lock, seal_run
from replay.run.endpoint import chat_session, check_served, fetch_served
from replay.run.progress import Progress
from replay.run.run_config import RunConfig

Item = TypeVar("Item")
Done = set[tuple[str, str]]
Served = Mapping[str, list[str]]


@dataclass(frozen=True)
class Halt:
    """What a unit of work returns instead of a line when the run must stop (its endpoint did not answer)."""

    error: str


Perform = Callable[[aiohttp.ClientSession, Item], Awaitable[BaseModel | Halt]]
"""One item to its result line (or a `Halt`), through the run's one HTTP session."""


@dataclass(frozen=True)
class Job(Generic[Item]):
    """One kind of run, as the executor needs it."""

    label: str
    """The status line's name for the run."""
    results: str
    """The file in the run directory the lines go to."""
    manifest: dict[str, Any]
    """`run.json`: what a resume must match (`replay.run.directory.manifest_diff`)."""
    completed: Callable[[Path], Done]
    """The items the results file already holds, by key (a torn last line cut off)."""
    plan: Callable[[Done], Sequence[Item]]
    """The work still to do; raises (a `RunError`) before anything is written when the run cannot start."""
    perform: Perform[Item]


@dataclass(frozen=True)
class Executed:
    """What one invocation did."""

    planned: int
    """Items this invocation set out to do (fewer were written only when it halted)."""
    done_before: Done
    """What the results file held when it started."""
    halted: str | None = None
    """Why the run stopped early (an endpoint that did not answer); None when it did everything."""


def open_run(job: Job[Item], run_dir: Path) -> tuple[Sequence[Item], Done]:
    """Steps 2 and 3 up to the first line: the directory checked (a resume only of this run, its sealed results
    unchanged), the rest planned, `run.json` written and its seal opened. Call under `run_lock`."""
    if check_run_dir(run_dir, job.manifest):
        check_resumable(run_dir, job.results)
    done = job.completed(run_dir / job.results)
    items = job.plan(done)
    prepare_run_dir(run_dir, job.manifest)
    open_seal(run_dir)
    return items, done


async def execute(items: Sequence[Item], perform: Perform[Item], config: RunConfig, results_path: Path, label: str,
                  slots: asyncio.Semaphore | None = None) -> tuple[int, str | None]:
    """Perform every item with the runner's concurrency, appending each line as soon as it exists. `slots`: the
    engine's sequences when other work in this event loop shares them (the demo's replay beside its sandbox); an
    item holds one while it is performed. Returns (lines written, why it halted or None)."""
    queue = deque(items)
    halted: list[str] = []
    written = 0
    with Progress(len(items), label) as progress, results_path.open("a", encoding="utf-8") as out:
        async with chat_session(config) as session:

            async def worker() -> None:
                nonlocal written
                while queue and not halted:
                    item = queue.popleft()
                    async with slots or nullcontext():
                        line = await perform(session, item)
                    if isinstance(line, Halt):
                        halted.append(line.error)
                        return
                    out.write(line.model_dump_json() + "\n")
                    out.flush()
                    written += 1
                    progress.advance()

            await asyncio.gather(*(worker() for _ in range(min(config.runner.concurrency, len(items)) or 1)))
    return written, (halted[0] if halted else None)


async def run_job(config: RunConfig, run_dir: Path, job_for: Callable[[Served, str | None], Job[Item]],
                  slots: asyncio.Semaphore | None = None) -> Executed:
    """The whole run (steps 1–5): `job_for` makes the job from what the endpoints serve and the engine's version."""
    served, engine_version, identities = await fetch_served(config)
    check_served(config, served)
    job = job_for(served, engine_version)
    job = replace(job, manifest={**job.manifest, SERVED: {arm: json.loads(identity.model_dump_json())
                                                          for arm, identity in identities.items()}})
    with run_lock(run_dir):
        items, done = open_run(job, run_dir)
        _, halted = await execute(items, job.perform, config, run_dir / job.results, job.label, slots)
        if halted is None:
            seal_run(run_dir, job.results)
    return Executed(planned=len(items), done_before=done, halted=halted)
