"""What tidegate observes for the HPAs that size its cloud pools, and so which metrics it can supply.

A cloud pool is a virtual-kubelet Deployment (the pool's ``scaleTargetRef``): one replica is one virtual
node, so the "pods" of the pool's HPA are the pool's nodes. Each is a pod named after its node, with one
container, ``virtual-kubelet``, whose requests are what the node offers (its allocatable). A node being
provisioned is a Pending pod; a node that has joined is a Running pod, Ready since it joined; a node
draining (cordoned by a scale-in, or under a spot notice) is a pod being deleted. Its pod selector is
``tidegate.io/pool=<pool>``. What each metric type reads:

- ``Resource`` ``<r>`` (and ``ContainerResource`` ``<r>`` of container ``virtual-kubelet``, the same):
  a pod's usage is what the pods bound to its node request of ``r`` (for ``pods``: how many are bound),
  its request the node's allocatable ``r``. ``averageUtilization`` is so the nodes' allocation in percent
  (``nvidia.com/gpu`` 75: keep three quarters of the pool's GPUs allocated), ``averageValue`` the
  allocation per node. Only resources the pool's nodes offer can be read.
- ``Pods``: ``tidegate_node_pods`` (pods bound to the node) and ``tidegate_node_jobs`` (jobs with pods
  there), unlabelled series.
- ``Object`` on ``describedObject: {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, name: <q>}``:
  the per-queue series ``tidegate serve`` exports at ``/metrics``: ``volcano_queue_pending_jobs_duration_
  seconds`` (the queue's subtree, as the External metric), ``tidegate_queue_jobs`` labelled ``phase``
  (``waiting``, ``running``), ``tidegate_queue_allocated`` labelled ``resource`` (what its running pods
  hold, in units: GPUs, cores, bytes) and ``tidegate_queue_weight``. The value is the sum of the queue's
  series the metric's selector matches (all of them without one), as a metrics adapter summing a query.
- ``External``: ``volcano_queue_pending_jobs_duration_seconds``, one series per queue labelled ``queue``.

``hpa_problems`` checks an HPA against this when a folder loads: a metric tidegate cannot supply (another
name, kind, resource or container, a selector no series can match) or a ``scaleTargetRef`` naming no pool
is an error; what Kubernetes accepts and then only reports as a condition (a selector or
``describedObject`` naming no queue, two HPAs on one pool) loads with a warning, and the HPA reports the
same condition every sync (FailedGetExternalMetric, FailedGetObjectMetric, AmbiguousSelector).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from tidegate.autoscale.hpa import PENDING_JOBS_DURATION_METRIC, HPAControllerConfig, HPASpec, check_hpa
from tidegate.autoscale.hpa_metrics import (
    ContainerResourceMetric,
    ExternalMetric,
    LabelSelector,
    ObjectMetric,
    PodsMetric,
    PodUsage,
    QuantityLike,
    ResourceMetric,
    TargetPod,
    to_milli,
)
from tidegate.fleet.pool import POOL_LABEL, Pool
from tidegate.fleet.spec import ClusterSpec, NodePoolSpec
from tidegate.model.errors import ManifestError
from tidegate.model.quantity import scale_of
from tidegate.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS, Resources

#: How the fleet's HPAs are evaluated: Kubernetes' controller defaults, with scaling from zero (the
#: HPAScaleToZero gate) allowed, since a cloud pool starts and idles at 0 nodes.
FLEET_HPA_CONFIG = HPAControllerConfig(allow_scale_from_zero=True)
KIND = "HorizontalPodAutoscaler"
#: The one container of a pool's virtual-kubelet pod.
POOL_CONTAINER = "virtual-kubelet"
NODE_PODS_METRIC = "tidegate_node_pods"
NODE_JOBS_METRIC = "tidegate_node_jobs"
QUEUE_KIND = "Queue"
QUEUE_GROUP = "scheduling.volcano.sh"
QUEUE_JOBS_METRIC = "tidegate_queue_jobs"
QUEUE_ALLOCATED_METRIC = "tidegate_queue_allocated"
QUEUE_WEIGHT_METRIC = "tidegate_queue_weight"
#: The Object metrics a Queue has, and the label keys of their series.
QUEUE_METRICS: Mapping[str, tuple[str, ...]] = {
    PENDING_JOBS_DURATION_METRIC: (),
    QUEUE_JOBS_METRIC: ("phase",),
    QUEUE_ALLOCATED_METRIC: ("resource",),
    QUEUE_WEIGHT_METRIC: (),
}
JOB_PHASES = ("waiting", "running")
#: Resources a queue's allocated series always has (0 when nothing is allocated), besides those held.
ALLOCATED_ALWAYS = (CPU, MEMORY, NVIDIA_GPU)
NODE_METRICS = (NODE_PODS_METRIC, NODE_JOBS_METRIC)


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue as ``/metrics`` exports it: its waiting and running jobs, what its running pods hold
    (canonical units) and its weight (its pending seconds arrive with each HPA sync)."""

    waiting: int = 0
    running: int = 0
    allocated: Resources = field(default_factory=Resources)
    weight: int = 1


