"""The SQLite registry: adapter checks, never-reused names, route transitions, durability."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields

import pytest

from serve.gateway.registry import AdapterError, NameTakenError, Registry, RequestRow, ShadowRow, inspect_adapter
from tests.support.gateway_harness import BASE_MODEL, fake_adapter


def open_registry(tmp_path) -> Registry:
    return Registry(tmp_path / "state.sqlite", ["worker"], "worker-base")


def files(root, name, **kwargs):
    fake_adapter(root, name, **kwargs)
    return inspect_adapter(name, root, BASE_MODEL, 16)


def test_inspect_accepts_a_lora_for_the_base_model_inside_the_root(root):
    checked = files(root, "a-v1", rank=16)
    assert checked.path == (root / "a-v1").resolve() and checked.rank == 16
    assert inspect_adapter(str(root / "a-v1"), root, BASE_MODEL, 16) == checked  # absolute path, same result


@pytest.mark.parametrize(("make", "message"), [
    (lambda root: fake_adapter(root, "big", rank=32), "rank 32 is above the engine's limit 16"),
    (lambda root: fake_adapter(root, "other", base="HuggingFaceTB/SmolLM2-360M"), "trained on"),
    (lambda root: (root / "empty").mkdir(), "does not exist"),
])
def test_inspect_refuses_adapters_that_do_not_fit_the_engine(root, make, message):
    make(root)
    name = next(p.name for p in root.iterdir())
    with pytest.raises(AdapterError, match=message):
        inspect_adapter(name, root, BASE_MODEL, 16)


def test_inspect_refuses_paths_outside_the_root_also_through_symlinks(root, tmp_path):
    outside = fake_adapter(tmp_path / "elsewhere", "x")
    (root / "link").symlink_to(outside)
    for path in (str(outside), "../elsewhere/x", "link"):
        with pytest.raises(AdapterError, match="outside the adapter root"):
            inspect_adapter(path, root, BASE_MODEL, 16)


def test_inspect_needs_weights_and_a_lora_config(root):
    directory = fake_adapter(root, "noweights")
    (directory / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterError, match="no adapter_model"):
        inspect_adapter("noweights", root, BASE_MODEL, 16)
    directory = fake_adapter(root, "ia3")
    config = json.loads((directory / "adapter_config.json").read_text())
    (directory / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    with pytest.raises(AdapterError, match="not 'LORA'"):
        inspect_adapter("ia3", root, BASE_MODEL, 16)


def test_names_are_never_reused_even_after_unload(tmp_path, root):
    registry = open_registry(tmp_path)
    registry.register("a-v1", files(root, "a-v1"))
    registry.set_adapter_state("a-v1", "unloaded")
    with pytest.raises(NameTakenError):
        registry.register("a-v1", files(root, "a-v1-copy"))


def test_production_rollback_and_promotion_of_a_canary(tmp_path, root):
    registry = open_registry(tmp_path)
    for name in ("a-v1", "b-v1"):
        registry.register(name, files(root, name))
        registry.set_adapter_state(name, "loaded")
    route = registry.set_production("worker", "a-v1")
    assert (route.production, route.previous) == ("a-v1", "worker-base")
    registry.set_canary("worker", "b-v1", 30.0, "workspace")
    registry.set_shadow("worker", "b-v1", 0.5)
    route = registry.set_production("worker", "b-v1")
    assert (route.production, route.previous, route.canary, route.shadow) == ("b-v1", "a-v1", None, None)
    route = registry.rollback("worker")
    assert (route.production, route.previous) == ("a-v1", "b-v1")
    assert registry.state.references("b-v1") == ["rollback target of route 'worker'"]
    assert registry.set_production("worker", "a-v1") == route  # no-op: the rollback target is kept


def test_state_survives_reopening_with_its_revision_and_log(tmp_path, root):
    registry = open_registry(tmp_path)
    registry.register("a-v1", files(root, "a-v1"))
    registry.set_adapter_state("a-v1", "loaded")
    registry.set_production("worker", "a-v1")
    registry.set_canary("worker", "worker-base", 25.0, "session")
    registry.record_request(RequestRow(request_id="r1", endpoint="chat", requested="worker", route="worker",
                                       adapter="a-v1", kind="production", sticky_key="s-1", upstream="engine-0",
                                       status=200, reason=None, duration_s=0.1))
    before = registry.state
    registry.close()
    again = open_registry(tmp_path)
    assert again.state == before
    assert again.state.revision == 4
    assert [entry["action"] for entry in again.admin_log()] == [
        "canary_start", "set_production", "adapter_loaded", "register"]
    assert again.requests()[0]["sticky_key"] == "s-1"
    assert sqlite3.connect(tmp_path / "state.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_failed_change_leaves_no_trace(tmp_path, root):
    registry = open_registry(tmp_path)
    registry.register("a-v1", files(root, "a-v1"))
    before = registry.state
    with pytest.raises(NameTakenError):
        registry.register("a-v1", files(root, "again"))
    assert registry.state == before
    assert len(registry.admin_log()) == 1


@pytest.mark.parametrize(("table", "row_type"), [("requests", RequestRow), ("shadow_results", ShadowRow)])
def test_log_row_types_declare_exactly_the_tables_columns(tmp_path, table, row_type):
    """A field the table lacks would fail only at the next flush, far from the call that logged it."""
    registry = open_registry(tmp_path)
    columns = {r[1] for r in registry._db.execute(f"PRAGMA table_info({table})")}
    registry.close()
    assert columns - {"id", "at"} == {f.name for f in fields(row_type)}
@pytest.mark.parametrize("path", ["a\0b", "\0", "ok/\0/x"])
def test_inspect_refuses_a_path_with_a_nul_byte(root, path):
    """Issue 14 item 8: bad admin input is an AdapterError (a 4xx with a message), never a ValueError."""
    with pytest.raises(AdapterError, match="NUL"):
        inspect_adapter(path, root, BASE_MODEL, 16)


@pytest.mark.parametrize("linked", ["adapter_config.json", "adapter_model.safetensors", "tokenizer.json"])
def test_inspect_refuses_files_that_resolve_outside_the_root(root, tmp_path, linked):
    """Issue 14 item 15: every file the engine will read must lie inside the root."""
    source = fake_adapter(tmp_path / "elsewhere", "x")
    (source / "tokenizer.json").write_text("{}")
    directory = fake_adapter(root, "a-v1")
    target = directory / linked
    if target.exists():
        target.unlink()
    target.symlink_to(source / linked)
    with pytest.raises(AdapterError, match=f"{linked}.*outside the adapter root"):
        inspect_adapter("a-v1", root, BASE_MODEL, 16)


def test_inspect_accepts_symlinks_that_stay_inside_the_root(root):
    shared = fake_adapter(root, "shared")
    directory = root / "a-v1"
    directory.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (directory / name).symlink_to(shared / name)
    assert inspect_adapter("a-v1", root, BASE_MODEL, 16).path == directory.resolve()


@pytest.mark.parametrize("content", [b"[" * 100_000, b'{"r": "\xff"}', b'{"r": ' + b"9" * 5000 + b"}"])
def test_inspect_refuses_an_unreadable_config_with_one_error(root, content):
    directory = fake_adapter(root, "deep")
    (directory / "adapter_config.json").write_bytes(content)
    with pytest.raises(AdapterError, match="adapter_config.json: "):
        inspect_adapter("deep", root, BASE_MODEL, 16)


def _log_rows(tmp_path, registry: Registry) -> None:
    for i in range(3):
        registry.record_request(RequestRow(
            request_id=f"r{i}", endpoint="chat", requested="worker", route="worker", adapter="worker-base",
            kind="production", sticky_key=None, upstream="engine-0", status=200, reason=None, duration_s=0.1))


def test_a_failed_log_write_keeps_the_rows_for_the_next_try(tmp_path):
    """Issue 14 item 10: a store error must not lose the buffered rows."""
    from serve.gateway.registry import LogWriteError

    registry = open_registry(tmp_path)
    _log_rows(tmp_path, registry)
    saboteur = sqlite3.connect(tmp_path / "state.sqlite")
    schema = saboteur.execute("SELECT sql FROM sqlite_master WHERE name = 'requests'").fetchone()[0]
    saboteur.execute("ALTER TABLE requests RENAME TO requests_away")
    saboteur.commit()
    with pytest.raises(LogWriteError, match="state.sqlite"):
        registry.flush()
    saboteur.execute("DROP TABLE requests_away")
    saboteur.execute(schema)
    saboteur.commit()
    saboteur.close()
    registry.flush()
    assert sorted(r["request_id"] for r in registry.requests()) == ["r0", "r1", "r2"]
    registry.close()


def test_the_rows_kept_for_a_retry_are_bounded(tmp_path, monkeypatch):
    import serve.gateway.registry as module

    monkeypatch.setattr(module, "_MAX_PENDING", 2)
    drops: list[tuple[str, str]] = []
    registry = Registry(tmp_path / "state.sqlite", ["worker"], "worker-base",
                        on_drop=lambda table, reason: drops.append((table, reason)))
    _log_rows(tmp_path, registry)
    saboteur = sqlite3.connect(tmp_path / "state.sqlite")
    saboteur.execute("ALTER TABLE requests RENAME TO requests_away")
    saboteur.commit()
    with pytest.raises(module.LogWriteError):
        registry.flush()
    assert drops == [("requests", "overflow")]
    saboteur.execute("ALTER TABLE requests_away RENAME TO requests")
    saboteur.commit()
    saboteur.close()
    registry.flush()
    assert sorted(r["request_id"] for r in registry.requests()) == ["r1", "r2"]  # the oldest went
    registry.close()


def test_rollback_ends_a_canary_or_shadow_of_the_version_it_makes_production(tmp_path, root):
    """Issue 14 item 9: no canary of production itself, no shadow comparing a version with itself."""
    registry = open_registry(tmp_path)
    for name in ("a-v1", "b-v1", "c-v1"):
        registry.register(name, files(root, name))
        registry.set_adapter_state(name, "loaded")
    registry.set_production("worker", "a-v1")
    registry.set_production("worker", "b-v1")  # a-v1 is the rollback target
    registry.set_canary("worker", "a-v1", 10.0, "workspace")
    registry.set_shadow("worker", "a-v1", 0.5)
    route = registry.rollback("worker")
    assert (route.production, route.previous, route.canary, route.shadow) == ("a-v1", "b-v1", None, None)
    registry.set_canary("worker", "c-v1", 10.0, "workspace")  # a trial of another version goes on
    registry.set_shadow("worker", "c-v1", 0.5)
    route = registry.rollback("worker")
    assert route.canary is not None and route.canary.candidate == "c-v1"
    assert route.shadow is not None and route.shadow.candidate == "c-v1"
    log = [entry["action"] for entry in registry.admin_log(3)]
    assert log[0] == "rollback"
    registry.close()
