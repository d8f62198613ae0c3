"""Turn loaded manifests into what the scheduler reads: a Snapshot and a SchedulerConfiguration."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tidegate.model.errors import ManifestError
from tidegate.model.expand import workload_from
from tidegate.model.manifests import ManifestSet
from tidegate.model.objects import SchedulerConfiguration
from tidegate.scheduler.admission import admission_errors
from tidegate.scheduler.snapshot import Snapshot


@dataclass(slots=True)
class Prepared:
    snapshot: Snapshot
    config: SchedulerConfiguration
    errors: list[ManifestError] = field(default_factory=list)
    warnings: list[ManifestError] = field(default_factory=list)


def prepare(ms: ManifestSet, now: float = 0.0) -> Prepared:
    """Validate, expand vcjobs into PodGroups and pods, and pick the scheduler configuration. The snapshot is
    taken at `now`; a PodGroup or pod without a creationTimestamp counts as created then (as the API server
    stamps an object it creates, and `tidegate serve` one it admits)."""
    errors = [*ms.errors, *admission_errors(ms)]
    workload = workload_from(ms)
    # A vcjob's templates are resolved by the loader and again when expanded: the same problem once.
    errors = list(dict.fromkeys([*errors, *workload.errors]))
    pods = [pod for group in workload.groups for pod in workload.pods_by_group.get(group.key, [])]
    groups = workload.groups
    if now:
        groups = [group if group.created else replace(group, created=now) for group in groups]
        pods = [pod if pod.created else replace(pod, created=now) for pod in pods]
    config = ms.configurations[0] if ms.configurations else SchedulerConfiguration()
    warnings = list(dict.fromkeys([*ms.warnings, *workload.warnings]))
    if len(ms.configurations) > 1:
        first = ms.configurations[0]
        warnings.append(
            ManifestError(
                first.source, "SchedulerConfiguration", first.name, "", "several configurations given; using this one"
            )
        )
    namespaces = {namespace.name: namespace.labels for namespace in ms.namespaces}
    snapshot = Snapshot(nodes=ms.nodes, queues=ms.queues, groups=groups, pods=pods, now=now, namespaces=namespaces)
    return Prepared(snapshot, config, errors, warnings)
