"""enqueue: admit Pending PodGroups whose queue has room for their minResources (Volcano's enqueue)."""

from __future__ import annotations

import numpy as np

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.info import JobInfo, TaskStatus
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


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        pending_phase = PodGroupPhase.PENDING
        for queue in ssn.queues.values():
            for job in queue.jobs:
                if job.phase is not pending_phase and _still_reserved(job) and job.min_resources.any():
                    reserved = np.maximum(job.min_resources - job.allocated, 0)
                    for level in (queue, *queue.ancestors):
                        level.inqueue += reserved
        queues = sorted((q for q in ssn.queues.values() if q.jobs), key=ssn.queue_key)
        for queue in queues:
            pending = [job for job in queue.jobs if job.phase is pending_phase and job.enqueue_blocked_at != ssn.freed]
            # Admission votes read the job's queue and minResources: a job asking what another was just
            # refused gets the same answer until something is admitted.
            refused: dict[bytes, str] = {}
            for job in sorted(pending, key=ssn.job_key):
                reason = ssn.job_invalid_reason(job)
                if not reason:
                    asked = job.min_resources.tobytes()
                    reason = refused.get(asked) or ssn.job_not_enqueueable_reason(job)
                    if reason:
                        refused[asked] = reason
                if reason:
                    job.reason = reason
                    job.enqueue_blocked_at = ssn.freed
                    continue
                job.phase = PodGroupPhase.INQUEUE
                refused.clear()
                for level in (queue, *queue.ancestors):
                    level.inqueue += job.min_resources
