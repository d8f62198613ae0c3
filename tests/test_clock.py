from __future__ import annotations

import pytest

from tidegate.clock import SimClock


def test_events_run_in_time_then_priority_then_insertion_order() -> None:
    clock = SimClock()
    seen: list[str] = []
    clock.call_at(5, lambda: seen.append("b5"))
    clock.call_at(5, lambda: seen.append("a5-first"), priority=-1)
    clock.call_at(1, lambda: seen.append("1"))
    clock.call_at(5, lambda: seen.append("c5"))
    clock.run()
    assert seen == ["1", "a5-first", "b5", "c5"]
    assert clock.now() == 5


def test_callbacks_can_schedule_more_events_and_cancel() -> None:
    clock = SimClock()
    seen: list[float] = []

    def tick() -> None:
        seen.append(clock.now())
        if clock.now() < 30:
            clock.call_later(10, tick)

    clock.call_at(0, tick)
    doomed = clock.call_at(15, lambda: seen.append(-1))
    doomed.cancel()
    clock.run()
    assert seen == [0, 10, 20, 30]


def test_run_until_stops_before_later_events_and_advances_time() -> None:
    clock = SimClock()
    seen: list[int] = []
    clock.call_at(10, lambda: seen.append(10))
    clock.call_at(20, lambda: seen.append(20))
    clock.run(until=15)
    assert seen == [10] and clock.now() == 15
    assert clock.peek() == 20


def test_scheduling_in_the_past_is_an_error() -> None:
    clock = SimClock(start=100)
    with pytest.raises(ValueError, match="past"):
        clock.call_at(50, lambda: None)
