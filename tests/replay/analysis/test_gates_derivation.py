"""Another run is evidence about the judged weights only when it served them (issue 60 item 2): a quantised run
must serve, on each arm, a quantised build derived from that arm's judged weights (the adapter folded in by
fingerprint, over the same base by digest); a confirmation run the same weights with another seed. Evidence about
other weights, an unquantised run, a build that names no origin, or a run that records nothing of what served it is
`not_run` with the reason; the same evidence made right passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.attestation import DerivedFrom, ServedIdentity
from replay.analysis.gates import Status, evaluate_gate
from replay.run.directory import RUN_JSON
from tests.replay.analysis.test_gates import CANDIDATE, PRODUCTION, SERIOUS, strong_records, write_run
from tests.replay.analysis.test_gates_custody import status
from tests.support.e13 import BASE
from tests.support.runs import BASE_MODEL_SHA256, high_precision, quantised_build, read_served, served

ADAPTER, OTHER_ADAPTER, OTHER_BASE = "a" * 64, "c" * 64, "d" * 64


def judged_run(tmp_path: Path) -> Path:
    """The judged run: the baseline the base model, the candidate adapter ADAPTER over it."""
    run = write_run(tmp_path / "run", strong_records())
    return served(run, {BASE: high_precision(BASE), CANDIDATE: high_precision(CANDIDATE, (ADAPTER, BASE_MODEL_SHA256))})


def other_run(tmp_path: Path, identities: dict[str, ServedIdentity], name: str = "other", seed: int = 1) -> Path:
    """Another sealed run of the judged run's suite, with its own decoding seed, served by `identities`."""
    run = write_run(tmp_path / name, strong_records(gain=9))
    manifest = json.loads((run / RUN_JSON).read_text())
    manifest["config"] = {"decoding": {"seed": seed}}
    (run / RUN_JSON).write_text(json.dumps(manifest))
    return served(run, identities)


def builds_of(judged: Path) -> dict[str, ServedIdentity]:
    return {arm: quantised_build(identity) for arm, identity in read_served(judged).items()}


