"""enqueue: admit Pending PodGroups whose queue has room for their minResources (Volcano's enqueue)."""

from __future__ import annotations

import numpy as np

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.info import JobInfo
from tidegate.scheduler.session import Session


def _still_reserved(job: JobInfo) -> bool:
    """Jobs admitted in an earlier cycle whose minResources still hold room in their queue (as in Volcano:
    Inqueue jobs, and Running jobs whose gang is complete, for the part of minResources not yet allocated)."""
    if job.phase is PodGroupPhase.INQUEUE:
        return True
    return job.phase is PodGroupPhase.RUNNING and job.ready_num >= job.min_available


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        for queue in ssn.queues.values():
            for job in queue.jobs:
                if job.min_resources.any() and _still_reserved(job):
                    reserved = np.maximum(job.min_resources - job.allocated, 0)
                    for level in (queue, *queue.ancestors):
                        level.inqueue += reserved
        queues = sorted((q for q in ssn.queues.values() if q.jobs), key=ssn.queue_key)
        for queue in queues:
            pending = [job for job in queue.jobs if job.phase is PodGroupPhase.PENDING]
            for job in sorted(pending, key=ssn.job_key):
                if job.phase is not PodGroupPhase.PENDING:
                    continue
                reason = ssn.job_invalid_reason(job) or ssn.job_not_enqueueable_reason(job)
                if reason:
                    job.reason = reason
                    continue
                job.phase = PodGroupPhase.INQUEUE
                for level in (queue, *queue.ancestors):
                    level.inqueue += job.min_resources
