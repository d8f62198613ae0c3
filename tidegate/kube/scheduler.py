"""tidegate as a real Kubernetes cluster's batch scheduler, in the place of Volcano's vc-scheduler.

Every period it reads the cluster (Nodes, PriorityClasses, Volcano Queues and PodGroups, Pods), hands
what changed to the same `OnlineScheduler` the simulator and `tidegate serve` drive, runs a cycle and writes
the decisions back: Bindings (with `volcano.sh/gpu-index` for GPU pods), PodGroup phases with an
Unschedulable condition saying why a group waits, and the deletion of pods evicted by preempt or reclaim.

It schedules the pods whose `spec.schedulerName` is its own (`volcano` by default, so vcjobs created by
Volcano's job controller need no change); pods bound by other schedulers take their room on their nodes.
A pod that names no PodGroup gets a one-pod group, as Volcano's controller gives it. State is the API
server's: a restarted scheduler reads it back, so nothing is kept locally.

It hosts the fleet's controllers (`tidegate.kube.fleet.KubeFleet`): overflow to a burst queue, and, given a
simulation folder's pools, HPAs and budget, the pools' virtual nodes, spot notices, the links and the budget.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar, cast

from tidegate.autoscale.hpa import HPASpec
from tidegate.clock import SimClock
from tidegate.fleet.burst import Burst
from tidegate.fleet.links import KEEP_RUNNING, CloudPods
from tidegate.fleet.pool import Pool, pinned_to_idc
from tidegate.fleet.scaling import QueueTree
from tidegate.fleet.spec import BudgetSpec
from tidegate.kube.api import HOME_QUEUE_ANNOTATION, ClusterApi, FleetApi
from tidegate.kube.cloud_member import CloudMember
from tidegate.kube.fleet import KubeFleet, waiting_since
from tidegate.kube.reading import ObjectCache
from tidegate.model.expand import group_key, workload_from
from tidegate.model.manifests import ManifestSet, gpu_index
from tidegate.model.objects import (
    Node,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PriorityClass,
    Queue,
    SchedulerConfiguration,
)
from tidegate.model.resources import Resources
from tidegate.scheduler.info import TaskStatus
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.snapshot import Bind, Decisions, Evict

_log = logging.getLogger(__name__)
T = TypeVar("T")
#: Writes (bindings, PodGroup status, evictions) in flight at once, as Volcano binds in goroutines.
WRITERS = 8
FINISHED = (PodPhase.SUCCEEDED, PodPhase.FAILED)
#: Phases in which a PodGroup with no pod yet is handed to the scheduler (to be admitted, or to stay so).
WAITING_PHASES = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE)


@dataclass(frozen=True, slots=True)
class _Seen:
    """What a group looked like when it was handed to the scheduler: a change means handing it again."""

    group: tuple[object, ...]
    pods: tuple[tuple[object, ...], ...]


@dataclass(frozen=True, slots=True)
class _Expanded:
    """A group key's objects as read, and the groups (normally one) and problems `workload_from` made of them."""

    read: tuple[PodGroup | None, tuple[Pod, ...]]
    groups: list[tuple[PodGroup, list[Pod]]]
    problems: list[str]


def _expand(read: tuple[PodGroup | None, tuple[Pod, ...]], classes: Sequence[PriorityClass]) -> _Expanded:
    """One group key's part of `workload_from` over the whole cluster (a group's expansion reads only its own
    PodGroup, its pods and the priority classes)."""
    group, pods = read
    workload = workload_from(
        ManifestSet(podgroups=[group] if group else [], pods=list(pods), priority_classes=list(classes))
    )
    made = [(made, workload.pods_by_group[made.key]) for made in workload.groups]
    return _Expanded(read, made, [str(error) for error in workload.errors])


def _seen(group: PodGroup, pods: Sequence[Pod]) -> _Seen:
    return _Seen(
        (
            group.queue,
            group.min_member,
            group.min_resources,
            group.priority,
            group.affinity,
            group.preemptable,
            group.waiting_time,
        ),
        tuple(
            (
                p.key,
                _uid(p),
                p.node_name,
                p.phase,
                p.deleting,
                p.requests,
                p.gpu_indices,
                p.tolerations,
                p.priority,
                p.preemptable,
                p.preemption_policy,
                tuple(sorted(p.node_selector.items())),
                p.affinity,
                tuple(sorted(p.labels.items())),  # what other pods' (anti-)affinity terms select
                p.pod_affinity,
            )
            for p in pods
        ),
    )


