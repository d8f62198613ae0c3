"""The shared IDC<->cloud link as an exact fluid model (processor sharing with per-transfer caps).

Every active transfer (a cloud pod's dataset prefetch, a checkpoint upload or download) gets a
max-min fair share of the link's capacity, never more than its own cap (the initContainer's bandwidth
limit). Rates change only when a transfer starts, ends or is cancelled, or when the link goes down or
comes back; at each such instant the bytes moved since the last one are subtracted, every rate is
recomputed, and a transfer whose rate changed gets a new finish event on the clock. There is no time
stepping, so finish times are exact (up to floating point) and a link costs nothing while idle.

A link that is down (an outage) gives every transfer rate 0: transfers stall and resume, with the
bytes they had moved, when it comes back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from tidegate.clock import Clock, Timer, nothing

#: Bytes per second in one gigabit per second (decimal, as network rates are quoted).
GBPS = 1e9 / 8


def max_min_fair(caps: Sequence[float], capacity: float) -> list[float]:
    """Water-filling: each transfer gets min(its cap, an equal share of what the smaller ones leave).

    With caps (8, 8) on a capacity of 10 both get 5; with caps (2, 8) the first gets 2 and the second
    the 8 left. Ties are broken by position, so the result is deterministic.
    """
    count = len(caps)
    left = max(capacity, 0.0)
    if count and caps.count(caps[0]) == count:
        # One cap for all (every transfer over a cluster's link has the pod's cap): the sort is the identity,
        # and the same arithmetic runs without it (min(cap, share) is cap unless share < cap).
        cap = caps[0]
        out = []
        for _ in range(count):
            share = left / count
            rate = share if share < cap else cap
            out.append(rate)
            left -= rate
            count -= 1
        return out
    rates = [0.0] * count
    for i in sorted(range(count), key=caps.__getitem__):
        rate = min(caps[i], left / count)
        rates[i] = rate
        left -= rate
        count -= 1
    return rates


@dataclass(slots=True, eq=False)
class Transfer:
    """Bytes moving over a link; `on_done` runs when the last byte arrives."""

    kind: str
    size: float
    cap: float
    on_done: Callable[[], None]
    started: float
    remaining: float = 0.0
    rate: float = 0.0
    timer: Timer | None = None
    active: bool = True


@dataclass(slots=True)
class Link:
    """One IDC<->cloud link of `capacity` bytes per second shared by its active transfers.

    `on_rate(total_rate, transfers, now)` is told every time the link's total rate or the number of
    transfers changes (for utilisation metering).
    """

    name: str
    clock: Clock
    capacity: float
    on_rate: Callable[[float, int, float], None] | None = None
    up: bool = True
    active: list[Transfer] = field(default_factory=list)
    moved: float = 0.0
    _updated: float = 0.0

    def start(self, kind: str, size: float, cap: float, on_done: Callable[[], None]) -> Transfer:
        """Begin moving `size` bytes at most `cap` bytes per second (math.inf: no cap)."""
        self._advance()
        transfer = Transfer(kind, size, cap if cap > 0 else math.inf, on_done, self.clock.now(), remaining=size)
        self.active.append(transfer)
        self._reshare()
        return transfer

    def cancel(self, transfer: Transfer) -> None:
        """Stop a transfer (its pod is gone); the bytes it moved stay counted, its callback never runs."""
        if not transfer.active:
            return
        self._advance()
        self._drop(transfer)
        self._reshare()

    def set_up(self, up: bool) -> None:
        """Cut (False) or restore (True) the link; transfers stall at rate 0 while it is down."""
        if up == self.up:
            return
        self._advance()
        self.up = up
        self._reshare()

    def _drop(self, transfer: Transfer) -> None:
        """The transfer leaves the link (finished or stopped); its callback is let go (callbacks point back at
        whoever keeps the transfer: a reference cycle otherwise)."""
        transfer.active = False
        transfer.on_done = nothing
        if transfer.timer is not None:
            transfer.timer.cancel()
            transfer.timer = None
        self.active.remove(transfer)

    def _advance(self) -> None:
        """Subtract the bytes each transfer moved since the last change."""
        now = self.clock.now()
        elapsed = now - self._updated
        if elapsed > 0:
            for transfer in self.active:
                moved = min(transfer.rate * elapsed, transfer.remaining)
                transfer.remaining -= moved
                self.moved += moved
        self._updated = now

    def _reshare(self) -> None:
        """New max-min fair rates; a transfer whose rate changed gets a new finish event."""
        now = self.clock.now()
        rates = max_min_fair([t.cap for t in self.active], self.capacity if self.up else 0.0)
        for transfer, rate in zip(self.active, rates, strict=True):
            if rate == transfer.rate and (transfer.timer is not None or rate == 0):
                continue
            transfer.rate = rate
            if transfer.timer is not None:
                transfer.timer.cancel()
                transfer.timer = None
            if rate > 0:
                # Under a byte left (floating point at a change that fell on its finish): it ends now.
                when = now if transfer.remaining < 1.0 else now + transfer.remaining / rate
                transfer.timer = self.clock.call_at(when, partial(self._finish, transfer))
        if self.on_rate is not None:
            self.on_rate(sum(rates), len(rates), now)

    def _finish(self, transfer: Transfer) -> None:
        transfer.timer = None
        self._advance()
        self.moved += transfer.remaining  # what floating point left over belongs to this transfer
        transfer.remaining = 0.0
        on_done = transfer.on_done
        self._drop(transfer)
        self._reshare()
        on_done()
