"""Result rows of a replicate without HTTP: the runner's plan, the planted policy, the runner's scoring."""

from __future__ import annotations

from collections.abc import Callable

from core.records import ResultRecord
from replay.calibration.planted import Kind, PlantedSpec, answer_message, planted_kind
from replay.calibration.spec import CalibrationSpec, run_config
from replay.run.decisions import plan, result_record
from replay.run.endpoint import Outcome
from replay.suite import Suite

Progress = Callable[[str, int, int], None]
"""(what, replicates done, replicates in all)."""


class Simulator:
    """Result rows of one replicate without HTTP: the runner's plan, the policy, the runner's scoring.

    A row depends only on (work item, answer kind), so each is scored once and reused."""

    def __init__(self, spec: CalibrationSpec, suite: Suite) -> None:
        self.config = run_config(spec, "http://127.0.0.1:1/v1", suite, 0)
        self.items = plan(suite, self.config, set())
        self._rows: dict[tuple[int, Kind], ResultRecord] = {}

    def rows(self, spec: PlantedSpec, seed: int, arms: set[str]) -> list[ResultRecord]:
        out = []
        for i, item in enumerate(self.items):
            if item.arm.name in arms:
                out.append(self.row(i, planted_kind(spec, seed, item.arm.model, item.decision, item.rule_ids)))
        return out

    def row(self, index: int, kind: Kind) -> ResultRecord:
        if (index, kind) not in self._rows:
            item = self.items[index]
            body = {"choices": [{"message": answer_message(kind, item.decision), "finish_reason": "stop"}]}
            self._rows[(index, kind)] = result_record(item, Outcome(body, None, 1, 0.0))
        return self._rows[(index, kind)]
