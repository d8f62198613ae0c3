"""Shared by preempt and reclaim: free a node for a pending task by evicting allowed victims."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from operator import ge
from typing import ClassVar, cast

import numpy as np

from tidegate.model.objects import PodGroupPhase, PreemptionPolicy
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo, TaskStatus
from tidegate.scheduler.node_table import BoolArray, NodeTable
from tidegate.scheduler.session import Session
from tidegate.scheduler.statement import Statement

VictimFilter = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
NEVER = PreemptionPolicy.NEVER
_WAITING = PodGroupPhase.PENDING
_PENDING = TaskStatus.PENDING
#: Thousandths in one GPU card (tidegate.io/gpu-milli), as the gpushare plugin counts them.
CARD_MILLI = 1000


def running_by_node(ssn: Session) -> dict[int, dict[int, TaskInfo]]:
    """The running pods that may be evicted, by node: not those marked `volcano.sh/preemptable: false` (as
    Volcano's preempt and reclaim skip a task that is not Preemptable), nor those of a PodGroup so marked
    (as its gang eviction actions read the PodGroup's). The session keeps it as pods change status
    (`RunningIndex`): it changes as victims are evicted."""
    assert ssn.running is not None, "a session whose actions evict keeps its running pods by node"
    return ssn.running.rows


def starving_jobs(ssn: Session, queue: QueueInfo, skip: Callable[[JobInfo], bool] | None = None) -> list[JobInfo]:
    """Admitted, valid jobs of the queue that cannot run as they are, in job order (without those `skip`
    says to leave out, asked first)."""
    starving = [
        job
        for job in queue.jobs.values()  # admitted jobs (those waiting for admission are elsewhere)
        if job.phase is not _WAITING
        and job.counts[_PENDING]  # it has pending pods (without listing them)
        and (skip is None or not skip(job))
        and not ssn.hopeless(job)
        and ssn.job_invalid_reason(job) is None
        and ssn.job_starving(job)
    ]
    return ssn.in_job_order(starving)


#: What an attempt refused by its queue's votes alone read (`JobInfo.evict_refused`): the job's version, the
#: node table's generation, `Session.quotas_moved`, and the queue's allocation.
VoteMemo = tuple[int, int, int, list[int]]


def refused_still(ssn: Session, job: JobInfo, memo: VoteMemo | None) -> bool:
    """The votes that refused every task of the job would refuse them again: the job, the node table and the
    quotas are as they were, and the queue holds at least as much of every resource (the votes are monotone
    in it, `ExtensionPoints.queue_reclaim_allowed`)."""
    if memo is None or memo[0] != job.version or memo[1] != ssn.table.generation or memo[2] != ssn.quotas_moved:
        return False
    return all(map(ge, job.queue.allocated.tolist(), memo[3]))  # one resource index: equal lengths


def victim_order(ssn: Session, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """The candidates in the order they are taken, as Volcano's BuildVictimsPriorityQueue pops them: victims
    of other queues by the victim queue order (the plugins' `victim_queue_order` keys, then queue order
    reversed: the queue that would be served last gives first), of one queue by job order reversed (the
    plugins' job keys only: jobs they cannot tell apart fall through), then by task order reversed.

    Volcano compares pairs; its comparisons agree with this one lexicographic key (for two tasks of one job
    the queue and job parts are equal, leaving task order reversed), so sorting gives its order."""
    if len(candidates) < 2:
        return list(candidates)
    out = sorted(candidates, key=ssn.task_key, reverse=True)  # keys are unique (they end in the pod's key)
    width = len(ssn.ext.job_order)
    job_keys: dict[int, tuple[float, ...]] = {}
    for task in out:
        job = task.job
        if id(job) not in job_keys:
            job_keys[id(job)] = tuple(-key for key in cast(tuple[float, ...], ssn.job_key(job)[:width]))
    queues = {id(task.job.queue): task.job.queue for task in out}
    if len(queues) == 1:
        out.sort(key=lambda task: job_keys[id(task.job)])
        return out
    reversed_order = sorted(queues.values(), key=ssn.queue_key, reverse=True)
    home, keys = preemptor.job.queue, ssn.ext.victim_queue_order
    queue_keys = {id(q): (*[key(q, home) for key in keys], rank) for rank, q in enumerate(reversed_order)}
    out.sort(key=lambda task: (queue_keys[id(task.job.queue)], job_keys[id(task.job)]))
    return out


def evict_for(
    ssn: Session,
    stmt: Statement,
    task: TaskInfo,
    by_node: dict[int, dict[int, TaskInfo]],
    eligible: Callable[[TaskInfo], bool],
    filters: list[VictimFilter],
    reason: str,
    quota_fits: Callable[[], bool] | None = None,
    rows: list[int] | None = None,
    victim_queues: frozenset[int] | None = None,
    start: int = 0,
) -> int:
    """Evict victims on the first suitable node (in row order; `rows`: `sorted(by_node)`, if known) until the
    task fits there, then pipeline it; returns the node's position in `rows` (-1: none suits). The search
    starts at position `start` (`EvictionAction.execute` knows the nodes before it do not suit). With
    `victim_queues` (ids of QueueInfo), a running pod is a candidate when its job's queue is one of them, and
    `eligible` is not asked (`EvictionAction.victim_queues`); `by_node` is then the session's `RunningIndex`
    rows, whose queue counts say which nodes hold no candidate.

    quota_fits, when given, must also hold before the task is pipelined (preempt: the task's queue may take
    it once its own victims leave, like Volcano's preemptorFitsOnNode); otherwise the node is left alone.

    A node is looked at only as far as it could help: its candidates are gathered when the search reaches it,
    and a node whose future idle room plus every candidate's request leaves the task short of some resource
    is passed before any victim filter or order is asked (its victims, a part of its candidates, would free
    no more), and so is a node whose every candidate's job some filter's job-wide twin refuses
    (`ExtensionPoints.victim_job_refusals`). Victim filters judge candidates greedily (`framework.VictimFilter`),
    so a node the search takes means every filter accepts some candidate of all: no search over every
    candidate first is needed.
    """
    if not filters:
        return -1
    twins = ssn.ext.victim_job_refusals
    refusals = [twins[f] for f in filters if f in twins]
    refused: dict[int, bool] = {}  # by job: nothing changes while the search goes on
    static = ssn.static_candidates(task)
    asked = task.request_nonzero or tuple((int(c), int(a)) for c, a in enumerate(task.request.tolist()) if a)
    table = ssn.table
    order = rows if rows is not None else sorted(by_node)
    queues_on = ssn.running.queues if ssn.running is not None else {}
    for position in range(start, len(order)):
        row = order[position]
        if not static[row]:
            continue
        on = by_node.get(row)
        if not on:
            continue
        # (`RunningIndex.rows` holds running pods only: an evicted one moves to its `releasing`)
        if victim_queues is None:
            candidates = [t for t in on.values() if eligible(t)]
        elif victim_queues.isdisjoint(queues_on[row]):
            continue  # none of its pods' queues gives
        else:
            candidates = [t for t in on.values() if id(t.job.queue) in victim_queues]
        if not candidates:
            continue
        if refusals:  # passed when some filter's job-wide twin refuses every candidate's job (asked once a job)
            for candidate in candidates:
                job = candidate.job
                held = refused.get(id(job))
                if held is None:
                    held = refused[id(job)] = any(refuse(job) for refuse in refusals)
                if not held:
                    break
            else:
                continue
        if not _could_free(table, row, asked, candidates):
            continue
        victims = ssn.victims(filters, task, victim_order(ssn, task, candidates))
        if not victims:
            continue
        freed = np.add.reduce([v.request for v in victims])
        if not ssn.fits_future_idle(task, row, freed) or not _cards_fit(ssn, task, row, victims):
            continue
        node_stmt = ssn.statement()
        for victim in victims:
            if _fits(ssn, task, row, quota_fits):
                break
            node_stmt.evict(victim, reason)
        if not _fits(ssn, task, row, quota_fits):
            node_stmt.discard()
            continue
        node_stmt.pipeline(task, row, nominated_cards(ssn, task, row))
        stmt.merge(node_stmt)
        return position
    return -1


def _could_free(table: NodeTable, row: int, asked: tuple[tuple[int, int], ...], candidates: list[TaskInfo]) -> bool:
    """Whether the node's future idle room plus every candidate's request covers what the task asks (what
    `Session.fits_future_idle` checks with the victims' requests, which are some of the candidates')."""
    # In Python ints (FutureIdle = allocatable - used + releasing, `NodeTable.future_idle_row`), releasing read
    # only where the idle room falls short: most rows a search passes hold nothing being released.
    alloc, used = table.alloc_rows[row], table.used_row(row)
    releasing: list[int] | None = None
    for col, amount in asked:
        room = alloc[col] - used[col]
        if room >= amount:
            continue
        if releasing is None:
            releasing = table.releasing[row].tolist()
        room += releasing[col]
        if room >= amount:
            continue
        for victim in candidates:
            room += victim.request_list[col] if victim.request_list else int(victim.request[col])
            if room >= amount:
                break
        else:
            return False
    return True


def _fits(ssn: Session, task: TaskInfo, row: int, quota_fits: Callable[[], bool] | None) -> bool:
    node_fits = ssn.fits_future_idle(task, row) and _cards_fit(ssn, task, row, [])
    return node_fits and (quota_fits is None or quota_fits())


def _cards_fit(ssn: Session, task: TaskInfo, row: int, extra_victims: list[TaskInfo]) -> bool:
    """GPU requests also need cards once the victims (and pods already evicted there) leave: enough untouched
    cards for whole-card requests, one card with room for a slice (memory and thousandths) for shared ones,
    besides the untouched cards promised to pods already pipelined to the node (`NodeTable.promised`) and
    the slices held for them."""
    gpu = task.gpu
    if not gpu.any:
        return True
    usable, untouched = _cards_after_leaving(ssn, task, row, extra_victims)
    if gpu.whole:
        return int(untouched.sum()) >= gpu.whole + ssn.table.promised[row]
    return bool(usable.any())


def nominated_cards(ssn: Session, task: TaskInfo, row: int) -> tuple[int, ...]:
    """The card held for a GPU slice pipelined to the node: the first one its slice fits on once the pods
    evicted there have left. Held, the slice counts on that card from now on, so no other slice takes the
    room its victims free one by one (whole cards are promised by count instead: which cards come free
    depends on the order the victims leave). Whole-card and CPU-only pods hold no card."""
    if not task.gpu.shared:
        return ()
    usable, _ = _cards_after_leaving(ssn, task, row, [])
    found = np.flatnonzero(usable)
    return (int(found[0]),) if len(found) else ()


def _cards_after_leaving(
    ssn: Session, task: TaskInfo, row: int, extra_victims: list[TaskInfo]
) -> tuple[BoolArray, BoolArray]:
    """Per card of the node once the victims and the pods already evicted there have left: may the task's
    slice go there (not on an untouched card while the untouched ones are all promised), and is it
    untouched."""
    gpu = task.gpu
    table = ssn.table
    whole = table.card_whole[row].copy()
    mem = table.card_used_mem[row].copy()
    milli = table.card_used_milli[row].copy()
    releasing = ssn.running.releasing.get(row) if ssn.running is not None else None
    leaving = [*extra_victims, *(releasing.values() if releasing else ())]  # in any order: integer sums
    for victim in leaving:
        for card in victim.cards:
            if victim.gpu.whole:
                whole[card] = False
            else:
                mem[card] -= victim.gpu.mem_mib
                milli[card] -= victim.gpu.milli
    usable = table.card_exists[row] & ~whole
    untouched = usable & (mem == 0) & (milli == 0)
    promised = table.promised[row]  # untouched cards already promised to pods pipelined here
    if promised and int(untouched.sum()) <= promised:
        usable &= ~untouched
    if gpu.mem_mib:
        usable &= table.card_mem[row] - mem >= gpu.mem_mib
    if gpu.milli:
        usable &= CARD_MILLI - milli >= gpu.milli
    return usable, untouched


class EvictionAction(ABC):
    """Shared loop of preempt and reclaim: for each queue in order, each starving job evicts victims
    for its pending pods through one statement, kept only if the job is then pipelined (gang)."""

    name: ClassVar[str] = ""
    reason = ""

    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return False

    def may_try(self, ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
        return True

    @abstractmethod
    def eligible(self, queue: QueueInfo, task: TaskInfo, victim: TaskInfo) -> bool:
        """May `victim` make room for `task` of `queue`?"""

    @abstractmethod
    def filters(self, ssn: Session) -> list[VictimFilter]:
        """The plugins' victim filters this action consults."""

    def quota_fits(self, ssn: Session, queue: QueueInfo, task: TaskInfo) -> Callable[[], bool] | None:
        return None

    def victim_queues(self, ssn: Session, queue: QueueInfo) -> frozenset[int] | None:
        """When `eligible` reads only the victim's queue: the queues (ids of QueueInfo) whose running pods may
        make room for the queue's jobs, so the search asks no pod (a pass reads hundreds of them); else None."""
        return None

    def attempt_key(self, task: TaskInfo) -> tuple[object, ...]:
        """What an attempt for `task` depends on besides the cluster state: attempts with equal keys in
        the same state end alike (the task's job by default)."""
        return (id(task.job), task.shape_key, task.priority)

    #: Its victims may be pods of the starving job's own queue (preempt): another job's committed evictions
    #: may then change a job of the queue, so a job its votes refused is looked at again at its turn.
    victims_in_own_queue: ClassVar[bool] = False

    def resumes_searches(self, ssn: Session) -> bool:
        """Whether a node that did not suit an attempt stays unsuitable for an equal attempt while the action
        goes on, so a later one starts where the last found its node. Equal attempts (their key names the
        queue) come in one queue's turn, where only its jobs act. When victims are of other queues and no pod
        affinity is read, what a turn does to a node (evicting victims of other queues, nominating a task of
        its own) leaves the node less room and fewer candidates, and the victim filters refuse no fewer (gang
        as jobs lose pods, capacity, proportion and hdrf as victim queues lose allocation and this one gains);
        a discarded statement puts the node back as it was. Like the failed attempts an action shares, this
        takes equal attempts to end alike in the same state."""
        return not self.victims_in_own_queue and not ssn.ext.placement_filters

    def execute(self, ssn: Session) -> None:
        by_node: dict[int, dict[int, TaskInfo]] | None = None  # looked at on first need: most cycles starve no one
        rows: list[int] = []
        # Attempts that failed in the state every job starts from (its statement still empty): a failed
        # attempt changes nothing, so an equal attempt fails too until some job's evictions are committed.
        failed: set[tuple[object, ...]] = set()
        # Those of them refused by the queue's votes alone, having read no node or victim.
        refused: set[tuple[object, ...]] = set()
        # Where the last search of an attempt key found its node (a position in `rows`): the nodes before it
        # did not suit, and nothing this action does makes one suit (`resumes`), so an equal attempt starts there.
        found_at: dict[tuple[object, ...], int] = {}
        resumes = self.resumes_searches(ssn)
        name = self.name
        for queue in ssn.in_queue_order(q for q in ssn.queues.values() if q.jobs):  # others starve no one
            if self.skip_queue(ssn, queue):
                continue
            # A job the votes refused stays refused while what they read holds; with victims only in other
            # queues, nothing this queue's turn commits undoes that (its allocation only grows by it).
            still_refused = None if self.victims_in_own_queue else self._still_refused(ssn, queue)
            givers = self.victim_queues(ssn, queue)
            for job in starving_jobs(ssn, queue, still_refused):
                if job.evict_blocked_at.get(name) == (ssn.freed, ssn.placed):
                    continue  # failed before, and nothing was freed or placed since
                if refused_still(ssn, job, job.evict_refused.get(name)):
                    continue  # its queue's votes refused it before, and would again
                tasks = sorted(job.pending_tasks(), key=ssn.task_key)
                # A job attempts what its tasks' keys and its gang's counts say: an equal job fails alike.
                signature = (
                    tuple(self.attempt_key(task) for task in tasks),
                    job.min_available,
                    tuple(sorted(job.group.min_task_member.items())),
                    (job.ready_num, job.waiting_num, job.valid_num),
                )
                if signature in failed:
                    self._failed(ssn, job, signature in refused)
                    continue
                stmt = ssn.statement()
                voted_only = True  # no node or victim looked at, by this attempt or the ones it repeats
                for task in tasks:
                    if not ssn.job_starving(job):
                        break
                    if task.pod.preemption_policy is NEVER:
                        continue  # it waits for room and evicts no one (Volcano's preempt and reclaim skip it)
                    key = self.attempt_key(task)
                    if key in failed:
                        voted_only = voted_only and key in refused
                        continue
                    if not self.may_try(ssn, queue, task):
                        if not stmt.ops:
                            failed.add(key)
                            refused.add(key)
                        continue
                    if by_node is None:
                        by_node = running_by_node(ssn)
                        # rows only empty as victims go (or fill again as they stay): the order taken now serves
                        assert ssn.running is not None
                        rows = ssn.running.sorted_rows()
                    voted_only = False
                    position = evict_for(
                        ssn,
                        stmt,
                        task,
                        by_node,
                        eligible=partial(self.eligible, queue, task),
                        filters=self.filters(ssn),
                        reason=self.reason.format(job=job.key, queue=queue.name),
                        quota_fits=self.quota_fits(ssn, queue, task),
                        rows=rows,
                        victim_queues=givers,
                        start=found_at.get(key, 0) if resumes else 0,
                    )
                    if position >= 0:
                        found_at[key] = position
                    elif not stmt.ops:
                        failed.add(key)
                if ssn.job_pipelined(job):
                    stmt.commit()
                    failed.clear()
                    refused.clear()
                else:
                    stmt.discard()
                    failed.add(signature)
                    if voted_only:
                        refused.add(signature)
                    self._failed(ssn, job, voted_only)

    def _failed(self, ssn: Session, job: JobInfo, voted_only: bool) -> None:
        """The attempt for the job failed: remember the state it saw, or, when only its queue's votes
        refused it (they read the job, the quotas and the queue's allocation), what those votes read."""
        job.evict_blocked_at[self.name] = (ssn.freed, ssn.placed)
        if voted_only:
            queue = job.queue
            allocated: list[int] = queue.allocated.tolist()
            shared = queue.refused_at
            if shared is None or shared != allocated:
                shared = queue.refused_at = allocated
            job.evict_refused[self.name] = (job.version, ssn.table.generation, ssn.quotas_moved, shared)
        else:
            job.evict_refused.pop(self.name, None)

    def _still_refused(self, ssn: Session, queue: QueueInfo) -> Callable[[JobInfo], bool]:
        """`refused_still` for the queue's jobs, its allocation read once: while the queue takes its turn it
        only grows (its jobs' victims are in other queues), so a job refused at less stays refused."""
        name, generation, quotas = self.name, ssn.table.generation, ssn.quotas_moved
        allocated = queue.allocated.tolist()
        held: dict[int, bool] = {}  # by the memo's allocation: most of them share one (`QueueInfo.refused_at`)

        def skip(job: JobInfo) -> bool:
            memo = job.evict_refused.get(name)
            if memo is None or memo[0] != job.version or memo[1] != generation or memo[2] != quotas:
                return False
            then = memo[3]
            found = held.get(id(then))
            if found is None:
                found = held[id(then)] = all(map(ge, allocated, then))  # (one resource index: equal lengths)
            return found

        return skip
