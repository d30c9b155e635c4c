"""Every subcommand of the three CLIs, found by walking their argparse parsers (a new subcommand is
covered without touching this file), run in-process with hostile files where it takes a path: a
missing path, a directory, an empty file, garbage bytes, a file that is not UTF-8, and a directory
whose every file a command reads is garbage. A hostile file is the user's to fix: one `error: …`
line and exit 2 (or a validator's own problem listing, exit 1) — never a traceback.

Subcommands that would train or serve on success are walked too, with every path hostile: they must
fail on their inputs before they start anything (engine, gateway: a bad `--config`)."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from demo.cli import build_parser as demo_parser
from replay.cli import build_parser as replay_parser
from serve.cli import build_parser as serve_parser

CLIS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "worker-serve": serve_parser, "worker-replay": replay_parser, "worker-demo": demo_parser}

# What starts the engine and the gateway once its inputs are good: the demo itself (its only path
# is where it writes). `base` and `adapters` are walked: with the cache empty (WORKER_TIER_CACHE
# below) they stop at "no model" before any training.
NOT_WALKED = {("worker-demo", "run"), ("worker-demo", "deferred"), ("worker-demo", "agent"), ("worker-demo", "loop")}
# Validators report what is wrong with their input as a listing and exit 1 (README).
LISTS_PROBLEMS = {("worker-replay", "suite", "validate"), ("worker-replay", "suite", "check-privacy"),
                  ("worker-replay", "sandbox", "validate"), ("worker-replay", "memory", "check")}
# The files the commands read inside a directory they are given (run, suite, pack, memory, model).
KNOWN_FILES = ("run.json", "results.jsonl", "suite.toml", "decisions.jsonl", "pack.toml", "scenarios.jsonl",
               "config.json", "adapter_config.json", "train.jsonl", "keys.toml", "manifest.json", "MEMORY.md",
               "capture.sqlite", "state.sqlite", "ledger.sqlite", "gateway.toml")
GARBAGE = b"\x00\xff{[\"garbage\n\x80\x81 = = \xfe"
NOT_UTF8 = b"name = \"caf\xe9\"\n{\"id\": \"\xff\xfe\"}\n"
TEXT_GARBAGE = b'{"unterminated\n= = ][\n'


def wrong_shape(name: str) -> bytes:
    """Well-formed files of the wrong shape: JSON that is a list, TOML with none of the keys."""
    if name.endswith((".json", ".jsonl")):
        return b"[]\n"
    return b"x = 1\n" if name.endswith(".toml") else b"[]"


DIRECTORY_CONTENT: dict[str, Callable[[str], bytes]] = {
    "garbage": lambda _: TEXT_GARBAGE, "not-utf8": lambda _: NOT_UTF8, "wrong-shape": wrong_shape}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                         argparse.ArgumentParser]]:
    """(subcommand path, its parser) for every runnable subcommand."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from leaves(child, (*path, name))


def hostile(kind: str, root: Path, index: int) -> Path:
    """A fresh hostile path of `kind` under `root`."""
    path = root / f"arg{index}"
    if kind == "directory":
        path.mkdir()
    elif kind.endswith("-directory"):
        path.mkdir()
        content = DIRECTORY_CONTENT[kind.removesuffix("-directory")]
        for name in KNOWN_FILES:
            (path / name).write_bytes(content(name))
        (path / "ws-a").mkdir()
        (path / "ws-a" / "MEMORY.md").write_bytes(content("MEMORY.md"))
    elif kind != "missing":
        path.write_bytes({"empty": b"", "garbage": GARBAGE, "not-utf8": NOT_UTF8}[kind])
    return path


def argv_for(parser: argparse.ArgumentParser, kind: str, root: Path) -> list[str]:
    """The subcommand's arguments: every path hostile, every other required one a plain value; of mutually
    exclusive options, the first only."""
    argv: list[str] = []
    exclusive = [set(map(id, group._group_actions)) for group in parser._mutually_exclusive_groups]
    taken: set[int] = set()
    for index, action in enumerate(parser._actions):
        if isinstance(action, argparse._HelpAction) or action.nargs == 0:
            continue
        rivals = next((group for group in exclusive if id(action) in group), set())
        if rivals & taken:
            continue
        taken.add(id(action))
        required = action.required or not action.option_strings
        if action.type is Path:
            value = str(hostile(kind, root, index))
        elif not required:
            continue
        elif action.choices:
            value = str(next(iter(action.choices)))
        elif action.type in (int, float):
            value = "1"
        else:
            value = "a"
        if action.nargs == "?" and not action.option_strings and action.type is not Path:
            continue
        argv += [action.option_strings[0], value] if action.option_strings else [value]
    return argv


CASES = [(cli, path) for cli, build in CLIS.items() for path, _ in leaves(build())
         if (cli, *path) not in NOT_WALKED]
KINDS = ("missing", "directory", "empty", "garbage", "not-utf8", "garbage-directory", "not-utf8-directory",
         "wrong-shape-directory")


def test_the_walk_finds_every_cli_and_the_subcommands_everyone_uses() -> None:
    walked = {(cli, *path) for cli, path in CASES}
    assert {("worker-serve", "engine"), ("worker-serve", "gateway"), ("worker-replay", "sandbox", "report"),
            ("worker-replay", "suite", "build"), ("worker-demo", "pack")} <= walked
    assert len(walked) > 30


def undocumented(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[str]:
    """Every subcommand and every argument (flag or positional) under `parser` that `--help` leaves blank."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                if not helps.get(name):
                    yield " ".join((*path, name))
                yield from undocumented(child, (*path, name))
        elif not action.help:
            yield f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_every_subcommand_and_argument_has_help(cli: str) -> None:
    assert list(undocumented(CLIS[cli](), (cli,))) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("cli", "path"), CASES, ids=[" ".join((c, *p)) for c, p in CASES])
def test_hostile_paths_are_one_error_line(cli: str, path: tuple[str, ...], kind: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "in"
    root.mkdir()
    work = tmp_path / "cwd"  # relative defaults (the ledger, configs/gateway.toml) land here
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("WORKER_TIER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WORKER_REPLAY_PSEUDONYM_KEYS", str(hostile(kind, root, 999)))
    parser = dict(leaves(CLIS[cli]()))[path]
    argv = [*path, *argv_for(parser, kind, root)]
    main = {"worker-serve": "serve.cli", "worker-replay": "replay.cli", "worker-demo": "demo.cli"}[cli]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = __import__(main, fromlist=["main"]).main(argv)
        except SystemExit as exit_:  # argparse
            status = exit_.code if isinstance(exit_.code, int) else 2
        except Exception as exc:  # noqa: BLE001 — what the test exists to find
            pytest.fail(f"{cli} {' '.join(argv)}: traceback: {type(exc).__name__}: {exc}")
    lines = err.getvalue().strip().splitlines()
    if status == 0 or (status == 1 and (cli, *path) in LISTS_PROBLEMS):
        return
    assert status == 2, (argv, err.getvalue())
    assert lines and lines[0].startswith("error: "), (argv, err.getvalue())
    assert all(line.startswith("  ") for line in lines[1:]), (argv, err.getvalue())
