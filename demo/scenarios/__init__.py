"""Decision situations of the demo workspaces, drawn from a caller's `random.Random`.

Each builder returns one situation with its recorded next call. The recorded call is
always inferable from the conversation: optional keys appear in the target exactly when
the user asked for what they carry, so key-set correctness is a fair test.

* `Rejection`: the assistant's call was rejected by the tool (the conversation holds the
  call and the error); `recovery` is the recorded, different next tool, `rejected` the
  call a failing agent repeats.
* `ScenarioStep`: a state and its recorded call: a clean multi-step flow, a one-step action, or a
  fresh state before a historically failed call.

The building blocks, then one module per demo workspace, each ending in its `KIT`:

- `parts.py`: the building blocks: `ScenarioStep`, `Rejection`, `Kit`, the `Convo` builder
- `invoicing.py`: ws-invoicing: invoices, customers and payments
- `support.py`: ws-support: tickets, customers and escalations
- `sales.py`: ws-sales: contacts, deals and calendar
- `files.py`: ws-files: folders, documents and sharing
"""

from demo.scenarios import files, invoicing, sales, support
from demo.scenarios.parts import Call, Kit, Messages, Rejection, ScenarioStep, wrap_up

KITS = (invoicing.KIT, support.KIT, sales.KIT, files.KIT)

__all__ = ["KITS", "Call", "Kit", "Messages", "Rejection", "ScenarioStep", "wrap_up"]
