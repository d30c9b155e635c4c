"""OpenAI tool schemas of the demo workspaces, generated from the demo worlds (`demo/worlds/`).

The argument models there are the one definition of each tool: the suite shows the model
exactly the schema the sandbox executes. Descriptions are short on purpose: the CPU demo
model serves an 8,192-token context, a 135M model reads long prompts poorly, and every request
carries its workspace's full tool list.

Every tool is `strict` with closed objects (`additionalProperties: false`), as OpenAI's strict
function calling defines it: vLLM then constrains the arguments to the schema, so the small
demo model chooses among the declared (optional) keys instead of inventing new ones, and a
key-set difference means a real choice. Free text is bounded (`maxLength`, 80 by default):
under greedy decoding the 135M demo model can repeat a phrase inside a string value until
max_tokens, which would turn a real choice of tool and keys into a truncated, malformed call.
"""

from __future__ import annotations

from typing import Any

from demo import worlds

Schema = dict[str, Any]

INVOICING: tuple[Schema, ...] = tuple(worlds.INVOICING.schemas())
SUPPORT: tuple[Schema, ...] = tuple(worlds.SUPPORT.schemas())
SALES: tuple[Schema, ...] = tuple(worlds.SALES.schemas())
FILES: tuple[Schema, ...] = tuple(worlds.FILES.schemas())
