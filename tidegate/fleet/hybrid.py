"""Every hybrid-cloud rule of one host, on one clock, behind one port.

`HybridFleet` puts the controllers together: pool sizing by the HPAs (`CloudFleet`), spot notices
(`SpotNotices`), the links (`Links`), overflow to the burst queue (`Overflow`) and the budget (`Budget`). A host
(the simulator, `tidegate serve`'s control plane, `tidegate kube`) builds one with itself as the `FleetPort`,
calls `start` once, `after_cycle` after each scheduling cycle, and passes on what it hears (a spot notice, a
link's state); everything else is the controllers' own, on the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tidegate.autoscale.hpa import HPASpec
from tidegate.clock import Clock
from tidegate.fleet.budget import Budget
from tidegate.fleet.burst import Burst, Overflow
from tidegate.fleet.links import KEEP_RUNNING, CloudPods, Links
from tidegate.fleet.pool import POOL_LABEL, Pool
from tidegate.fleet.port import FleetPort
from tidegate.fleet.scaling import CloudFleet
from tidegate.fleet.spec import BudgetSpec
from tidegate.fleet.spot import SpotNotices
from tidegate.model.objects import Node, Queue


class HybridFleet:
    """The controllers of one host."""

    def __init__(
        self,
        host: FleetPort,
        clock: Clock,
        pools: Sequence[Pool],
        hpas: Sequence[HPASpec],
        queues: Mapping[str, Queue],
        burst: Burst | None = None,
        budget: BudgetSpec | None = None,
        cloud_pods: CloudPods = KEEP_RUNNING,
        release_priority: int = 0,
        origin: float | None = None,
    ) -> None:
        """`queues` is the host's own mapping, read as it changes (the HPAs' queue metrics select from it);
        `burst` turns overflow on; `budget` starts its first period now; `cloud_pods` is what running cloud
        pods do on a link cut that does not say; `release_priority` orders an instance's end among events at
        the same instant; `origin` is when the fleet's time starts (now by default: the budget's first
        period)."""
        self.host = host
        self.clock = clock
        self.queues = queues
        self.sizing = CloudFleet(pools, hpas, queues, host, clock)
        self.links = Links(host, self.sizing, clock, cloud_pods)
        self.spot = SpotNotices(host, self.sizing, clock, release_priority)
        self.sizing.leaving = self.spot.leaving
        self.sizing.may_grow = self.links.may_grow
        self.sizing.joined = self.links.joined
        self.overflow = Overflow(burst, host, self.links) if burst is not None else None
        self.budget: Budget | None = None
        if budget is not None:
            self.budget = Budget(budget, queues[budget.queue], host, clock, self.cap, origin)

    @property
    def pools(self) -> dict[str, Pool]:
        return self.sizing.pools

    def start(self, priority: int, at: float | None = None) -> None:
        """The periodic controllers' timers (HPA syncs, budget periods and checks), from `at` (now), at
        `priority` among events due at the same instant."""
        self.sizing.run(priority, at)
        if self.budget is not None:
            self.budget.run(priority, at)

    def stop(self) -> None:
        self.sizing.stop()
        self.spot.stop()
        if self.budget is not None:
            self.budget.stop()

    def after_cycle(self, now: float) -> float:
        """What follows a scheduling cycle: overflow. Returns when a waiting job will next have waited long
        enough to overflow (inf: none), for a host that sleeps while nothing changes."""
        return self.overflow.after_cycle(now) if self.overflow is not None else float("inf")

    def cap(self, max_replicas: int | None) -> str:
        """Every HPA's maxReplicas capped (None: each its own again), from its next sync."""
        return self.sizing.cap(max_replicas, self.queues)

    def pool_of(self, node: str | Node) -> Pool | None:
        """The pool a node of the fleet belongs to (by its pool label when given a Node)."""
        if isinstance(node, Node):
            pool = self.pools.get(node.labels.get(POOL_LABEL, ""))
            return pool if pool is not None and node.name in pool.nodes else None
        return next((pool for pool in self.pools.values() if node in pool.nodes), None)
