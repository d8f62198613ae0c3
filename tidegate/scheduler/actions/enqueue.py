"""enqueue: admit Pending PodGroups whose queue has room for their minResources (Volcano's enqueue), whether
or not their pods exist yet: gang validity is allocate's business, as in Volcano."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskStatus
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.session import Session


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


def _reserved(job: JobInfo) -> IntArray | None:
    """The part of the job's minResources it still holds in its queue (None for none), remembered until
    the job's pods or phase change (what it reads besides minResources, fixed once the job exists)."""
    held = job.reserved_memo
    if held is not None and held[0] == job.version and held[1] is job.phase:
        return held[2]
    reserved = None
    if _still_reserved(job) and job.min_resources.any():
        reserved = np.maximum(job.min_resources - job.allocated, 0)
    job.reserved_memo = (job.version, job.phase, reserved)
    return reserved


def _admission_state(ssn: Session, queue: QueueInfo) -> tuple[bytes, tuple[object, ...], IntArray]:
    """What admission votes read for the queue's jobs besides the jobs themselves: the cluster total,
    every queue's spec, and the usage (allocated plus reserved) of the queue and each ancestor."""
    usage = np.concatenate([level.allocated + level.inqueue for level in (queue, *queue.ancestors)])
    return ssn.total.tobytes(), tuple(q.queue for q in ssn.queues.values()), usage


def _only_grew(then: tuple[object, ...], now: tuple[bytes, tuple[object, ...], IntArray]) -> bool:
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
    time is over, whatever its minResources and the usage): such jobs are judged one by one every time."""

    name: ClassVar[str] = "enqueue"

    def execute(self, ssn: Session) -> None:
        pending_phase = PodGroupPhase.PENDING
        for queue in ssn.queues.values():
            for job in queue.jobs:
                if job.phase is not pending_phase:
                    reserved = _reserved(job)
                    if reserved is not None:
                        for level in (queue, *queue.ancestors):
                            level.inqueue += reserved
        for queue in ssn.in_queue_order(q for q in ssn.queues.values() if q.jobs):
            self._admit(ssn, queue)

    @staticmethod
    def _admit(ssn: Session, queue: QueueInfo) -> None:
        """Judge the queue's waiting jobs in job order: admit (Inqueue) or record why not."""
        pending_phase = PodGroupPhase.PENDING
        permits = bool(ssn.ext.job_enqueue_permit)
        pending = [
            job
            for job in queue.jobs
            if job.phase is pending_phase
            and (job.enqueue_blocked_at != ssn.freed or (permits and ssn.enqueue_permitted(job)))
        ]
        if any(job.enqueue_seen for job in pending) and _only_grew(queue.admission_state, _admission_state(ssn, queue)):
            pending = [job for job in pending if not job.enqueue_seen or (permits and ssn.enqueue_permitted(job))]
        if not pending:
            return
        ordered = ssn.in_job_order(pending)
        # Admission votes read the job's queue and minResources: a job asking what another was just
        # refused gets the same answer until something is admitted.
        refused: dict[bytes, str] = {}
        floors: IntArray | None = None  # floors[i]: the least any job from i on asks, per resource
        probed: bytes | None = None
        waiting = False
        refused_after = -1  # jobs after this position are refused with the probe below, unless permitted
        for i, job in enumerate(ordered):
            permitted = permits and ssn.enqueue_permitted(job)
            if 0 <= refused_after < i and not permitted:
                continue
            job.enqueue_seen = True
            # Not the validity votes: Volcano's enqueue admits a PodGroup on its minResources alone (gang
            # validity applies when allocating), and its job controller creates a vcjob's pods only once the
            # PodGroup is Inqueue. A queue that does not take the namespace's work (tidegate's) does refuse it.
            outside = ssn.namespace_refusal(queue, job.group.namespace)
            reason: str | None = outside
            if not reason:
                asked = job.min_resources.tobytes()
                reason = (None if permitted else refused.get(asked)) or ssn.job_not_enqueueable_reason(job)
                if reason and not permitted:
                    refused[asked] = reason
            if not reason:
                job.phase = PodGroupPhase.INQUEUE
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
                    if permits and ssn.enqueue_permitted(rest):
                        continue
                    rest.enqueue_seen = True
                    namespace = ssn.namespace_refusal(queue, rest.group.namespace)
                    rest.reason = namespace or refused.get(rest.min_resources.tobytes()) or refusal
                    rest.enqueue_blocked_at = ssn.freed
                if not permits:
                    break
                refused_after = i
        # Refused jobs stay refused while the usage only grows; with none left waiting there is nothing to keep.
        queue.admission_state = _admission_state(ssn, queue) if waiting else ()
