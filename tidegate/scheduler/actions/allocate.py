"""allocate: place pending pods of admitted jobs, queue by queue and job by job, gang all-or-nothing.

Queues take turns by their order (lowest share first); each turn places one job until it is
ready (minMember), then the job goes back in line so other jobs get their turn too.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import count
from typing import ClassVar

from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo, TaskStatus
from tidegate.scheduler.refusal import Refusal
from tidegate.scheduler.session import Session

_PENDING = TaskStatus.PENDING


def schedulable_jobs(ssn: Session, queue: QueueInfo, skip_blocked: bool = False) -> list[JobInfo]:
    """Jobs of the queue with pending pods that the session may place now (with `skip_blocked`, not
    those allocate failed while nothing has been freed since)."""
    gated = "enqueue" in ssn.config.actions
    out = []
    freed = ssn.freed
    # Where the queue takes every namespace, a job's validity is its memo while the job's pods stay as they were
    # (`Session.job_invalid_reason`'s own test, read here without the calls: this runs for every waiting job of
    # every busy cycle).
    every = ssn.takes_every_namespace(queue)
    # Jobs waiting for admission (phase Pending) are enqueue's, unless there is no enqueue.
    for job in queue.jobs.values() if gated else queue.unsettled():
        if not job.counts[_PENDING]:
            continue
        if skip_blocked and (job.blocked_at == freed or ssn.hopeless(job)):
            continue
        held = job.valid_memo
        reason = held[1] if every and held is not None and held[0] == job.version else ssn.job_invalid_reason(job)
        if reason:
            job.reason = reason
            continue
        out.append(job)
    return out


_Entry = tuple[tuple[object, ...], int, JobInfo]
#: What a remembered no-node turn found for a queue and the shapes it tried (`JobInfo.no_node_memo`): the
#: session's state then (`Session.charged`, `Session.freed`, the node table's changes and generation) and
#: the explanation. While the state stands, every vote, node and explanation reads as it did: another job of
#: the queue that tried those shapes finds no node either, and is told the same.
_Verdict = tuple[tuple[int, int, int, int], str]


class _Line:
    """A queue's jobs in (key, seq) order, as one heap of them would give: the jobs present at the start
    are sorted once and taken from the end (cheaper than a heap pop each), jobs put back go to a heap."""

    __slots__ = ("heap", "sorted")

    def __init__(self, entries: list[_Entry]) -> None:
        self.sorted = sorted(entries, reverse=True)  # seq is unique: keys never tie, jobs never compare
        self.heap: list[_Entry] = []

    def __bool__(self) -> bool:
        return bool(self.sorted or self.heap)

    def __iter__(self) -> Iterator[_Entry]:
        yield from self.sorted
        yield from self.heap

    def pop(self) -> _Entry:
        if self.heap and (not self.sorted or self.heap[0] < self.sorted[-1]):
            return heapq.heappop(self.heap)
        return self.sorted.pop()

    def push(self, entry: _Entry) -> None:
        heapq.heappush(self.heap, entry)


class Allocate:
    name: ClassVar[str] = "allocate"

    def execute(self, ssn: Session) -> None:
        bind_nominated(ssn)
        seq = count()
        jobs: dict[str, _Line] = {}
        queue_heap: list[tuple[tuple[object, ...], int, QueueInfo]] = []
        gated = "enqueue" in ssn.config.actions
        for queue in ssn.queues.values():
            if gated and not queue.jobs:
                continue  # no admitted job (those waiting for admission are enqueue's): none to place
            ready = schedulable_jobs(ssn, queue, skip_blocked=True)
            if ready:
                keyed = len(ready) > 1  # a lone job needs no key: it is taken first whatever its key
                jobs[queue.name] = _Line([(ssn.job_key(j) if keyed else (), next(seq), j) for j in ready])
                queue_heap.append(((), next(seq), queue))
        if len(queue_heap) > 1:  # likewise a lone queue: it comes back alone, after every turn
            queue_heap = [(ssn.queue_key(queue), order, queue) for _, order, queue in queue_heap]
            heapq.heapify(queue_heap)
        # What a remembered no-node turn found for a queue and pod shapes, while the state stands (`_Verdict`).
        verdicts: dict[tuple[int, tuple[object, ...]], _Verdict] | None = None if ssn.ext.placement_filters else {}
        while queue_heap:
            _, _, queue = heapq.heappop(queue_heap)
            line = jobs[queue.name]
            if not line:
                continue
            reason = ssn.queue_overused_reason(queue)
            if reason:
                for _, _, job in line:
                    job.reason = job.reason or reason
                continue
            key: tuple[object, ...] | None = None
            while True:
                _, _, job = line.pop()
                state = (ssn.charged, ssn.freed)
                more = self.allocate_turn(ssn, queue, job, verdicts)
                if more:
                    line.push((ssn.job_key(job), next(seq), job))
                    break
                if not line or state != (ssn.charged, ssn.freed):
                    break
                # The turn changed nothing (no pod charged or given back): the queue's key and its overuse are
                # as they were. Pushed back, it would be popped again at once unless another queue's key is
                # not greater (on a tie the one pushed earlier goes first), so its next job takes the turn now.
                if queue_heap:
                    if key is None:
                        key = ssn.queue_key(queue)
                    if not queue_heap[0][0] > key:
                        break
            heapq.heappush(queue_heap, (ssn.queue_key(queue) if queue_heap else (), next(seq), queue))

    def allocate_turn(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        verdicts: dict[tuple[int, tuple[object, ...]], _Verdict] | None = None,
    ) -> bool:
        """Place the job's pods; True when it is ready and still has pods to place (goes back in line).

        `verdicts` (allocate's, for one pass): what remembered no-node turns found, shared by jobs of a queue
        that tried the same shapes."""
        memo = job.no_node_memo
        if memo is not None and memo[0] == job.version and memo[1] == job.counts[TaskStatus.PENDING]:
            tried = memo[2]
            if verdicts is not None:
                table = ssn.table
                state = (ssn.charged, ssn.freed, len(table.changes), table.generation)
                found = verdicts.get((id(queue), memo[3]))
                if found is not None and found[0] == state:
                    return self._no_node(ssn, job, tried, found[1])
            if not any(
                ssn.queue_not_allocatable_reason(queue, task) or ssn.best_node(task) is not None for task in tried
            ):
                failure = ssn.explain(tried[-1])
                if verdicts is not None:
                    verdicts[(id(queue), memo[3])] = (state, failure)
                return self._no_node(ssn, job, tried, failure)
        job.no_node_memo = None
        tasks = job.pending_tasks()
        if len(tasks) > 1:
            tasks.sort(key=ssn.task_key)
        stmt = ssn.statement()
        failed_shapes: set[object] = set()  # shape numbers (or shapes), as best_node keys them
        shapes: list[TaskInfo] = []  # the first task of each of them
        failure = ""
        # The last task no node took: its explanation is the failure, unless a vote's refusal comes later. It
        # is asked for when the nodes are about to change (or after the loop), so it reads them as they were
        # when the task found none; explanations of failures a later one replaces are not asked for.
        unplaced: TaskInfo | None = None
        more = False
        for i, task in enumerate(tasks):
            shape = task.shape_key
            if failed_shapes and shape in failed_shapes:
                continue
            reason = ssn.queue_not_allocatable_reason(queue, task)
            if reason:
                failure, unplaced = reason, None
                break
            row = ssn.best_node(task)
            if row is None:
                unplaced = task
                failed_shapes.add(shape)
                shapes.append(task)
                continue
            if unplaced is not None:
                failure, unplaced = ssn.explain(unplaced), None
            stmt.allocate(task, row)
            if i + 1 < len(tasks) and ssn.job_ready(job):
                more = True
                break
        if unplaced is not None:
            if not stmt.ops:  # no vote refused, and no node took any shape: so it stays while they fit nowhere
                keys = tuple([task.shape_key for task in shapes])
                job.no_node_memo = (job.version, job.counts[TaskStatus.PENDING], shapes, keys)
                return self._no_node(ssn, job, shapes, ssn.explain(shapes[-1]))
            failure = ssn.explain(unplaced)
        if ssn.job_ready(job):
            stmt.commit()
            job.reason = failure
            if failure and not more:
                job.blocked_at = ssn.freed
            return more
        placed = job.ready_num
        stmt.discard()
        job.reason = self._gang_reason(job, placed, failure)
        job.blocked_at = ssn.freed
        if all(ssn.never_fits(task) for task in tasks):
            job.hopeless_at = (ssn.table.generation, job.counts[TaskStatus.PENDING])
        return False

    def _no_node(self, ssn: Session, job: JobInfo, shapes: list[TaskInfo], failure: str) -> bool:
        """The end of a turn that placed nothing because no node takes any of the job's pod shapes (one pending
        task of each, in the order the turn tried them): the last one's explanation (`failure`) is the reason."""
        job.blocked_at = ssn.freed
        # The explanation is the very text object while nothing it counts changed (a new node table makes
        # a new one); the job's version holds whether it is ready and how many of its pods run.
        said = job.no_node_said
        if said is not None and said[1] is failure and said[0] == job.version and job.reason is said[2]:
            return False  # the last such end wrote just this, and nothing wrote over it since
        if ssn.job_ready(job):
            job.reason = failure
        else:
            job.reason = self._gang_reason(job, job.ready_num, failure)
            if all(ssn.never_fits(task) for task in shapes):
                job.hopeless_at = (ssn.table.generation, job.counts[TaskStatus.PENDING])
        job.no_node_said = (job.version, failure, job.reason)
        return False

    @staticmethod
    def _gang_reason(job: JobInfo, placed: int, failure: str) -> str:
        """The gang's reason, with the code of what stopped its pods (`Refusal.within`)."""
        if job.min_available <= 1:
            return failure
        gang = f"gang: {placed}/{job.min_available} pods fit"
        if not failure:
            return gang
        return failure.within(f"{gang}; {failure}") if isinstance(failure, Refusal) else f"{gang}; {failure}"


