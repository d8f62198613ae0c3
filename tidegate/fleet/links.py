"""The links between the IDC and the cloud clusters: when one fails, work degrades to the IDC.

While a cloud's link is down:
- nothing new is dispatched there: its nodes are cordoned (nodes joining meanwhile too; nodes cordoned for
  scale-in stay so when it comes back) and its pools do not grow (a scale-up fails, as a scale update the
  cloud refuses);
- once every cloud's link is down, burst is off: no job overflows, and jobs waiting in the burst queue go
  back to the queue they were submitted to (`on_all_cut`: `Overflow.send_home`);
- the jobs running there follow the cut's `cloud_pods`: `keepRunning` (each is told; a simulated one's
  checkpoints stay on local disk until the link is back) or `fail` (their pods fail, and their lifecycle
  policies restart them from their last uploaded checkpoint);
- transfers over the link stall (`LinkHost.link_changed`).

What says a link is down is the host's: the simulator's scripted outages, a prober's report to `tidegate
serve`, the cloud API server's reachability for `tidegate kube`. Every job a cut touches gets an event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from tidegate.clock import Clock
from tidegate.fleet.pool import Pool
from tidegate.fleet.port import EventKind, LinkHost
from tidegate.fleet.scaling import CloudFleet

CloudPods = Literal["keepRunning", "fail"]
KEEP_RUNNING: CloudPods = "keepRunning"


class Links:
    """Which clouds' links are down, since when and why."""

    def __init__(self, host: LinkHost, sizing: CloudFleet, clock: Clock, cloud_pods: CloudPods = KEEP_RUNNING) -> None:
        """`cloud_pods`: what running cloud pods do on a cut that does not say."""
        self.host = host
        self.sizing = sizing
        self.clock = clock
        self.cloud_pods = cloud_pods
        self.clouds = sorted({pool.cluster_name for pool in sizing.pools.values() if pool.is_cloud})
        #: Clouds whose link is down: since when, and why.
        self.down: dict[str, tuple[float, str]] = {}
        #: What else happens when the last link goes (overflow sends the burst queue's jobs home).
        self.on_all_cut: Callable[[], None] = lambda: None

    def may_grow(self, pool: Pool) -> bool:
        """No new capacity in a cloud cut off."""
        return pool.cluster_name not in self.down

    @property
    def blocks_burst(self) -> bool:
        """Every cloud's link is down: nothing can burst."""
        return bool(self.down) and bool(self.clouds) and all(cloud in self.down for cloud in self.clouds)

    def joined(self, pool: Pool, node: str) -> None:
        """A node joining while its cloud is cut off joins cordoned."""
        if pool.cluster_name in self.down:
            self.host.set_schedulable(node, False)

    def cut(self, clusters: Sequence[str], cause: str = "", cloud_pods: CloudPods | None = None) -> None:
        """The links to these clouds go down now (`cause`, e.g. "for 7200 s", is shown after "cut"); a cloud
        already down stays as it was. Jobs waiting in the burst queue go home if no cloud is left."""
        host = self.host
        now = self.clock.now()
        newly = [cluster for cluster in clusters if cluster not in self.down]
        for cluster in newly:
            self.down[cluster] = (now, cause)
        policy = cloud_pods or self.cloud_pods
        where = ", ".join(clusters)
        host.record(f"link to {where} cut{f' {cause}' if cause else ''} (cloud pods: {policy})", EventKind.LINK)
        for cluster in newly:
            host.link_changed(cluster, False)
        self._cordon(newly, True)
        for job in host.running_on(set(self._nodes(newly, draining=True))):
            if policy == "fail":
                host.record(f"lost its data path (link to {where} cut); restarting", EventKind.LINK_AFFECTED, job.key)
                host.fail(job.key, "link outage")
            elif job.fetching:
                host.record(f"prefetch stalled (link to {where} cut)", EventKind.LINK_AFFECTED, job.key)
            else:
                text = "keeps running through the link cut; checkpoints kept locally"
                host.record(text, EventKind.LINK_AFFECTED, job.key)
        if self.blocks_burst:
            self.on_all_cut()
        host.want_cycle()

    def restore(self, clusters: Sequence[str]) -> None:
        """The links to these clouds are back: their nodes take new pods again (all but those cordoned for
        scale-in), their pools may grow, burst is on again."""
        restored = [cluster for cluster in clusters if cluster in self.down]
        if not restored:
            return
        for cluster in restored:
            del self.down[cluster]
            self.host.link_changed(cluster, True)
        self._cordon(restored, False)
        self.host.record(f"link to {', '.join(restored)} restored", EventKind.LINK)
        self.host.want_cycle()

    def set_link(self, cluster: str, up: bool, reason: str = "") -> bool:
        """A prober's or an operator's word on one cloud's link; False when it changes nothing (a link
        reported down again keeps the time it went down). Raises KeyError for a cloud not served."""
        if cluster not in self.clouds:
            raise KeyError(cluster)
        if up == (cluster not in self.down):
            return False
        if up:
            self.restore([cluster])
        else:
            self.cut([cluster], f"({reason})" if reason else "")
            self.down[cluster] = (self.down[cluster][0], reason)
        return True

    def resume(self, cluster: str, since: float, reason: str) -> None:
        """A link that was down before a restart stays down (its nodes cordoned) until reported up."""
        if cluster in self.clouds and cluster not in self.down:
            self.down[cluster] = (since, reason)
            self.host.link_changed(cluster, False)
            self._cordon([cluster], True)

    def _cordon(self, clusters: Iterable[str], cordoned: bool) -> None:
        """The clusters' nodes (but those cordoned for scale-in, which stay so) take new pods or not."""
        for node in self._nodes(clusters, draining=False):
            self.host.set_schedulable(node, not cordoned)

    def _nodes(self, clusters: Iterable[str], draining: bool) -> list[str]:
        """The clusters' nodes, with or without those cordoned for scale-in."""
        wanted = set(clusters)
        return [
            node
            for pool in self.sizing.pools.values()
            if pool.cluster_name in wanted
            for node in pool.nodes
            if draining or node not in pool.draining
        ]
