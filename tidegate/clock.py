"""Clocks: controllers are written once against `Clock` and run in simulated or wall time.

`SimClock` is a tiny discrete-event kernel (as in SimPy): a heap of (time, priority, seq, callback);
the sequence counter breaks ties deterministically, so the same inputs replay identically.
`WallClock` runs the same callbacks in real time for the live control plane.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import Protocol

Callback = Callable[[], None]


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> Timer: ...

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> Timer: ...


@dataclass(slots=True)
class _Event:
    when: float
    callback: Callback
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


#: A heap entry: tuples compare in C, far cheaper than an ordered dataclass on a month of events.
_Entry = tuple[float, int, int, _Event]


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
            event.callback()
        if until is not None and until > self._now:
            self._now = until


class _WallTimer:
    def __init__(self, timer: threading.Timer) -> None:
        self._timer = timer

    def cancel(self) -> None:
        self._timer.cancel()


class WallClock:
    """Real time; callbacks run on timer threads (the live control loop serialises them)."""

    def now(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> _WallTimer:
        return self.call_later(when - self.now(), callback, priority)

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> _WallTimer:
        timer = threading.Timer(max(delay, 0.0), callback)
        timer.daemon = True
        timer.start()
        return _WallTimer(timer)