@dataclass(frozen=True, slots=True)
class Fleet:
    """A simulation folder's fleet as `tidegate kube` serves it: pools whose virtual nodes it registers, the
    HPAs sizing them, burst and the budget."""

    pools: tuple[Pool, ...] = ()
    hpas: tuple[HPASpec, ...] = ()
    burst: Burst | None = None
    budget: BudgetSpec | None = None
    queues: tuple[Queue, ...] = field(default=())
    #: Cloud clusters run as members (`CloudMember`): their pools' nodes are the members' instances.
    members: tuple[CloudMember, ...] = ()
    #: What pods running in a cloud do when its link goes down.
    cloud_pods: CloudPods = KEEP_RUNNING


class ClusterScheduler:
    """One cluster, one `OnlineScheduler`: `step(now)` reads the cluster, runs a cycle and writes it back."""

    def __init__(
        self,
        api: ClusterApi,
        config: SchedulerConfiguration | None = None,
        scheduler_name: str = "volcano",
        burst: Burst | None = None,
        fleet: Fleet | None = None,
        start: float = 0.0,
    ) -> None:
        """With `burst`, waiting PodGroups not pinned to the IDC move to the burst queue (overflow); `fleet`
        (whose burst then applies) also registers its pools' virtual nodes, which need an API that writes
        nodes, queues and events (`FleetApi`). The fleet's time starts at `start` (the first step's now)."""
        self.api = api
        fleet = fleet or Fleet(burst=burst)
        self.clock = SimClock(start)
        #: The fleet's controllers, with this scheduler as their host.
        self.fleet = KubeFleet(
            self,
            cast(FleetApi, api),
            self.clock,
            fleet.pools,
            fleet.hpas,
            fleet.burst,
            fleet.budget,
            {queue.name: queue for queue in fleet.queues},
            fleet.members,
            fleet.cloud_pods,
        )
        self.config = config or SchedulerConfiguration()
        self.scheduler_name = scheduler_name
        self.core: OnlineScheduler | None = None
        self._reader = ObjectCache()
        self._queues: dict[str, Queue] = {}
        self._nodes: dict[str, Node] = {}
        #: Per node: the node read, the other schedulers' pods on it, and the node with their room taken.
        self._squeezed: dict[str, tuple[Node, tuple[Pod, ...], Node]] = {}
        self._groups: dict[str, _Seen] = {}
        #: Per group key: what was read of it (its PodGroup, its pods) and what that expanded to.
        self._expanded: dict[str, _Expanded] = {}
        #: PodGroups that exist in the API server, the one-pod groups of pods that name none (no object of
        #: their own), and the status last written.
        self._declared: set[str] = set()
        self._bare: set[str] = set()
        self._written: dict[str, tuple[str, str]] = {}
        #: Pipelined pods' nominated node and GPU card(s) as last written (`ClusterApi.nominate`).
        self._nominations: dict[str, tuple[str, str]] = {}
        #: Waiting pods' Unschedulable message as last written (`ClusterApi.set_pod_unschedulable`), by key and
        #: uid (a pod recreated under its name, as a vcjob's are, has not said it yet).
        self._pods_written: dict[tuple[str, str], str] = {}
        #: The pods (key, uid) of groups whose queue does not exist.
        self._queueless_pods: dict[str, list[tuple[str, str]]] = {}
        #: Groups whose queue does not exist (not handed to the scheduler), and so why they wait.
        self._queueless: dict[str, str] = {}
        self.cycles = 0
        #: Pods bound and evicted since start, and how long the last step took (seconds).
        self.bound = self.evicted = 0
        #: Steps that raised (counted by the loop that runs them).
        self.failed_cycles = 0
        #: Steps left out: the cluster had not changed since a cycle that did nothing (`step`).
        self.quiet_cycles = 0
        self._quiet_version: int | None = None
        self._quiet_until = -math.inf
        self.last_step_s = 0.0
        #: Objects the last read could not use, as messages (file#document kind/name field: problem).
        self.problems: list[str] = []

    def step(self, now: float) -> Decisions:
        """Read the cluster, schedule, write the decisions. Returns the cycle's decisions."""
        started = time.perf_counter()
        if now > self.clock.now():
            self.clock.run(until=now)  # the fleet's timers due by now: HPA syncs, notices running out, budget
        self.fleet.sync_members(now)  # the clouds' instances, virtual nodes and pods, before the IDC is read
        version = self.api.version()
        if version is not None and version == self._quiet_version and now < self._quiet_until:
            self.quiet_cycles += 1  # nothing changed since a cycle that did nothing: it would do nothing
            return Decisions()
        ms = self._reader.read(self.api.list_objects())
        self.problems = [str(error) for error in ms.errors]
        core = self._reconcile(ms)
        self.fleet.read({key: str(seen.group[0]) for key, seen in self._groups.items()})
        self.fleet.observe(ms.nodes, ms.pods, self._queues)
        for problem in self.problems:
            _log.warning("skipped: %s", problem)
        decisions = core.cycle(now)
        self.cycles += 1
        failed = self._write(core, decisions)
        moving = len(self.fleet.moving)
        until = self.fleet.after_cycle(now)
        self.fleet.keep_budget()
        did = decisions.binds or decisions.evictions or decisions.pipelined or len(self.fleet.moving) > moving
        quiet = not did and not failed
        until = min(until, decisions.wake_at, self.clock.peek() or math.inf)  # an sla deadline, the fleet's timers
        self._quiet_version, self._quiet_until = (version, until) if quiet else (None, -math.inf)
        self.bound += len(decisions.binds)
        self.evicted += len(decisions.evictions)
        self.last_step_s = time.perf_counter() - started
        return decisions

    def declared(self, key: str) -> bool:
        """The group is a PodGroup object (not a bare pod's one-pod group)."""
        return key in self._declared

    def movable(self, key: str) -> bool:
        """The group can be moved to another queue: a PodGroup, or a bare pod's group."""
        return key in self._declared or key in self._bare

    def home_queue(self, key: str) -> str:
        """The queue a group moved to the burst queue came from ("" if it was not moved)."""
        held = self._expanded.get(key)
        if held is None:
            return ""
        group, pods = held.read
        annotations = group.raw.get("metadata", {}).get("annotations") or {} if group is not None else {}
        if group is None and pods:
            annotations = pods[0].annotations
        return str(annotations.get(HOME_QUEUE_ANNOTATION, ""))

    @property
    def overflowed(self) -> dict[str, str]:
        """Groups moved to the burst queue, and the queue each came from: as the last read shows them, and as
        moved since."""
        out = {key: home for key in self._expanded if self.movable(key) and (home := self.home_queue(key))}
        for key, (queue, home) in self.fleet.moving.items():
            if queue == home:
                out.pop(key, None)
            else:
                out[key] = home
        return out

    def forget(self, key: str) -> None:
        """Leave the group out of this cycle and its writes: the next read hands it over again."""
        if self._groups.pop(key, None) is not None and self.core is not None:
            self.core.remove_group(key)
        self._written.pop(key, None)

    def wake(self) -> None:
        """Run the next step's cycle even if nothing changed (the fleet changed something)."""
        self._quiet_version = None

    @property
    def queues(self) -> Mapping[str, Queue]:
        """The queues the last read found, by name."""
        return self._queues

    @property
    def nodes(self) -> Mapping[str, Node]:
        """The nodes the last read found (with other schedulers' pods' room taken), by name."""
        return self._nodes

    def others_on(self, node: str) -> tuple[Pod, ...]:
        """Pods of other schedulers (and ours the scheduler does not have) holding room on the node."""
        held = self._squeezed.get(node)
        return held[1] if held is not None else ()

    def pending_seconds(self, now: float) -> dict[str, float]:
        """volcano_queue_pending_jobs_duration_seconds as the simulator and `tidegate serve` define it: per
        queue, the seconds its waiting groups not pinned to the IDC have waited since their wait began
        (`waiting_since`), summed, a parent queue adding its children's. What an HPA scaling a virtual-kubelet
        pool reads (through a Prometheus adapter)."""
        own: dict[str, float] = {}
        for job in self.core.waiting.values() if self.core is not None else ():
            # A PodGroup with no pod yet waits for its job controller, not for nodes.
            if job.tasks and not any(pinned_to_idc(task.pod) for task in job.tasks):
                own[job.group.queue] = own.get(job.group.queue, 0.0) + max(now - waiting_since(job), 0.0)
        return QueueTree(self._queues.values()).totals(own)

    # -- reading ------------------------------------------------------------------------------------
    def _with_others_taken(self, nodes: Sequence[Node], others: Sequence[Pod]) -> list[Node]:
        """Nodes with the room that pods of other schedulers hold taken away (bound and not finished). A node
        read as before, with the same such pods on it, is the same node as before."""
        on: dict[str, list[Pod]] = {}
        for pod in others:
            if pod.node_name and pod.phase not in FINISHED:
                on.setdefault(pod.node_name, []).append(pod)
        before, squeezed = self._squeezed, {}
        out = []
        for node in nodes:
            pods = tuple(on.get(node.name, ()))
            held = before.get(node.name)
            if held is not None and held[0] is node and held[1] == pods:
                less = held[2]
            else:
                less = _less(node, sum((pod.requests for pod in pods), Resources())) if pods else node
            squeezed[node.name] = (node, pods, less)
            out.append(less)
        self._squeezed = squeezed
        return out

    def _reconcile(self, ms: ManifestSet) -> OnlineScheduler:
        ours: list[Pod] = []
        others: list[Pod] = []
        for pod in ms.pods:
            (ours if pod.scheduler_name == self.scheduler_name else others).append(pod)
        queues = {queue.name: queue for queue in ms.queues}
        asked = {name for pod in ours for name in pod.requests}
        core = self.core
        # start afresh when a queue was added or removed, or a pod asks for a resource the scheduler has no
        # column for (none of its nodes offered it when it started: such a pod waits, it does not fail a cycle)
        afresh = core is None or queues.keys() != self._queues.keys() or not asked <= core.resources
        if afresh:
            self._groups = {}
        # Groups with pods bound to a node that came or went are handed again: the scheduler accounts a bound
        # pod by its node when it takes the group (one whose node is back would otherwise hold no room).
        moved = {node.name for node in ms.nodes} ^ self._nodes.keys()
        stale = (
            {key for key, seen in self._groups.items() if any(entry[2] in moved for entry in seen.pods)}
            if moved
            else set()
        )
        declared = {group.key: group for group in ms.podgroups}
        self._declared = set(declared)
        self._written = {key: status for key, status in self._written.items() if key in self._declared}
        members: dict[str, list[Pod]] = {}
        self._bare = set()
        for pod in ours:
            key = group_key(pod)
            members.setdefault(key, []).append(pod)
            if not pod.group:
                self._bare.add(key)
        # A PodGroup with no pod yet is ours to admit, as Volcano's scheduler takes every PodGroup: its job
        # controller creates a vcjob's pods only once the group is Inqueue. One whose pods are another
        # scheduler's is that scheduler's, and one Running or done with its pods gone is left as it is.
        theirs = {group_key(pod) for pod in others if pod.group}
        for key, declared_group in declared.items():
            if key not in members and key not in theirs and declared_group.phase in WAITING_PHASES:
                members[key] = []
        groups: dict[str, _Seen] = {}
        self._queueless, self._queueless_pods = {}, {}
        expanded: dict[str, _Expanded] = {}
        handed: list[tuple[PodGroup, list[Pod]]] = []
        for key, pods in members.items():
            read = (declared.get(key), tuple(pods))
            before = self._expanded.get(key)
            held = before if before is not None and before.read == read else _expand(read, ms.priority_classes)
            expanded[key] = held
            self.problems += held.problems
            if held is before and key in self._groups and key not in stale:  # only what changed is looked at
                groups[key] = self._groups[key]
                continue
            for group, group_pods in held.groups:
                if self._changed(group, group_pods, queues, groups) or group.key in stale:
                    handed.append((group, group_pods))
        # Our running pods the scheduler does not have (their group's queue is gone, or their group could not
        # be made) still hold their nodes' room, as other schedulers' pods do.
        scheduled = {entry[0] for seen in groups.values() for entry in seen.pods}
        strays = [pod for pod in ours if pod.node_name and pod.phase not in FINISHED and pod.key not in scheduled]
        nodes = self._with_others_taken(ms.nodes, [*others, *strays])
        if afresh or core is None:
            known = core.resources if core is not None else frozenset()
            core = self.core = OnlineScheduler(nodes, list(queues.values()), self.config, resources=asked | known)
            self._queues, self._nodes = queues, {n.name: n for n in nodes}
        else:
            for name, queue in queues.items():
                if queue != self._queues[name]:
                    core.set_queue(queue)
            self._queues = queues
            current = {node.name: node for node in nodes}
            gone = [name for name in self._nodes if name not in current]
            if gone:
                core.remove_nodes(gone)
            changed = [node for name, node in current.items() if not _same_node(self._nodes.get(name), node)]
            if changed:
                core.add_nodes(changed)
            self._nodes = current
        core.set_namespaces({namespace.name: namespace.labels for namespace in ms.namespaces})
        # Every group that went or changed leaves first: a pod may have moved from one group to another.
        for key in self._groups.keys() - groups.keys():
            core.remove_group(key)
        for group, _ in handed:
            if group.key in self._groups:
                core.remove_group(group.key)
        for group, group_pods in handed:
            try:
                core.add_group(group, group_pods)
            except ValueError as exc:  # e.g. a pod listed twice: the group waits, the rest is scheduled
                self.problems.append(f"PodGroup {group.key}: not scheduled: {exc}")
                del groups[group.key]
        self._groups, self._expanded = groups, expanded
        return core

    def _changed(self, group: PodGroup, pods: list[Pod], queues: Mapping[str, Queue], groups: dict[str, _Seen]) -> bool:
        """Whether the group must be handed to the scheduler (again): it is new or changed. A group whose queue
        does not exist waits, and says so."""
        if group.queue not in queues:  # it waits for its queue, and says so
            self._queueless[group.key] = f"queue {group.queue} does not exist"
            self._queueless_pods[group.key] = [(pod.key, _uid(pod)) for pod in pods if not pod.node_name]
            return False
        seen = _seen(group, pods)
        groups[group.key] = seen
        return self._groups.get(group.key) != seen

    # -- writing ------------------------------------------------------------------------------------
    def _write(self, core: OnlineScheduler, decisions: Decisions) -> int:
        """Bindings, then evictions, then PodGroup status, each batch written concurrently. Returns how many
        writes failed."""
        failures = 0
        binds = [(bind, gpu_index(bind.gpu_indices) or "") for bind in decisions.binds]
        for (bind, _), failed in zip(binds, _each(self._bind, binds), strict=True):
            if failed:  # the pod went or was bound meanwhile: the next read says how things are
                failures += 1
                _log.warning("binding %s to %s failed: %s", bind.pod, bind.node, failed)
                key = core.group_of(bind.pod)
                if self._groups.pop(key, None) is not None:  # its group is handed afresh at the next read
                    core.remove_group(key)
        for eviction, failed in zip(decisions.evictions, _each(self._evict, decisions.evictions), strict=True):
            if failed:
                failures += 1
                _log.warning("evicting %s failed: %s", eviction.pod, failed)
        wanted = {
            status.group: (
                status.phase.value,
                "" if status.phase is PodGroupPhase.RUNNING else core.pending_reason(status.group),
            )
            for status in decisions.groups
        }
        wanted |= {key: (PodGroupPhase.PENDING.value, why) for key, why in self._queueless.items()}
        statuses = [
            (key, phase_and_reason)
            for key, phase_and_reason in wanted.items()
            if key in self._declared and self._written.get(key) != phase_and_reason  # a bare pod's group: no object
        ]
        for (key, status), failed in zip(statuses, _each(self._set_status, statuses), strict=True):
            if failed:
                failures += 1
                _log.warning("writing the status of PodGroup %s failed: %s", key, failed)
            else:
                self._written[key] = status
        return failures + self._write_nominations(core, decisions) + self._write_waiting_pods(core, wanted)

    def _write_nominations(self, core: OnlineScheduler, decisions: Decisions) -> int:
        """Pipelined pods' nominated nodes (and a GPU slice's card there), as kube-scheduler writes the node: a
        restarted or new leader reads them back and holds the room reclaimed for them (instead of evicting
        again). A nomination the scheduler dropped is cleared while its pod still waits. Returns how many
        writes failed."""
        wanted = {p.pod: (p.node, gpu_index(p.gpu_indices) or "") for p in decisions.pipelined}
        held: dict[str, tuple[str, str]] = {}  # what the API server holds now, as far as this scheduler knows
        for job in core.waiting.values():
            for task in job.tasks:
                read = (task.pod.nominated_node_name, gpu_index(task.pod.gpu_indices) or "")
                nomination = self._nominations.get(task.key, read)
                if nomination[0] and task.status is TaskStatus.PENDING:
                    held[task.key] = nomination
                    wanted.setdefault(task.key, ("", ""))
                elif nomination[0] and task.key in wanted:
                    held[task.key] = nomination
        writes = [(pod, nomination) for pod, nomination in wanted.items() if held.get(pod, ("", "")) != nomination]
        failures = 0
        for (pod, nomination), failed in zip(writes, _each(self._nominate, writes), strict=True):
            if failed:
                failures += 1
                _log.warning("writing the nominated node of pod %s failed: %s", pod, failed)
            elif nomination[0]:
                held[pod] = nomination
            else:
                held.pop(pod, None)
        self._nominations = held
        return failures

    def _write_waiting_pods(self, core: OnlineScheduler, wanted: Mapping[str, tuple[str, str]]) -> int:
        """Each pod of a waiting group that is not placed says why it waits (written when that changes, and
        again once it has been placed and waits anew). Returns how many writes failed."""
        waiting: dict[tuple[str, str], str] = {}
        for key, (_, why) in wanted.items():
            if not why:
                continue
            job = core.jobs.get(key)
            pods = (
                self._queueless_pods.get(key, [])
                if job is None
                else [(task.key, _uid(task.pod)) for task in job.tasks if task.status is TaskStatus.PENDING]
            )
            for pod in pods:
                waiting[pod] = why
        writes = [(pod, why) for pod, why in waiting.items() if self._pods_written.get(pod) != why]
        self._pods_written = {pod: why for pod, why in self._pods_written.items() if pod in waiting}
        failures = 0
        for (pod, why), failed in zip(writes, _each(self._set_unschedulable, writes), strict=True):
            if failed:
                failures += 1
                _log.warning("writing why pod %s waits failed: %s", pod[0], failed)
            else:
                self._pods_written[pod] = why
        return failures

    def _bind(self, item: tuple[Bind, str]) -> None:
        bind, cards = item
        namespace, _, name = bind.pod.partition("/")
        self.api.bind(namespace, name, bind.node, cards)

    def _evict(self, eviction: Evict) -> None:
        namespace, _, name = eviction.pod.partition("/")
        self.api.evict(namespace, name)

    def _nominate(self, item: tuple[str, tuple[str, str]]) -> None:
        pod, (node, cards) = item
        namespace, _, name = pod.partition("/")
        self.api.nominate(namespace, name, node, cards)

    def _set_unschedulable(self, item: tuple[tuple[str, str], str]) -> None:
        (pod, _), why = item
        namespace, _, name = pod.partition("/")
        self.api.set_pod_unschedulable(namespace, name, why)

    def _set_status(self, item: tuple[str, tuple[str, str]]) -> None:
        key, (phase, reason) = item
        namespace, _, name = key.partition("/")
        self.api.set_group_status(namespace, name, phase, reason)