class NodeReadings(Protocol):
    """What the fleet's host tells about nodes and queues, for the HPAs' metrics."""

    def node_requests(self, node: str) -> Resources:
        """What the pods bound to the node request, summed."""

    def pods_on(self, node: str) -> int:
        """How many pods are bound to the node."""

    def busy(self, node: str) -> int:
        """How many jobs have pods on the node."""

    def queue_figures(self) -> Mapping[str, QueueFigures]:
        """Each queue's figures now."""


def pool_selector(pool: str) -> str:
    """The label selector of a pool's virtual-kubelet pods (its Deployment's ``status.selector``)."""
    return f"{POOL_LABEL}={pool}"


# --------------------------------------------------------------------------------------------------
# Series
# --------------------------------------------------------------------------------------------------


def _allocated_labels(offered: Iterable[str]) -> list[dict[str, str]]:
    return [{"resource": r} for r in sorted({*ALLOCATED_ALWAYS, *offered})]


def queue_series(
    metric: str, pending_seconds: float, figures: QueueFigures
) -> list[tuple[dict[str, str], QuantityLike]]:
    """A queue's series of an Object metric: (labels, value in the units ``/metrics`` exports)."""
    if metric == PENDING_JOBS_DURATION_METRIC:
        return [({}, pending_seconds)]
    if metric == QUEUE_JOBS_METRIC:
        return [({"phase": "waiting"}, figures.waiting), ({"phase": "running"}, figures.running)]
    if metric == QUEUE_WEIGHT_METRIC:
        return [({}, figures.weight)]
    held = figures.allocated  # tidegate_queue_allocated
    return [({"resource": r}, Fraction(held[r], scale_of(r))) for r in sorted({*ALLOCATED_ALWAYS, *held})]


def _matches_any(selector: LabelSelector | None, label_sets: Iterable[Mapping[str, str]]) -> bool:
    return selector is None or any(selector.matches(labels) for labels in label_sets)


def _queue_label_sets(metric: str, offered: Iterable[str]) -> list[dict[str, str]]:
    if metric == QUEUE_JOBS_METRIC:
        return [{"phase": phase} for phase in JOB_PHASES]
    if metric == QUEUE_ALLOCATED_METRIC:
        return _allocated_labels(offered)
    return [{}]


# --------------------------------------------------------------------------------------------------
# Load-time checks
# --------------------------------------------------------------------------------------------------

