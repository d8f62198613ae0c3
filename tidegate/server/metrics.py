"""What `GET /metrics` exports (Prometheus), with Volcano's names where Volcano has the concept.

- Read at each scrape from the control plane (never stale): `volcano_queue_pending_jobs_duration_seconds{queue}`
  (what the cloud pool's HPA reads), tidegate's own queue, pool, budget and link gauges, and the queues'
  quota figures as Volcano's scheduler exports them (pkg/scheduler/metrics/queue.go; label `queue_name`):
  `volcano_queue_{allocated,request,deserved,capacity}_milli_cpu`, `..._memory_bytes`,
  `..._scalar_resources{resource}` (milli-units, as Volcano counts scalar resources: a GPU is 1000),
  `volcano_queue_share`, `volcano_queue_weight`, `volcano_queue_overused`, and the PodGroup counts of
  Volcano's controller (pkg/controllers/metrics/queue.go): `volcano_queue_pod_group_{pending,inqueue,running,
  completed,unknown}_count`.
- Observed as they happen: `volcano_e2e_scheduling_latency_milliseconds` (each cycle's duration, Volcano's
  buckets), `tidegate_pods_bound_total`, `tidegate_pods_evicted_total` (as `tidegate kube` names them), and
  `tidegate_http_requests_total{method,route,code}` with `tidegate_http_request_duration_seconds` (the route
  as its template, `/jobs/{namespace}/{name}`, so a label never holds a user's object names).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import JobPhase
from tidegate.model.quantity import scale_of
from tidegate.prometheus import gauge_families, latency_histogram, volcano_queue_series
from tidegate.scheduler.snapshot import Decisions


class CycleMetrics:
    """Each scheduling cycle's duration, and the pods bound and evicted, as they happen."""

    def __init__(self) -> None:
        self.latency = latency_histogram()
        self.bound = Counter("tidegate_pods_bound", "Pods bound", registry=None)
        self.evicted = Counter("tidegate_pods_evicted", "Pods evicted by preempt or reclaim", registry=None)

    def observe(self, decisions: Decisions, seconds: float) -> None:
        self.latency.observe(seconds * 1000)
        self.bound.inc(len(decisions.binds))
        self.evicted.inc(len(decisions.evictions))

    def collectors(self) -> tuple[Collector, ...]:
        return (self.latency, self.bound, self.evicted)


class MeteredPlane(ControlPlane):
    """The control plane `tidegate serve` runs: each cycle is timed and its binds and evictions counted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.cycle_metrics = CycleMetrics()
        super().__init__(*args, **kwargs)

    def cycle(self) -> Decisions:
        started = time.perf_counter()
        decisions = super().cycle()
        self.cycle_metrics.observe(decisions, time.perf_counter() - started)
        return decisions


#: The live phases each of Volcano's PodGroup counts covers (none is Unknown here; Failed is not counted).
POD_GROUP_COUNTS = {
    "pending": JobPhase.PENDING,
    "inqueue": JobPhase.INQUEUE,
    "running": JobPhase.RUNNING,
    "completed": JobPhase.COMPLETED,
}


class PlaneCollector(Collector):
    """Reads the control plane at each scrape (gauges that are never stale)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self.plane.reading():  # one consistent reading
            yield from self._collect()

    def _collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        pending = GaugeMetricFamily(
            "volcano_queue_pending_jobs_duration_seconds",
            "Seconds the queue's waiting jobs not pinned to the IDC have waited, summed with its children's "
            "(what a cloud pool's HPA reads)",
            labels=["queue"],
        )
        jobs = GaugeMetricFamily("tidegate_queue_jobs", "Jobs of the queue by phase", labels=["queue", "phase"])
        allocated = GaugeMetricFamily(
            "tidegate_queue_allocated",
            "What the queue's running pods hold (canonical units)",
            labels=["queue", "resource"],
        )
        weight = GaugeMetricFamily("tidegate_queue_weight", "The queue's spec.weight", labels=["queue"])
        for row in self.plane.metrics():
            pending.add_metric([row.queue], row.pending_seconds)
            jobs.add_metric([row.queue, "waiting"], row.pending)
            jobs.add_metric([row.queue, "running"], row.running)
            weight.add_metric([row.queue], row.weight)
            for resource, amount in sorted(row.allocated.items()):
                allocated.add_metric([row.queue, resource], amount / scale_of(resource))
        cycles = CounterMetricFamily("tidegate_scheduling_cycles", "Scheduling cycles run")
        cycles.add_metric([], self.plane.cycles)
        nodes = GaugeMetricFamily("tidegate_pool_nodes", "Nodes of the pool in the cluster", labels=["pool"])
        billed = GaugeMetricFamily(
            "tidegate_pool_billed_nodes", "Nodes of the pool billed now (provisioning included)", labels=["pool"]
        )
        spend = CounterMetricFamily(
            "tidegate_pool_spend", "What the pool's nodes have billed since the first start", labels=["pool"]
        )
        for pool in self.plane.views.pools_view():
            nodes.add_metric([pool["name"]], len(pool["nodes"]))
            billed.add_metric([pool["name"]], pool["billed_nodes"])
            spend.add_metric([pool["name"]], pool["spent"])
        link = GaugeMetricFamily(
            "tidegate_link_up", "1 while the cloud cluster's link to the IDC is up", labels=["cluster"]
        )
        for cloud in self.plane.views.links_view():
            link.add_metric([cloud["cluster"]], 1.0 if cloud["up"] else 0.0)
        yield from (pending, jobs, allocated, weight, cycles, nodes, billed, spend, link)
        if self.plane.budget is not None:
            budget = self.plane.views.budget_view()
            spent = GaugeMetricFamily("tidegate_budget_period_spent", "Cloud spend in the budget's current period")
            spent.add_metric([], budget["spent"])
            yield spent
        figures = self.plane.views.quota_figures()  # the served queues (not the session's own root and default)
        served = [figures[name] for name in self.plane.queues if name in figures]
        yield from gauge_families(volcano_queue_series(served, self._pod_groups()))

    def _pod_groups(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {name: {} for name in self.plane.queues}
        phases = {phase: name for name, phase in POD_GROUP_COUNTS.items()}
        for job in self.plane.jobs.values():
            row = counts.setdefault(job.group.queue, {})
            name = phases.get(job.phase)
            if name is not None:
                row[name] = row.get(name, 0) + 1
        return counts


def route_of(scope: Mapping[str, Any]) -> str:
    """The route template a request matched (`/jobs/{namespace}/{name}`), or `unmatched`."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
