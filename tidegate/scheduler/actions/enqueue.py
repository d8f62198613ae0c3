"""enqueue: admit Pending PodGroups whose queue has room for their minResources (Volcano's enqueue), whether
or not their pods exist yet: gang validity is allocate's business, as in Volcano."""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from operator import is_
from typing import ClassVar

import numpy as np

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.info import JobInfo, QueueInfo, ReservedMemo, TaskStatus
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.pending import Cover, Entry, Key, PendingJobs, _entry_key
from tidegate.scheduler.session import Session

#: What admission votes read for a queue's jobs besides the jobs themselves (`_admission_state`).
AdmissionState = tuple[bytes, tuple[object, ...], IntArray]


def _still_reserved(job: JobInfo) -> bool:
    """Jobs admitted in an earlier cycle whose minResources still hold room in their queue (as in Volcano:
    Inqueue jobs, and Running jobs whose gang is complete, for the part of minResources not yet allocated).
    A running job with every pod placed whose pods ask at least its minResources reserves nothing more."""
    if job.phase is PodGroupPhase.INQUEUE:
        return True
    if job.phase is not PodGroupPhase.RUNNING or job.ready_num < job.min_available:
        return False
    counts = job.counts
    return bool(counts[TaskStatus.PENDING] or counts[TaskStatus.PIPELINED] or not job.min_within_requests)


def _reservation(job: JobInfo) -> ReservedMemo:
    """`(version, phase, reserved)`: the part of the job's minResources it still holds in its queue (None for
    none), remembered until the job's pods or phase change (what it reads besides minResources, fixed once the
    job exists)."""
    held = job.reserved_memo
    if held is not None and held[0] == job.version and held[1] is job.phase:
        return held
    reserved = None
    if _still_reserved(job) and job.min_bytes.strip(b"\0"):  # some minResources (its bytes, not a numpy call)
        reserved = np.maximum(job.min_resources - job.allocated, 0)
    held = job.reserved_memo = (job.version, job.phase, reserved)
    return held


def _reserve(ssn: Session) -> None:
    """Each queue's `inqueue`: what its admitted jobs still reserve of their minResources, its children's too.
    The sum is kept while every job's reservation memo is the one it was made of (most cycles change none)."""
    for queue in ssn.queues.values():
        queue.inqueue.fill(0)
    for queue in ssn.queues.values():
        memos: list[ReservedMemo] = []  # the memos of the jobs reserving something, in order
        arrays: list[IntArray] = []  # what they reserve
        for job in queue.jobs.values():  # admitted jobs: those waiting for admission reserve nothing
            held = job.reserved_memo  # `_reservation`'s memo test inline: most hold, cycle after cycle
            if held is None or held[0] != job.version or held[1] is not job.phase:
                held = _reservation(job)
            if held[2] is not None:
                memos.append(held)
                arrays.append(held[2])
        if not memos:
            continue
        kept = queue.reserved_sum
        if kept is not None and len(kept[0]) == len(memos) and all(map(is_, kept[0], memos)):
            total = kept[1]
        else:  # integers: the same sum in any order
            total = np.add.reduce(arrays) if len(arrays) > 1 else arrays[0]  # np.sum's, without its wrapper
            queue.reserved_sum = (memos, total)
        for level in (queue, *queue.ancestors):
            level.inqueue += total


def _admission_state(ssn: Session, queue: QueueInfo) -> AdmissionState:
    """What admission votes read for the queue's jobs besides the jobs themselves: the cluster total,
    every queue's spec, and the usage (allocated plus reserved) of the queue and each ancestor."""
    usage = np.concatenate([level.allocated + level.inqueue for level in (queue, *queue.ancestors)])
    return ssn.total.tobytes(), ssn.queue_specs(), usage


def _only_grew(then: tuple[object, ...], now: AdmissionState) -> bool:
    """Same total and specs, and no usage went down: every job refused then is refused now."""
    if not then or then[0] != now[0] or then[1] != now[1]:
        return False
    before = then[2]
    assert isinstance(before, np.ndarray)
    return before.shape == now[2].shape and bool((now[2] >= before).all())