#: A problem with one field of an HPA: (field path, message).
Problem = tuple[str, str]


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def target_pool(spec: HPASpec, pools: Mapping[str, NodePoolSpec]) -> tuple[str | None, Problem | None]:
    """The NodePool the HPA's scaleTargetRef names (kind, API group and name must all match the pool's),
    or the problem with the field that does not."""
    named = {n: p.scale_target_ref for n, p in pools.items() if p.scale_target_ref and p.scale_target_ref.name}
    by_name = [n for n, ref in named.items() if ref.name == spec.target_name]
    if not by_name:
        offered = ", ".join(sorted(f"{ref.kind}/{ref.name}" for ref in named.values())) or "none"
        return None, (
            "spec.scaleTargetRef.name",
            f"no NodePool has scaleTargetRef {spec.target_kind}/{spec.target_name} (the pools' targets: {offered})",
        )
    name = by_name[0]
    ref = named[name]
    if ref.kind != spec.target_kind:
        return None, (
            "spec.scaleTargetRef.kind",
            f"NodePool {name} is scaled through {ref.kind}/{ref.name}, not {spec.target_kind}/{spec.target_name}",
        )
    if _group_of(ref.api_version) != _group_of(spec.target_api_version):
        return None, (
            "spec.scaleTargetRef.apiVersion",
            f"NodePool {name}'s {ref.kind} is in API group {_group_of(ref.api_version) or 'core'} "
            f"({ref.api_version}), not {spec.target_api_version or 'unset'}: Kubernetes would look the target "
            "up there and fail to get its scale",
        )
    return name, None


