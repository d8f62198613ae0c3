"""Budget control: a cloud budget per period; crossing a threshold patches the burst queue, as operators
do with `PATCH /queues/cloud-burst {"spec":{"weight":10}}`, and/or caps the cloud pools' HPAs
(`maxReplicas`); the next period restores both.

Spend is billed node time at each cloud pool's price (a node is billed from the autoscaler's request until
it leaves), counted from the start of the period. It is checked every 15 s (the HPA sync period), so a
crossing is acted on at the first check at or after the instant the bill reaches the threshold, at most
15 s late. Period k starts k periods after the first. Every host runs this same controller on its clock
(`BudgetHost`): each says what has been spent and keeps the queue as patched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial
from typing import Any

from tidegate.clock import Clock, Timer
from tidegate.fleet.port import BudgetHost, EventKind
from tidegate.fleet.scaling import HPA_SYNC_SECONDS
from tidegate.fleet.spec import BudgetSpec, BudgetThreshold
from tidegate.model.objects import Queue, QueueState
from tidegate.model.resources import Resources


def patched(queue: Queue, threshold: BudgetThreshold) -> Queue:
    """The queue with the threshold's weight, capability and/or state."""
    changes: dict[str, object] = {}
    if threshold.state is not None:
        changes["state"] = QueueState(threshold.state)
    if threshold.weight is not None:
        changes["weight"] = threshold.weight
    if threshold.capability is not None:
        where = f"budget threshold of queue {queue.name}"
        # Zeros kept, as for a Queue's spec.capability: nvidia.com/gpu "0" caps the queue at no GPUs.
        changes["capability"] = Resources.parse(dict(threshold.capability), where, keep_zeros=True)
    return dataclasses.replace(queue, **changes)  # type: ignore[arg-type]


def describe(queue: Queue) -> str:
    capability = (
        ", ".join(f"{k}={v}" for k, v in sorted(queue.capability.to_dict().items())) if queue.capability else "none"
    )
    state = "" if queue.state is QueueState.OPEN else f", {queue.state.value}"
    return f"weight {queue.weight}, capability {capability}{state}"


def _budgeted(queue: Queue) -> tuple[object, ...]:
    """What a threshold changes of a queue (its other fields, and where it was read from, are not the budget's)."""
    return queue.weight, queue.capability, queue.state


