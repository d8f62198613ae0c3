"""The Kubernetes and Volcano objects tidegate schedules, as typed values.

Every object keeps the document it was read from (`raw`) so unknown fields survive a round trip,
and its `source` so errors can name the file and document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tidegate.model.errors import Source
from tidegate.model.resources import CPU, EMPTY, MEMORY, Resources

DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
NODE_TYPE_LABEL = "volcano.sh/node-type"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
REGION_LABEL = "topology.kubernetes.io/region"
LATENCY_ANNOTATION = "latency.ms.local-idc"
GPU_INDEX_ANNOTATION = "volcano.sh/gpu-index"
GPU_MEMORY_ANNOTATION = "volcano.sh/gpu-memory"
PRIORITY_ANNOTATION = "volcano.sh/priority"
GROUP_NAME_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
#: On a pod (annotation, else label): may it be preempted or reclaimed ("false": never). Volcano reads it on
#: PodGroups too, and its job controller copies a vcjob's onto the job's pods.
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
#: On a Queue: the namespaces whose work it takes, comma-separated (absent: every namespace), as Kueue's
#: ClusterQueue `namespaceSelector` says which namespaces may use it; a child queue takes only what its
#: ancestors take too.
NAMESPACES_ANNOTATION = "tidegate.io/namespaces"
#: On a PodGroup (or a vcjob, whose annotations Volcano's job controller copies onto its PodGroup): the longest
#: the job should wait (a Go duration, "1h30m"), read by the sla plugin; Volcano reads the first key, then the second.
SLA_WAITING_TIME_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
#: On a Queue: its place in the drf plugin's hierarchy ("root/eng/dev") and each level's weight ("1/2/8"), read
#: when drf runs with enableHierarchy (Volcano's hdrf); tidegate's spec.parent tree is another thing, see Queue.
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
DEFAULT_MAX_RETRY = 3
#: Resources a queue capability of 0 leaves unlimited: Volcano's proportion and capacity plugins raise
#: a capability's MilliCPU and Memory at or below 0 to MaxFloat64, and keep every other quantity as given.
UNCAPPED_AT_ZERO = frozenset({CPU, MEMORY})
#: The source of an object made in memory. Source is frozen, so every such object shares this one: the
#: simulator makes a PodGroup and pods per job, and a fresh Source each was a tenth of their cost.
NO_SOURCE = Source()


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect.value}" if self.value else f"{self.key}:{self.effect.value}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: empty key with Exists matches every taint."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """The requirements of one term are ANDed; the terms of a selector are ORed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        """Kubernetes: "A null or empty node selector term matches no objects" (the scheduler's LabelIndex
        agrees)."""
        return bool(self.match_expressions) and all(req.matches(labels) for req in self.match_expressions)


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()

    def required_matches(self, labels: dict[str, str]) -> bool:
        if self.required is None:
            return True
        return any(term.matches(labels) for term in self.required)


