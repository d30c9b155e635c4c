"""Each tenant's fair share of the engine: pure bookkeeping, with the clock handed in (no I/O, no globals).

A *share* is what one set of limits is counted against: a workspace (both keys of a workspace
count against one share, so rotating a key never doubles a budget), or a service key. Three
limits, each optional:

* `max_in_flight`: requests admitted and not finished, waiting for an engine slot included;
* `requests_per_s`: a token bucket of requests (capacity `request_burst`, default the rate
  rounded up, at least 1);
* `tokens_per_min`: a token bucket of model tokens (capacity one minute's worth). A request is
  charged its *estimate* when admitted (`estimate_tokens`: the output it may ask for plus a
  quarter of its body's bytes, a generous count of its prompt) and, when its answer reports usage,
  the difference is given back or charged afterwards (`FairShare.release`), so the bucket tracks
  what was really used; a bucket may go below zero by that correction and then refills first.
  A request costlier than the whole bucket is charged the bucket's capacity (it is served when
  the bucket is full, never refused forever).

Over a limit a request is not admitted: `Throttled(reason, retry_after_s)`, the wait after which
that limit would admit it (the gateway answers 429 with `Retry-After`). Nothing is taken from any
limit unless all three admit the request.

The engine's slots (`SlotQueue`): when the engines' slots are all taken, waiting requests are
granted in start-time fair queueing order (Goyal et al., 1996): each request gets the tag
`max(V, last tag of its share) + 1 / weight`, the lowest start tag goes first, and V is the start
tag last granted. A share with twice the weight gets twice the slots while both wait; a share
that sends ten times the requests of another does not push the other's requests back, since its
own tags run ahead of V (this is what keeps one greedy tenant from holding the engine).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]
PRUNE_EVERY = 1024  # admissions between sweeps of idle shares (so header-named shares cannot grow memory)
OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class ShareLimits:
    """One share's limits (None: no limit) and its weight for engine slots."""

    weight: float = 1.0
    max_in_flight: int | None = None
    requests_per_s: float | None = None
    request_burst: int | None = None
    tokens_per_min: float | None = None

    @property
    def burst(self) -> float:
        if self.request_burst is not None:
            return float(self.request_burst)
        return float(max(1, math.ceil(self.requests_per_s or 1.0)))


@dataclass(frozen=True)
class Throttled:
    """Not admitted: which limit (`in_flight`, `requests`, `tokens`, `engine_busy`) and when to retry."""

    reason: str
    retry_after_s: int


class TokenBucket:
    """`capacity` tokens, refilled at `rate_per_s`; starts full."""

    def __init__(self, rate_per_s: float, capacity: float, now: float) -> None:
        self.rate_per_s, self.capacity = rate_per_s, capacity
        self.level, self.at = capacity, now

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate_per_s)
            self.at = now

    def reshape(self, rate_per_s: float, capacity: float, now: float) -> None:
        """New limits (a reloaded keys file): the level is kept, cut to the new capacity."""
        self.refill(now)
        self.rate_per_s, self.capacity = rate_per_s, capacity
        self.level = min(self.level, capacity)

    def charge(self, cost: float) -> float:
        """What a request of `cost` is charged: its cost, at most the whole bucket."""
        return min(cost, self.capacity)

    def wait_s(self, cost: float, now: float) -> float:
        """Seconds until `cost` could be taken (0: now)."""
        self.refill(now)
        missing = self.charge(cost) - self.level
        return 0.0 if missing <= 0 else missing / self.rate_per_s

    def take(self, amount: float, now: float) -> None:
        """Take `amount` (may be negative: given back), never above capacity; the level may go below zero."""
        self.refill(now)
        self.level = min(self.capacity, self.level - amount)

    def full(self, now: float) -> bool:
        self.refill(now)
        return self.level >= self.capacity


@dataclass
class Share:
    """One share's state."""

    limits: ShareLimits
    in_flight: int = 0
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None

    def shape(self, limits: ShareLimits, now: float) -> None:
        """Apply `limits` (they may have changed since the last request), creating or dropping buckets."""
        self.limits = limits
        self.requests = _bucket(self.requests, limits.requests_per_s, limits.burst, now)
        per_min = limits.tokens_per_min
        self.tokens = _bucket(self.tokens, None if per_min is None else per_min / 60.0, per_min, now)

    def idle(self, now: float) -> bool:
        return self.in_flight == 0 and all(b is None or b.full(now) for b in (self.requests, self.tokens))


def _bucket(bucket: TokenBucket | None, rate: float | None, capacity: float | None, now: float) -> TokenBucket | None:
    if rate is None or capacity is None:
        return None
    if bucket is None:
        return TokenBucket(rate, capacity, now)
    bucket.reshape(rate, capacity, now)
    return bucket


@dataclass
class AdmissionTicket:
    """An admitted request: what it was charged, so the release can settle it."""

    share: str
    tokens: float
    released: bool = False


def _retry_after(seconds: float) -> int:
    return max(1, math.ceil(seconds))


