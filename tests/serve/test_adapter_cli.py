"""`worker-serve adapter register|load|list` against a running gateway (the real app under uvicorn).

Admin calls need no model answers, so, as in tests/serve/gateway/endpoints/test_admin.py, the gateway fronts
the fault injector (it accepts adapter loads) or no upstream at all; the adapters are fake files no
real engine would load. What is asserted is what the commands print and the gateway's registry."""

from __future__ import annotations

import json

import pytest

from serve.cli import main
from tests.support.gateway_harness import TOKEN, fake_adapter, start_gateway
from tests.support.live import free_port


def serve(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(code: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture(autouse=True)
def admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_GATEWAY_ADMIN_TOKEN", TOKEN)


def test_register_load_and_list_a_version(tmp_path, root, fault, capsys):
    fake_adapter(root, "recovery-v3")
    with start_gateway(tmp_path, root, [fault]) as gw:
        assert serve(capsys, "adapter", "list", "--gateway", gw.url)[1] == "no adapter versions registered\n"
        code, out, _ = serve(capsys, "adapter", "register", "recovery-v3", "--gateway", gw.url)
        assert code == 0 and "registered recovery-v3: rank 8" in out and str(root / "recovery-v3") in out
        code, out, _ = serve(capsys, "adapter", "list", "--gateway", gw.url)
        row = next(line for line in out.splitlines() if line.startswith("recovery-v3"))
        assert row.split()[:4] == ["recovery-v3", "registered", "-", "no"]
        code, out, _ = serve(capsys, "adapter", "load", "recovery-v3", "--gateway", gw.url)
        assert code == 0 and "recovery-v3: loaded" in out and fault.loads == ["recovery-v3"]
        gw.ok("POST", "/routes/worker/production", {"version": "recovery-v3"})
        code, out, _ = serve(capsys, "adapter", "list", "--gateway", gw.url)
        row = next(line for line in out.splitlines() if line.startswith("recovery-v3"))
        assert row.split()[:4] == ["recovery-v3", "loaded", "engine-0", "worker"]
        code, out, _ = serve(capsys, "adapter", "list", "--gateway", gw.url, "--json")
        (listed,) = json.loads(out)
        assert code == 0 and listed["loaded_on"] == ["engine-0"] and listed["production_of"] == ["worker"]
        assert listed["base"] == "/models/SmolLM2-135M-Instruct" and listed["path"] == str(root / "recovery-v3")


def test_the_path_may_name_another_directory_under_the_root(tmp_path, root, no_upstream, capsys):
    fake_adapter(root, "runs/seed-7")
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        code, out, _ = serve(capsys, "adapter", "register", "mix-v2", "--path", "runs/seed-7", "--gateway", gw.url)
        assert code == 0 and gw.ok("GET", "/adapters")["adapters"][0]["path"] == str(root / "runs" / "seed-7")


def test_the_gateways_refusals_are_one_error_line(tmp_path, root, no_upstream, capsys):
    fake_adapter(root, "other-base", base="/models/Qwen3-8B")
    fake_adapter(root, "a-v1")
    outside = fake_adapter(tmp_path / "elsewhere", "b-v1")
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        code, _, err = serve(capsys, "adapter", "register", "x-v1", "--path", "other-base", "--gateway", gw.url)
        one_error_line(code, err, "HTTP 422 invalid_adapter", "trained on '/models/Qwen3-8B'",
                       "the base model is 'SmolLM2-135M-Instruct'")
        code, _, err = serve(capsys, "adapter", "register", "b-v1", "--path", str(outside), "--gateway", gw.url)
        one_error_line(code, err, "outside the adapter root")
        assert serve(capsys, "adapter", "register", "a-v1", "--gateway", gw.url)[0] == 0
        code, _, err = serve(capsys, "adapter", "register", "a-v1", "--gateway", gw.url)
        one_error_line(code, err, "HTTP 409 name_taken", "never reused")
        code, _, err = serve(capsys, "adapter", "load", "ghost", "--gateway", gw.url)
        one_error_line(code, err, "HTTP 404", "ghost")
        code, _, err = serve(capsys, "adapter", "load", "a-v1", "--gateway", gw.url)
        one_error_line(code, err, "HTTP 503", "no engine is healthy")
        code, _, err = serve(capsys, "adapter", "load", "../state", "--gateway", gw.url)
        one_error_line(code, err, "VERSION must be a name")
        assert [a["name"] for a in gw.ok("GET", "/adapters")["adapters"]] == ["a-v1"]


def test_a_missing_or_wrong_token_is_one_error_line(tmp_path, root, no_upstream, capsys, monkeypatch):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        monkeypatch.setenv("WORKER_GATEWAY_ADMIN_TOKEN", "wrong")
        code, _, err = serve(capsys, "adapter", "list", "--gateway", gw.url)
        one_error_line(code, err, "HTTP 401 invalid_token", "$WORKER_GATEWAY_ADMIN_TOKEN must hold")
        monkeypatch.delenv("WORKER_GATEWAY_ADMIN_TOKEN")
        code, _, err = serve(capsys, "adapter", "list", "--gateway", gw.url)
        one_error_line(code, err, "no admin token: set $WORKER_GATEWAY_ADMIN_TOKEN")


def test_an_unreachable_gateway_is_one_error_line(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = serve(capsys, "adapter", "register", "a-v1", "--gateway", url)
    one_error_line(code, err, f"the gateway at {url} cannot be reached")
    code, _, err = serve(capsys, "adapter", "list", "--gateway", "not a url")
    one_error_line(code, err, "cannot be reached")


def test_the_gateway_url_defaults_to_the_environment(monkeypatch, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("WORKER_GATEWAY_URL", url)
    one_error_line(*serve(capsys, "adapter", "list")[::2], url)
