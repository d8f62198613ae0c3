"""Turn loaded manifests into what the scheduler places: PodGroups and their pods.

Volcano never schedules a vcjob or a bare pod directly. Its job controller creates a PodGroup and
the pods of every task; its PodGroup controller gives each bare pod a one-pod group. This module
does the same on plain values:

- `expand_job(job, priority_classes)` -> the job's PodGroup and pods, as the job controller makes them.
- `bare_pod_group(pod)` -> a one-pod group for a pod that names no group.
- `apply_group_affinity(pod, affinity)` -> a pod with its PodGroup's node affinity merged in.
- `workload_from(ms)` -> the Workload: every group to schedule with its pods, plus errors such as
  pods naming a PodGroup that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tidegate.model.errors import FieldError, ManifestError, ManifestErrors
from tidegate.model.manifests import (
    QUEUE_NAME_ANNOTATION,
    ManifestSet,
    class_of,
    preemption_policy,
    resolve_priority,
)
from tidegate.model.objects import (
    DEFAULT_QUEUE,
    GROUP_NAME_ANNOTATIONS,
    PREEMPTABLE_KEY,
    PRIORITY_ANNOTATION,
    TASK_SPEC_ANNOTATION,
    Job,
    NodeAffinity,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PriorityClass,
    TaskSpec,
    preemptable_setting,
)
from tidegate.model.resources import EMPTY, Resources

#: The group-name annotation Volcano's controllers write on the pods they create.
GROUP_NAME_ANNOTATION = GROUP_NAME_ANNOTATIONS[0]
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
TASK_INDEX_KEY = "volcano.sh/task-index"
#: Prefix of the one-pod group Volcano's PodGroup controller makes for a bare pod.
BARE_POD_GROUP_PREFIX = "podgroup-"

PriorityClasses = Mapping[str, PriorityClass] | Iterable[PriorityClass]


@dataclass(slots=True)
class Workload:
    """Everything there is to schedule: PodGroups and, for each, its pods.

    groups: vcjobs' groups first, then standalone PodGroups, then bare pods' one-pod groups, each
        in load order.
    pods_by_group: PodGroup.key ("namespace/name") -> the group's pods; every group has an entry
        (possibly empty) and every pod's `group` names its group in the same namespace.
    errors, warnings: problems found while building it (a pod naming a PodGroup that does not
        exist, a vcjob whose priority class is unknown, ...), with file, document and field.
    """

    groups: list[PodGroup] = field(default_factory=list)
    pods_by_group: dict[str, list[Pod]] = field(default_factory=dict)
    errors: list[ManifestError] = field(default_factory=list)
    warnings: list[ManifestError] = field(default_factory=list)

    @property
    def pods(self) -> list[Pod]:
        """All pods, group by group in the order of `groups`."""
        return [pod for group in self.groups for pod in self.pods_by_group[group.key]]

    def pods_of(self, group: PodGroup) -> list[Pod]:
        return self.pods_by_group.get(group.key, [])

    def add(self, group: PodGroup, pods: list[Pod]) -> None:
        """Add a group with its pods; a second group with the same key is an error, not a merge."""
        if group.key in self.pods_by_group:
            self.errors.append(
                ManifestError(
                    group.source, "PodGroup", group.name, "metadata.name", f"PodGroup {group.key} is defined twice"
                )
            )
            return
        self.groups.append(group)
        self.pods_by_group[group.key] = pods

    def raise_for_errors(self) -> None:
        if self.errors:
            raise ManifestErrors(list(self.errors))


# --- vcjob ------------------------------------------------------------------------------------------


def expand_job(job: Job, priority_classes: PriorityClasses) -> tuple[PodGroup, list[Pod]]:
    """The PodGroup and pods Volcano's job controller creates for a vcjob.

    The group is named after the job, in the job's queue, with minMember = job_min_available(job),
    minTaskMember = each task's minAvailable (its replicas when unset, as Volcano's webhook
    defaults it) and minResources as Volcano's calcPGMinResources sums them (`min_resources`). Pods are
    named <job>-<task>-<index>. Raises ManifestErrors when a priority class is undefined and not one of
    the built-in levels.
    """
    classes = _class_index(priority_classes)
    group_priority = _resolve(job, job.priority_class_name, "spec.priorityClassName", classes)
    pods_by_task = [_task_pods(job, i, task, classes) for i, task in enumerate(job.tasks)]
    min_member = job_min_available(job)
    group = PodGroup(
        name=job.name,
        namespace=job.namespace,
        queue=job.queue,
        min_member=min_member,
        min_resources=min_resources(job, min_member, classes),
        min_task_member={task.name: _task_min_available(task) for task in job.tasks},
        priority_class_name=job.priority_class_name,
        priority=group_priority,
        created=job.created,
        waiting_time=job.waiting_time,  # Volcano's job controller copies the job's annotations onto its PodGroup
        source=job.source,
    )
    group.raw = _podgroup_manifest(group, _job_annotations(job))
    return group, [pod for pods in pods_by_task for pod in pods]


def _job_annotations(job: Job) -> dict[str, str]:
    meta = job.raw.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return {str(k): v for k, v in annotations.items() if isinstance(v, str)} if isinstance(annotations, Mapping) else {}


def job_min_available(job: Job) -> int:
    """spec.minAvailable, or (unset or 0, as Volcano's webhook reads it) the sum of the tasks' minAvailable."""
    if job.min_available:
        return job.min_available
    return sum(_task_min_available(task) for task in job.tasks)


def _task_min_available(task: TaskSpec) -> int:
    return task.replicas if task.min_available is None else task.min_available


def _task_pods(job: Job, index: int, task: TaskSpec, classes: Mapping[str, PriorityClass]) -> list[Pod]:
    """The replicas of one task, from its template, labelled and annotated as Volcano's controller does (the
    job's volcano.sh/preemptable included), with the priority and preemptionPolicy the API server admits."""
    template = task.template
    class_name = template.priority_class_name or job.priority_class_name
    priority = _resolve(job, class_name, _template_priority_field(job, index, task), classes)
    try:
        policy = preemption_policy(template, f"spec.tasks[{index}].template.spec", class_of(class_name, classes))
    except FieldError as exc:
        raise ManifestErrors([ManifestError(job.source, "Job", job.name, exc.field, exc.message)]) from None
    common_labels = {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace, QUEUE_NAME_KEY: job.queue}
    job_labels = {PREEMPTABLE_KEY: job.labels[PREEMPTABLE_KEY]} if PREEMPTABLE_KEY in job.labels else {}
    job_annotations = {PREEMPTABLE_KEY: job.annotations[PREEMPTABLE_KEY]} if PREEMPTABLE_KEY in job.annotations else {}
    pods = []
    for replica in range(max(task.replicas, 0)):
        name = f"{job.name}-{task.name}-{replica}"
        labels = {**template.labels, **common_labels, TASK_SPEC_ANNOTATION: task.name, **job_labels}
        annotations = {
            **template.annotations,
            TASK_SPEC_ANNOTATION: task.name,
            GROUP_NAME_ANNOTATION: job.name,
            JOB_NAME_KEY: job.name,
            QUEUE_NAME_KEY: job.queue,
            TASK_INDEX_KEY: str(replica),
            **job_annotations,
        }
        pod = replace(
            template,
            name=name,
            namespace=job.namespace,
            labels=labels,
            annotations=annotations,
            priority=priority,
            priority_class_name=class_name,
            preemption_policy=policy,
            preemptable=preemptable_setting(annotations, labels)[0] is not False,
            node_selector=dict(template.node_selector),
            scheduler_name=template.scheduler_name or job.scheduler_name,
            node_name="",
            phase=PodPhase.PENDING,
            group=job.name,
            task=task.name,
            gpu_indices=(),
            created=job.created,
            source=job.source,
        )
        pod.raw = _pod_manifest(pod, template.raw)
        pods.append(pod)
    return pods


def _template_priority_field(job: Job, index: int, task: TaskSpec) -> str:
    """Where a task's priority class was written, for error messages."""
    template = task.template
    spec = template.raw.get("spec")
    written_in_spec = isinstance(spec, Mapping) and bool(spec.get("priorityClassName"))
    if written_in_spec or template.priority_class_name not in ("", job.priority_class_name):
        return f"spec.tasks[{index}].template.spec.priorityClassName"
    if template.annotations.get(PRIORITY_ANNOTATION):
        return f"spec.tasks[{index}].template.metadata.annotations.{PRIORITY_ANNOTATION}"
    return "spec.priorityClassName"


def min_resources(job: Job, min_member: int, classes: Mapping[str, PriorityClass]) -> Resources:
    """The PodGroup's minResources as Volcano's job controller computes them (calcPGMinResources,
    pkg/controllers/job/job_controller_actions.go, and TasksPriority in job_controller_util.go).

    Tasks are ordered by the priority of the class their template names itself (`spec.priorityClassName`
    as written: not the job's class it inherits; no class, or one that is not defined, counts 0), highest
    first, tasks of equal priority as written. When minMember is below the sum of the tasks' minAvailable,
    it is the requests of the first minMember pods in that order. Otherwise each task's minAvailable pods
    count first (at most minMember in all), then, while fewer than minMember, the replicas beyond their
    minAvailable of the tasks in the same order.
    """
    tasks = sorted(job.tasks, key=lambda task: -_own_priority(task.template, classes))  # stable: ties as written
    total = EMPTY
    if min_member < sum(_task_min_available(task) for task in job.tasks):  # CalcFirstCountResources
        count = min_member
        for task in tasks:
            taken = min(count, task.replicas)
            total += task.template.requests.scaled(max(taken, 0))
            count -= taken
            if count <= 0:
                break
        return total
    pods = 0  # CalcPGMinResources: every task's minAvailable first
    for task in tasks:
        taken = min(_task_min_available(task), min_member - pods)
        total += task.template.requests.scaled(max(taken, 0))
        pods += taken
        if pods >= min_member:
            return total
    left = min_member - pods  # then up to minMember from the replicas beyond minAvailable
    for task in tasks:
        spare = task.replicas - _task_min_available(task)
        if spare == 0:
            continue
        taken = min(left, spare)
        total += task.template.requests.scaled(max(taken, 0))
        left -= taken
        if left <= 0:
            break
    return total


def _own_priority(template: Pod, classes: Mapping[str, PriorityClass]) -> int:
    """The priority of the class a task's template names in its own spec, as calcPGMinResources reads it:
    0 without one, and 0 for a class it cannot find (Volcano logs and ignores it); tidegate's built-in
    levels count as the classes they stand for. A template built without a manifest names its
    `priority_class_name`."""
    if template.raw:
        spec = template.raw.get("spec")
        written = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
        name = written if isinstance(written, str) else ""
    else:
        name = template.priority_class_name
    if not name:
        return 0
    try:
        return resolve_priority(name, classes)
    except FieldError:
        return 0


# --- PodGroups and bare pods ------------------------------------------------------------------------


def apply_group_affinity(pod: Pod, affinity: NodeAffinity | None) -> Pod:
    """The pod with its PodGroup's node affinity merged in (tidegate's PodGroup affinity extension).

    The pod's own required terms win when it has any; otherwise the group's apply. Preferred
    terms add up: the pod's first, then the group's.
    """
    if affinity is None:
        return pod
    own = pod.affinity or NodeAffinity()
    required = own.required if own.required is not None else affinity.required
    return replace(pod, affinity=NodeAffinity(required, own.preferred + affinity.preferred))


def group_key(pod: Pod) -> str:
    """The key of the group the pod belongs to: the PodGroup it names, else its own one-pod group."""
    return f"{pod.namespace}/{pod.group or BARE_POD_GROUP_PREFIX + pod.name}"


def bare_pod_group(pod: Pod) -> tuple[PodGroup, Pod]:
    """The one-pod group Volcano's PodGroup controller makes for a pod that names no group.

    Named podgroup-<pod>, in the queue of the pod's scheduling.volcano.sh/queue-name annotation
    (default otherwise), minMember 1, minResources the pod's requests, the pod's priority. A pod
    already bound to a node gives a Running group (Completed once the pod has finished).
    """
    name = f"{BARE_POD_GROUP_PREFIX}{pod.name}"
    group = PodGroup(
        name=name,
        namespace=pod.namespace,
        queue=pod.annotations.get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE,
        min_member=1,
        min_resources=pod.requests,
        priority_class_name=pod.priority_class_name,
        priority=pod.priority,
        phase=_bare_group_phase(pod),
        # Volcano's PodGroup controller copies the pod's volcano.sh/preemptable onto the group.
        preemptable=preemptable_setting(pod.annotations, pod.labels)[0],
        created=pod.created,
        source=pod.source,
    )
    group.raw = _podgroup_manifest(group)
    member = replace(pod, group=name, annotations={**pod.annotations, GROUP_NAME_ANNOTATION: name})
    return group, member


def _bare_group_phase(pod: Pod) -> PodGroupPhase:
    if pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
        return PodGroupPhase.COMPLETED
    if pod.node_name or pod.phase is PodPhase.RUNNING:
        return PodGroupPhase.RUNNING
    return PodGroupPhase.PENDING


# --- the whole workload -----------------------------------------------------------------------------


def workload_from(ms: ManifestSet) -> Workload:
    """Every PodGroup to schedule with its pods: vcjobs expanded, PodGroups with their pods, bare pods grouped.

    A vcjob whose PodGroup or pods are already in the manifests (a dump of a live cluster) keeps
    those: only missing pods are created, as Volcano's job controller reconciles. A pod naming a
    PodGroup that exists nowhere is an error.
    """
    workload = Workload()
    classes = _class_index(ms.priority_classes)
    declared = {group.key: group for group in ms.podgroups}
    members: dict[str, list[Pod]] = {}
    bare: list[Pod] = []
    for pod in ms.pods:
        if pod.group:
            members.setdefault(group_key(pod), []).append(pod)
        else:
            bare.append(pod)
    for job in ms.jobs:
        _add_job(workload, job, classes, declared, members)
    for group in ms.podgroups:
        if declared.pop(group.key, None) is not None:
            workload.add(group, [apply_group_affinity(pod, group.affinity) for pod in members.pop(group.key, [])])
    for pods in members.values():
        for pod in pods:
            field_ = f"metadata.annotations.{_group_annotation_of(pod)}"
            workload.errors.append(
                ManifestError(
                    pod.source, "Pod", pod.name, field_, f"PodGroup {pod.group!r} does not exist in {pod.namespace}"
                )
            )
    for pod in bare:
        group, member = bare_pod_group(pod)
        workload.add(group, [member])
    return workload


def _add_job(
    workload: Workload,
    job: Job,
    classes: Mapping[str, PriorityClass],
    declared: dict[str, PodGroup],
    members: dict[str, list[Pod]],
) -> None:
    """Expand one vcjob into the workload, reusing its PodGroup and pods where they already exist."""
    try:
        group, pods = expand_job(job, classes)
    except ManifestErrors as exc:
        workload.errors.extend(exc.errors)
        return
    existing_group = declared.pop(group.key, None)
    existing_pods = members.pop(group.key, [])
    names = {pod.name for pod in existing_pods}
    group = existing_group or group
    merged = existing_pods + [pod for pod in pods if pod.name not in names]
    workload.add(group, [apply_group_affinity(pod, group.affinity) for pod in merged])


def _group_annotation_of(pod: Pod) -> str:
    return next((key for key in GROUP_NAME_ANNOTATIONS if pod.annotations.get(key)), GROUP_NAME_ANNOTATION)


# --- helpers ----------------------------------------------------------------------------------------


def _class_index(classes: PriorityClasses) -> Mapping[str, PriorityClass]:
    return classes if isinstance(classes, Mapping) else {pc.name: pc for pc in classes}


def _resolve(job: Job, class_name: str, field_: str, classes: Mapping[str, PriorityClass]) -> int:
    """resolve_priority, with an undefined class reported against the job's field."""
    try:
        return resolve_priority(class_name, classes)
    except FieldError as exc:
        raise ManifestErrors([ManifestError(job.source, "Job", job.name, field_, exc.message)]) from None


def _podgroup_manifest(group: PodGroup, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The PodGroup as Volcano would store it, so generated groups can be written out like loaded ones."""
    spec: dict[str, Any] = {"queue": group.queue, "minMember": group.min_member}
    if group.min_resources:
        spec["minResources"] = group.min_resources.to_dict()
    if group.min_task_member:
        spec["minTaskMember"] = dict(group.min_task_member)
    if group.priority_class_name:
        spec["priorityClassName"] = group.priority_class_name
    metadata: dict[str, Any] = {"name": group.name, "namespace": group.namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": metadata, "spec": spec}


def _pod_manifest(pod: Pod, template: Mapping[str, Any]) -> dict[str, Any]:
    """A generated pod as a manifest: the template's spec (shared, not copied) under the pod's metadata."""
    metadata = {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels, "annotations": pod.annotations}
    spec = template.get("spec")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec if isinstance(spec, Mapping) else {}}
