"""Checks across loaded manifests, like Volcano's and Kubernetes' admission webhooks.

`validate(ms)` returns every problem as a ManifestError naming file, document, object and field;
an empty list means the set would be admitted. Loading (manifests.py) already rejects values that
cannot be parsed; the rules here need the object as a whole or other objects (queues that exist,
gang sizes against replicas, the queue hierarchy, names used twice).

One rule differs from a literal reading of Volcano on purpose: a queue's `deserved` may exceed its
`capability`. In tidegate capability is the local physical cap while deserved also counts the
queue's elastic share of cloud capacity. A guarantee above deserved or capability is an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tidegate.model.errors import ManifestError, Source
from tidegate.model.manifests import QUEUE_NAME_ANNOTATION, ManifestSet, resource_field, scheduler_conf_prefix
from tidegate.model.names import DNS1123_LABEL_RULE, DNS1123_SUBDOMAIN_RULE, is_dns1123_label, is_dns1123_subdomain
from tidegate.model.objects import (
    DEFAULT_QUEUE,
    GROUP_NAME_ANNOTATIONS,
    HIERARCHY_ANNOTATION,
    NAMESPACES_ANNOTATION,
    ROOT_QUEUE,
    Job,
    JobAction,
    JobEvent,
    LifecyclePolicy,
    Pod,
    PodGroup,
    PodGroupPhase,
    PriorityClass,
    Queue,
    QueueState,
    SchedulerConfiguration,
)
from tidegate.model.resources import EMPTY, Resources

#: Actions a SchedulerConfiguration may run, in Volcano's usual order.
KNOWN_ACTIONS: tuple[str, ...] = ("enqueue", "allocate", "backfill", "preempt", "reclaim")
#: Plugins a SchedulerConfiguration may name; overcommit is accepted and ignored.
KNOWN_PLUGINS: tuple[str, ...] = (
    "gang",
    "priority",
    "drf",
    "proportion",
    "capacity",
    "predicates",
    "nodeorder",
    "binpack",
    "gpushare",
    "sla",
    "conformance",
    "overcommit",
)
#: Queues that exist without a manifest, as in a Volcano cluster.
BUILTIN_QUEUES: tuple[str, ...] = (DEFAULT_QUEUE, ROOT_QUEUE)
MIN_QUEUE_WEIGHT, MAX_QUEUE_WEIGHT = 1, 65535
#: Events and actions users may write in lifecycle policies (Volcano's webhook allows these only).
POLICY_EVENTS = frozenset(
    {
        JobEvent.ANY,
        JobEvent.POD_FAILED,
        JobEvent.POD_EVICTED,
        JobEvent.JOB_UNKNOWN,
        JobEvent.TASK_COMPLETED,
        JobEvent.TASK_FAILED,
        JobEvent.JOB_UPDATED,
    }
)
POLICY_ACTIONS = frozenset(
    {
        JobAction.ABORT_JOB,
        JobAction.RESTART_JOB,
        JobAction.RESTART_TASK,
        JobAction.RESTART_POD,
        JobAction.TERMINATE_JOB,
        JobAction.COMPLETE_JOB,
        JobAction.RESUME_JOB,
    }
)
#: Kubernetes reserves priority values above this for system-* classes.
MAX_USER_PRIORITY = 1_000_000_000


class _Object(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def source(self) -> Source: ...


class _Namespaced(_Object, Protocol):
    @property
    def namespace(self) -> str: ...


def _error(obj: _Object, kind: str, field_: str, message: str) -> ManifestError:
    return ManifestError(obj.source, kind, obj.name, field_, message)


def validate(ms: ManifestSet, ratcheted: list[ManifestError] | None = None) -> list[ManifestError]:
    """Every admission problem in the set, ordered by file and document. With `ratcheted` (objects accepted
    before, read back from a store), the problems of the queue rules that ratchet go there instead: a job,
    PodGroup or pod in a queue that is no longer Open or no longer takes its namespace stays (it waits, as
    the scheduler keeps such work waiting), as Kubernetes' validation ratcheting keeps stored objects."""
    queues = _QueueTree.of(ms.queues)
    queues.ratcheted = ratcheted
    errors = [
        *_name_errors(ms),
        *_duplicate_names(ms),
        *queues.errors(),
        *(error for job in ms.jobs for error in _job_errors(job, queues)),
        *(error for group in ms.podgroups for error in _podgroup_errors(group, queues)),
        *(error for pod in ms.pods for error in _pod_errors(pod, queues)),
        *_priority_class_errors(ms.priority_classes),
        *(error for conf in ms.configurations for error in _configuration_errors(conf)),
    ]
    return sorted(errors, key=lambda error: (error.source.file, error.source.index))


