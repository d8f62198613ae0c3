"""What `tidegate kube` serves on its metrics port: Prometheus metrics (read from the scheduler at each scrape,
and each cycle's latency as it happens), its liveness (`/healthz`), and, read-only, the dashboard's page with
the views it reads (`tidegate/kube/views.py`; the page itself is `tidegate serve`'s, handed in by the CLI).

Metrics with Volcano's names where Volcano has them: `volcano_e2e_scheduling_latency_milliseconds` (each
step's duration, read, decide and write, Volcano's buckets) and the queues' `volcano_queue_*` families
(allocated, request, deserved, capacity, share, weight, overused and PodGroup counts, label `queue_name`), as
`tidegate serve` exports them; the port's own requests as `tidegate_http_requests_total{method,route,code}`
and `tidegate_http_request_duration_seconds`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tidegate.kube.scheduler import ClusterScheduler
from tidegate.kube.views import ClusterViews
from tidegate.prometheus import HttpMetrics, gauge_families, latency_histogram, volcano_queue_series

#: The dashboard's page and files by path: (body, media type, headers), or None for a path that is none of
#: them. `tidegate kube` is handed `tidegate.server.dashboard.static_page` (the layers keep kube below server).
Pages = Callable[[str], tuple[bytes, str, Mapping[str, str]] | None]

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
        core = s.core
        if core is not None:
            figures = core.quota_figures()
            served = [figures[name] for name in s.queues if name in figures]
            groups: dict[str, dict[str, int]] = {}
            for job in core.jobs.values():
                row = groups.setdefault(job.group.queue, {})
                row[job.phase.value.lower()] = row.get(job.phase.value.lower(), 0) + 1
            yield from gauge_families(volcano_queue_series(served, groups))


class CycleLatency:
    """Each step's duration (read, decide, write) as Volcano's e2e scheduling latency histogram."""

    def __init__(self) -> None:
        self.histogram = latency_histogram()

    def observe(self, seconds: float) -> None:
        self.histogram.observe(seconds * 1000)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes are not logged."""


def serve_metrics(
    scheduler: ClusterScheduler,
    port: int,
    heartbeat: Heartbeat | None = None,
    address: str = "0.0.0.0",
    latency: CycleLatency | None = None,
    views: ClusterViews | None = None,
    pages: Pages | None = None,
) -> WSGIServer:
    """Serve the scheduler's metrics at http://address:port/metrics and, with a heartbeat, its liveness at
    /healthz (200, or 503 saying why), from a background thread; with `latency`, the cycles' histogram; with
    `views` and `pages`, the dashboard read-only at / and the views it reads (`GET /queues`, `/jobs`, `/nodes`,
    ...). Returns the server (`shutdown` stops it)."""
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(scheduler))
    if latency is not None:
        registry.register(latency.histogram)
    http = HttpMetrics()
    for collector in http.collectors():
        registry.register(collector)
    metrics = make_wsgi_app(registry)

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> tuple[str, Iterable[bytes]]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz" and heartbeat is not None:
            ok, text = heartbeat.check()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return path, [text.encode()]
        if views is not None and pages is not None:
            page = pages(path)
            if page is not None:
                body, media, headers = page
                start_response("200 OK", [("Content-Type", media), *headers.items()])
                return ("/" if path == "/" else "/dashboard/{name}"), [body]
            found = _view(views, path, parse_qs(environ.get("QUERY_STRING", "")))
            if found is not None:
                code, document = found
                status = "200 OK" if code == 200 else "404 Not Found"
                start_response(status, [("Content-Type", "application/json")])
                return path if code == 200 else "unmatched", [json.dumps(document).encode()]
        return "/metrics", metrics(environ, start_response)  # as before: any other path is the metrics

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started, said = time.perf_counter(), []

        def start(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            said.append(status.split(" ", 1)[0])
            return start_response(status, headers, *rest)

        route, body = answer(environ, start)
        seconds = time.perf_counter() - started
        http.observe(environ.get("REQUEST_METHOD", "GET"), route, said[0] if said else "500", seconds)
        return body

    server = make_server(address, port, app, _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="tidegate-metrics", daemon=True).start()
    return server


#: The routes of the read-only views, as `tidegate serve` names them.
VIEW_ROUTES = ("/whoami", "/queues", "/jobs", "/nodes", "/pools", "/links", "/pools/history", "/budget")


def _view(views: ClusterViews, path: str, query: Mapping[str, list[str]]) -> tuple[int, Any] | None:
    """The document of a view route (code, JSON), None for any other path. Lists come whole: with `limit`, as
    one `<Kind>List` with no `continue` (a server may answer a limit with every item, as Kubernetes' may)."""
    if path not in VIEW_ROUTES:
        return None
    if path == "/whoami":
        return 200, {"user": "", "rights": ["view"], "namespaces": None}
    if path == "/budget":
        message = "tidegate kube serves no budget (tidegate serve with a Scenario's spec.budget does)"
        return 404, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NotFound",
            "details": {"name": "", "kind": "Budget", "causes": []},
            "code": 404,
        }
    if path == "/pools/history":
        return 200, {"interval_seconds": 0, "pools": [], "budget": []}
    items: list[dict[str, Any]] = [] if path in ("/pools", "/links") else list(views.get(path.strip("/")))
    if path == "/jobs":
        for field, key in (("queue", "queue"), ("phase", "phase"), ("namespace", "namespace")):
            wanted = (query.get(field) or [""])[0]
            if wanted:
                items = [item for item in items if item[key] == wanted]
    if "limit" not in query and "continue" not in query:
        return 200, items
    kind = {"/queues": "Queue", "/jobs": "Job", "/nodes": "Node", "/pools": "Pool", "/links": "Link"}[path]
    return 200, {"apiVersion": "tidegate.io/v1alpha1", "kind": f"{kind}List", "metadata": {}, "items": items}