def test_a_quantised_build_of_the_judged_weights_is_judged(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    got, reason = status(tmp_path, "quantised", judged, other_run(tmp_path, builds_of(judged)))
    assert got is Status.PASS, reason


def test_a_quantised_build_of_another_adapter_is_not_evidence(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    builds = builds_of(judged)
    builds[CANDIDATE] = quantised_build(high_precision(CANDIDATE, (OTHER_ADAPTER, BASE_MODEL_SHA256)))
    got, reason = status(tmp_path, "quantised", judged, other_run(tmp_path, builds))
    assert got is Status.NOT_RUN
    assert reason == ("evidence 'quantised': its candidate 'strong' serves a w8a8-int8 build of adapter "
                      "cccccccccccc… over base 666666666666…, the judged run's candidate adapter aaaaaaaaaaaa… over "
                      "base 666666666666…: it must be derived from the judged weights")


def test_the_baseline_must_be_a_build_of_the_judged_baseline_too(tmp_path: Path) -> None:
    """A quantised baseline of another base model (or one that folds in the candidate) is another comparison."""
    judged = judged_run(tmp_path)
    for i, wrong in enumerate(((None, OTHER_BASE), (ADAPTER, BASE_MODEL_SHA256))):
        builds = {**builds_of(judged), BASE: quantised_build(high_precision(BASE, wrong))}
        got, reason = status(tmp_path, "quantised", judged, other_run(tmp_path, builds, f"other-{i}"))
        assert got is Status.NOT_RUN and reason.startswith(f"evidence 'quantised': its baseline {BASE!r} serves")


def test_an_unquantised_run_of_the_same_weights_is_not_a_quantised_run(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    got, reason = status(tmp_path, "quantised", judged, other_run(tmp_path, read_served(judged)))
    assert got is Status.NOT_RUN
    assert reason == (f"evidence 'quantised': its baseline {BASE!r} was served unquantised (its engine's model "
                      "config names no quantisation): it must be a quantised build")


def test_a_quantised_model_that_names_no_origin_is_not_bound(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    builds = {arm: identity.model_copy(update={"derived_from": None}) for arm, identity in builds_of(judged).items()}
    got, reason = status(tmp_path, "quantised", judged, other_run(tmp_path, builds))
    assert got is Status.NOT_RUN and "is a w8a8-int8 model that records nothing it was built from" in reason


def test_runs_that_record_nothing_of_what_served_them_bind_nothing(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    bare = other_run(tmp_path, {})
    for key in ("quantised", "confirmation"):
        got, reason = status(tmp_path, key, judged, bare)
        assert got is Status.NOT_RUN and reason.startswith(f"evidence {key!r}: ")
        assert f"records nothing of what served arm {BASE!r}" in reason
    unknown = served(judged_run(tmp_path / "unknown"), {BASE: ServedIdentity(model=BASE),
                                                        CANDIDATE: ServedIdentity(model="mix", fingerprint=ADAPTER)})
    got, reason = status(tmp_path, "quantised", unknown, other_run(tmp_path, builds_of(judged), "q"))
    assert got is Status.NOT_RUN and reason.startswith("the judged run names no base model digest for its baseline")


def test_a_confirmation_replays_the_same_weights_with_another_seed(tmp_path: Path) -> None:
    judged = judged_run(tmp_path)
    manifest = json.loads((judged / RUN_JSON).read_text())
    (judged / RUN_JSON).write_text(json.dumps({**manifest, "config": {"decoding": {"seed": 0}}}))
    assert status(tmp_path, "confirmation", judged, other_run(tmp_path, read_served(judged)))[0] is Status.PASS
    same_seed = other_run(tmp_path, read_served(judged), "same-seed", seed=0)
    got, reason = status(tmp_path, "confirmation", judged, same_seed)
    assert got is Status.NOT_RUN
    assert reason == ("evidence 'confirmation' replayed the same weights with the judged run's seed (0), which gives "
                      "the same answers: a confirmation needs another seed")
    others = {**read_served(judged), CANDIDATE: high_precision(CANDIDATE, (OTHER_ADAPTER, BASE_MODEL_SHA256))}
    got, reason = status(tmp_path, "confirmation", judged, other_run(tmp_path, others, "other-weights"))
    assert got is Status.NOT_RUN
    assert reason == ("evidence 'confirmation': its candidate 'strong' was served by adapter cccccccccccc… over base "
                      "666666666666…, the judged run's by adapter aaaaaaaaaaaa… over base 666666666666…: a "
                      "confirmation must replay the same weights")
    builds = other_run(tmp_path, builds_of(judged), "quantised")  # a quantised build stands for the same weights
    assert status(tmp_path, "confirmation", judged, builds)[0] is Status.PASS


IDENTITY_FIELDS = ("fingerprint", "base_sha256", "derived_fingerprint", "derived_base")
SHIPPED = {"quantised": (PRODUCTION, "quantisation-survives"), "confirmation": (SERIOUS, "confirmation-run")}


def substituted(identity: ServedIdentity, field: str, digest: str) -> ServedIdentity:
    """`identity` with one of the digests that name its weights replaced by `digest`."""
    derived = identity.derived_from or DerivedFrom(source_sha256="7" * 64, base_sha256=str(identity.base_sha256))
    if field == "derived_fingerprint":
        return identity.model_copy(update={"derived_from": derived.model_copy(update={"fingerprint": digest})})
    if field == "derived_base":
        return identity.model_copy(update={"derived_from": derived.model_copy(update={"base_sha256": digest})})
    if identity.derived_from is not None and field == "base_sha256":  # a build's own digest is not its weights'
        return identity.model_copy(update={"derived_from": derived.model_copy(update={"base_sha256": digest})})
    return identity.model_copy(update={field: digest})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(SHIPPED)), arm=st.sampled_from([BASE, CANDIDATE]),
       field=st.sampled_from(IDENTITY_FIELDS), digest=st.sampled_from(["e" * 64, OTHER_ADAPTER, OTHER_BASE]))
def test_evidence_about_any_other_weights_is_never_judged_by_a_shipped_policy(
        tmp_path_factory: pytest.TempPathFactory, key: str, arm: str, field: str, digest: str) -> None:
    """The shipped policies, a right quantised or confirmation run with one digest of one arm's weights replaced by
    another's: that condition is not run; the run as it was is judged."""
    policy, condition = SHIPPED[key]
    root = tmp_path_factory.mktemp("derivation")
    judged = judged_run(root)
    right = builds_of(judged) if key == "quantised" else read_served(judged)
    wrong = {**right, arm: substituted(right[arm], field, digest)}
    for identities, name in ((right, "right"), (wrong, "wrong")):
        evidence = other_run(root, identities, name)
        [result] = [c for c in evaluate_gate(policy, judged, BASE, CANDIDATE, {key: evidence}).conditions
                    if c.id == condition]
        assert wrong[arm].weights() != right[arm].weights()  # every substitution names other weights
        if name == "right":
            assert result.status is not Status.NOT_RUN, result.reason
        else:
            assert result.status is Status.NOT_RUN and result.reason.startswith(f"evidence {key!r}: its "), result.reason
    shutil.rmtree(root)


# ── live evidence names the served version by its weights (shadow, canary) ───────────────────────────────────

LIVE_POLICY = {
    "shadow": 'kind = "shadow_improves"\nmin_items = 10\n',
    "canary": 'kind = "canary_no_regression"\nmin_requests = 100\nmax_error_rate_increase = 0.01\n',
}


def live_file(tmp_path: Path, key: str, subject: dict[str, object] | None) -> Path:
    """A shadow export (paired outcomes) or a canary export the candidate wins or holds, naming `subject`."""
    body: dict[str, object] = (
        {"measure": "correct", "items": [{"id": f"t{i}", "baseline": i > 2, "candidate": True} for i in range(12)]}
        if key == "shadow" else
        {"adapter": CANDIDATE, "control": {"requests": 1000, "errors": 5, "anomalies": 9},
         "canary": {"requests": 200, "errors": 1, "anomalies": 1}})
    path = tmp_path / f"{key}-{len(list(tmp_path.glob(f'{key}-*')))}.json"
    path.write_text(json.dumps(body | ({"subject": subject} if subject is not None else {})))
    return path


def live_status(tmp_path: Path, key: str, judged: Path, evidence: Path) -> tuple[Status, str]:
    policy = tmp_path / f"live-{key}.toml"
    policy.write_text(f'name = "live"\nversion = "1"\n\n[[conditions]]\nid = "{key}"\ndescription = "d"\n'
                      f'evidence = "{key}"\n{LIVE_POLICY[key]}')
    [result] = evaluate_gate(policy, judged, BASE, CANDIDATE, {key: evidence}).conditions
    return result.status, result.reason


@pytest.mark.parametrize("key", sorted(LIVE_POLICY))
def test_live_evidence_must_name_the_judged_candidate_s_weights(tmp_path: Path, key: str) -> None:
    judged = judged_run(tmp_path)
    right = {"candidate": {"model": "mix-v2", "version": "mix-v2", "fingerprint": ADAPTER}}
    assert live_status(tmp_path, key, judged, live_file(tmp_path, key, right))[0] is Status.PASS
    other = {"candidate": {"model": "mix-v3", "version": "mix-v3", "fingerprint": OTHER_ADAPTER}}
    got, reason = live_status(tmp_path, key, judged, live_file(tmp_path, key, other))
    assert got is Status.NOT_RUN
    assert reason == (f"evidence {key!r} is about candidate 'mix-v3' served with weights cccccccccccc…, the judged "
                      "run's candidate 'strong' with aaaaaaaaaaaa…: it must be about the same weights")
    got, reason = live_status(tmp_path, key, judged, live_file(tmp_path, key, None))
    assert got is Status.NOT_RUN
    assert reason == (f"evidence {key!r} names no served version of the candidate, so nothing binds it to the judged "
                      "weights; export it with this version of `worker-serve evidence`")
    base = {"candidate": {"model": "worker-base", "version": "worker-base"}}  # the base model is other weights too
    assert live_status(tmp_path, key, judged, live_file(tmp_path, key, base))[0] is Status.NOT_RUN


LIVE_SHIPPED = {"shadow": "shadow-improves", "canary": "canary-no-regression"}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(LIVE_SHIPPED)), digest=st.sampled_from([None, "e" * 64, OTHER_ADAPTER]),
       version=st.sampled_from(["mix-v2", "mix-v3", CANDIDATE]))
def test_live_evidence_about_any_other_weights_is_never_judged_by_the_shipped_policy(
        tmp_path_factory: pytest.TempPathFactory, key: str, digest: str | None, version: str) -> None:
    """production-candidate, shadow or canary evidence naming any version served with other weights than the
    judged candidate's (the base model's included): that condition is not run, whatever the version's name."""
    root = tmp_path_factory.mktemp("live")
    judged = judged_run(root)
    evidence = live_file(root, key, {"candidate": {"model": version, "version": version, "fingerprint": digest}})
    [result] = [c for c in evaluate_gate(PRODUCTION, judged, BASE, CANDIDATE, {key: evidence}).conditions
                if c.id == LIVE_SHIPPED[key]]
    assert result.status is Status.NOT_RUN and "it must be about the same weights" in result.reason, result.reason
    shutil.rmtree(root)
