"""Link outages: a scenario cuts the IDC<->cloud link for time windows (`spec.linkOutages`).

While a cloud's link is cut:
- nothing new is dispatched there: its nodes are cordoned (unschedulable; nodes that become ready
  during the cut are cordoned too) and its pools do not scale up;
- when every cloud is cut, burst is off: no job overflows, and jobs pending in the burst queue go back
  to their home queue (a job whose home is the burst queue waits there);
- transfers over the link (prefetches, checkpoint uploads and downloads) stall at rate 0 and resume
  with the bytes they had moved when it comes back;
- running cloud jobs follow the outage's `cloudPods`: `keepRunning` (their checkpoints stay on local
  disk, at most two, until the link is back) or `fail` (restarted like an evicted job, from their last
  uploaded checkpoint).

Every job the cut touches gets an event in the report; nothing changes silently. Overlapping windows
nest: a cloud is restored when its last window ends.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from tidegate.fleet.pool import Pool
from tidegate.sim.spec import LinkOutageSpec

if TYPE_CHECKING:
    from tidegate.sim.engine import Simulation

#: At one instant, a cut or restore runs after completions and finished transfers, before the cycle.
PRIORITY_OUTAGE = 1


class LinkOutages:
    """The scenario's outage windows, applied to a running simulation."""

    def __init__(self, sim: Simulation, outages: list[LinkOutageSpec]) -> None:
        self.sim = sim
        self.outages = outages
        self.clouds = sorted({p.cluster_name for p in sim.pools.values() if p.is_cloud})
        self.cut: dict[str, int] = dict.fromkeys(self.clouds, 0)
        self.events: list[tuple[float, str]] = []

    def schedule(self) -> None:
        clock = self.sim.clock
        for outage in self.outages:
            clusters = [outage.cluster] if outage.cluster else self.clouds
            clock.call_at(outage.start, partial(self._cut, outage, clusters), PRIORITY_OUTAGE)
            end = outage.start + outage.duration_seconds
            clock.call_at(end, partial(self._restore, clusters), PRIORITY_OUTAGE)

    def is_cut(self, pool: Pool) -> bool:
        return self.cut.get(pool.cluster_name, 0) > 0

    @property
    def blocks_burst(self) -> bool:
        """Every cloud's link is cut: nothing can burst."""
        return bool(self.clouds) and all(self.cut[c] > 0 for c in self.clouds)

    def _set_up(self, clusters: list[str], up: bool) -> None:
        """Bring the clusters' links and (non-draining) nodes up or down together."""
        sim = self.sim
        for cluster in clusters:
            link = sim.links.get(cluster)
            if link is not None:
                link.set_up(up)
        for node in self._nodes(clusters, draining=False):
            sim.core.set_schedulable(node, up)

    def _nodes(self, clusters: list[str], draining: bool) -> list[str]:
        """The clusters' nodes, with or without those cordoned for scale-in (they stay cordoned)."""
        return [
            node
            for pool in self.sim.pools.values()
            if pool.cluster_name in clusters
            for node in pool.nodes
            if draining or node not in pool.draining
        ]

    def log(self, text: str) -> None:
        """An outage event: in the run's events and in its list of outage events (never truncated)."""
        event = (self.sim.clock.now(), text)
        self.sim.events.append(event)
        self.events.append(event)

    def _affected(self, text: str) -> None:
        self.log(text)
        self.sim.meter["outage_affected_jobs"].add(1, self.sim.clock.now())

    def _cut(self, outage: LinkOutageSpec, clusters: list[str]) -> None:
        sim = self.sim
        now = sim.clock.now()
        newly = [c for c in clusters if self.cut.get(c, 0) == 0]
        for cluster in clusters:
            self.cut[cluster] = self.cut.get(cluster, 0) + 1
        where = ", ".join(clusters)
        self.log(f"link to {where} cut for {outage.duration_seconds:g} s (cloud pods: {outage.cloud_pods})")
        sim.meter["link_outages"].add(1, now)
        sim.meter["link_cut_clouds"].add(len(newly), now)
        self._set_up(newly, False)
        on_cut = set(self._nodes(newly, draining=True))
        for run in list(sim.running.values()):
            if not any(node in on_cut for node in run.nodes):
                continue
            name = run.job.name
            if outage.cloud_pods == "fail":
                self._affected(f"{name}: lost its data path (link to {where} cut); restarting")
                sim._evicted(run, "link outage")
            elif run.work_started is None:
                self._affected(f"{name}: prefetch stalled (link to {where} cut)")
            else:
                self._affected(f"{name}: keeps running through the link cut; checkpoints kept locally")
        if self.blocks_burst:
            self._send_home()
        sim._want_cycle()

    def _send_home(self) -> None:
        """Pending burst jobs fall back to their home queue (the burst queue is their only one: they wait)."""
        sim = self.sim
        burst = sim.scenario.burst.queue
        for group_key, job in list(sim.pending.items()):
            if job.queue != burst:
                continue
            if job.home_queue == burst:
                self._affected(f"{job.name}: waits in {burst} (link cut, no home queue to fall back to)")
                continue
            sim._move(group_key, job, job.home_queue)
            self._affected(f"{job.name}: moved back from {burst} to {job.home_queue} (link cut)")

    def _restore(self, clusters: list[str]) -> None:
        sim = self.sim
        now = sim.clock.now()
        restored = []
        for cluster in clusters:
            self.cut[cluster] -= 1
            if self.cut[cluster] == 0:
                restored.append(cluster)
        sim.meter["link_cut_clouds"].add(-len(restored), now)
        if not restored:
            return
        self._set_up(restored, True)
        self.log(f"link to {', '.join(restored)} restored")
        sim._want_cycle()
