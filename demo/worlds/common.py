"""What the demo worlds share: value types, argument pieces, the outbox record and text matching."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from core.records import Strict
from replay.sandbox.world import Args, Prose

Currency = Annotated[str, Field(description="ISO 4217")]
Date = Annotated[str, Field(description="YYYY-MM-DD", max_length=10)]
Time = Annotated[str, Field(description="ISO 8601 date-time")]


class Money(Args):
    value: float
    currency: Currency


class Person(Args):
    email: str
    name: str | None = None


def matches(query: str, *texts: str) -> bool:
    """Every word of the query occurs in one of the texts (case-insensitive)."""
    haystack = " ".join(texts).lower()
    return all(word in haystack for word in query.lower().split())


class Outgoing(Strict):
    """Anything that left the workspace: an email, an invoice sent, a reply, an invite, a share."""

    tool: str
    to: list[str]
    subject: Prose = ""
    body: Prose = ""
