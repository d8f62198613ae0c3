"""Per-session views of tasks (pods), jobs (PodGroups) and queues, with their running counts."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

import numpy as np

from tidegate.model.objects import Pod, PodGroup, PodGroupPhase, Queue
from tidegate.model.resources import GPU_MEMORY, GPU_MILLI, NVIDIA_GPU
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.pending import Cover, PendingJobs
from tidegate.scheduler.refusal import Refusal

#: `(version, phase, reserved)`: what enqueue last found a job's minResources still reserve (None: nothing).
ReservedMemo = tuple[int, PodGroupPhase, IntArray | None]
_V = TypeVar("_V")


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
_RELEASING = TaskStatus.RELEASING
_WAITING = PodGroupPhase.PENDING

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
    #: The pod's key (`Pod.key`), made once: a pod's name and namespace never change.
    key: str = ""

    @property
    def shape_key(self) -> object:
        """What per-shape memos key the task by: its shape's number when the session gave it one (an int
        hashes for free; the shape, a tuple of dataclasses, is hashed afresh each time), else the shape."""
        return self.shape_id if self.shape_id >= 0 else self.shape

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
    #: Why the job could not get (all of) its pods placed this session, for the user (read it as `reason`:
    #: a waiting job past where enqueue stopped reads it from its queue's record, see pending.py).
    reason_: str = ""
    #: minResources is covered by its pods' requests (then a fully placed gang reserves nothing more).
    min_within_requests: bool = True
    #: `Session.freed` when allocate (enqueue) last failed the job: while nothing is freed it would fail
    #: again (placements and admissions only take capacity and quota), so cycles skip it.
    blocked_at: int = -1
    enqueue_blocked_raw: int = -1
    #: Bumped by every pod status change (and so every change of `allocated`): what job order reads.
    version: int = 0
    #: `(version, pending pods, one pending pod of each shape in the turn's order, their shape keys)` when
    #: allocate's last turn for the job placed nothing because no node took any of those shapes (no vote
    #: refused it): the next turn asks only those again (`Allocate.allocate_turn`).
    no_node_memo: tuple[int, int, list[TaskInfo], tuple[object, ...]] | None = None
    #: `(version, explanation, reason written)` of the last such turn's end: while they hold, the next one
    #: writes the same (`Allocate._no_node`).
    no_node_said: tuple[int, str, str] | None = None
    #: `(version, node table generation, job key)` of the last `Session.job_key` (generation -1: any table).
    key_memo: tuple[int, int, tuple[object, ...]] | None = None
    #: `(version, reason)` of the last `Session.job_invalid_reason`.
    valid_memo: tuple[int, Refusal | None] | None = None
    #: `(version, phase, reserved)`: what enqueue last found the job's minResources still reserve.
    reserved_memo: ReservedMemo | None = None
    #: Enqueue has judged the job since its queue's admission state last changed (`QueueInfo.admission_state`;
    #: read it as `enqueue_seen`, like `reason`).
    enqueue_seen_raw: bool = False
    #: `(node table generation, pending pods)` when allocate found none of its pending pods fits any
    #: node even empty (`Session.hopeless`).
    hopeless_at: tuple[int, int] = (-1, -1)
    #: Per eviction action (preempt, reclaim): `(Session.freed, Session.placed)` when it last failed the
    #: job; while neither moved, no victim or room appeared, so the action skips the job.
    evict_blocked_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Per eviction action: when its attempt for the job failed on its queue's votes alone (no node or victim
    #: looked at), what those votes read (`eviction.VoteMemo`); the action skips the job while it holds.
    evict_refused: dict[str, tuple[int, int, int, list[int]]] = field(default_factory=dict)
    #: minResources as bytes (what enqueue's memos are keyed by).
    min_bytes: bytes = b""
    #: The queue's `PendingJobs.tick` when the job started waiting, and when it was last written to (a
    #: queue's record of refusals covers only jobs stamped before it and not written to since).
    seq: int = 0
    touched: int = 0
    #: Position of the job in the session's registration order (`Session.jobs` is sorted by it).
    order: int = 0
    #: Its job key in its queue's order of waiting jobs (`PendingJobs.entries`).
    entry_key: tuple[object, ...] = ()
    #: The PodGroup's key (`PodGroup.key`), made once: a group's name and namespace never change.
    key: str = ""

    # -- what enqueue wrote, possibly through the queue's record (pending.py) ------------------------------
    def _cover(self) -> Cover | None:
        cover = self.queue.pending.cover
        if cover is not None and self.phase is _WAITING and self.seq < cover.seq and self.touched < cover.seq:
            return cover
        return None

    def materialize(self) -> None:
        """What the queue's record says of the job becomes its own (before anything writes to it)."""
        cover = self._cover()
        if cover is not None:
            self.reason_ = cover.reason_for(self)
            self.enqueue_seen_raw = True
            self.enqueue_blocked_raw = cover.freed
            self.touched = self.queue.pending.stamp()

    def _touch(self) -> PendingJobs:
        pending = self.queue.pending
        if pending.cover is not None:
            self.materialize()
        self.touched = pending.stamp()
        return pending

    def judged(self) -> PendingJobs:
        """Enqueue judges the waiting job now (`enqueue_seen`); returns its queue's waiting jobs."""
        pending = self._touch()
        self.enqueue_seen_raw = True
        pending.unseen.pop(id(self), None)
        return pending

    # A job no longer waiting never waits again: no record covers it, and nothing else need be kept.
    @property
    def reason(self) -> str:
        if self.phase is _WAITING:
            cover = self.queue.pending.cover
            if cover is not None and self.seq < cover.seq and self.touched < cover.seq:
                return cover.reason_for(self)
        return self.reason_

    @reason.setter
    def reason(self, value: str) -> None:
        if self.phase is _WAITING:
            self._touch()
        self.reason_ = value

    @property
    def enqueue_seen(self) -> bool:
        return True if self._cover() is not None else self.enqueue_seen_raw

    @enqueue_seen.setter
    def enqueue_seen(self, value: bool) -> None:
        if self.phase is not _WAITING:
            self.enqueue_seen_raw = value
            return
        pending = self._touch()
        self.enqueue_seen_raw = value
        if value:
            pending.unseen.pop(id(self), None)
        elif id(self) in pending.jobs:
            pending.unseen[id(self)] = self

    @property
    def enqueue_blocked_at(self) -> int:
        cover = self._cover()
        return cover.freed if cover is not None else self.enqueue_blocked_raw

    @enqueue_blocked_at.setter
    def enqueue_blocked_at(self, value: int) -> None:
        if self.phase is not _WAITING:
            self.enqueue_blocked_raw = value
            return
        pending = self._touch()
        old, self.enqueue_blocked_raw = self.enqueue_blocked_raw, value
        if id(self) in pending.jobs:
            pending.note_blocked(old, value)

    @property
    def min_available(self) -> int:
        return self.group.min_member

    def count(self, *statuses: TaskStatus) -> int:
        return sum(self.counts.get(s, 0) for s in statuses)

    @property
    def ready_num(self) -> int:
        counts = self.counts  # every status has its count (`Session` makes the job)
        return counts[_ALLOCATED] + counts[_RUNNING] + counts[_SUCCEEDED]

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
        if self.phase is _WAITING:  # its job key may move: its queue's waiting jobs are sorted again
            self.materialize()
            self.queue.pending.dirty = True
        was = task.status
        running = self.queue.running  # None when no action evicts (then nothing is kept)
        if running is not None and (was is _RUNNING or was is _RELEASING):
            running.discard(task)
        self.counts[was] -= 1
        self.counts[status] = self.counts.get(status, 0) + 1
        task.status = status
        if running is not None and (status is _RUNNING or status is _RELEASING):
            running.add(task)