class FairShare:
    """Admission against each share's limits."""

    def __init__(self, clock: Clock, in_flight_retry_after_s: int = 1) -> None:
        self.clock = clock
        self.in_flight_retry_after_s = in_flight_retry_after_s
        self.shares: dict[str, Share] = {}
        self._admitted = 0

    def admit(self, share: str, limits: ShareLimits, tokens: int) -> AdmissionTicket | Throttled:
        """Admit a request estimated at `tokens`, or say which limit refuses it and for how long."""
        now = self.clock()
        state = self.shares.get(share)
        if state is None:
            state = self.shares[share] = Share(limits)
        state.shape(limits, now)
        if limits.max_in_flight is not None and state.in_flight >= limits.max_in_flight:
            return Throttled("in_flight", self.in_flight_retry_after_s)
        waits = [("requests", state.requests.wait_s(1, now) if state.requests else 0.0),
                 ("tokens", state.tokens.wait_s(tokens, now) if state.tokens else 0.0)]
        reason, wait = max(waits, key=lambda w: w[1])
        if wait > 0:
            return Throttled(reason, _retry_after(wait))
        charged = 0.0
        if state.requests is not None:
            state.requests.take(1, now)
        if state.tokens is not None:
            charged = state.tokens.charge(tokens)
            state.tokens.take(charged, now)
        state.in_flight += 1
        self._admitted += 1
        if self._admitted % PRUNE_EVERY == 0:
            self.prune(now)
        return AdmissionTicket(share, charged)

    def release(self, ticket: AdmissionTicket, used_tokens: int | None = None) -> None:
        """The request ended; with the tokens its answer reports, the estimate is settled. Idempotent."""
        if ticket.released:
            return
        ticket.released = True
        state = self.shares.get(ticket.share)
        if state is None:
            return
        state.in_flight -= 1
        if used_tokens is not None and state.tokens is not None and ticket.tokens > 0:
            state.tokens.take(used_tokens - ticket.tokens, self.clock())

    def in_flight(self, share: str) -> int:
        state = self.shares.get(share)
        return 0 if state is None else state.in_flight

    def prune(self, now: float) -> None:
        """Forget idle shares: one with nothing in flight and full buckets is the same as a new one."""
        for name in [n for n, s in self.shares.items() if s.idle(now)]:
            del self.shares[name]


def estimate_tokens(body: Mapping[str, Any], body_bytes: int, default_output: int) -> int:
    """What a request may cost before its answer says: the output it asks for at most (`max_tokens`,
    `max_completion_tokens` or `max_output_tokens`; else `default_output`) plus its body's bytes / 4."""
    asked = next((v for f in OUTPUT_FIELDS if isinstance(v := body.get(f), int) and not isinstance(v, bool)), None)
    output = asked if asked is not None and asked > 0 else default_output
    return output + math.ceil(body_bytes / BYTES_PER_TOKEN)


def used_tokens(answer: Any) -> int | None:
    """The tokens an answer's `usage` reports (OpenAI: prompt + completion; Anthropic and Responses:
    input + output), or None when it reports none."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    for parts in (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens")):
        values = [usage.get(p) for p in parts]
        if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            return sum(v for v in values if isinstance(v, int))
    return None


@dataclass(order=True)
class _Waiting:
    start: float
    seq: int
    ticket: int = field(compare=False)


class SlotQueue:
    """The engines' `slots`, granted in start-time fair queueing order by share weight.

    `request` returns a ticket number and whether it holds a slot at once; `release` (a request
    that held a slot ended) and `cancel` (a waiting one left) return the tickets granted next."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running: set[int] = set()
        self._waiting: list[_Waiting] = []
        self._waiting_tickets: set[int] = set()
        self._finish: dict[str, float] = {}  # each share's last finish tag
        self._virtual = 0.0
        self._ids = itertools.count(1)
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._waiting_tickets)

    def request(self, share: str, weight: float) -> tuple[int, bool]:
        ticket = next(self._ids)
        start = max(self._virtual, self._finish.get(share, 0.0))
        self._finish[share] = start + 1.0 / weight
        heapq.heappush(self._waiting, _Waiting(start, next(self._seq), ticket))
        self._waiting_tickets.add(ticket)
        granted = self._grant()
        if len(self._finish) > 4 * (self.slots + len(self._waiting_tickets)) + 64:
            self._finish = {s: f for s, f in self._finish.items() if f > self._virtual}
        return ticket, ticket in granted

    def release(self, ticket: int) -> list[int]:
        self.running.discard(ticket)
        return self._grant()

    def cancel(self, ticket: int) -> list[int]:
        """A ticket given up, waiting (it leaves the queue) or running (as `release`)."""
        self._waiting_tickets.discard(ticket)
        return self.release(ticket)

    def _grant(self) -> list[int]:
        granted = []
        while self._waiting and len(self.running) < self.slots:
            head = heapq.heappop(self._waiting)
            if head.ticket not in self._waiting_tickets:
                continue  # cancelled while it waited
            self._waiting_tickets.discard(head.ticket)
            self._virtual = head.start
            self.running.add(head.ticket)
            granted.append(head.ticket)
        return granted
