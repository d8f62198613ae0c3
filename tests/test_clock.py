from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tidegate.clock import EventLoop, SimClock, WallClock


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


def test_the_wall_clock_runs_events_in_the_sim_clocks_order_once_their_time_comes() -> None:
    clock = WallClock(speed=1000.0)  # a clock second is a millisecond
    seen: list[tuple[str, float]] = []
    clock.call_at(50, lambda: seen.append(("b50", clock.now())))
    clock.call_at(50, lambda: seen.append(("a50", clock.now())), priority=-1)
    clock.call_at(20, lambda: seen.append(("20", clock.now())))
    clock.call_at(30, lambda: seen.append(("never", clock.now()))).cancel()
    began = time.monotonic()
    clock.run()
    assert time.monotonic() - began >= 0.045  # waited for the last event's time on the wall
    assert seen == [("20", 20), ("a50", 50), ("b50", 50)]  # each callback sees its own time


def test_the_wall_clock_runs_events_other_threads_add_on_its_own_thread() -> None:
    clock = WallClock(speed=1000.0)
    ran_on: list[int] = []
    clock.call_at(2000, lambda: ran_on.append(threading.get_ident()))  # keeps the loop waiting

    def submit() -> None:  # as a request handler would, while the loop waits
        clock.call_later(5, lambda: ran_on.append(threading.get_ident()))

    threading.Timer(0.01, submit).start()
    clock.run(until=1000)  # a wall second: ample time for the other thread
    assert ran_on == [threading.get_ident()]  # the added event ran, on the loop's thread, before `until`
    assert clock.now() == 1000 and clock.peek() == 2000
    with pytest.raises(ValueError, match="past"):
        clock.call_at(999, lambda: None)


def test_the_wall_clock_refuses_a_speed_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="speed"):
        WallClock(speed=0)


@pytest.mark.parametrize("make_clock", [SimClock, lambda: WallClock(speed=1e6)], ids=["sim", "wall"])
def test_call_each_runs_as_call_at_in_index_order_would(make_clock: Callable[[], EventLoop]) -> None:
    # The calls take their places when scheduled: ties with later events at the same time and priority go
    # to the series, equal times keep index order, and the series interleaves with what its calls schedule.
    def replay(each: bool) -> list[str]:
        clock = make_clock()
        seen: list[str] = []
        times = [5.0, 1.0, 5.0, 3.0, 1.0]

        def call(i: int) -> None:
            seen.append(f"job{i}@{clock.now():g}")
            if i == 3:
                clock.call_at(5.0, lambda: seen.append("scheduled by job3"), priority=1)

        if each:
            clock.call_each(times, call, priority=1)
        else:
            for i, when in enumerate(times):
                clock.call_at(when, lambda i=i: call(i), priority=1)  # type: ignore[misc]
        clock.call_at(5.0, lambda: seen.append("later, same priority"), priority=1)
        clock.call_at(5.0, lambda: seen.append("later, first priority"), priority=0)
        clock.run()
        return seen

    assert replay(each=True) == replay(each=False)
    assert replay(each=True) == [
        "job1@1",
        "job4@1",
        "job3@3",
        "later, first priority",
        "job0@5",
        "job2@5",
        "later, same priority",
        "scheduled by job3",
    ]


def test_call_each_refuses_the_past_and_takes_nothing() -> None:
    clock = SimClock(start=10)
    with pytest.raises(ValueError, match="past"):
        clock.call_each([20.0, 5.0], lambda i: None)
    clock.call_each([], lambda i: None)
    assert clock.peek() is None
