"""Terse builders for scheduler tests: nodes, queues, gangs of pods, configurations, and a cluster
that applies Decisions so the next cycle can be scheduled (like Volcano's test util.Build* helpers).

Quantities are written as users write them ({"cpu": "500m", "nvidia.com/gpu": 1}); everything is
converted through the model's own parsers so tests exercise the same canonical units as manifests.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidegate.model.objects import (
    DEFAULT_NAMESPACE,
    NODE_TYPE_LABEL,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PluginOption,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PreferredSchedulingTerm,
    Queue,
    SchedulerConfiguration,
    Taint,
    TaintEffect,
    Tier,
    Toleration,
)
from tidegate.model.resources import GPU_MEMORY, GPU_NUMBER, NVIDIA_GPU, Resources
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Decisions, Snapshot

Spec = Mapping[str, object]


def res(spec: Spec | None = None, **named: object) -> Resources:
    """Resources from a user-style map: res({"volcano.sh/gpu-memory": 1024}) or res(cpu=2, memory="4Gi", gpu=1),
    where the keywords gpu and gpu_mem stand for nvidia.com/gpu and volcano.sh/gpu-memory (MiB)."""
    out: dict[str, object] = dict(spec or {})
    for key, value in named.items():
        out[{"gpu": NVIDIA_GPU, "gpu_mem": GPU_MEMORY}.get(key, key)] = value
    return Resources.parse(out, "test")


# -- nodes ---------------------------------------------------------------------------------------------
def node(
    name: str,
    cpu: object = 32,
    memory: object = "256Gi",
    gpus: int = 0,
    gpu_mem_mib: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint | str] = (),
    pods: int | None = None,
    extra: Spec | None = None,
) -> Node:
    """A node with `gpus` cards; with gpu_mem_mib each card has that much memory (volcano.sh/gpu-memory
    advertises the total, volcano.sh/gpu-number the card count, as the Volcano device plugin does)."""
    spec: dict[str, object] = {"cpu": cpu, "memory": memory, **(extra or {})}
    if gpus:
        spec[NVIDIA_GPU] = gpus
        if gpu_mem_mib:
            spec[GPU_MEMORY] = gpus * gpu_mem_mib
            spec[GPU_NUMBER] = gpus
    if pods is not None:
        spec["pods"] = pods
    return Node(
        name=name,
        allocatable=Resources.parse(spec, f"node {name}"),
        labels=dict(labels or {}),
        taints=tuple(taint(t) if isinstance(t, str) else t for t in taints),
        gpu_memory_mib=(gpu_mem_mib,) * gpus if gpu_mem_mib else (),
    )


def nodes(prefix: str, count: int, **kwargs: Any) -> list[Node]:
    """`count` identical nodes named prefix0, prefix1, ..."""
    return [node(f"{prefix}{i}", **kwargs) for i in range(count)]


def idc_node(name: str, **kwargs: Any) -> Node:
    labels = {NODE_TYPE_LABEL: "idc", **dict(kwargs.pop("labels", None) or {})}
    return node(name, labels=labels, **kwargs)


def cloud_node(name: str, **kwargs: Any) -> Node:
    """A cloud spot node, labelled volcano.sh/node-type=cloud-spot and tainted cloud.provider=aliyun:NoSchedule."""
    labels = {NODE_TYPE_LABEL: "cloud-spot", **dict(kwargs.pop("labels", None) or {})}
    return node(name, labels=labels, taints=[CLOUD_TAINT], **kwargs)


def taint(text: str) -> Taint:
    """'key=value:Effect' or 'key:Effect'."""
    body, _, effect = text.rpartition(":")
    key, _, value = body.partition("=")
    return Taint(key, value, TaintEffect(effect))


CLOUD_TAINT = taint("cloud.provider=aliyun:NoSchedule")
TOLERATE_CLOUD = Toleration(key="cloud.provider", operator="Equal", value="aliyun", effect=TaintEffect.NO_SCHEDULE)


# -- affinity ------------------------------------------------------------------------------------------
def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, operator, tuple(values))


def required(*terms: Iterable[NodeSelectorRequirement]) -> NodeAffinity:
    """Required node affinity: terms ORed, the requirements of a term ANDed."""
    return NodeAffinity(required=tuple(NodeSelectorTerm(tuple(t)) for t in terms))


def preferred(*weighted: tuple[int, Iterable[NodeSelectorRequirement]]) -> NodeAffinity:
    return NodeAffinity(
        preferred=tuple(PreferredSchedulingTerm(w, NodeSelectorTerm(tuple(reqs))) for w, reqs in weighted)
    )


PREFER_IDC = preferred((100, [req(NODE_TYPE_LABEL, "NotIn", "cloud-spot")]))


# -- queues --------------------------------------------------------------------------------------------
def queue(
    name: str,
    weight: int = 1,
    capability: Spec | None = None,
    deserved: Spec | None = None,
    guarantee: Spec | None = None,
    parent: str = "",
    reclaimable: bool = True,
    priority: int = 0,
) -> Queue:
    return Queue(
        name=name,
        weight=weight,
        # Zeros kept, as the manifest loader does: a declared nvidia.com/gpu 0 caps the queue at no GPUs.
        capability=None if capability is None else Resources.parse(dict(capability), "test", keep_zeros=True),
        deserved=None if deserved is None else res(deserved),
        guarantee=res(guarantee),
        parent=parent,
        reclaimable=reclaimable,
        priority=priority,
    )


# -- jobs ----------------------------------------------------------------------------------------------
@dataclass
class Job:
    """A PodGroup and its pods."""

    group: PodGroup
    pods: list[Pod]

    @property
    def key(self) -> str:
        return self.group.key

    def pod_keys(self) -> list[str]:
        return [p.key for p in self.pods]


def job(
    name: str,
    queue: str = "default",
    replicas: int = 1,
    requests: Spec | Resources | None = None,
    min_member: int | None = None,
    min_resources: Spec | None = None,
    priority: int = 0,
    priority_class: str = "",
    phase: PodGroupPhase = PodGroupPhase.PENDING,
    running_on: Iterable[str] = (),
    gpu_indices: Iterable[tuple[int, ...]] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: NodeAffinity | None = None,
    tolerations: Iterable[Toleration] = (),
    created: float = 0.0,
    namespace: str = DEFAULT_NAMESPACE,
) -> Job:
    """A gang of `replicas` identical pods named name-0, name-1, ... (minMember defaults to replicas).

    The PodGroup and its pods share the priority (class), as a vcjob's do when its templates name none:
    the group's is the job's priority, the pods' their tasks'. running_on lists the nodes of the first
    pods, which are then Running there (with gpu_indices).
    """
    request = requests if isinstance(requests, Resources) else res(requests)
    group = PodGroup(
        name=name,
        namespace=namespace,
        queue=queue,
        min_member=replicas if min_member is None else min_member,
        min_resources=res(min_resources),
        priority_class_name=priority_class,
        priority=priority,
        phase=phase,
        created=created,
    )
    hosts = list(running_on)
    cards = list(gpu_indices)
    pods = []
    for i in range(replicas):
        pods.append(
            Pod(
                name=f"{name}-{i}",
                namespace=namespace,
                requests=request,
                node_selector=dict(node_selector or {}),
                affinity=affinity,
                tolerations=tuple(tolerations),
                priority=priority,
                priority_class_name=priority_class,
                node_name=hosts[i] if i < len(hosts) else "",
                phase=PodPhase.RUNNING if i < len(hosts) else PodPhase.PENDING,
                group=name,
                gpu_indices=cards[i] if i < len(cards) else (),
                created=created,
            )
        )
    return Job(group, pods)


def resolve_priorities(jobs: Iterable[Job], classes: Mapping[str, int]) -> None:
    """Resolve PriorityClass names onto pod.priority, as the API server's admission plugin does, and onto
    the PodGroup's priority, as Volcano's scheduler cache does."""
    for j in jobs:
        if j.group.priority_class_name:
            j.group.priority = classes[j.group.priority_class_name]
        for pod in j.pods:
            if pod.priority_class_name:
                pod.priority = classes[pod.priority_class_name]


# -- configuration -------------------------------------------------------------------------------------
def conf(actions: str, *tiers: str, **arguments: Mapping[str, object]) -> SchedulerConfiguration:
    """conf("enqueue, allocate", "priority, gang", "predicates, proportion") with plugin arguments by name."""
    return SchedulerConfiguration(
        actions=tuple(a.strip() for a in actions.split(",")),
        tiers=tuple(
            Tier(tuple(PluginOption(p.strip(), dict(arguments.get(p.strip(), {}))) for p in t.split(",")))
            for t in tiers
        ),
    )


PROPORTION = conf(
    "enqueue, allocate, backfill",
    "priority, gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
)
CAPACITY = conf(
    "enqueue, allocate, backfill",
    "priority, gang",
    "drf, predicates, capacity, nodeorder, binpack, gpushare",
)


# -- a cluster that lives across cycles ----------------------------------------------------------------
@dataclass
class Cluster:
    nodes: list[Node] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    now: float = 0.0

    def snapshot(self) -> Snapshot:
        """A deep copy, so a scheduler cycle never sees (or leaves) shared mutable state."""
        return Snapshot(
            nodes=copy.deepcopy(self.nodes),
            queues=copy.deepcopy(self.queues),
            groups=copy.deepcopy([j.group for j in self.jobs]),
            pods=copy.deepcopy([p for j in self.jobs for p in j.pods]),
            now=self.now,
        )

    def schedule(self, config: SchedulerConfiguration | None = None) -> Decisions:
        return schedule(self.snapshot(), config)

    def pod(self, key: str) -> Pod:
        for j in self.jobs:
            for p in j.pods:
                if p.key == key:
                    return p
        raise KeyError(key)

    def apply(self, decisions: Decisions) -> None:
        """What the adapters do: binds start pods, evicted pods leave their node (and go back to Pending,
        as a vcjob controller recreates them), group phases follow the scheduler's verdict."""
        for bind in decisions.binds:
            pod = self.pod(bind.pod)
            pod.node_name, pod.phase, pod.gpu_indices = bind.node, PodPhase.RUNNING, bind.gpu_indices
        for evict in decisions.evictions:
            pod = self.pod(evict.pod)
            pod.node_name, pod.phase, pod.gpu_indices = "", PodPhase.PENDING, ()
        phases = {s.group: s.phase for s in decisions.groups}
        for j in self.jobs:
            j.group.phase = phases.get(j.key, j.group.phase)


# -- reading decisions ---------------------------------------------------------------------------------
def bound(decisions: Decisions) -> dict[str, str]:
    """Pod key -> node name for every Bind."""
    return {b.pod: b.node for b in decisions.binds}


def evicted(decisions: Decisions) -> list[str]:
    return sorted(e.pod for e in decisions.evictions)


def pipelined(decisions: Decisions) -> dict[str, str]:
    return {p.pod: p.node for p in decisions.pipelined}


def pending_reason(decisions: Decisions, job_key: str) -> str:
    for p in decisions.pending:
        if p.job == job_key:
            return p.reason
    raise AssertionError(f"{job_key} is not pending; pending: {[p.job for p in decisions.pending]}")


def phase_of(decisions: Decisions, job_key: str) -> PodGroupPhase:
    for s in decisions.groups:
        if s.group == job_key:
            return s.phase
    raise KeyError(job_key)


def count_by_prefix(pod_keys: Iterable[str], *prefixes: str) -> dict[str, int]:
    """How many of the pod keys start with each prefix ("default/a-" ...)."""
    keys = list(pod_keys)
    return {prefix: sum(1 for k in keys if k.startswith(prefix)) for prefix in prefixes}
