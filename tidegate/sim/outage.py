"""Scripted link outages: a scenario cuts the IDC<->cloud link for time windows (`spec.linkOutages`).

This is the simulated world's side: when each window starts and ends. What a cut does (nodes cordoned,
pools held, burst off and burst jobs sent home once every cloud is cut, running cloud pods kept or failed
as the window's `cloudPods` says, transfers stalled) is the fleet's link controller
(`tidegate.fleet.links.Links`), as in `tidegate serve` and `tidegate kube`. Overlapping windows nest: a
cloud is restored when its last window ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from tidegate.clock import Clock
from tidegate.fleet.links import Links
from tidegate.sim.meter import Meter
from tidegate.sim.spec import LinkOutageSpec

#: At one instant, a cut or restore runs after completions and finished transfers, before the cycle.
PRIORITY_OUTAGE = 1


class LinkOutages:
    """The scenario's outage windows, cutting and restoring the links of a running simulation."""

    def __init__(self, clock: Clock, links: Links, meter: Meter, outages: Sequence[LinkOutageSpec]) -> None:
        self.clock = clock
        self.links = links
        self.meter = meter
        self.outages = outages
        #: How many windows hold each cloud's link cut now.
        self.cut: dict[str, int] = dict.fromkeys(links.clouds, 0)

    def schedule(self) -> None:
        for outage in self.outages:
            clusters = [outage.cluster] if outage.cluster else self.links.clouds
            self.clock.call_at(outage.start, partial(self._cut, outage, clusters), PRIORITY_OUTAGE)
            end = outage.start + outage.duration_seconds
            self.clock.call_at(end, partial(self._restore, clusters), PRIORITY_OUTAGE)

    def _cut(self, outage: LinkOutageSpec, clusters: list[str]) -> None:
        for cluster in clusters:
            self.cut[cluster] = self.cut.get(cluster, 0) + 1
        self.meter["link_outages"].add(1, self.clock.now())
        self.links.cut(clusters, f"for {outage.duration_seconds:g} s", outage.cloud_pods)

    def _restore(self, clusters: list[str]) -> None:
        restored = []
        for cluster in clusters:
            self.cut[cluster] -= 1
            if self.cut[cluster] == 0:
                restored.append(cluster)
        self.links.restore(restored)