#: The label Kubernetes (1.21 on) gives every namespace: its name, so a namespaceSelector can pick namespaces by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels and matchExpressions ANDed; an empty selector matches everything (a
    missing one, None where it is optional, matches nothing, as metav1.LabelSelectorAsSelector reads them)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels) and all(
            req.matches(labels) for req in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One required pod (anti-)affinity term, as written: the pods it selects (label_selector; None selects none),
    in which namespaces (`namespaces`, `namespace_selector`: both empty mean the pod's own namespace), and the
    node label whose values are the topology domains. matchLabelKeys and mismatchLabelKeys add `key In (value)`
    and `key NotIn (value)` for the pod's own label values, as the API server does when it creates the pod."""

    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's required inter-pod terms: podAffinity (to be in a domain with pods each term selects) and
    podAntiAffinity (not in a domain with any pod a term selects). Preferred terms are not scheduled on."""

    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()


@dataclass(slots=True)
class Namespace:
    """A v1 Namespace, for namespaceSelectors in pod (anti-)affinity: its labels (with NAMESPACE_NAME_LABEL)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Node:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = EMPTY
    unschedulable: bool = False
    ready: bool = True
    #: Memory of each GPU card in MiB (cards share volcano.sh/gpu-memory evenly), or () without GPUs.
    gpu_memory_mib: tuple[int, ...] = ()
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_cloud(self) -> bool:
        return self.labels.get(NODE_TYPE_LABEL, "").startswith("cloud")


class PreemptionPolicy(StrEnum):
    """A pod's spec.preemptionPolicy (Kubernetes sets it from the pod's PriorityClass): Never pods wait for
    room and preempt no one."""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


#: What Go's strconv.ParseBool reads, as Volcano reads volcano.sh/preemptable.
_GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def preemptable_setting(annotations: dict[str, str], labels: dict[str, str]) -> tuple[bool | None, str]:
    """volcano.sh/preemptable as Volcano reads it (api.GetPodPreemptable, JobInfo.extractPreemptable): the
    annotation if there is one, else the label; None when neither is set. A value Go's ParseBool does not
    read counts as false; the second item then says where it was ("" otherwise)."""
    for where, values in (("annotations", annotations), ("labels", labels)):
        if PREEMPTABLE_KEY in values:
            value = _GO_BOOLS.get(values[PREEMPTABLE_KEY])
            if value is None:
                return False, f"metadata.{where}.{PREEMPTABLE_KEY}"
            return value, ""
    return None, ""


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(slots=True)
class Pod:
    name: str
    namespace: str = DEFAULT_NAMESPACE
    requests: Resources = EMPTY
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: NodeAffinity | None = None
    #: Required pod affinity and anti-affinity (None when the pod has neither).
    pod_affinity: PodAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    #: spec.preemptionPolicy as admitted: the PriorityClass's (the pod's own when no class applies).
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    #: volcano.sh/preemptable (`preemptable_setting`; unset means true): false, and no preempt or reclaim
    #: evicts it.
    preemptable: bool = True
    scheduler_name: str = "volcano"
    node_name: str = ""
    #: status.nominatedNodeName: the node a pipelined pod waits on while its victims leave.
    nominated_node_name: str = ""
    phase: PodPhase = PodPhase.PENDING
    #: metadata.deletionTimestamp is set: the pod is terminating. Bound, it still holds its node's room
    #: until it is gone, but it is releasing it (Volcano's Releasing): no quota, no victim.
    deleting: bool = False
    #: The PodGroup this pod belongs to ("" for a bare pod) and its task inside a vcjob.
    group: str = ""
    task: str = ""
    #: GPU cards the pod holds on its node (shared slice or whole cards).
    gpu_indices: tuple[int, ...] = ()
    #: Time the pod was created, in seconds; orders tasks and jobs like a creation timestamp.
    created: float = 0.0
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodGroupPhase(StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


@dataclass(slots=True)
class PodGroup:
    name: str
    namespace: str = DEFAULT_NAMESPACE
    queue: str = DEFAULT_QUEUE
    min_member: int = 1
    min_resources: Resources = EMPTY
    min_task_member: dict[str, int] = field(default_factory=dict)
    priority_class_name: str = ""
    #: priority_class_name resolved to its value (by the loader or expand_job); orders groups like Volcano.
    priority: int = 0
    phase: PodGroupPhase = PodGroupPhase.PENDING
    #: Node affinity written on the PodGroup spec (a tidegate extension applied to the group's pods).
    affinity: NodeAffinity | None = None
    #: volcano.sh/preemptable on the PodGroup (`preemptable_setting`), None when not set: set to false, none
    #: of its pods is evicted (as Volcano's gang eviction actions read it).
    preemptable: bool | None = None
    created: float = 0.0
    #: The sla-waiting-time annotation in seconds (SLA_WAITING_TIME_ANNOTATIONS), None when absent.
    waiting_time: float | None = None
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class QueueState(StrEnum):
    OPEN = "Open"
    CLOSING = "Closing"
    CLOSED = "Closed"


@dataclass(slots=True)
class Queue:
    name: str
    weight: int = 1
    capability: Resources | None = None
    deserved: Resources | None = None
    guarantee: Resources = EMPTY
    reclaimable: bool = True
    parent: str = ""
    priority: int = 0
    state: QueueState = QueueState.OPEN
    #: The namespaces whose work the queue takes (NAMESPACES_ANNOTATION); empty: every namespace.
    namespaces: tuple[str, ...] = ()
    #: Its path in hdrf's tree from "root" (HIERARCHY_ANNOTATION) and each level's weight, () when not given.
    hierarchy: tuple[str, ...] = ()
    hierarchy_weights: tuple[float, ...] = ()
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    def refuses(self, namespace: str) -> str:
        """Why the queue itself does not take work from the namespace ("" when it does)."""
        if not self.namespaces or namespace in self.namespaces:
            return ""
        return f"queue {self.name} takes work from namespace(s) {', '.join(self.namespaces)} only, not {namespace}"

    def capability_limits(self) -> dict[str, int]:
        """The resources spec.capability caps, and at what, as Volcano reads it: a named resource is
        capped at its quantity, 0 included (`nvidia.com/gpu: "0"`: no GPUs at all), except cpu and memory,
        where 0 means unlimited (UNCAPPED_AT_ZERO); a resource the list does not name is unlimited."""
        if self.capability is None:
            return {}
        return {name: amount for name, amount in self.capability.items() if amount > 0 or name not in UNCAPPED_AT_ZERO}


@dataclass(slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    #: What pods of this class get as spec.preemptionPolicy (Kubernetes' admission sets it).
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)


class JobEvent(StrEnum):
    ANY = "*"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    POD_PENDING = "PodPending"
    JOB_UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    JOB_UPDATED = "JobUpdated"


class JobAction(StrEnum):
    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    action: JobAction
    events: tuple[JobEvent, ...] = ()
    exit_code: int | None = None
    timeout_s: float | None = None


@dataclass(slots=True)
class TaskSpec:
    name: str
    replicas: int
    template: Pod
    policies: tuple[LifecyclePolicy, ...] = ()
    min_available: int | None = None


@dataclass(slots=True)
class Job:
    """A Volcano batch.volcano.sh/v1alpha1 Job (vcjob)."""

    name: str
    namespace: str = DEFAULT_NAMESPACE
    queue: str = DEFAULT_QUEUE
    tasks: tuple[TaskSpec, ...] = ()
    min_available: int | None = None
    max_retry: int = DEFAULT_MAX_RETRY
    priority_class_name: str = ""
    policies: tuple[LifecyclePolicy, ...] = ()
    plugins: dict[str, list[str]] = field(default_factory=dict)
    scheduler_name: str = "volcano"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    created: float = 0.0
    #: The job's sla-waiting-time annotation in seconds, which its PodGroup takes (None when absent).
    waiting_time: float | None = None
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def total_replicas(self) -> int:
        return sum(task.replicas for task in self.tasks)


#: The per-plugin switches of volcano-scheduler.conf, spelt as Volcano's PluginOption reads them
#: (pkg/scheduler/conf/scheduler_conf.go: some are enable..., some enabled...). Absent means on, except
#: enableHierarchy and enabledClusterOrder, which Volcano leaves off unless set (plugins.ApplyPluginConfDefaults).
PLUGIN_SWITCHES = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: The switches the tier entry sets (PLUGIN_SWITCHES), and to what; a switch not listed is at its default.
    switches: dict[str, bool] = field(default_factory=dict)

    def enabled(self, switch: str) -> bool:
        """Volcano's reading of a switch: on unless set to false (enableHierarchy and enabledClusterOrder:
        off unless set to true)."""
        return self.switches.get(switch, switch not in SWITCHES_OFF_BY_DEFAULT)


#: Switches Volcano's defaulting leaves unset, so that they read as off.
SWITCHES_OFF_BY_DEFAULT = frozenset({"enableHierarchy", "enabledClusterOrder"})


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


DEFAULT_ACTIONS = ("enqueue", "allocate", "backfill")
DEFAULT_TIERS = (
    Tier((PluginOption("priority"), PluginOption("gang"))),
    Tier(
        (
            PluginOption("drf"),
            PluginOption("predicates"),
            PluginOption("proportion"),
            PluginOption("nodeorder"),
            PluginOption("binpack"),
            PluginOption("gpushare"),
        )
    ),
)


@dataclass(slots=True)
class SchedulerConfiguration:
    """volcano-scheduler.conf: the actions to run in order and tiers of plugins with arguments."""

    name: str = "default"
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    tiers: tuple[Tier, ...] = DEFAULT_TIERS
    source: Source = NO_SOURCE
    raw: dict[str, Any] = field(default_factory=dict)

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for option in tier.plugins:
                if option.name == name:
                    return option
        return None