# --- names ------------------------------------------------------------------------------------------


def _kinds(ms: ManifestSet) -> list[tuple[str, Sequence[_Object], bool]]:
    """Each kind's objects, and whether the kind is namespaced."""
    return [
        ("Node", ms.nodes, False),
        ("Queue", ms.queues, False),
        ("PodGroup", ms.podgroups, True),
        ("Job", ms.jobs, True),
        ("Pod", ms.pods, True),
        ("PriorityClass", ms.priority_classes, False),
        ("SchedulerConfiguration", ms.configurations, False),
        ("Namespace", ms.namespaces, False),
    ]


def _name_errors(ms: ManifestSet) -> Iterator[ManifestError]:
    """Names as Kubernetes accepts them (DNS-1123 subdomains; namespaces DNS-1123 labels), so every object
    can be named in a URL, a key and the API server (a namespace "a/b" made a job no call could reach)."""
    for kind, objects, namespaced in _kinds(ms):
        for obj in objects:
            if not is_dns1123_subdomain(obj.name):
                yield _error(
                    obj,
                    kind,
                    "metadata.name",
                    f"{obj.name[:80]!r} is not a DNS-1123 subdomain ({DNS1123_SUBDOMAIN_RULE})",
                )
            namespace = getattr(obj, "namespace", "") if namespaced else ""
            if namespace and not is_dns1123_label(namespace):
                yield _error(
                    obj,
                    kind,
                    "metadata.namespace",
                    f"{namespace[:80]!r} is not a DNS-1123 label ({DNS1123_LABEL_RULE})",
                )


def _duplicate_names(ms: ManifestSet) -> Iterator[ManifestError]:
    """Two objects of one kind with the same name (and namespace, for namespaced kinds)."""
    for kind, objects, namespaced in _kinds(ms):
        first: dict[str, _Object] = {}
        for obj in objects:
            key = f"{getattr(obj, 'namespace', '')}/{obj.name}" if namespaced else obj.name
            if key in first:
                where = first[key].source
                yield _error(
                    obj, kind, "metadata.name", f"duplicate name: also defined in {where.file} document {where.index}"
                )
            else:
                first[key] = obj


