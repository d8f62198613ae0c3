"""What the live control plane does for the fleet of a served simulation folder: it hosts the node pools the
fleet controller sizes (`FleetHost`: nodes joining and leaving, billing), moves waiting jobs to the burst
queue, takes the providers' spot interruption notices and the links' reported state, and runs the
Scenario's cloud budget. A part of `ControlPlane`, kept apart so each file reads as one concern.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

from tidegate.clock import Clock, EventLoop, Timer
from tidegate.fleet.budget import Budget
from tidegate.fleet.burst import Burst
from tidegate.fleet.hpa_supply import QueueFigures
from tidegate.fleet.pool import POOL_LABEL, Pool
from tidegate.fleet.scaling import HPA_SYNC_SECONDS, CloudFleet
from tidegate.fleet.spec import notice_seconds as notice_seconds_of
from tidegate.live.bill import Bill
from tidegate.live.jobs import JobPhase, LiveJob, Marked, NotFound, QueueMetrics
from tidegate.live.queue_manifests import budgeted_manifest, parsed_queue, queue_manifest
from tidegate.model.objects import JobEvent, Node, Pod, Queue
from tidegate.model.resources import Resources
from tidegate.scheduler.online import OnlineScheduler

_log = logging.getLogger(__name__)
#: A spot node's notice when neither its pool nor its provider says (AWS's two-minute warning).
DEFAULT_NOTICE_SECONDS = 120.0
#: Priority of the HPA's and the budget's timers among events due at the same time (after the cycle's, 10).
PRIORITY_FLEET = 11


class FleetHosting:
    """The pools, burst, spot notices, links and budget of `ControlPlane` (whose state these are)."""

    clock: Clock
    core: OnlineScheduler
    fleet: CloudFleet
    nodes: dict[str, Node]
    jobs: dict[str, LiveJob]
    queues: dict[str, Queue]
    burst: Burst | None
    budget: Budget | None
    budget_origin: float
    bill: Bill
    notices: dict[str, float]
    links_down: dict[str, tuple[float, str]]
    fleet_events: list[tuple[float, str]]
    _lock: threading.RLock
    _node_pods: dict[str, dict[str, Pod]]
    _pod_job: dict[str, str]
    _dirty: Marked
    _dirty_pools: Marked
    _dirty_queues: Marked
    _notice_timers: dict[str, Timer]
    _leaving_now: set[str]
    _budget_timers: list[Timer]

    if TYPE_CHECKING:  # ControlPlane's own

        def _changing(self) -> AbstractContextManager[None]: ...

        def _apply_policy(self, job: LiveJob, pod: Pod, event: JobEvent, what: str, now: float) -> None: ...

        def _set_queue(self, name: str, doc: Any, file: str) -> Queue: ...

        def metrics(self) -> list[QueueMetrics]: ...

    # -- the fleet's host (tidegate/fleet/scaling.py) ---------------------------------------------------
    def _pool_of(self, node: str) -> Pool | None:
        served = self.nodes.get(node)
        return None if served is None else self.fleet.pools.get(served.labels.get(POOL_LABEL, ""))

    def _clouds(self) -> set[str]:
        return {pool.cluster_name for pool in self.fleet.pools.values() if pool.is_cloud}

    def node_requests(self, node: str) -> Resources:
        total = Resources()
        for pod in self._node_pods.get(node, {}).values():
            total = total + pod.requests
        return total

    def pods_on(self, node: str) -> int:
        return len(self._node_pods.get(node, {}))

    def queue_figures(self) -> dict[str, QueueFigures]:
        return {row.queue: QueueFigures(row.pending, row.running, row.allocated, row.weight) for row in self.metrics()}

    def node_ready(self, pool: Pool, node: Node) -> None:
        self.nodes[node.name] = node
        self._node_pods[node.name] = {}
        if pool.cluster_name in self.links_down:
            self.core.set_schedulable(node.name, False)  # joins cordoned while its cloud is cut off

    def evict_node(self, pool: Pool, node: str) -> None:
        now = self.clock.now()
        self._leaving_now.add(node)
        for pod in list(self._node_pods.get(node, {}).values()):
            job = self.jobs.get(self._pod_job.get(pod.key, ""))
            if job is not None and job.phase is JobPhase.RUNNING:
                self._apply_policy(job, pod, JobEvent.POD_EVICTED, f"pod {pod.key} evicted: node {node} removed", now)
        self._leaving_now.discard(node)
        self.nodes.pop(node, None)
        self._node_pods.pop(node, None)
        if self.notices.pop(node, None) is not None:
            self._notice_timers.pop(node).cancel()

    def busy(self, node: str) -> int:
        return len({self._pod_job[key] for key in self._node_pods.get(node, {})})

    def leaving(self, node: str) -> bool:
        return node in self.notices  # it goes whatever the autoscaler wants

    def may_grow(self, pool: Pool) -> bool:
        return pool.cluster_name not in self.links_down  # no new cloud capacity while cut off

    def billed(self, pool: Pool, change: int) -> None:
        self.bill.change(pool.name, change, self.clock.now())
        self._dirty_pools.add(pool.name)

    def sized(self, pool: Pool) -> None:
        self._dirty_pools.add(pool.name)  # kept in the store, so a restart has the same nodes

    def record(self, text: str) -> None:
        self._event(self.clock.now(), text)

    def want_cycle(self) -> None:
        pass  # a cycle runs every period anyway

    def _event(self, when: float, text: str) -> None:
        """A scaling or budget event: logged, and the recent ones listed by `GET /pools` and `GET /budget`."""
        _log.info("%s", text)
        self.fleet_events.append((when, text))
        del self.fleet_events[:-1000]

    def _drained(self, node: str) -> None:
        """A node cordoned for scale-in leaves once its last pod has gone (its billing stops). A node under
        a spot notice waits for the provider; a node being removed is not removed twice."""
        pool = self._pool_of(node)
        if pool is None or node in self._leaving_now or node in self.notices:
            return
        if node in pool.draining and node in pool.nodes:
            self.fleet.remove_node(pool, node)
            self.sized(pool)

    def _overflow(self, burst: Burst, now: float) -> None:
        """Waiting jobs that waited long enough, or whose queue is at capability, move to the burst queue
        (none while every cloud's link is down)."""
        if self._burst_cut_off():
            return
        ssn = self.core.ssn
        target = ssn.queues.get(burst.queue)
        for key in list(self.core.waiting):
            job = self.jobs[key]
            home = job.group.queue
            if not job.waiting or not burst.moves(home, job.pods, now - job.queued_since, job.reason):
                continue
            if target is not None and ssn.namespace_refusal(target, job.group.namespace):
                continue  # the burst queue does not take this namespace's work
            self.core.remove_group(key)
            job.overflow_to(burst.queue)
            self.core.add_group(job.group, list(job.pods))
            job.events.append((now, f"overflowed from {home} to {burst.queue}"))
            self._dirty.add(key)

    # -- spot interruptions -----------------------------------------------------------------------------
    def spot_notice(self, node: str, notice_seconds: float | None = None) -> float:
        """A provider's spot interruption notice for a cloud node, as its agent reports it
        (`POST /nodes/<name>/interruption`); returns when the instance goes.

        The node is cordoned and leaves the HPA's count (jobs waiting for room get a new node, not this
        one); each job running there is told (an event) that its pods' preStop hooks should checkpoint.
        When the notice runs out (`notice_seconds`, by default the pool's `interruption.noticeSeconds` or
        its provider's: aws 120 s, gcp and azure 30 s, aliyun 300 s) the node is removed and its pods are
        evicted: their jobs follow their lifecycle policies (RestartJob resumes from the checkpoint).
        A second notice for the node changes nothing. Raises NotFound for a node of no cloud pool."""
        with self._changing():
            pool = self._pool_of(node)
            if pool is None or not pool.is_cloud:
                raise NotFound(f"node {node} is not a node of a served cloud pool", "Node", node)
            if node in self.notices:
                return self.notices[node]
            if notice_seconds is None:
                notice_seconds = notice_seconds_of(pool.spec, pool.cluster) or DEFAULT_NOTICE_SECONDS
            now = self.clock.now()
            self._notice(pool, node, now + notice_seconds)
            stopping = sorted({self._pod_job[key] for key in self._node_pods.get(node, {})})
            for key in stopping:
                self.jobs[key].events.append((now, f"spot interruption notice for {node}: checkpoint now"))
                self._dirty.add(key)
            stopped = ", ".join(stopping) or "no jobs"
            self._event(now, f"{pool.name}: spot notice for {node} ({notice_seconds:g} s); stopping {stopped}")
            return self.notices[node]

    def _notice(self, pool: Pool, node: str, goes_at: float) -> None:
        """The node is cordoned, out of the HPA's count, and removed at `goes_at` (or now, if that has passed)."""
        self.notices[node] = goes_at
        if node not in pool.draining:
            pool.draining.append(node)
            self.core.set_schedulable(node, False)
            self._dirty_pools.add(pool.name)
        when = max(goes_at, self.clock.now())
        self._notice_timers[node] = self.fleet.clock.call_at(when, partial(self._instance_gone, pool, node))

    def _instance_gone(self, pool: Pool, node: str) -> None:
        """The notice ran out: the provider takes the instance back."""
        self._notice_timers.pop(node, None)
        self.notices.pop(node, None)
        if node in pool.nodes:
            self._event(self.clock.now(), f"{pool.name}: {node} interrupted")
            self.fleet.remove_node(pool, node)
            self.sized(pool)

    def _resume_notices(self, notices: Mapping[str, float]) -> None:
        """Nodes under a spot notice when the store was written go when it said (at once if that has passed)."""
        for node, goes_at in notices.items():
            pool = self._pool_of(node)
            if pool is not None and node in pool.nodes:
                self._notice(pool, node, float(goes_at))

    # -- the links to the clouds ------------------------------------------------------------------------
    def set_link(self, cluster: str, up: bool, reason: str = "") -> None:
        """A prober's or an operator's word on a cloud cluster's link to the IDC (`PUT /links/<cluster>`).

        While it is down nothing new goes there, and work degrades to the IDC: the cluster's nodes are
        cordoned (nodes joining meanwhile too), its pools do not grow, and once every cloud's link is down
        no job overflows and burst jobs still waiting go back to the queue they were submitted to. Pods
        running there run on (their agents report them). Raises NotFound for a cluster not served."""
        with self._changing():
            if cluster not in self._clouds():
                raise NotFound(f"cloud cluster {cluster} is not served", "Cluster", cluster)
            if up == (cluster not in self.links_down):
                return  # no change (a link reported down again keeps the time it went down)
            now = self.clock.now()
            if up:
                del self.links_down[cluster]
            else:
                self.links_down[cluster] = (now, reason)
            self._cordon(cluster, not up)
            self._event(now, f"link to {cluster}: {'up' if up else 'down'}{f' ({reason})' if reason else ''}")
            if self._burst_cut_off():
                self._send_home(now)

    def _burst_cut_off(self) -> bool:
        """Every cloud's link is down: nothing can burst."""
        clouds = self._clouds()
        return bool(clouds) and clouds <= self.links_down.keys()

    def _cordon(self, cluster: str, cordoned: bool) -> None:
        """The cluster's nodes (but those cordoned for scale-in, which stay so) take new pods or not."""
        for pool in self.fleet.pools.values():
            if pool.cluster_name == cluster:
                for node in pool.nodes:
                    if node not in pool.draining:
                        self.core.set_schedulable(node, not cordoned)

    def _send_home(self, now: float) -> None:
        """Burst jobs still waiting, with no pod running, go back to the queue they were submitted to."""
        if self.burst is None:
            return
        for job in self.jobs.values():
            home = job.home[0]
            if job.waiting and job.group.queue == self.burst.queue and home != self.burst.queue:
                if any(pod.node_name for pod in job.pods):
                    continue  # part of its gang runs on: it keeps its queue
                self.core.remove_group(job.key)
                job.back_home()
                self.core.add_group(job.group, list(job.pods))
                job.events.append((now, f"back from {self.burst.queue} to {home}: the cloud is cut off"))
                self._dirty.add(job.key)

    def _resume_links(self, down: Mapping[str, Sequence[Any]]) -> None:
        """The links that were down when the store was written stay down until reported up."""
        for cluster, (since, reason) in down.items():
            if cluster in self._clouds():
                self.links_down[cluster] = (float(since), str(reason))
                self._cordon(cluster, True)

    # -- the budget (tidegate/fleet/budget.py, the simulator's controller) ---------------------------------
    def _run_budget(self, clock: EventLoop, budget: Budget) -> None:
        """Each period starts on time (from `budget_origin`); the spend is checked every HPA sync."""

        def next_period() -> None:
            self._budget_step(lambda: budget.start_period(self.clock.now(), budget.period + 1))
            self._budget_timers[0] = clock.call_at(self._period_start(budget, budget.period + 1), next_period, priority)

        def check() -> None:
            self._budget_step(lambda: budget.check(self.clock.now()))
            self._budget_timers[1] = clock.call_later(HPA_SYNC_SECONDS, check, priority)

        priority = PRIORITY_FLEET
        self._budget_timers = [
            clock.call_at(self._period_start(budget, budget.period + 1), next_period, priority),
            clock.call_later(0.0, check, priority),
        ]

    def _budget_step(self, step: Callable[[], None]) -> None:
        try:
            with self._changing():
                step()
        except Exception:  # as a cycle: logged, and the budget's next step runs on time
            _log.exception("budget step failed")

    def _period_start(self, budget: Budget, index: int) -> float:
        return self.budget_origin + index * budget.period_s

    def _budget_apply(self, queue: Queue) -> None:
        """A threshold's patch (or a new period's restore) of the budget's queue, as `PATCH /queues` makes it."""
        assert self.budget is not None
        current = self.queues[queue.name]
        manifest = budgeted_manifest(current.raw or queue_manifest(current), queue)
        self.budget.current = self._set_queue(queue.name, manifest, f"budget of queue {queue.name}")
        self._dirty_queues.add(queue.name)

    def _cap(self, max_replicas: int | None) -> str:
        return self.fleet.cap(max_replicas, self.queues)

    def _resume_budget(self, state: Mapping[str, Any] | None) -> None:
        """Go on with the kept period, or start the one a restart falls in (restoring the queue's own spec)."""
        budget = self.budget
        if budget is None or state is None:
            return
        self.budget_origin = float(state["origin"])
        budget.original = parsed_queue(state["original"])
        budget.current = self.queues[budget.spec.queue]
        now = self.clock.now()
        index = max(math.floor((now - self.budget_origin) / budget.period_s), int(state["period"]))
        if index == int(state["period"]):
            budget.resume(dict(state), budget.current)
        else:  # the nodes billed now ran through the downtime: the period's spend counts from its start
            budget.changes = int(state["changes"])
            budget.start_period(self._period_start(budget, index), index)