class Enqueue:
    """Admission votes must be monotone in the queue's usage and the job's minResources: refused at some
    usage, refused at any higher, and so is a job asking more (capacity and proportion compare
    minResources + allocated + reserved to a limit). A pass stops once a probe asking the least any
    remaining job asks is refused. And
    once a pass has judged every waiting job of a queue, later cycles that find the same specs and total
    and no lower usage look only at jobs that arrived since; a Volcano queue with a long backlog then costs
    its arrivals per cycle, not its backlog. None of this holds for a job a permit lets in (sla: its waiting
    time is over, whatever its minResources and the usage): such jobs are judged one by one every time.

    Without permits, a pass costs what it judges, not the backlog: the waiting jobs are kept in job order with
    their counts by minResources (pending.py), so neither sorting them nor the least a later job asks costs a
    pass over them, and the jobs past where a pass stops take their refusal from one record of the queue's
    instead of each being written (they read as if they had been)."""

    name: ClassVar[str] = "enqueue"

    def execute(self, ssn: Session) -> None:
        permits = bool(ssn.ext.job_enqueue_permit)
        freed = ssn.freed
        # The queues with a waiting job to judge: with permits every waiting one, else those not refused since
        # `freed` last moved (`_admit` passes over the others). Admitting in one queue leaves another's as it is.
        judging = [
            q for q in ssn.queues.values() if q.pending and (permits or len(q.pending) > q.pending.blocked_now(freed))
        ]
        if not judging:
            return  # what admitted jobs reserve (`QueueInfo.inqueue`) is read by the votes alone: not needed
        _reserve(ssn)
        for queue in ssn.in_queue_order(judging):
            if permits:
                self._admit_each(ssn, queue)
            else:
                self._admit(ssn, queue)

    @staticmethod
    def _admit(ssn: Session, queue: QueueInfo) -> None:
        """Judge the queue's waiting jobs in job order (those refused since nothing was freed, and, while the
        queue's usage only grew, those judged already, left out): admit (Inqueue) or record why not."""
        waiting = queue.pending
        freed = ssn.freed
        candidates = len(waiting) - waiting.blocked_now(freed)  # not refused since `freed` last moved
        if not candidates:
            return
        unseen = waiting.unseen  # never judged: among the candidates, and those are the rest
        state = None  # what the votes read now, if worked out
        if candidates == len(unseen) or _only_grew(queue.admission_state, state := _admission_state(ssn, queue)):
            if len(unseen) == 1:
                _judge_one(ssn, queue, next(iter(unseen.values())), state)
            elif unseen:
                _judge(ssn, queue, ssn.in_job_order(unseen.values()), lazy=False)
        elif candidates == len(waiting):
            entries = ssn.waiting_in_order(queue)
            if any(level.queue.namespaces for level in (queue, *queue.ancestors)):
                _judge(ssn, queue, [job for _, job in entries], lazy=True)
            else:
                _judge_skipping(ssn, queue)
        else:
            stale = [job for job in waiting if job.enqueue_blocked_at != freed]
            _judge(ssn, queue, ssn.in_job_order(stale), lazy=False)

    @staticmethod
    def _admit_each(ssn: Session, queue: QueueInfo) -> None:
        """`_admit` when a plugin may permit a job whatever the votes say (sla): every job written to."""
        pending = [job for job in queue.pending if job.enqueue_blocked_at != ssn.freed or ssn.enqueue_permitted(job)]
        if any(job.enqueue_seen for job in pending) and _only_grew(queue.admission_state, _admission_state(ssn, queue)):
            pending = [job for job in pending if not job.enqueue_seen or ssn.enqueue_permitted(job)]
        if not pending:
            return
        ordered = ssn.in_job_order(pending)
        refused: dict[bytes, str] = {}
        floors: IntArray | None = None  # floors[i]: the least any job from i on asks, per resource
        probed: bytes | None = None
        waiting = False
        refused_after = -1  # jobs after this position are refused with the probe below, unless permitted
        for i, job in enumerate(ordered):
            permitted = ssn.enqueue_permitted(job)
            if 0 <= refused_after < i and not permitted:
                continue
            job.enqueue_seen = True
            outside = ssn.namespace_refusal(queue, job.group.namespace)
            reason: str | None = outside
            if not reason:
                asked = job.min_bytes
                reason = (None if permitted else refused.get(asked)) or ssn.job_not_enqueueable_reason(job)
                if reason and not permitted:
                    refused[asked] = reason
            if not reason:
                ssn.set_phase(job, PodGroupPhase.INQUEUE)
                job.reason = ssn.job_invalid_reason(job) or ""  # a gang still short of pods says so
                refused.clear()
                probed = None
                for level in (queue, *queue.ancestors):
                    level.inqueue += job.min_resources
                continue
            job.reason = reason
            job.enqueue_blocked_at = ssn.freed
            waiting = True
            if outside or i + 1 == len(ordered):
                continue
            if floors is None:
                floors = np.minimum.accumulate(np.stack([j.min_resources for j in ordered])[::-1])[::-1]
            floor = floors[i + 1]
            if probed == floor.tobytes():
                continue  # asked already, and nothing admitted since
            probed = floor.tobytes()
            refusal = ssn.job_not_enqueueable_reason(dataclasses.replace(job, min_resources=floor))
            if refusal and refused_after < 0:
                # Even the least any later job asks is refused at this usage: so is every later job (but one a
                # permit may let in, judged in its turn).
                for rest in ordered[i + 1 :]:
                    if ssn.enqueue_permitted(rest):
                        continue
                    rest.enqueue_seen = True
                    namespace = ssn.namespace_refusal(queue, rest.group.namespace)
                    rest.reason = namespace or refused.get(rest.min_bytes) or refusal
                    rest.enqueue_blocked_at = ssn.freed
                refused_after = i
        # Refused jobs stay refused while the usage only grows; with none left waiting there is nothing to keep.
        queue.admission_state = _admission_state(ssn, queue) if waiting else ()