def hpa_problems(
    spec: HPASpec, queues: Collection[str], pools: Mapping[str, NodePoolSpec]
) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) for one HPA of a simulation folder: what tidegate cannot supply and references
    that resolve to nothing (see the module docstring)."""
    errors: list[Problem] = []
    warnings: list[Problem] = []
    pool_name, problem = target_pool(spec, pools)
    if problem is not None:
        errors.append(problem)
    pool = pools.get(pool_name) if pool_name is not None else None
    offered = set(pool_resources(pool)) if pool is not None else None
    every_offered = {r for p in pools.values() for r in pool_resources(p)}
    for i, metric in enumerate(spec.metrics):
        base = f"spec.metrics[{i}]"
        if isinstance(metric, ExternalMetric):
            path = f"{base}.external.metric"
            if metric.name != PENDING_JOBS_DURATION_METRIC:
                errors.append(
                    (
                        f"{path}.name",
                        f"tidegate has no External metric {metric.name!r}: it supplies "
                        f"{PENDING_JOBS_DURATION_METRIC} (one series per queue, labelled queue)",
                    )
                )
            elif not _matches_any(metric.selector, ({"queue": q} for q in queues)):
                warnings.append(
                    (
                        f"{path}.selector",
                        f"{metric.selector} matches no queue's series (labelled queue: {', '.join(sorted(queues))}): "
                        "the HPA reports ScalingActive False, FailedGetExternalMetric, every sync",
                    )
                )
        elif isinstance(metric, ObjectMetric):
            path = f"{base}.object"
            ref = metric.described_object
            if ref.kind != QUEUE_KIND or (ref.api_version and _group_of(ref.api_version) != QUEUE_GROUP):
                errors.append(
                    (
                        f"{path}.describedObject",
                        f"tidegate has Object metrics for Volcano Queues only ({QUEUE_GROUP}/v1beta1 {QUEUE_KIND}), "
                        f"not {ref.api_version or 'core'} {ref.kind}",
                    )
                )
            elif metric.name not in QUEUE_METRICS:
                errors.append(
                    (f"{path}.metric.name", f"a Queue has no metric {metric.name!r}: it has {', '.join(QUEUE_METRICS)}")
                )
            elif not _matches_any(metric.selector, _queue_label_sets(metric.name, every_offered)):
                labels = ", ".join(QUEUE_METRICS[metric.name]) or "none"
                errors.append(
                    (
                        f"{path}.metric.selector",
                        f"{metric.selector} matches none of a Queue's {metric.name} series (labels: {labels})",
                    )
                )
            elif ref.name not in queues:
                warnings.append(
                    (
                        f"{path}.describedObject.name",
                        f"queue {ref.name!r} is not defined: the HPA reports ScalingActive False, "
                        "FailedGetObjectMetric, every sync",
                    )
                )
        elif isinstance(metric, PodsMetric):
            path = f"{base}.pods.metric"
            if metric.name not in NODE_METRICS:
                errors.append(
                    (
                        f"{path}.name",
                        f"a pool's pods (its virtual nodes) have no metric {metric.name!r}: they have "
                        f"{', '.join(NODE_METRICS)}",
                    )
                )
            elif not _matches_any(metric.selector, [{}]):
                errors.append((f"{path}.selector", f"{metric.selector} matches nothing: {metric.name} has no labels"))
        else:
            member = "containerResource" if isinstance(metric, ContainerResourceMetric) else "resource"
            path = f"{base}.{member}"
            if isinstance(metric, ContainerResourceMetric) and metric.container != POOL_CONTAINER:
                errors.append(
                    (
                        f"{path}.container",
                        f"a pool's pods have one container, {POOL_CONTAINER}, not {metric.container!r}",
                    )
                )
            if offered is not None and metric.name not in offered:
                errors.append(
                    (
                        f"{path}.name",
                        f"NodePool {pool_name}'s nodes offer no {metric.name} "
                        f"(they offer {', '.join(sorted(offered))})",
                    )
                )
    return errors, warnings


def hpa_report(
    specs: Sequence[HPASpec], queues: Collection[str], pools: Mapping[str, NodePoolSpec]
) -> tuple[list[ManifestError], list[ManifestError]]:
    """(errors, warnings) for a folder's HPAs, each naming the HPA's file, the HPA and the field: what
    ``hpa_problems`` finds, HPAs sharing a pool, a name used twice, and ``check_hpa``'s warnings."""
    errors: list[ManifestError] = []
    warnings: list[ManifestError] = []
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        if (spec.namespace, spec.name) in seen:
            errors.append(ManifestError(spec.source, KIND, spec.name, "metadata.name", f"duplicate {KIND} name"))
        seen.add((spec.namespace, spec.name))
        bad, notes = hpa_problems(spec, queues, pools)
        errors += [ManifestError(spec.source, KIND, spec.name, path, message) for path, message in bad]
        warnings += [ManifestError(spec.source, KIND, spec.name, path, message) for path, message in notes]
        notes = [("", note) for note in check_hpa(spec, FLEET_HPA_CONFIG)]
        warnings += [ManifestError(spec.source, KIND, spec.name, path, message) for path, message in notes]
    for pool, names in shared_targets(specs, pools).items():
        for spec in specs:
            if spec.name in names:
                others = ", ".join(n for n in names if n != spec.name)
                message = (
                    f"NodePool {pool} is also scaled by HPA {others}: Kubernetes lets none of them scale it "
                    "(ScalingActive False, AmbiguousSelector), and neither does tidegate"
                )
                warnings.append(ManifestError(spec.source, KIND, spec.name, "spec.scaleTargetRef", message))
    return errors, warnings


def shared_targets(specs: Sequence[HPASpec], pools: Mapping[str, NodePoolSpec]) -> dict[str, list[str]]:
    """Pools more than one HPA targets, and those HPAs' names: Kubernetes lets none of them scale
    (ScalingActive False, AmbiguousSelector)."""
    by_pool: dict[str, list[str]] = {}
    for spec in specs:
        name, _ = target_pool(spec, pools)
        if name is not None:
            by_pool.setdefault(name, []).append(spec.name)
    return {pool: names for pool, names in by_pool.items() if len(names) > 1}


def pool_resources(pool: NodePoolSpec) -> list[str]:
    """The resources a pool's nodes offer (what its pods request), as its nodes are built."""
    return sorted(Pool("", pool, pool.cluster, ClusterSpec(type="cloud")).node("").allocatable)


# --------------------------------------------------------------------------------------------------
# One sync's samples
# --------------------------------------------------------------------------------------------------


def _quantity(resource: str, canonical: int) -> Fraction:
    return Fraction(canonical, scale_of(resource))


