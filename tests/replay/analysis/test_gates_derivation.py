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
