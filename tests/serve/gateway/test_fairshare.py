"""The fair share's bookkeeping, on a clock the tests move: buckets, in-flight caps, slot order."""

from __future__ import annotations

import copy
import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from serve.gateway.fairshare import (
    AdmissionTicket,
    FairShare,
    ShareLimits,
    SlotQueue,
    Throttled,
    TokenBucket,
    estimate_tokens,
    used_tokens,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_requests_bucket_admits_its_burst_then_says_when_the_next_fits():
    clock = FakeClock()
    share = FairShare(clock)
    limits = ShareLimits(requests_per_s=0.5, request_burst=2)
    assert all(isinstance(share.admit("ws:a", limits, 10), AdmissionTicket) for _ in range(2))
    assert share.admit("ws:a", limits, 10) == Throttled("requests", 2)  # one request refills in 2 s
    clock.now = 1.9
    assert isinstance(share.admit("ws:a", limits, 10), Throttled)
    clock.now = 2.0
    assert isinstance(share.admit("ws:a", limits, 10), AdmissionTicket)
    assert isinstance(share.admit("ws:b", limits, 10), AdmissionTicket)  # another share has its own bucket


def test_in_flight_counts_until_release_and_release_is_idempotent():
    share = FairShare(FakeClock(), in_flight_retry_after_s=3)
    limits = ShareLimits(max_in_flight=2)
    first, second = share.admit("s", limits, 1), share.admit("s", limits, 1)
    assert isinstance(first, AdmissionTicket) and isinstance(second, AdmissionTicket)
    assert share.admit("s", limits, 1) == Throttled("in_flight", 3)
    share.release(first)
    share.release(first)
    assert share.in_flight("s") == 1
    assert isinstance(share.admit("s", limits, 1), AdmissionTicket)


def test_a_refused_request_takes_nothing_from_any_limit():
    clock = FakeClock()
    share = FairShare(clock)
    limits = ShareLimits(requests_per_s=1, request_burst=5, tokens_per_min=600)  # 10 tokens/s, 600 capacity
    assert isinstance(share.admit("s", limits, 590), AdmissionTicket)
    refused = share.admit("s", limits, 100)  # the tokens bucket has 10 left: 9 s to refill 90
    assert refused == Throttled("tokens", 9)
    state = share.shares["s"]
    assert state.requests is not None and state.requests.level == 4  # the refused request took no request
    assert state.in_flight == 1


def test_usage_settles_the_estimate_both_ways():
    clock = FakeClock()
    share = FairShare(clock)
    limits = ShareLimits(tokens_per_min=600)
    ticket = share.admit("s", limits, 500)
    assert isinstance(ticket, AdmissionTicket)
    share.release(ticket, used_tokens=100)  # 400 given back
    tokens = share.shares["s"].tokens
    assert tokens is not None and tokens.level == 500
    ticket = share.admit("s", limits, 100)
    assert isinstance(ticket, AdmissionTicket)
    share.release(ticket, used_tokens=900)  # 800 more than estimated: the bucket owes 400
    assert tokens.level == -400
    assert share.admit("s", limits, 1) == Throttled("tokens", 41)  # (1 + 400) / 10 per s


def test_a_request_costlier_than_the_bucket_waits_for_a_full_bucket_not_forever():
    clock = FakeClock()
    share = FairShare(clock)
    limits = ShareLimits(tokens_per_min=60)
    assert isinstance(share.admit("s", limits, 30), AdmissionTicket)
    assert share.admit("s", limits, 10_000) == Throttled("tokens", 30)
    clock.now = 30
    ticket = share.admit("s", limits, 10_000)
    assert isinstance(ticket, AdmissionTicket) and ticket.tokens == 60


def test_new_limits_apply_to_a_share_at_its_next_request():
    clock = FakeClock()
    share = FairShare(clock)
    assert isinstance(share.admit("s", ShareLimits(max_in_flight=1), 1), AdmissionTicket)
    assert isinstance(share.admit("s", ShareLimits(max_in_flight=1), 1), Throttled)
    assert isinstance(share.admit("s", ShareLimits(max_in_flight=2), 1), AdmissionTicket)  # a reloaded keys file raised it


def test_idle_shares_are_forgotten_busy_ones_kept():
    clock = FakeClock()
    share = FairShare(clock)
    limits = ShareLimits(requests_per_s=1, request_burst=1)
    busy = share.admit("busy", limits, 1)
    done = share.admit("done", limits, 1)
    assert isinstance(busy, AdmissionTicket) and isinstance(done, AdmissionTicket)
    share.release(done)
    share.prune(clock())
    assert set(share.shares) == {"busy", "done"}  # done's bucket is not full yet: forgetting it would refill it
    clock.now = 1.0
    share.prune(clock())
    assert set(share.shares) == {"busy"}


@settings(max_examples=200, deadline=None)
@given(rate=st.floats(0.1, 100), capacity=st.floats(1, 1000),
       events=st.lists(st.tuples(st.floats(0, 5), st.floats(0.1, 2000)), min_size=1, max_size=60))
def test_a_bucket_never_admits_more_than_its_capacity_plus_what_it_refilled(rate, capacity, events):
    """Over any run, admitted cost <= capacity + rate * elapsed; the level never exceeds capacity;
    and a refused cost fits exactly after the wait the bucket names."""
    bucket = TokenBucket(rate, capacity, 0.0)
    now, admitted = 0.0, 0.0
    for gap, cost in events:
        now += gap
        wait = bucket.wait_s(cost, now)
        assert bucket.level <= capacity + 1e-9
        if wait == 0:
            charged = bucket.charge(cost)
            bucket.take(charged, now)
            admitted += charged
        else:
            assert copy.deepcopy(bucket).wait_s(cost, now + wait * (1 + 1e-9) + 1e-9) == 0
            assert copy.deepcopy(bucket).wait_s(cost, now + wait * 0.99) > 0
        assert admitted <= capacity + rate * now + 1e-6


@settings(max_examples=100, deadline=None)
@given(limit=st.integers(1, 5), steps=st.lists(st.booleans(), min_size=1, max_size=80))
def test_in_flight_never_exceeds_the_cap(limit, steps):
    share = FairShare(FakeClock())
    held: list[AdmissionTicket] = []
    for arrive in steps:
        if arrive:
            decision = share.admit("s", ShareLimits(max_in_flight=limit), 1)
            if isinstance(decision, AdmissionTicket):
                held.append(decision)
            else:
                assert len(held) == limit
        elif held:
            share.release(held.pop(0))
        assert share.in_flight("s") == len(held) <= limit


def drain(queue: SlotQueue, order: list[str], owners: dict[int, str], until: int) -> None:
    """Run the queue to completion one grant at a time, recording whose ticket each grant was."""
    running = sorted(queue.running)
    while running and len(order) < until:
        granted = queue.release(running.pop(0))
        order.extend(owners[t] for t in granted)
        running.extend(granted)


def test_a_greedy_shares_backlog_does_not_push_back_another_shares_request():
    queue = SlotQueue(slots=2)
    owners: dict[int, str] = {}
    for _ in range(50):
        ticket, _ = queue.request("greedy", 1.0)
        owners[ticket] = "greedy"
    ticket, granted = queue.request("quiet", 1.0)
    owners[ticket] = "quiet"
    assert not granted
    order: list[str] = []
    drain(queue, order, owners, until=51)
    assert order.index("quiet") <= 1  # the next slot or the one after, not after 48 greedy requests


def test_slots_go_by_weight_while_both_shares_wait():
    queue = SlotQueue(slots=1)
    owners: dict[int, str] = {}
    for _ in range(40):
        for share, weight in (("production", 1.0), ("replay", 0.25)):
            ticket, _ = queue.request(share, weight)
            owners[ticket] = share
    order: list[str] = []
    drain(queue, order, owners, until=40)
    counts = Counter(order[:25])
    assert abs(counts["production"] - 20) <= 1 and abs(counts["replay"] - 5) <= 1


@settings(max_examples=100, deadline=None)
@given(slots=st.integers(1, 4), ops=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "release", "cancel"]),
                                                        st.integers(0, 1000)), max_size=80))