@dataclass(slots=True)
class Supply:
    """What one HPA's metrics read, worked out once from its spec: which resources, node metrics and queue
    series, and whether the pool's pods are listed at all (External averageValue metrics alone need none)."""

    resources: tuple[str, ...] = ()
    #: (PodsMetric.key, metric name)
    node_metrics: tuple[tuple[str, str], ...] = ()
    #: (ObjectMetric.key, queue, metric name, selector)
    queue_metrics: tuple[tuple[str, str, str, LabelSelector | None], ...] = ()
    lists_pods: bool = False
    #: The virtual-kubelet container's requests (the pool's allocatable of `resources`), made on first use.
    _requests: dict[str, dict[str, QuantityLike]] | None = None

    @classmethod
    def of(cls, spec: HPASpec) -> Supply:
        resources: list[str] = []
        node_metrics: list[tuple[str, str]] = []
        queue_metrics: list[tuple[str, str, str, LabelSelector | None]] = []
        lists_pods = False
        for metric in spec.metrics:
            if isinstance(metric, ResourceMetric | ContainerResourceMetric):
                resources.append(metric.name)
                lists_pods = True
            elif isinstance(metric, PodsMetric):
                node_metrics.append((metric.key, metric.name))
                lists_pods = True
            elif isinstance(metric, ObjectMetric):
                ref = metric.described_object
                queue_metrics.append((metric.key, ref.name, metric.name, metric.selector))
                lists_pods = lists_pods or metric.uses_value
            else:
                lists_pods = lists_pods or not metric.target.per_pod
        return cls(tuple(dict.fromkeys(resources)), tuple(node_metrics), tuple(queue_metrics), lists_pods)

    def observe(
        self,
        pool: Pool,
        joined: Mapping[str, float],
        host: NodeReadings,
        pending_seconds: Mapping[str, float],
        now: float,
    ) -> dict[str, Any]:
        """``HPAController.step``'s pod and metric keywords for this sync (empty when it needs none)."""
        out: dict[str, Any] = {}
        if self.lists_pods:
            requests = self._container_requests(pool)
            draining = set(pool.draining)
            pods = [
                TargetPod(node, "Running", True, joined.get(node), joined.get(node), node in draining, requests)
                for node in pool.nodes
            ]
            pods += [
                TargetPod(f"{pool.name}-provisioning-{i}", "Pending", False, requests=requests)
                for i in range(pool.provisioning)
            ]
            out["pods"] = pods
        if self.resources:
            usage = {}
            for node in pool.nodes:
                held = host.node_requests(node)
                used: dict[str, QuantityLike] = {
                    r: host.pods_on(node) if r == PODS else _quantity(r, held[r]) for r in self.resources
                }
                usage[node] = PodUsage({POOL_CONTAINER: used}, now)
            out["usage"] = usage
        if self.node_metrics:
            out["pod_values"] = {
                key: {node: host.pods_on(node) if name == NODE_PODS_METRIC else host.busy(node) for node in pool.nodes}
                for key, name in self.node_metrics
            }
        if self.queue_metrics:
            figures = host.queue_figures()
            objects: dict[str, QuantityLike] = {}
            for key, queue, name, selector in self.queue_metrics:
                if queue in figures:
                    series = queue_series(name, pending_seconds.get(queue, 0.0), figures[queue])
                    matched = [to_milli(v) for labels, v in series if selector is None or selector.matches(labels)]
                    if matched:
                        objects[key] = Fraction(sum(matched), 1000)  # the sum, exact in milli-units
            out["objects"] = objects
        return out

    def _container_requests(self, pool: Pool) -> dict[str, dict[str, QuantityLike]]:
        if self._requests is None:
            allocatable = pool.allocatable if pool.allocatable is not None else pool.node(pool.name).allocatable
            self._requests = {POOL_CONTAINER: {r: _quantity(r, allocatable[r]) for r in self.resources}}
        return self._requests
