"""enqueue: admit Pending PodGroups whose queue has room for their minResources (Volcano's enqueue)."""

from __future__ import annotations

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.session import Session


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        queues = sorted((q for q in ssn.queues.values() if q.jobs), key=ssn.queue_key)
        for queue in queues:
            for job in sorted(queue.jobs, key=ssn.job_key):
                if job.phase is not PodGroupPhase.PENDING:
                    continue
                reason = ssn.job_invalid_reason(job) or ssn.job_not_enqueueable_reason(job)
                if reason:
                    job.reason = reason
                    continue
                job.phase = PodGroupPhase.INQUEUE
                for level in (queue, *queue.ancestors):
                    level.inqueue += job.min_resources
