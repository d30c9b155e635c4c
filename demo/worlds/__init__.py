"""Worlds of the four demo workspaces, one module each: every tool of `demo/tools.py`, executed over typed state.

The argument models in these modules are the single definition of each demo tool: `demo/tools.py`
builds the schemas the suite shows the model from them (`World.schemas`), so the suite's
tools and the sandbox's cannot drift. Refusals mirror the demo suite's rejections (a draft
cannot be sent, a closed ticket takes no reply, outbound email to customers is disabled, a
calendar conflict, a duplicate contact, a folder id given to `read_file`, a missing folder).

- `common.py`: what the worlds share: value types, argument pieces, the outbox, text matching
- `invoicing.py`: the ws-invoicing world: invoices, payments, outbound invoice email
- `support.py`: the ws-support world: tickets, threads, escalations, customer email
- `sales.py`: the ws-sales world: contacts, deals, activities, the calendar
- `files.py`: the ws-files world: folders, files and sharing
"""

from __future__ import annotations

from demo.worlds.files import FILES
from demo.worlds.invoicing import INVOICING
from demo.worlds.sales import SALES
from demo.worlds.support import SUPPORT
from replay.sandbox.world import Tool, World

__all__ = ["FILES", "INVOICING", "SALES", "SUPPORT", "WORKSPACE_WORLD", "WORLDS", "all_tools"]

WORLDS: dict[str, World] = {w.name: w for w in (INVOICING, SUPPORT, SALES, FILES)}
WORKSPACE_WORLD = {"ws-invoicing": "invoicing", "ws-support": "support", "ws-sales": "sales", "ws-files": "files"}


def all_tools() -> list[Tool]:
    return [t for w in WORLDS.values() for t in w.tools.values()]
