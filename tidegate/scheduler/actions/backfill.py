"""backfill: place best-effort pods (no resource requests) on any node that passes the filters."""

from __future__ import annotations

from tidegate.scheduler.actions.allocate import schedulable_jobs
from tidegate.scheduler.session import Session


class Backfill:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        pods_col = ssn.index.col["pods"]
        for queue in sorted(ssn.queues.values(), key=ssn.queue_key):
            for job in sorted(schedulable_jobs(ssn, queue), key=ssn.job_key):
                stmt = ssn.statement()
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    if task.request.sum() != task.request[pods_col]:
                        continue  # not best-effort: allocate handles it
                    # The queue must still take pods (Open, a leaf queue); quotas never bind best-effort pods.
                    reason = ssn.queue_not_allocatable_reason(queue, task)
                    if reason:
                        job.reason = job.reason or reason
                        break
                    row = ssn.best_node(task)
                    if row is not None:
                        stmt.allocate(task, row)
                if ssn.job_ready(job):
                    stmt.commit()
                else:
                    stmt.discard()