@dataclass(slots=True)
class RunningIndex:
    """The running pods preempt and reclaim may evict, by node row, kept as pods change status (one per
    session, shared by its queues): not those marked `volcano.sh/preemptable: false` (as Volcano's preempt
    and reclaim skip a task that is not Preemptable), nor those of a PodGroup so marked. A cycle that looks
    for victims then starts from it instead of a pass over every pod of the session."""

    rows: dict[int, dict[int, TaskInfo]] = field(default_factory=dict)
    #: Per row of `rows`, how many of its pods each queue has (by id of QueueInfo): reclaim passes a node none
    #: of whose queues may give (`eviction.evict_for`) without looking at its pods.
    queues: dict[int, dict[int, int]] = field(default_factory=dict)
    where: dict[int, int] = field(default_factory=dict)
    #: The pods being released (evicted, or terminating), by node: what a node gets back before a victim's
    #: own pods leave (`eviction._cards_after_leaving`).
    releasing: dict[int, dict[int, TaskInfo]] = field(default_factory=dict)
    #: `rows`' keys in order, made when first asked, then kept in order as a node gains its first pod here or
    #: loses its last (None until asked, and after rows are renumbered).
    ordered: list[int] | None = None
    #: `ordered` was handed out (`sorted_rows`): the next change works on a copy, leaving the caller's as it was.
    lent: bool = False

    def sorted_rows(self) -> list[int]:
        """The rows with running pods, ascending (do not modify: it is shared until the rows change)."""
        found = self.ordered
        if found is None:
            found = self.ordered = sorted(self.rows)
        self.lent = True
        return found

    def _editable_order(self) -> list[int] | None:
        """`ordered` to change in place (a copy of it once it was handed out), or None when not made."""
        if self.ordered is not None and self.lent:
            self.ordered = self.ordered[:]
            self.lent = False
        return self.ordered

    def _row_came(self, row: int) -> None:
        """`row` gained its first pod in `rows`: `ordered` takes it in its place."""
        ordered = self._editable_order()
        if ordered is not None:
            insort(ordered, row)

    def _row_went(self, row: int) -> None:
        """`row` lost its last pod in `rows`: `ordered` lets it go."""
        ordered = self._editable_order()
        if ordered is not None:
            del ordered[bisect_left(ordered, row)]

    def add(self, task: TaskInfo) -> None:
        row = task.node
        if row < 0:
            return
        if task.status is _RELEASING:
            into = self.releasing
        elif task.pod.preemptable and task.job.group.preemptable is not False:
            into = self.rows
        else:
            return
        self.where[id(task)] = row
        on = into.get(row)
        if on is None:
            into[row] = {id(task): task}
            if into is self.rows:
                self.queues[row] = {id(task.job.queue): 1}
                self._row_came(row)
        else:
            on[id(task)] = task
            if into is self.rows:
                counts = self.queues[row]
                queue = id(task.job.queue)
                counts[queue] = counts.get(queue, 0) + 1

    def discard(self, task: TaskInfo) -> None:
        row = self.where.pop(id(task), None)
        if row is not None:
            into = self.releasing if task.status is _RELEASING else self.rows
            on = into[row]
            del on[id(task)]
            if not on:
                del into[row]
                if into is self.rows:
                    del self.queues[row]
                    self._row_went(row)
            elif into is self.rows:
                counts = self.queues[row]
                queue = id(task.job.queue)
                if counts[queue] == 1:
                    del counts[queue]
                else:
                    counts[queue] -= 1

    def renumber(self, moved: list[int], later: Iterable[TaskInfo]) -> None:
        """Node rows were removed and the rest moved up (`NodeTable.remove_rows`: `moved[old]` is the new
        row); no task indexed here was on a removed row, and `later` holds every task that may be indexed after
        the first row removed (those before it keep their number, and so do their rows here)."""
        where = self.where
        renamed: set[int] = set()  # the old rows of the tasks that move
        for task in later:
            row = where.get(id(task))
            if row is not None and moved[row] != row:
                renamed.add(row)
                where[id(task)] = moved[row]
        if not renamed:
            return
        ordered = sorted(renamed)
        _move_keys(self.rows, ordered, moved)
        _move_keys(self.queues, ordered, moved)
        _move_keys(self.releasing, ordered, moved)
        if self.ordered is not None:
            first = bisect_left(self.ordered, ordered[0])
            self.ordered = [*self.ordered[:first], *[moved[row] for row in self.ordered[first:]]]
            self.lent = False

    def rebuild(self, tasks: Iterable[TaskInfo]) -> None:
        """After node rows were renumbered: every running or releasing task again at its row."""
        self.rows, self.queues, self.where, self.releasing, self.ordered = {}, {}, {}, {}, None
        for task in tasks:
            if task.status is _RUNNING or task.status is _RELEASING:
                self.add(task)