def test_the_slot_queue_is_work_conserving_and_never_over_its_slots(slots, ops):
    queue = SlotQueue(slots)
    waiting: list[int] = []
    for op, pick in ops:
        if op in ("a", "b", "c"):
            ticket, granted = queue.request(op, {"a": 1.0, "b": 0.5, "c": 2.0}[op])
            if not granted:
                waiting.append(ticket)
        elif op == "release" and queue.running:
            granted = queue.release(sorted(queue.running)[pick % len(queue.running)])
            waiting = [t for t in waiting if t not in granted]
        elif op == "cancel" and waiting:
            gone = waiting.pop(pick % len(waiting))
            queue.cancel(gone)
        assert len(queue.running) <= slots
        assert queue.waiting == len(waiting)
        assert queue.waiting == 0 or len(queue.running) == slots  # nobody waits while a slot is free


def test_token_estimates_and_usage():
    assert estimate_tokens({"max_tokens": 100}, 400, 1024) == 200
    assert estimate_tokens({"max_completion_tokens": 7}, 1, 1024) == 8
    assert estimate_tokens({"max_output_tokens": 5}, 0, 1024) == 5
    assert estimate_tokens({"max_tokens": True}, 0, 1024) == 1024  # not a count: the default
    assert estimate_tokens({}, 4001, 16) == 16 + math.ceil(4001 / 4)
    assert used_tokens({"usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}) == 7
    assert used_tokens({"usage": {"input_tokens": 9, "output_tokens": 3}}) == 12
    assert used_tokens({"usage": {"prompt_tokens": -1, "completion_tokens": 2}}) is None
    assert used_tokens({"usage": None}) is None and used_tokens([1]) is None
