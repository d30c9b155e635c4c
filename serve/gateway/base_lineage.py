"""The base model every engine serves, named by what it is (`core.lineage`): the digest of the engine's model
directory, its quantisation scheme and what it was built from, read from the directory the engines say they serve
(`root` in their `/v1/models`). `/v1/models` puts it on every entry and the admin API on its state and adapter list,
so a run records, per arm, the weights under the adapter too (DESIGN §7, the chain of custody)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.lineage import Lineage, LineageError, model_lineage
from serve.gateway.upstreams import UpstreamPool

UNKNOWN: dict[str, Any] = {"base_sha256": None, "quantization": None, "derived_from": None}
"""What is said where no engine's model directory can be read here (an engine on another machine, none probed
yet), or the replicas serve different ones: nothing, rather than one replica's."""


async def base_lineage(pool: UpstreamPool, base: str) -> dict[str, Any]:
    """`base_sha256`, `quantization` and `derived_from` of the model the engines serve as `base` (see UNKNOWN);
    digested off the event loop, once per state of the directory's files."""
    roots = {root for upstream in pool.upstreams if isinstance(root := upstream.models.get(base), str)}
    found: set[Lineage | None] = set()
    for root in sorted(roots):
        try:
            found.add(await asyncio.to_thread(model_lineage, Path(root)))
        except (LineageError, OSError):
            found.add(None)
    if len(found) != 1 or (lineage := found.pop()) is None:
        return dict(UNKNOWN)
    return {"base_sha256": lineage.sha256, "quantization": lineage.quantization,
            "derived_from": lineage.derived_from and lineage.derived_from.model_dump(mode="json")}