def _each(write: Callable[[T], None], items: Sequence[T]) -> list[str]:
    """Run `write` on every item, up to WRITERS at once; per item, "" or why it failed."""

    def attempt(item: T) -> str:
        try:
            write(item)
            return ""
        except Exception as exc:  # reported per item; the others go on
            return f"{type(exc).__name__}: {exc}"

    if len(items) <= 1:
        return [attempt(item) for item in items]
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="tidegate-write") as pool:
        return list(pool.map(attempt, items))


def _uid(pod: Pod) -> str:
    meta = pod.raw.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, dict) else ""


def _same_node(before: Node | None, node: Node) -> bool:
    """Whether the scheduler would see no change: what else a node's document holds (its resourceVersion,
    the kubelet's heartbeats in its status) is not the scheduler's business."""
    return before is node or (before is not None and _scheduled_view(before) == _scheduled_view(node))


def _scheduled_view(node: Node) -> tuple[object, ...]:
    return (
        node.allocatable,
        node.labels,
        node.annotations,
        node.taints,
        node.unschedulable,
        node.ready,
        node.gpu_memory_mib,
    )


def _less(node: Node, used: Mapping[str, int]) -> Node:
    left = {name: max(amount - used.get(name, 0), 0) for name, amount in node.allocatable.items()}
    return replace(node, allocatable=Resources(left))