# --- queues -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _QueueTree:
    """The declared queues, the built-in ones, and who is whose child (no parent means root)."""

    by_name: dict[str, Queue]
    children: dict[str, list[str]] = field(default_factory=dict)
    #: Where the problems of the rules that ratchet go (see `validate`); None: they are errors.
    ratcheted: list[ManifestError] | None = None

    @classmethod
    def of(cls, queues: Iterable[Queue]) -> _QueueTree:
        tree = cls({})
        for queue in queues:
            tree.by_name.setdefault(queue.name, queue)
        names = [*tree.by_name, *(name for name in BUILTIN_QUEUES if name not in tree.by_name)]
        for name in names:
            parent = tree.parent_of(name)
            if parent:
                tree.children.setdefault(parent, []).append(name)
        return tree

    def exists(self, name: str) -> bool:
        return name in self.by_name or name in BUILTIN_QUEUES

    def parent_of(self, name: str) -> str:
        queue = self.by_name.get(name)
        if name == ROOT_QUEUE:
            return queue.parent if queue else ""
        return (queue.parent if queue else "") or ROOT_QUEUE

    def state_of(self, name: str) -> QueueState:
        queue = self.by_name.get(name)
        return queue.state if queue else QueueState.OPEN

    def errors(self) -> Iterator[ManifestError]:
        for queue in self.by_name.values():
            yield from self._own_errors(queue)
            yield from self._parent_errors(queue)
            yield from self._children_errors(queue)
            yield from self._hierarchy_errors(queue)

    def _hierarchy_errors(self, queue: Queue) -> Iterator[ManifestError]:
        """Volcano's queue webhook: a queue's volcano.sh/hierarchy may not lead to another queue's (a queue at
        root/sci and one at root/sci/dev conflict: hdrf's tree hangs jobs on its leaves only)."""
        if not queue.hierarchy:
            return
        below = "/".join(queue.hierarchy) + "/"
        for other in self.by_name.values():
            if other.name != queue.name and "/".join(other.hierarchy).startswith(below):
                yield _error(
                    queue,
                    "Queue",
                    f"metadata.annotations.{HIERARCHY_ANNOTATION}",
                    f"{'/'.join(queue.hierarchy)!r} leads to queue {other.name!r}'s {'/'.join(other.hierarchy)!r}: "
                    "a queue's place in the hierarchy may not be above another queue's",
                )
                return

    def _own_errors(self, queue: Queue) -> Iterator[ManifestError]:
        if not MIN_QUEUE_WEIGHT <= queue.weight <= MAX_QUEUE_WEIGHT:
            yield _error(
                queue, "Queue", "spec.weight", f"{queue.weight} is outside {MIN_QUEUE_WEIGHT}..{MAX_QUEUE_WEIGHT}"
            )
        if not -(2**31) <= queue.priority < 2**31:
            yield _error(queue, "Queue", "spec.priority", f"{queue.priority} is not a 32-bit integer (Volcano's int32)")
        limits: tuple[tuple[Mapping[str, int] | None, str], ...] = (
            (queue.deserved, "deserved"),
            (queue.capability_limits(), "capability"),
        )
        for name, amount in queue.guarantee.items():
            for limit, what in limits:
                if limit is not None and name in limit and amount > limit[name]:
                    yield _error(
                        queue,
                        "Queue",
                        resource_field("spec.guarantee.resource", name),
                        f"guarantee {_amount(name, amount)} is above {what} {_amount(name, limit[name])}",
                    )

    def _parent_errors(self, queue: Queue) -> Iterator[ManifestError]:
        if queue.name == ROOT_QUEUE and queue.parent:
            yield _error(queue, "Queue", "spec.parent", "the root queue cannot have a parent")
            return
        if queue.parent and not self.exists(queue.parent):
            yield _error(queue, "Queue", "spec.parent", f"parent queue {queue.parent!r} does not exist")
            return
        cycle = self._cycle_through(queue.name)
        if cycle:
            yield _error(queue, "Queue", "spec.parent", f"the queue hierarchy has a cycle: {' -> '.join(cycle)}")
            return
        parent = self.by_name.get(self.parent_of(queue.name))
        if parent is not None:
            # Caps as the quota plugins read them: a cpu or memory of 0 is no cap, any other 0 is.
            parent_limits = parent.capability_limits()
            for name, amount in queue.capability_limits().items():
                if name in parent_limits and amount > parent_limits[name]:
                    yield _error(
                        queue,
                        "Queue",
                        resource_field("spec.capability", name),
                        f"{_amount(name, amount)} is above parent queue {parent.name!r}'s capability "
                        f"{_amount(name, parent_limits[name])}",
                    )

    def _cycle_through(self, start: str) -> list[str]:
        """The parent chain from `start` back to itself, or [] when `start` is on no cycle."""
        path, name = [start], self.by_name[start].parent
        while name and name in self.by_name and name not in path:
            path.append(name)
            name = self.by_name[name].parent
        return [*path, start] if name == start else []

    def _children_errors(self, queue: Queue) -> Iterator[ManifestError]:
        """A parent's guarantee and deserved must cover the sums of its children's, where it declares them."""
        children = [self.by_name[name] for name in self.children.get(queue.name, ()) if name in self.by_name]
        guarantees = sum((child.guarantee for child in children), EMPTY)
        deserved = sum((child.deserved or EMPTY for child in children), EMPTY)
        for what, mine, total in (
            ("guarantee.resource", queue.guarantee, guarantees),
            ("deserved", queue.deserved, deserved),
        ):
            for name, amount in (mine or EMPTY).items():
                if total[name] > amount:
                    yield _error(
                        queue,
                        "Queue",
                        resource_field(f"spec.{what}", name),
                        f"{_amount(name, amount)} is below the {_amount(name, total[name])} its child queues add up to",
                    )

    def reference_errors(
        self, obj: _Namespaced, kind: str, queue: str, field_: str, check_state: bool = True
    ) -> Iterator[ManifestError]:
        """A job, PodGroup or pod must name an existing, Open, leaf queue, as Volcano admits them, that takes work
        from its namespace."""
        if not self.exists(queue):
            yield _error(obj, kind, field_, f"queue {queue!r} does not exist")
            return
        children = self.children.get(queue)
        if children:
            yield _error(
                obj,
                kind,
                field_,
                f"queue {queue!r} has child queues ({', '.join(children)}); only leaf queues take work",
            )
        state = self.state_of(queue)
        ratcheting: list[ManifestError] = []
        if check_state and state is not QueueState.OPEN:
            message = f"queue {queue!r} is {state.value}; only Open queues take new work"
            ratcheting.append(_error(obj, kind, field_, message))
        refusal = self.namespace_refusal(queue, obj.namespace) if check_state else ""
        if refusal:
            ratcheting.append(_error(obj, kind, field_, f"{refusal} (annotation {NAMESPACES_ANNOTATION})"))
        if self.ratcheted is None:
            yield from ratcheting
        else:
            self.ratcheted.extend(ratcheting)

    def namespace_refusal(self, queue: str, namespace: str) -> str:
        """Why the queue, or one of its ancestors, does not take work from the namespace ("" if they all do).
        Queues have ancestors, root included, only when one names a parent (as the scheduler builds them)."""
        hierarchical = any(q.parent and q.name != ROOT_QUEUE for q in self.by_name.values())
        seen: set[str] = set()
        name = queue
        while name and name not in seen:
            seen.add(name)
            declared = self.by_name.get(name)
            refusal = declared.refuses(namespace) if declared else ""
            if refusal or not hierarchical:
                return refusal
            name = self.parent_of(name)
        return ""


