"""Prometheus metrics of `tidegate kube`, read from the scheduler at each scrape, and its liveness."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tidegate.kube.scheduler import ClusterScheduler

#: Seconds without a turn of the scheduling loop after which /healthz says it is stuck (at least; see
#: `Heartbeat.for_period`).
STUCK_SECONDS = 60.0


class Heartbeat:
    """When the scheduling loop last went round (leading or standing by): a loop stuck longer than
    `timeout` seconds (a write that never returns, say) fails /healthz, so its kubelet restarts it and a
    standby replica takes the Lease over."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout, self.clock = timeout, clock
        self.last = clock()

    @classmethod
    def for_period(cls, period: float) -> Heartbeat:
        """A heartbeat for a loop of `period` seconds: stuck after 20 periods, and never under a minute."""
        return cls(max(STUCK_SECONDS, 20 * period))

    def beat(self) -> None:
        self.last = self.clock()

    def check(self) -> tuple[bool, str]:
        """Whether the loop is alive, and what /healthz answers."""
        quiet = self.clock() - self.last
        if quiet > self.timeout:
            return False, f"the scheduling loop has not gone round for {quiet:.0f} s (limit {self.timeout:g} s)\n"
        return True, "ok\n"


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


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes are not logged."""


def serve_metrics(
    scheduler: ClusterScheduler, port: int, heartbeat: Heartbeat | None = None, address: str = "0.0.0.0"
) -> WSGIServer:
    """Serve the scheduler's metrics at http://address:port/metrics and, with a heartbeat, its liveness at
    /healthz (200, or 503 saying why), from a background thread. Returns the server (`shutdown` stops it)."""
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(scheduler))
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/healthz" or heartbeat is None:
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        ok, text = heartbeat.check()
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [text.encode()]

    server = make_server(address, port, app, _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="tidegate-metrics", daemon=True).start()
    return server
