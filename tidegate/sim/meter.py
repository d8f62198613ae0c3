"""Time-weighted accounting of piecewise-constant levels (allocated GPUs, cloud nodes, demand)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Level:
    """A quantity that changes at instants: its integral over time, its peak and its history."""

    value: float = 0.0
    since: float = 0.0
    area: float = 0.0
    peak: float = 0.0
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def set(self, value: float, now: float) -> None:
        if value == self.value:
            return
        self.area += self.value * (now - self.since)
        self.since = now
        self.value = value
        if value > self.peak:  # max(), without the builtin call: this runs several times per job
            self.peak = value
        if self.times and self.times[-1] == now:
            self.values[-1] = value
        else:
            self.times.append(now)
            self.values.append(value)

    def add(self, delta: float, now: float) -> None:
        self.set(self.value + delta, now)

    def integral(self, until: float) -> float:
        """The area under the level from time 0 to `until` (value-seconds), `until` at any time."""
        if until >= self.since:
            return self.area + self.value * (until - self.since)
        area, previous_t, previous_v = 0.0, 0.0, 0.0
        for t, v in zip(self.times, self.values, strict=True):
            if t >= until:
                break
            area += previous_v * (t - previous_t)
            previous_t, previous_v = t, v
        return area + previous_v * (until - previous_t)


class Meter:
    """Named levels, created on first use."""

    def __init__(self) -> None:
        self.levels: dict[str, Level] = {}

    def __getitem__(self, name: str) -> Level:
        level = self.levels.get(name)
        if level is None:
            level = self.levels[name] = Level()
        return level