def _judge(ssn: Session, queue: QueueInfo, ordered: list[JobInfo], lazy: bool) -> None:
    """One pass over `ordered` (the queue's jobs to judge, in job order), without permits. With `lazy`,
    `ordered` is every job waiting in the queue: the least the jobs after a position ask comes from the
    queue's counts, and the jobs after the pass stops are refused through one record (`Cover`)."""
    waiting = queue.pending
    freed = ssn.freed
    refused: dict[bytes, str] = {}
    floors: IntArray | None = None  # floors[i]: the least any job from i on asks, per resource (not lazy)
    walked: dict[bytes, int] = {}  # minResources of the jobs judged so far (lazy)
    probed: bytes | None = None
    refusing = False
    admitted: list[JobInfo] = []
    cover_seq = waiting.stamp() if lazy else 0  # a record made by this pass covers jobs stamped before it
    last = len(ordered) - 1
    for i, job in enumerate(ordered):
        job.judged()
        asked = job.min_bytes
        if lazy:
            walked[asked] = walked.get(asked, 0) + 1
        # Not the validity votes: Volcano's enqueue admits a PodGroup on its minResources alone (gang
        # validity applies when allocating), and its job controller creates a vcjob's pods only once the
        # PodGroup is Inqueue. A queue that does not take the namespace's work (tidegate's) does refuse it.
        outside = ssn.namespace_refusal(queue, job.group.namespace)
        reason: str | None = outside
        if not reason:
            reason = refused.get(asked) or ssn.job_not_enqueueable_reason(job)
            if reason:
                refused[asked] = reason
        if not reason:
            job.phase = PodGroupPhase.INQUEUE  # leaves the waiting jobs after the pass (their counts hold till then)
            admitted.append(job)
            job.reason_ = ssn.job_invalid_reason(job) or ""  # a gang still short of pods says so
            refused.clear()
            probed = None
            for level in (queue, *queue.ancestors):
                level.inqueue += job.min_resources
            continue
        _refused(waiting, job, reason, freed)
        refusing = True
        if outside or i == last:
            continue
        if lazy:
            floor = waiting.floor_after(walked, len(job.min_resources))
        else:
            if floors is None:
                floors = np.minimum.accumulate(np.stack([j.min_resources for j in ordered])[::-1])[::-1]
            floor = floors[i + 1]
        if probed == floor.tobytes():
            continue  # asked already, and nothing admitted since
        probed = floor.tobytes()
        refusal = ssn.job_not_enqueueable_reason(dataclasses.replace(job, min_resources=floor))
        if refusal:
            # Even the least any later job asks is refused at this usage: so is every later job.
            if lazy:
                waiting.cover = _cover(queue, cover_seq, freed, [], [], job.entry_key, refused, refusal)
                waiting.unseen.clear()  # every waiting job was judged or is covered
                epoch, count = waiting.blocked
                waiting.blocked = (freed, (count if epoch == freed else 0) + last - i)
            else:
                for rest in ordered[i + 1 :]:
                    rest.judged()
                    namespace = ssn.namespace_refusal(queue, rest.group.namespace)
                    _refused(waiting, rest, namespace or refused.get(rest.min_bytes) or refusal, freed)
            break
    for job in admitted:
        if waiting.discard(job):
            queue.jobs[id(job)] = job
    # Refused jobs stay refused while the usage only grows; with none left waiting there is nothing to keep.
    queue.admission_state = _admission_state(ssn, queue) if refusing else ()