def bind_nominated(ssn: Session) -> None:
    """Pipelined pods go first to the node they were nominated to, once their victims have left it:
    the room was reclaimed (or preempted) for them and is kept from everyone else until then. A gang
    binds all its nominated pods at once or keeps waiting."""
    if not ssn.pipelined:
        return  # most cycles: no eviction is under way
    by_job: dict[int, list[TaskInfo]] = {}
    for task in ssn.pipelined.values():
        by_job.setdefault(id(task.job), []).append(task)
    for tasks in sorted(by_job.values(), key=lambda tasks: ssn.job_key(tasks[0].job)):
        job = tasks[0].job
        held = [(task, task.node, task.cards) for task in sorted(tasks, key=ssn.task_key)]
        for task, row, _ in held:
            ssn.undo_pipeline(task, row, TaskStatus.PENDING)
        stmt = ssn.statement()
        bound = 0
        for task, row, _ in held:
            if not ssn.fits_now(task, row):
                break
            stmt.allocate(task, row)
            bound += 1
        if bound == len(held) and ssn.job_ready(job):
            stmt.commit()
            continue
        stmt.discard()
        for task, row, cards in held:
            ssn.apply_pipeline(task, row, cards)


def pending_tasks_sorted(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    return sorted(job.pending_tasks(), key=ssn.task_key)


def allocate_job(ssn: Session, job: JobInfo) -> bool:
    """One allocate turn for one job, outside the action's queue-by-queue loop; True when the job is ready
    afterwards: at least minMember (and at least one) of its pods hold resources and every readiness vote
    agrees.

    The turn is the action's: the job's pending pods go through one statement, committed only when the
    job is ready (gang all-or-nothing), and the reason it cannot run is recorded on the job; a job the
    plugins call invalid, or whose queue is overused, gets no turn. Like the action, the turn ends once
    the job is ready, so a gang with more pods than minMember may need further calls. Queue order and
    the enqueue gate are the caller's business: this is for feeding arrivals into one long-lived session
    (`Session.add_group`), as the GPU placement experiment does.
    """
    reason = ssn.job_invalid_reason(job) or ssn.queue_overused_reason(job.queue)
    if reason:
        job.reason = reason
        return False
    _TURN.allocate_turn(ssn, job.queue, job)
    return job.ready_num >= max(job.min_available, 1) and ssn.job_ready(job)


_TURN = Allocate()
