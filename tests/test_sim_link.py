"""The shared link as an exact fluid model: max-min fair rates, finish times, stalls (hand-checked)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.clock import SimClock
from tidegate.sim.link import GBPS, Link, max_min_fair

GB = 1e9  # bytes (decimal, like the link's Gbit/s)


def test_max_min_fair_splits_equally_below_the_caps_and_gives_leftovers_to_the_larger_caps() -> None:
    assert max_min_fair([8.0, 8.0], 10.0) == [5.0, 5.0]
    assert max_min_fair([2.0, 8.0], 10.0) == [2.0, 8.0]
    assert max_min_fair([2.0, 8.0, 8.0], 10.0) == [2.0, 4.0, 4.0]
    assert max_min_fair([3.0], 10.0) == [3.0]
    assert max_min_fair([math.inf, math.inf], 10.0) == [5.0, 5.0]
    assert max_min_fair([8.0, 8.0], 0.0) == [0.0, 0.0]


@given(
    st.lists(st.floats(0.1, 100.0), min_size=1, max_size=8),
    st.floats(0.0, 200.0),
)
def test_max_min_fair_never_exceeds_a_cap_or_the_capacity_and_leaves_nothing_idle_that_a_cap_wants(
    caps: list[float], capacity: float
) -> None:
    rates = max_min_fair(caps, capacity)
    assert all(0 <= r <= c + 1e-9 for r, c in zip(rates, caps, strict=True))
    assert sum(rates) <= capacity + 1e-6
    # Work-conserving: either the link is full or every transfer runs at its cap.
    assert sum(rates) >= min(capacity, sum(caps)) - 1e-6


def _water_filling(caps: list[float], capacity: float) -> list[float]:
    """max_min_fair as first written (smallest cap first, ties by position): what its fast path must equal."""
    rates = [0.0] * len(caps)
    left, count = max(capacity, 0.0), len(caps)
    for i in sorted(range(len(caps)), key=lambda i: caps[i]):
        rate = min(caps[i], left / count)
        rates[i] = rate
        left -= rate
        count -= 1
    return rates


@given(
    st.one_of(
        st.lists(st.floats(0.1, 100.0), max_size=12),
        st.tuples(st.sampled_from((0.3, 2.5, 8 * GBPS, math.inf)), st.integers(0, 40)).map(lambda c: [c[0]] * c[1]),
    ),
    st.one_of(st.floats(0.0, 200.0), st.sampled_from((0.0, 10 * GBPS, 100 * GBPS, 1.0, 7.0))),
)
def test_max_min_fair_is_the_water_filling_to_the_last_bit(caps: list[float], capacity: float) -> None:
    # One cap for all takes a path without the sort: the same rates, bit for bit, as the sorted loop.
    assert [r.hex() for r in max_min_fair(caps, capacity)] == [r.hex() for r in _water_filling(caps, capacity)]


def _link(gbps: float) -> tuple[SimClock, Link, dict[str, float]]:
    clock = SimClock()
    return clock, Link("l", clock, gbps * GBPS), {}


def test_two_prefetches_sharing_a_link_finish_when_the_arithmetic_says() -> None:
    # Link 10 Gbit/s, each transfer capped at 8 Gbit/s. A (10 GB = 80 Gbit) starts at 0, B (5 GB =
    # 40 Gbit) at 2. A alone runs at its cap: 16 Gbit by t=2, 64 left. From 2 both get 5 Gbit/s: B's
    # 40 Gbit take 8 s (ends at 10); A moved 40 more, 24 left, then runs at 8 again: 3 s (ends at 13).
    clock, link, done = _link(10)
    cap = 8 * GBPS
    clock.call_at(0, lambda: link.start("dataset", 10 * GB, cap, lambda: done.setdefault("a", clock.now())))
    clock.call_at(2, lambda: link.start("dataset", 5 * GB, cap, lambda: done.setdefault("b", clock.now())))
    clock.run()
    assert done == {"b": 10.0, "a": 13.0}
    assert link.moved == pytest.approx(15 * GB)
    assert not link.active


def test_a_cut_stalls_a_transfer_for_exactly_the_cut() -> None:
    # 10 GB at 8 Gbit/s takes 10 s; the link is down from 4 to 34: it ends at 10 + 30 = 40.
    clock, link, done = _link(10)
    link.start("dataset", 10 * GB, 8 * GBPS, lambda: done.setdefault("a", clock.now()))
    clock.call_at(4, lambda: link.set_up(False))
    clock.call_at(34, lambda: link.set_up(True))
    clock.run()
    assert done == {"a": 40.0}


def test_a_cancelled_transfer_gives_its_share_back_and_never_calls_back() -> None:
    # Both at 5 Gbit/s; B is cancelled at 4 (A has 80 - 20 = 60 Gbit left), A then runs at 8: 7.5 s.
    clock, link, done = _link(10)
    link.start("dataset", 10 * GB, 8 * GBPS, lambda: done.setdefault("a", clock.now()))
    b = link.start("dataset", 10 * GB, 8 * GBPS, lambda: done.setdefault("b", clock.now()))
    clock.call_at(4, lambda: link.cancel(b))
    clock.run()
    assert done == {"a": 11.5}
    assert link.moved == pytest.approx(10 * GB + 2.5 * GB)


def test_rates_are_reported_at_each_change_for_utilisation() -> None:
    clock = SimClock()
    seen: list[tuple[float, float, int]] = []
    link = Link("l", clock, 10 * GBPS, lambda rate, n, now: seen.append((now, rate / GBPS, n)))
    link.start("dataset", 10 * GB, 8 * GBPS, lambda: None)
    clock.run()
    assert seen == [(0.0, 8.0, 1), (10.0, 0.0, 0)]