def _judge_one(ssn: Session, queue: QueueInfo, job: JobInfo, state: AdmissionState | None = None) -> None:
    """`_judge` of a single job (a cycle's one arrival, the common case): no memo, floor or probe to keep.
    `state`: `_admission_state` as the caller found it just before (a refusal leaves it as it is)."""
    waiting = job.judged()
    reason = ssn.namespace_refusal(queue, job.group.namespace) or ssn.job_not_enqueueable_reason(job)
    if reason:
        _refused(waiting, job, reason, ssn.freed)
        queue.admission_state = state if state is not None else _admission_state(ssn, queue)
        return
    job.phase = PodGroupPhase.INQUEUE
    job.reason_ = ssn.job_invalid_reason(job) or ""  # a gang still short of pods says so
    for level in (queue, *queue.ancestors):
        level.inqueue += job.min_resources
    if waiting.discard(job):
        queue.jobs[id(job)] = job
    queue.admission_state = ()


def _refused(waiting: PendingJobs, job: JobInfo, reason: str, freed: int) -> None:
    """A waiting job just judged is refused now (what `job.reason = ...; job.enqueue_blocked_at = freed` do)."""
    job.reason_ = reason
    old, job.enqueue_blocked_raw = job.enqueue_blocked_raw, freed
    waiting.note_blocked(old, freed)


def _cover(
    queue: QueueInfo,
    seq: int,
    freed: int,
    ends: list[Key],
    runs: list[dict[bytes, str]],
    after: Key | None,
    refused: dict[bytes, str],
    refusal: str,
) -> Cover:
    specs = (queue.queue, *(level.queue for level in queue.ancestors))
    levels = tuple((spec.name, spec.namespaces) for spec in specs)
    return Cover(seq, freed, ends, runs, after, refused, refusal, levels, bool(queue.ancestors))