def _move_keys(into: dict[int, _V], old: list[int], moved: list[int]) -> None:
    """The entries at rows `old` (ascending) go to their new rows (`moved[row]`); the new rows are below the old
    ones and above the rows kept, so none is taken twice."""
    taken = [(row, into.pop(row)) for row in old if row in into]
    for row, value in taken:
        into[moved[row]] = value


@dataclass(eq=False, slots=True)
class QueueInfo:
    queue: Queue
    #: Ancestors from the root down to the parent (empty for root and flat queues).
    ancestors: list[QueueInfo] = field(default_factory=list)
    children: list[QueueInfo] = field(default_factory=list)
    allocated: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    request: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: What its admitted jobs (and its children's) still reserve of their minResources: made by enqueue in a
    #: cycle where it judges a waiting job, for the admission votes (nothing else reads it).
    inqueue: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: Admitted jobs the actions look at (by id, in the order they came), not those still waiting for admission
    #: (PodGroup phase Pending: in `pending`); in a long-lived session, settled jobs (fully placed gangs that
    #: reserve nothing) wait in `settled` until something happens to them.
    jobs: dict[int, JobInfo] = field(default_factory=dict)
    #: Jobs waiting for admission, in job order for enqueue (see pending.py).
    pending: PendingJobs = field(default_factory=PendingJobs)
    #: The session's running pods that may be evicted, by node (shared by its queues; None when no action of
    #: the session evicts).
    running: RunningIndex | None = None
    settled: dict[int, JobInfo] = field(default_factory=dict)
    #: What admission votes read for this queue when enqueue last judged all its waiting jobs.
    admission_state: tuple[object, ...] = ()
    #: What enqueue last summed of its jobs' reservations: their memos (`JobInfo.reserved_memo`, those
    #: reserving something, in order) and the sum; while the memos are the same objects, so is the sum.
    reserved_sum: tuple[list[ReservedMemo], IntArray] | None = None
    #: Neither the queue nor an ancestor names the namespaces it takes work from (None: not worked out since
    #: a queue's spec last changed; `Session.respec_queue` forgets it).
    every_namespace: bool | None = None
    #: The allocation last written into a job's vote memo (`JobInfo.evict_refused`): memos written at an equal
    #: allocation share this list, so an eviction action compares it with the queue's once a turn.
    refused_at: list[int] | None = None
    #: The queue's name (`Queue.name`), read in every cycle's every turn: an edited spec keeps it.
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.queue.name

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def has_jobs(self) -> bool:
        """Some job is admitted or waits for admission (settled ones aside)."""
        return bool(self.jobs or self.pending)

    def unsettled(self) -> list[JobInfo]:
        """Every job not settled: the admitted ones, then those waiting for admission."""
        return [*self.jobs.values(), *self.pending]
