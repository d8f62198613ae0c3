"""Spot interruption notices: what happens to a cloud node, and its pods, between a provider's notice and the
instance's end.

A notice (the simulator's interruption model draws it, `tidegate serve`'s agents report it, `tidegate kube`
reads it off the node's taint) cordons the node and takes it out of its pool's count, so the HPA asks for a
replacement and no job waits for this one; the pods running there start their preStop hook at once (each
host says what that means: the simulator models the checkpoint's time against the grace period, the live
hosts tell the pods); when the notice runs out the provider takes the instance back and whatever still
runs there is evicted (its jobs follow their lifecycle policies). A second notice for a node changes nothing.
"""

from __future__ import annotations

from functools import partial

from tidegate.clock import Clock, Timer
from tidegate.fleet.pool import Pool
from tidegate.fleet.port import EventKind, SpotHost
from tidegate.fleet.scaling import CloudFleet
from tidegate.fleet.spec import notice_seconds

#: A spot node's notice when neither its pool nor its provider says (AWS's two-minute warning).
DEFAULT_NOTICE_SECONDS = 120.0


class SpotNotices:
    """The nodes under a notice and when each goes."""

    def __init__(self, host: SpotHost, sizing: CloudFleet, clock: Clock, priority: int = 0) -> None:
        """`priority`: of the instance's end among events due at the same instant."""
        self.host = host
        self.sizing = sizing
        self.clock = clock
        self.priority = priority
        #: Nodes under a notice, and when the provider takes each back.
        self.noticed: dict[str, float] = {}
        self._timers: dict[str, Timer] = {}

    def leaving(self, node: str) -> bool:
        """The node goes whatever the autoscaler wants."""
        return node in self.noticed

    def notice(self, pool: Pool, node: str, notice_s: float | None = None) -> float | None:
        """A provider's notice for the pool's node, `notice_s` before its end (by default the pool's
        `interruption.noticeSeconds`, else its provider's: aws 120 s, gcp and azure 30 s, aliyun 300 s).
        Returns when the instance goes (None for a node the pool no longer has)."""
        if node in self.noticed:
            return self.noticed[node]
        if node not in pool.nodes:
            return None
        if notice_s is None:
            notice_s = notice_seconds(pool.spec, pool.cluster) or DEFAULT_NOTICE_SECONDS
        goes_at = self.clock.now() + notice_s
        self._hold(pool, node, goes_at)
        stopping = self.host.interrupt(pool, node, notice_s)
        text = f"{node}: spot interruption notice ({notice_s:g} s); stopping {', '.join(stopping) or 'no jobs'}"
        self.host.record(text, EventKind.SPOT)
        self._timers[node] = self.clock.call_at(goes_at, partial(self._gone, pool, node), self.priority)
        return goes_at

    def resume(self, pool: Pool, node: str, goes_at: float) -> None:
        """A notice given before a restart: the node stays cordoned and goes when it said (at once if that has
        passed); its pods were told already."""
        if node in pool.nodes and node not in self.noticed:
            self._hold(pool, node, goes_at)
            when = max(goes_at, self.clock.now())
            self._timers[node] = self.clock.call_at(when, partial(self._gone, pool, node), self.priority)

    def _hold(self, pool: Pool, node: str, goes_at: float) -> None:
        """Cordoned, and out of the pool's count (the HPA replaces it)."""
        self.noticed[node] = goes_at
        self.host.set_schedulable(node, False)
        if node not in pool.draining:
            pool.draining.append(node)

    def _gone(self, pool: Pool, node: str) -> None:
        """The notice ran out: the provider takes the instance back (what still runs there is evicted)."""
        self._timers.pop(node, None)
        self.noticed.pop(node, None)
        if node in pool.nodes:
            self.host.record(f"{pool.name}: {node} interrupted", EventKind.SPOT)
            self.sizing.remove_node(pool, node)
            self.host.sized(pool)

    def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers = {}