def _judge_skipping(ssn: Session, queue: QueueInfo) -> None:
    """`_judge` over every job waiting in a queue that takes every namespace, without visiting the jobs it
    refuses by memo: once a minResources is refused in a pass, every later job asking it is refused with the
    same reason until a job is admitted, and the least the later jobs ask (the probe's floor) changes only
    after the last job of some minResources. So the pass goes from one job asking a minResources not refused
    yet (a vote) to the next, or to the last job of a refused one (a probe), by the keys of each
    minResources' jobs (`PendingJobs.by_ask`); the jobs in between are refused through the queue's record
    (`Cover.runs`). A pass costs the distinct minResources it meets and the jobs it admits, not the backlog
    of jobs refused ahead of them. The same jobs are admitted, in the same order, with the same reasons."""
    waiting = queue.pending
    freed = ssn.freed
    cover_seq = waiting.stamp()
    lists = waiting.by_ask
    vectors = waiting.min_vectors
    asks = list(lists)
    pos = dict.fromkeys(asks, 0)  # per minResources, its first job not passed yet
    last = {asked: lists[asked][-1][0] for asked in asks}
    end = max(last.values())  # the key of the last waiting job
    refused: dict[bytes, str] = {}  # memo of the votes since the last admission (a new dict after each)
    ends: list[Key] = []
    runs: list[dict[bytes, str]] = []
    after: Key | None = None
    refusal = ""
    probed: bytes | None = None
    floor: IntArray | None = None  # the least the jobs not passed yet ask (None: to be worked out)
    admitted: list[JobInfo] = []
    unseen = waiting.unseen
    while True:
        vote: tuple[Key, bytes] | None = None  # the next job whose minResources is not refused yet
        stop: tuple[Key, bytes] | None = None  # the next last job of a refused minResources
        for asked in asks:
            here, jobs = pos[asked], lists[asked]
            if here == len(jobs):
                continue
            if asked in refused:
                if stop is None or last[asked] < stop[0]:
                    stop = (last[asked], asked)
            elif vote is None or jobs[here][0] < vote[0]:
                vote = (jobs[here][0], asked)
        if stop is not None and (vote is None or stop[0] < vote[0]):
            key = stop[0]
            ends.append(key)
            runs.append(refused)
            for asked in refused:  # every job up to `key` of a refused minResources is passed
                pos[asked] = bisect_right(lists[asked], key, lo=pos[asked], key=_entry_key)
            floor = None
            if key == end:
                break
            job = lists[stop[1]][-1][1]
        else:
            if vote is None:
                break
            key, asked = vote
            if refused and any(
                pos[other] < len(lists[other]) and lists[other][pos[other]][0] < key for other in refused
            ):
                ends.append(key)  # the jobs before it asking a refused minResources (the vote's own is written)
                runs.append(refused)
                for other in refused:
                    pos[other] = bisect_left(lists[other], key, lo=pos[other], key=_entry_key)
            job = lists[asked][pos[asked]][1]
            pos[asked] += 1
            if pos[asked] == len(lists[asked]):
                floor = None
            job.materialize()
            job.touched = waiting.stamp()
            job.enqueue_seen_raw = True
            unseen.pop(id(job), None)
            reason = ssn.job_not_enqueueable_reason(job)
            if not reason:
                job.phase = PodGroupPhase.INQUEUE  # leaves the waiting jobs after the pass
                admitted.append(job)
                job.reason_ = ssn.job_invalid_reason(job) or ""  # a gang still short of pods says so
                refused = {}
                probed = None
                for level in (queue, *queue.ancestors):
                    level.inqueue += job.min_resources
                if key == end:
                    break
                continue
            refused[asked] = reason
            job.reason_ = reason
            job.enqueue_blocked_raw = freed
            if key == end:
                break
        if floor is None:
            floor = _least(lists, pos, vectors, len(job.min_resources))
        if probed == floor.tobytes():
            continue  # asked already, and nothing admitted since
        probed = floor.tobytes()
        found = ssn.job_not_enqueueable_reason(dataclasses.replace(job, min_resources=floor))
        if found:  # even the least any later job asks is refused: so is every later job
            after, refusal = key, found
            break
    for job in admitted:
        if waiting.discard(job):
            queue.jobs[id(job)] = job
    waiting.cover = _cover(queue, cover_seq, freed, ends, runs, after, refused, refusal)
    unseen.clear()  # every waiting job was judged or is covered
    waiting.blocked = (freed, len(waiting))  # and every one still waiting was refused at `freed`
    queue.admission_state = _admission_state(ssn, queue) if waiting else ()


def _least(
    lists: dict[bytes, list[Entry]], pos: dict[bytes, int], vectors: dict[bytes, IntArray], width: int
) -> IntArray:
    """The least each resource any job not passed yet asks (zeros when none is left)."""
    floor: IntArray | None = None
    for asked, jobs in lists.items():
        if pos[asked] < len(jobs):
            vector = vectors[asked]
            floor = vector if floor is None else np.minimum(floor, vector)
    return floor if floor is not None else np.zeros(width, dtype=np.int64)