class Budget:
    """Tracks the period's spend and patches the queue through its host (a live queue edit)."""

    def __init__(
        self,
        spec: BudgetSpec,
        queue: Queue,
        host: BudgetHost,
        clock: Clock,
        cap_autoscalers: Callable[[int | None], str] | None = None,
        origin: float | None = None,
    ) -> None:
        """The first period starts at `origin` (now)."""
        self.spec = spec
        #: The queue as its own spec says, which each period starts from.
        self.original = queue
        self.current = queue
        self.host = host
        self.clock = clock
        #: Sets (or, with None, restores) the HPAs' maxReplicas; returns what changed, for the event.
        self.cap_autoscalers = cap_autoscalers
        self.capped = False
        self.thresholds = sorted(spec.thresholds, key=lambda t: t.spent_fraction)
        self.period = -1
        self.period_start = 0.0
        self.baseline = 0.0
        self.crossed = 0
        self.changes = 0
        #: When period 0 started: period k starts k periods later.
        self.origin = clock.now() if origin is None else origin
        self._timers: list[Timer] = []
        self.start_period(self.origin, 0)

    def run(self, priority: int, at: float | None = None) -> None:
        """Start each period on time and check the spend every HPA sync period from `at` (now), while the host
        is active."""
        when = self.clock.now() if at is None else at
        self._timers = [
            self.clock.call_at(self.period_starts(self.period + 1), partial(self._next_period, priority), priority),
            self.clock.call_at(when, partial(self._check, priority), priority),
        ]

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers = []

    def period_starts(self, index: int) -> float:
        return self.origin + index * self.period_s

    def _next_period(self, priority: int) -> None:
        if not self.host.active():
            return
        self._step(lambda: self.start_period(self.clock.now(), self.period + 1))
        self._timers[0] = self.clock.call_at(
            self.period_starts(self.period + 1), partial(self._next_period, priority), priority
        )

    def _check(self, priority: int) -> None:
        self._step(lambda: self.check(self.clock.now()))
        if self.host.active():
            self._timers[1] = self.clock.call_later(HPA_SYNC_SECONDS, partial(self._check, priority), priority)

    def _step(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # the host says whether it stops everything
            self.host.failed("budget step", exc)

    @property
    def period_s(self) -> float:
        return self.spec.period_hours * 3600.0

    def start_period(self, now: float, index: int | None = None) -> None:
        """A new period (the next one, or period `index`) starting at `now`: spend counts from here, and a
        patched queue gets its spec back."""
        self.period = self.period + 1 if index is None else index
        self.period_start = now
        self.baseline = self.host.spend(now)
        self.crossed = 0
        if _budgeted(self.current) != _budgeted(self.original):
            self._set(self.original, now, f"period {self.period} starts: restored")
        if self.capped and self.cap_autoscalers is not None:
            self.capped = False
            self._capped(None, now, f"period {self.period} starts: restored")

    def spent(self, now: float) -> float:
        return self.host.spend(now) - self.baseline

    def check(self, now: float) -> None:
        """Apply every threshold the period's spend has reached and not yet acted on."""
        if self.crossed == len(self.thresholds):
            return
        spent = self.spent(now)
        while self.crossed < len(self.thresholds):
            threshold = self.thresholds[self.crossed]
            if spent < threshold.spent_fraction * self.spec.per_period:
                break
            self.crossed += 1
            reason = (
                f"spent {spent:,.2f} of {self.spec.per_period:,.2f} in period {self.period} "
                f"(>= {threshold.spent_fraction:.0%})"
            )
            if threshold.weight is not None or threshold.capability is not None or threshold.state is not None:
                self._set(patched(self.current, threshold), now, reason)
            if threshold.max_replicas is not None and self.cap_autoscalers is not None:
                self.capped = True
                self._capped(threshold.max_replicas, now, reason)

    def state(self) -> dict[str, Any]:
        """Where the period stands, as plain values (what a restart resumes from, with `resume`)."""
        return {
            "origin": self.origin,
            "period": self.period,
            "period_start": self.period_start,
            "baseline": self.baseline,
            "crossed": self.crossed,
            "changes": self.changes,
        }

    def resume(self, state: dict[str, Any], current: Queue) -> None:
        """Continue a period as `state` left it, the queue now `current` (as patched then): the HPA cap of
        the last threshold crossed that set one is applied again (an HPA's spec is not kept)."""
        self.period, self.period_start = int(state["period"]), float(state["period_start"])
        self.baseline, self.crossed = float(state["baseline"]), int(state["crossed"])
        self.changes = int(state["changes"])
        self.current = current
        caps = [t.max_replicas for t in self.thresholds[: self.crossed] if t.max_replicas is not None]
        if caps and self.cap_autoscalers is not None:
            self.capped = True
            self.cap_autoscalers(caps[-1])

    def restore(self, state: dict[str, Any], current: Queue, original: Queue, now: float) -> None:
        """After a restart: go on with the kept period (`state`, with the queue now `current` and its own spec
        `original`), or start the one `now` falls in, restoring the queue's own spec (the nodes billed now ran
        through the downtime: that period's spend counts from its start)."""
        self.origin, self.original, self.current = float(state["origin"]), original, current
        index = max(math.floor((now - self.origin) / self.period_s), int(state["period"]))
        if index == int(state["period"]):
            self.resume(state, current)
        else:
            self.changes = int(state["changes"])
            self.start_period(self.period_starts(index), index)

    def _capped(self, max_replicas: int | None, now: float, reason: str) -> None:
        assert self.cap_autoscalers is not None
        change = self.cap_autoscalers(max_replicas)
        self.changes += 1
        self.host.record(f"budget: {change} ({reason})", EventKind.BUDGET)

    def _set(self, queue: Queue, now: float, reason: str) -> None:
        before = describe(self.current)
        self.current = self.host.set_queue(queue)
        self.changes += 1
        self.host.record(f"budget: queue {queue.name} {before} -> {describe(queue)} ({reason})", EventKind.BUDGET)
