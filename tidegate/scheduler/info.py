"""Per-session views of tasks (pods), jobs (PodGroups) and queues, with their running counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from tidegate.model.objects import Pod, PodGroup, PodGroupPhase, Queue
from tidegate.model.resources import GPU_MEMORY, GPU_MILLI, NVIDIA_GPU
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.refusal import Refusal


class TaskStatus(Enum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"  # placed in this session, bound when the session commits
    PIPELINED = "Pipelined"  # placed on resources still being released
    RUNNING = "Running"  # bound before this session
    RELEASING = "Releasing"  # evicted in this session
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    # Members are singletons compared by identity; Enum's own __hash__ (hash of the name, in Python) is
    # slow enough to show in profiles, as statuses key every job's counts.
    __hash__ = object.__hash__


# Plain names for hot code: reading an enum member through its class costs ~0.2 us on Python 3.11.
_PENDING = TaskStatus.PENDING
_ALLOCATED = TaskStatus.ALLOCATED
_PIPELINED = TaskStatus.PIPELINED
_RUNNING = TaskStatus.RUNNING
_SUCCEEDED = TaskStatus.SUCCEEDED

#: Statuses that hold resources on a node and count towards a gang's readiness.
READY_STATUSES = frozenset({TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED})
#: Statuses that count as a job's valid members for gang scheduling.
VALID_STATUSES = frozenset(
    {TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED}
)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a pod asks of GPU cards: whole cards, or a slice of one card (MiB and/or thousandths)."""

    whole: int = 0
    mem_mib: int = 0
    milli: int = 0

    @property
    def shared(self) -> bool:
        return self.whole == 0 and (self.mem_mib > 0 or self.milli > 0)

    @property
    def any(self) -> bool:
        return self.whole > 0 or self.mem_mib > 0 or self.milli > 0

    @classmethod
    def of(cls, pod: Pod) -> GpuRequest:
        mem, milli = pod.requests[GPU_MEMORY] // 1000, pod.requests[GPU_MILLI] // 1000
        whole = 0 if (mem or milli) else -(-pod.requests[NVIDIA_GPU] // 1000)
        return cls(whole=whole, mem_mib=mem, milli=milli)


@dataclass(eq=False, slots=True)
class TaskInfo:
    pod: Pod
    job: JobInfo
    request: IntArray
    gpu: GpuRequest
    #: Pods with equal shape keys pass the same filters and get the same scores.
    shape: tuple[object, ...]
    status: TaskStatus = TaskStatus.PENDING
    node: int = -1
    cards: tuple[int, ...] = ()
    #: The request as Python ints (shared by equal requests), for scalar code that must not pay numpy's per-call cost.
    request_list: tuple[int, ...] = ()
    #: Small integer naming the shape within the session (index of its placement cache).
    shape_id: int = -1
    #: (column, amount) for every resource the request names, in column order (shared by equal requests).
    request_nonzero: tuple[tuple[int, int], ...] = ()
    #: The pod asks for nothing but its pod slot (no resource requests): backfill's to place, not allocate's.
    best_effort: bool = False

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def priority(self) -> int:
        return self.pod.priority


@dataclass(eq=False, slots=True)
class JobInfo:
    """A PodGroup and its pods: the unit gang scheduling works on."""

    group: PodGroup
    queue: QueueInfo
    min_resources: IntArray
    #: The PodGroup's priority (its priorityClassName's value), as Volcano's job priority; never its pods'.
    priority: int
    tasks: list[TaskInfo] = field(default_factory=list)
    allocated: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    counts: dict[TaskStatus, int] = field(default_factory=dict)
    phase: PodGroupPhase = PodGroupPhase.PENDING
    #: Why the job could not get (all of) its pods placed this session, for the user.
    reason: str = ""
    #: minResources is covered by its pods' requests (then a fully placed gang reserves nothing more).
    min_within_requests: bool = True
    #: `Session.freed` when allocate (enqueue) last failed the job: while nothing is freed it would fail
    #: again (placements and admissions only take capacity and quota), so cycles skip it.
    blocked_at: int = -1
    enqueue_blocked_at: int = -1
    #: Bumped by every pod status change (and so every change of `allocated`): what job order reads.
    version: int = 0
    #: `(version, node table generation, job key)` of the last `Session.job_key`.
    key_memo: tuple[int, int, tuple[object, ...]] | None = None
    #: `(version, reason)` of the last `Session.job_invalid_reason`.
    valid_memo: tuple[int, Refusal | None] | None = None
    #: `(version, phase, reserved)`: what enqueue last found the job's minResources still reserve.
    reserved_memo: tuple[int, PodGroupPhase, IntArray | None] | None = None
    #: Enqueue has judged the job since its queue's admission state last changed (`QueueInfo.admission_state`).
    enqueue_seen: bool = False
    #: `(node table generation, pending pods)` when allocate found none of its pending pods fits any
    #: node even empty (`Session.hopeless`).
    hopeless_at: tuple[int, int] = (-1, -1)
    #: Per eviction action (preempt, reclaim): `(Session.freed, Session.placed)` when it last failed the
    #: job; while neither moved, no victim or room appeared, so the action skips the job.
    evict_blocked_at: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def min_available(self) -> int:
        return self.group.min_member

    def count(self, *statuses: TaskStatus) -> int:
        return sum(self.counts.get(s, 0) for s in statuses)

    @property
    def ready_num(self) -> int:
        counts = self.counts
        return counts.get(_ALLOCATED, 0) + counts.get(_RUNNING, 0) + counts.get(_SUCCEEDED, 0)

    @property
    def waiting_num(self) -> int:
        return self.counts.get(_PIPELINED, 0)

    @property
    def valid_num(self) -> int:
        counts = self.counts
        return (
            counts.get(_PENDING, 0)
            + counts.get(_ALLOCATED, 0)
            + counts.get(_PIPELINED, 0)
            + counts.get(_RUNNING, 0)
            + counts.get(_SUCCEEDED, 0)
        )

    def pending_tasks(self) -> list[TaskInfo]:
        return [t for t in self.tasks if t.status is _PENDING]

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        self.version += 1
        self.counts[task.status] -= 1
        self.counts[status] = self.counts.get(status, 0) + 1
        task.status = status


@dataclass(eq=False, slots=True)
class QueueInfo:
    queue: Queue
    #: Ancestors from the root down to the parent (empty for root and flat queues).
    ancestors: list[QueueInfo] = field(default_factory=list)
    children: list[QueueInfo] = field(default_factory=list)
    allocated: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    request: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inqueue: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: Jobs the actions look at: all of them in a one-off session; in a long-lived one, settled jobs
    #: (fully placed gangs that reserve nothing) wait in `settled` until something happens to them.
    jobs: list[JobInfo] = field(default_factory=list)
    settled: dict[int, JobInfo] = field(default_factory=dict)
    #: What admission votes read for this queue when enqueue last judged all its waiting jobs.
    admission_state: tuple[object, ...] = ()

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def is_leaf(self) -> bool:
        return not self.children
