"""Prometheus metrics of `tidegate kube`, read from the scheduler at each scrape."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tidegate.kube.scheduler import ClusterScheduler


class SchedulerCollector(Collector):
    """Cycles, binds, evictions, unreadable objects, the last step's duration, and each queue's pending seconds."""

    def __init__(self, scheduler: ClusterScheduler) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        s = self.scheduler
        pending = GaugeMetricFamily(
            "volcano_queue_pending_jobs_duration_seconds",
            "Seconds the queue's waiting PodGroups not pinned to the IDC have waited, summed with its children's",
            labels=["queue"],
        )
        for queue, seconds in s.pending_seconds(time.time()).items():
            pending.add_metric([queue], seconds)
        cycles = CounterMetricFamily("tidegate_scheduling_cycles", "Scheduling cycles run")
        cycles.add_metric([], s.cycles)
        quiet = CounterMetricFamily("tidegate_quiet_cycles", "Periods left out: nothing changed since an idle cycle")
        quiet.add_metric([], s.quiet_cycles)
        bound = CounterMetricFamily("tidegate_pods_bound", "Pods bound")
        bound.add_metric([], s.bound)
        evicted = CounterMetricFamily("tidegate_pods_evicted", "Pods evicted by preempt or reclaim")
        evicted.add_metric([], s.evicted)
        step = GaugeMetricFamily(
            "tidegate_last_cycle_seconds", "Wall seconds the last cycle took (read, decide, write)"
        )
        step.add_metric([], s.last_step_s)
        problems = GaugeMetricFamily("tidegate_unreadable_objects", "Objects the last read left out")
        problems.add_metric([], len(s.problems))
        failed = CounterMetricFamily("tidegate_failed_cycles", "Cycles that raised (the API server away, say)")
        failed.add_metric([], s.failed_cycles)
        yield from (pending, cycles, quiet, bound, evicted, step, problems, failed)


def serve_metrics(scheduler: ClusterScheduler, port: int, address: str = "0.0.0.0") -> None:
    """Export the scheduler's metrics at http://address:port/metrics from a background thread."""
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(scheduler))
    start_http_server(port, address, registry=registry)
