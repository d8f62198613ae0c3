"""Prometheus exposition shared by `tidegate serve` (`tidegate.server.metrics`) and `tidegate kube`
(`tidegate.kube.metrics`): Volcano's names, labels, units and buckets, written once.

- `volcano_queue_series`: Volcano's per-queue gauges from the quota figures (`tidegate.scheduler.figures`), as
  its scheduler exports them (pkg/scheduler/metrics/queue.go, label `queue_name`), and the PodGroup counts of
  its controller (pkg/controllers/metrics/queue.go).
- `latency_histogram`: `volcano_e2e_scheduling_latency_milliseconds`, with Volcano's buckets
  (`ExponentialBucketsRange(1, 5000, 20)`).
- `HttpMetrics`: requests answered by method, route template and code, and their durations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tidegate.model.quantity import scale_of
from tidegate.model.resources import CPU, MEMORY
from tidegate.scheduler.figures import QuotaFigures


def exponential_buckets_range(low: float, high: float, count: int) -> list[float]:
    """Prometheus' ExponentialBucketsRange (client_golang): `count` buckets from `low` to `high`."""
    factor = (high / low) ** (1 / (count - 1))
    return [low * factor**i for i in range(count)]


#: Volcano's e2e_scheduling_latency_milliseconds buckets: ExponentialBucketsRange(1, 5000, 20).
LATENCY_BUCKETS_MS = exponential_buckets_range(1, 5000, 20)
#: HTTP request duration buckets (seconds), Prometheus' defaults.
HTTP_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def latency_histogram() -> Histogram:
    """Each scheduling cycle's duration in milliseconds, as Volcano's e2e scheduling latency (unregistered)."""
    return Histogram(
        "volcano_e2e_scheduling_latency_milliseconds",
        "Duration of a scheduling cycle in milliseconds (from reading the cluster to the last decision), as Volcano's",
        buckets=LATENCY_BUCKETS_MS,
        registry=None,
    )


class HttpMetrics:
    """Requests answered, by method, route template and code, and how long they took."""

    def __init__(self) -> None:
        labels = ["method", "route", "code"]
        self.requests = Counter("tidegate_http_requests", "HTTP requests answered", labels, registry=None)
        self.duration = Histogram(
            "tidegate_http_request_duration_seconds",
            "Seconds from a request's arrival to its answer",
            labels,
            buckets=HTTP_BUCKETS_S,
            registry=None,
        )

    def observe(self, method: str, route: str, code: int | str, seconds: float) -> None:
        self.requests.labels(method, route, str(code)).inc()
        self.duration.labels(method, route, str(code)).observe(seconds)

    def collectors(self) -> tuple[Collector, ...]:
        return (self.requests, self.duration)


#: One Prometheus family as plain values: name, help, label names, and (label values, value) samples.
Series = tuple[str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]
#: The PodGroup phases Volcano's controller counts per queue (pkg/controllers/metrics/queue.go).
POD_GROUP_PHASES = ("pending", "inqueue", "running", "completed", "unknown")


def volcano_queue_series(
    figures: Iterable[QuotaFigures], pod_groups: Mapping[str, Mapping[str, int]] | None = None
) -> list[Series]:
    """Volcano's per-queue gauges (label queue_name; pkg/scheduler/metrics/queue.go) for the figures, and with
    `pod_groups` (queue -> phase -> count) its controller's PodGroup counts: `volcano_queue_{allocated,request,
    deserved,capacity}_milli_cpu`, `_memory_bytes`, `_scalar_resources{resource}` (milli-units, as Volcano
    counts scalar resources: a GPU is 1000; capacity only for what spec.capability names),
    `volcano_queue_share`, `volcano_queue_weight`, `volcano_queue_overused`, `volcano_queue_pod_group_*_count`.
    What `tidegate serve` and `tidegate kube` export alike."""
    families: dict[str, Series] = {}

    def add(name: str, help_: str, labels: tuple[str, ...], values: tuple[str, ...], value: float) -> None:
        families.setdefault(name, (name, help_, labels, []))[3].append((values, float(value)))

    queue_name = ("queue_name",)
    for row in figures:
        amounts = (
            ("allocated", "Allocated", row.allocated),
            ("request", "Requested", row.request),
            ("deserved", "Deserved", row.deserved),
            ("capacity", "Capacity (spec.capability)", row.capability if row.capability else None),
        )
        for what, said, resources in amounts:
            if resources is None:
                continue
            for resource, unit, words in (
                (CPU, "milli_cpu", "CPU in millicores"),
                (MEMORY, "memory_bytes", "memory in bytes"),
            ):
                if what != "capacity" or resource in resources:
                    add(
                        f"volcano_queue_{what}_{unit}",
                        f"{said} {words} of the queue",
                        queue_name,
                        (row.queue,),
                        resources.get(resource, 0),
                    )
            for resource, amount in sorted(resources.items()):
                if resource not in (CPU, MEMORY):
                    add(
                        f"volcano_queue_{what}_scalar_resources",
                        f"{said} scalar resources of the queue, in milli-units (a GPU is 1000)",
                        ("queue_name", "resource"),
                        (row.queue, resource),
                        amount * 1000 / scale_of(resource),
                    )
        add("volcano_queue_share", "Share of the queue (allocated over deserved)", queue_name, (row.queue,), row.share)
        add("volcano_queue_weight", "Weight of the queue", queue_name, (row.queue,), row.weight)
        add("volcano_queue_overused", "1 if the queue is overused", queue_name, (row.queue,), float(row.overused))
        if pod_groups is not None:
            for phase in POD_GROUP_PHASES:
                add(
                    f"volcano_queue_pod_group_{phase}_count",
                    f"The number of {phase.capitalize()} PodGroups in this queue",
                    queue_name,
                    (row.queue,),
                    pod_groups.get(row.queue, {}).get(phase, 0),
                )
    return list(families.values())


def gauge_families(series: Iterable[Series]) -> Iterator[GaugeMetricFamily]:
    """Plain series as Prometheus gauges (what a collector yields)."""
    for name, help_, labels, samples in series:
        family = GaugeMetricFamily(name, help_, labels=list(labels))
        for values, value in samples:
            family.add_metric(list(values), value)
        yield family