def _amount(resource: str, amount: int) -> str:
    return f"{resource}={Resources({resource: amount}).to_dict().get(resource, '0')}"


# --- vcjobs, PodGroups, pods ------------------------------------------------------------------------


def _job_errors(job: Job, queues: _QueueTree) -> Iterator[ManifestError]:
    """Volcano's job admission: gang sizes, task names and replicas, lifecycle policies, queue."""
    if not job.tasks:
        yield _error(job, "Job", "spec.tasks", "a Job needs at least one task")
    if job.min_available is not None and job.min_available < 0:
        yield _error(job, "Job", "spec.minAvailable", f"{job.min_available} is negative")
    elif job.min_available is not None and job.min_available > job.total_replicas:
        yield _error(
            job,
            "Job",
            "spec.minAvailable",
            f"{job.min_available} is more than the {job.total_replicas} replicas of all tasks",
        )
    if job.max_retry < 0:
        yield _error(job, "Job", "spec.maxRetry", f"{job.max_retry} is negative")
    seen: set[str] = set()
    for i, task in enumerate(job.tasks):
        prefix = f"spec.tasks[{i}]"
        if task.name in seen:
            yield _error(job, "Job", f"{prefix}.name", f"duplicated task name {task.name!r}")
        seen.add(task.name)
        if not is_dns1123_label(task.name):
            yield _error(
                job, "Job", f"{prefix}.name", f"{task.name!r} is not a DNS-1123 label (a-z, 0-9, '-', at most 63)"
            )
        if task.replicas < 0:
            yield _error(job, "Job", f"{prefix}.replicas", f"{task.replicas} is negative")
        if task.min_available is not None and task.min_available < 0:
            yield _error(job, "Job", f"{prefix}.minAvailable", f"{task.min_available} is negative")
        elif task.min_available is not None and task.min_available > task.replicas:
            yield _error(
                job, "Job", f"{prefix}.minAvailable", f"{task.min_available} is more than replicas {task.replicas}"
            )
        yield from _policy_errors(job, task.policies, f"{prefix}.policies", _raw_policies(job, i))
    yield from _policy_errors(job, job.policies, "spec.policies", _raw_policies(job, None))
    yield from queues.reference_errors(job, "Job", job.queue, "spec.queue")


def _raw_policies(job: Job, task: int | None) -> list[object]:
    """The policies list as written, to tell `event` from `events` in error fields."""
    spec = job.raw.get("spec")
    if not isinstance(spec, Mapping):
        return []
    holder: object = spec
    if task is not None:
        tasks = spec.get("tasks")
        holder = tasks[task] if isinstance(tasks, list) and task < len(tasks) else {}
    policies = holder.get("policies") if isinstance(holder, Mapping) else None
    return policies if isinstance(policies, list) else []


