"""Clocks: controllers are written once against `Clock` and run in simulated or wall time.

`SimClock` is a tiny discrete-event kernel (as in SimPy): a heap of (time, priority, seq, callback);
the sequence counter breaks ties deterministically, so the same inputs replay identically.
`WallClock` runs the same callbacks, in the same order, as wall time comes (optionally sped up).
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import count
from typing import Protocol

Callback = Callable[[], None]


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> Timer: ...

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> Timer: ...


class EventLoop(Clock, Protocol):
    """A clock that also runs its events: what drives a simulation or a live control loop."""

    events_run: int

    def call_each(self, times: Sequence[float], callback: Callable[[int], None], priority: int = 0) -> None:
        """Call `callback(i)` at `times[i]` for every i, as `call_at` would in index order."""
        ...

    def peek(self) -> float | None: ...

    def run(self, until: float | None = None) -> None: ...


def nothing() -> None:
    """A callback that does nothing: what a spent event (or link transfer) is left with."""


@dataclass(slots=True)
class _Event:
    """A call at a time. Once it has run or is cancelled it lets go of its callback: whoever keeps the event (a
    timer to cancel) would otherwise be kept alive by it, and the callback often points back at them: a
    reference cycle only the cyclic collector frees."""

    when: float
    callback: Callback
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        self.callback = nothing

    def fire(self) -> None:
        """Run the callback, letting go of it first."""
        callback, self.callback = self.callback, nothing
        callback()


#: A heap entry: tuples compare in C, far cheaper than an ordered dataclass on a month of events.
_Entry = tuple[float, int, int, _Event]


class _Series:
    """The calls of one `SimClock.call_each`, taken in `order`: the heap holds an event for the next only.
    (A class, not closures: a closure that schedules itself would be a reference cycle.)"""

    __slots__ = ("_callback", "_first", "_heap", "_order", "_position", "_priority", "_times")

    def __init__(
        self,
        heap: list[_Entry],
        times: Sequence[float],
        order: list[int],
        first: int,
        priority: int,
        callback: Callable[[int], None],
    ) -> None:
        self._heap = heap
        self._times = times
        self._order = order
        self._first = first  # call i's sequence number is first + i
        self._priority = priority
        self._callback = callback
        self._position = 0

    def push_next(self) -> None:
        i = self._order[self._position]
        when = self._times[i]
        heapq.heappush(self._heap, (when, self._priority, self._first + i, _Event(when, self._fire)))

    def _fire(self) -> None:
        i = self._order[self._position]
        self._position += 1
        if self._position < len(self._order):  # none of the calls after it can come before it
            self.push_next()
        self._callback(i)


class SimClock:
    """Simulated time that jumps from event to event."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[_Entry] = []
        self._seq = count()
        self.events_run = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> _Event:
        if when < self._now:
            raise ValueError(f"cannot schedule an event in the past ({when} < now {self._now})")
        event = _Event(when, callback)
        heapq.heappush(self._heap, (when, priority, next(self._seq), event))
        return event

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> _Event:
        return self.call_at(self._now + max(delay, 0.0), callback, priority)

    def call_each(self, times: Sequence[float], callback: Callable[[int], None], priority: int = 0) -> None:
        """Call `callback(i)` at `times[i]` for every i, exactly as `call_at(times[i], partial(callback, i),
        priority)` for each i in index order would: the calls take their sequence numbers now, so they run in
        the same order among themselves and against every other event. Only the next one sits in the heap,
        though: a replay's thousands of arrivals would otherwise deepen every push and pop of the run. The
        calls cannot be cancelled."""
        if not times:
            return
        if min(times) < self._now:
            raise ValueError(f"cannot schedule an event in the past ({min(times)} < now {self._now})")
        order = sorted(range(len(times)), key=times.__getitem__)  # stable: equal times keep index order
        first = next(self._seq)
        self._seq = count(first + len(times))  # the numbers call_at would have taken, one a call
        _Series(self._heap, times, order, first, priority, callback).push_next()

    def peek(self) -> float | None:
        while self._heap and self._heap[0][3].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def run(self, until: float | None = None) -> None:
        """Run events in time order until the heap is empty or the next event is after `until`."""
        heap = self._heap
        pop = heapq.heappop
        while heap:
            when, _, _, event = heap[0]
            if until is not None and when > until:
                break
            pop(heap)
            if event.cancelled:
                continue
            self._now = when
            self.events_run += 1
            callback, event.callback = event.callback, nothing  # `_Event.fire`, inline: once an event of a month
            callback()
        if until is not None and until > self._now:
            self._now = until


class WallClock:
    """Wall time, optionally sped up, for a control loop that runs the simulation's controllers live.

    Events run as SimClock runs them: one at a time, in (time, priority, insertion) order, on the thread
    that calls `run`, so controllers written for SimClock need no locks; each runs once its time has come
    on the wall clock (`speed` clock seconds a wall second). Any thread may add events (a request handler
    submitting work): adding is thread-safe and wakes the loop. On the loop's thread `now()` is the time
    of the event being run (what a simulation would give it), so the same controllers make the same
    decisions; on other threads it is the clock's current time.
    """

    def __init__(self, start: float = 0.0, speed: float = 1.0, wall: Callable[[], float] = time.monotonic) -> None:
        if not speed > 0:
            raise ValueError(f"speed {speed!r} must be positive")
        self._speed = speed
        self._wall = wall
        self._origin = wall() - start / speed  # the wall reading at which the clock read 0
        self._now = start
        self._heap: list[_Entry] = []
        self._seq = count()
        self._changed = threading.Condition()
        self._loop: int | None = None
        self.events_run = 0

    def _current(self) -> float:
        return (self._wall() - self._origin) * self._speed

    def now(self) -> float:
        return self._now if threading.get_ident() == self._loop else max(self._now, self._current())

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> _Event:
        event = _Event(when, callback)
        with self._changed:
            if when < self._now:
                raise ValueError(f"cannot schedule an event in the past ({when} < now {self._now})")
            heapq.heappush(self._heap, (when, priority, next(self._seq), event))
            self._changed.notify()
        return event

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> _Event:
        return self.call_at(self.now() + max(delay, 0.0), callback, priority)

    def call_each(self, times: Sequence[float], callback: Callable[[int], None], priority: int = 0) -> None:
        """Call `callback(i)` at `times[i]` for every i: `call_at` for each in index order (a live loop's
        heap is small, so SimClock's one-at-a-time series would buy nothing here)."""
        for i, when in enumerate(times):
            self.call_at(when, partial(callback, i), priority)

    def peek(self) -> float | None:
        with self._changed:
            while self._heap and self._heap[0][3].cancelled:
                heapq.heappop(self._heap)
            return self._heap[0][0] if self._heap else None

    def run(self, until: float | None = None) -> None:
        """Run events as their time comes until none is left (without `until`) or the clock reaches
        `until`; waiting, the loop wakes for events other threads add."""
        self._loop = threading.get_ident()
        heap = self._heap
        with self._changed:
            while True:
                while heap and heap[0][3].cancelled:
                    heapq.heappop(heap)
                if not heap and until is None:
                    return
                due = heap[0][0] if heap else math.inf
                if until is not None and due > until:
                    due = until
                wait = (due - self._current()) / self._speed
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                if until is not None and (not heap or heap[0][0] > until):
                    self._now = max(self._now, until)
                    return
                when, _, _, event = heapq.heappop(heap)
                self._now = when
                self.events_run += 1
                self._changed.release()  # other threads may add events while the callback runs
                try:
                    event.fire()
                finally:
                    self._changed.acquire()
