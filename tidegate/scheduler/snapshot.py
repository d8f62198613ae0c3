"""What the scheduler reads (a Snapshot) and what it returns (Decisions): plain values, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tidegate.model.objects import Node, Pod, PodGroup, PodGroupPhase, Queue


@dataclass(slots=True)
class Snapshot:
    """The cluster as the scheduler sees it at `now` (seconds, from whatever clock drives it).

    `pods` holds every pod: bound ones (node_name set) count as used capacity, pending ones
    are candidates. Each pod names its PodGroup in `pod.group` (same namespace).
    """

    nodes: list[Node]
    queues: list[Queue]
    groups: list[PodGroup]
    pods: list[Pod]
    now: float = 0.0
    #: Labels of each namespace that has a Namespace object (pod affinity's namespaceSelector reads them; one
    #: without has only the label Kubernetes gives every namespace, kubernetes.io/metadata.name).
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Bind:
    """Bind a pending pod to a node (and GPU cards, for GPU pods)."""

    pod: str
    node: str
    gpu_indices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict a running pod to make room for another (preempt or reclaim)."""

    pod: str
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A pod waits for a node whose resources are being released by evictions (its nominated node),
    holding `gpu_indices` there when it asks for a GPU slice (the card its slice will share)."""

    pod: str
    node: str
    gpu_indices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """The PodGroup's phase after the session and, when it cannot run, why."""

    group: str
    queue: str
    phase: PodGroupPhase
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job with pods left unplaced and the reason a user can act on."""

    job: str
    queue: str
    reason: str


@dataclass(slots=True)
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    pipelined: list[Pipeline] = field(default_factory=list)
    groups: list[GroupStatus] = field(default_factory=list)
    pending: list[PendingJob] = field(default_factory=list)
    #: When the plugins' votes next change by the clock alone (a waiting job's sla deadline), inf for never: a
    #: caller that runs cycles only when something happens (the simulator, a quiet `tidegate kube`) runs one then.
    wake_at: float = math.inf