def _policy_errors(
    job: Job, policies: Sequence[LifecyclePolicy], prefix: str, raw: Sequence[object]
) -> Iterator[ManifestError]:
    """Volcano's validatePolicies: each event or exit code handled once, '*' alone, exit code not 0."""
    events_seen: dict[JobEvent, int] = {}
    codes_seen: dict[int, int] = {}
    for j, policy in enumerate(policies):
        path = f"{prefix}[{j}]"
        item = raw[j] if j < len(raw) else None
        written = item if isinstance(item, Mapping) else {}
        events_field = f"{path}.event" if "event" in written and "events" not in written else f"{path}.events"
        if policy.events and policy.exit_code is not None:
            yield _error(job, "Job", path, "give events or exitCode, not both")
        elif not policy.events and policy.exit_code is None:
            yield _error(job, "Job", path, "needs an event, events or exitCode")
        if policy.action not in POLICY_ACTIONS:
            yield _error(job, "Job", f"{path}.action", f"{policy.action.value} cannot be used in a policy")
        for event in policy.events:
            if event not in POLICY_EVENTS:
                yield _error(job, "Job", events_field, f"{event.value} cannot be used in a policy")
            elif event in events_seen:
                yield _error(
                    job,
                    "Job",
                    events_field,
                    f"duplicated event {event.value} (already in {prefix}[{events_seen[event]}])",
                )
            else:
                events_seen[event] = j
        if policy.exit_code == 0:
            yield _error(job, "Job", f"{path}.exitCode", "0 is not a failure exit code")
        elif policy.exit_code is not None and policy.exit_code in codes_seen:
            yield _error(
                job,
                "Job",
                f"{path}.exitCode",
                f"duplicated exitCode {policy.exit_code} (already in {prefix}[{codes_seen[policy.exit_code]}])",
            )
        elif policy.exit_code is not None:
            codes_seen[policy.exit_code] = j
    if JobEvent.ANY in events_seen and len(events_seen) > 1:
        yield _error(job, "Job", prefix, "when a policy handles '*', no other policy may name an event")


def _podgroup_errors(group: PodGroup, queues: _QueueTree) -> Iterator[ManifestError]:
    if group.min_member < 0:
        yield _error(group, "PodGroup", "spec.minMember", f"{group.min_member} is negative")
    for task, count in group.min_task_member.items():
        if count < 0:
            yield _error(group, "PodGroup", f"spec.minTaskMember.{task}", f"{count} is negative")
    pending = group.phase is PodGroupPhase.PENDING
    yield from queues.reference_errors(group, "PodGroup", group.queue, "spec.queue", check_state=pending)


def _pod_errors(pod: Pod, queues: _QueueTree) -> Iterator[ManifestError]:
    """A bare pod's queue annotation must name a queue that takes work (its one-pod group goes there)."""
    queue = pod.annotations.get(QUEUE_NAME_ANNOTATION)
    in_group = any(pod.annotations.get(key) for key in GROUP_NAME_ANNOTATIONS)
    if queue and not in_group:
        field_ = f"metadata.annotations.{QUEUE_NAME_ANNOTATION}"
        yield from queues.reference_errors(pod, "Pod", queue, field_, check_state=not pod.node_name)


# --- cluster-wide objects ---------------------------------------------------------------------------


def _priority_class_errors(classes: Sequence[PriorityClass]) -> Iterator[ManifestError]:
    default: PriorityClass | None = None
    for pc in classes:
        if pc.global_default and default is not None:
            yield _error(pc, "PriorityClass", "globalDefault", f"{default.name!r} is already the global default")
        elif pc.global_default:
            default = pc
        if pc.value > MAX_USER_PRIORITY and not pc.name.startswith("system-"):
            yield _error(
                pc, "PriorityClass", "value", f"values above {MAX_USER_PRIORITY} are reserved for system-* classes"
            )


def _configuration_errors(conf: SchedulerConfiguration) -> Iterator[ManifestError]:
    """Every action and plugin must be one tidegate implements."""
    prefix = scheduler_conf_prefix(conf.raw)
    actions_field = f"{prefix}.actions" if prefix else "actions"
    for action in conf.actions:
        if action not in KNOWN_ACTIONS:
            yield _error(
                conf,
                "SchedulerConfiguration",
                actions_field,
                f"unknown action {action!r} (known: {', '.join(KNOWN_ACTIONS)})",
            )
    for i, tier in enumerate(conf.tiers):
        names = {plugin.name for plugin in tier.plugins}
        for j, plugin in enumerate(tier.plugins):
            path = f"{prefix}.tiers[{i}].plugins[{j}]" if prefix else f"tiers[{i}].plugins[{j}]"
            if plugin.name not in KNOWN_PLUGINS:
                message = f"unknown plugin {plugin.name!r} (known: {', '.join(KNOWN_PLUGINS)})"
                yield _error(conf, "SchedulerConfiguration", f"{path}.name", message)
            elif plugin.name == "drf" and plugin.enabled("enableHierarchy") and "proportion" in names:
                # Volcano's scheduler refuses such a configuration (UnmarshalSchedulerConf).
                message = "proportion and drf with hierarchy enabled conflict (in the same tier)"
                yield _error(conf, "SchedulerConfiguration", f"{path}.enableHierarchy", message)
