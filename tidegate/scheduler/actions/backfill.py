"""backfill: place best-effort pods (no resource requests) on any node that passes the filters."""

from __future__ import annotations

from typing import ClassVar

from tidegate.scheduler.actions.allocate import schedulable_jobs
from tidegate.scheduler.session import Session


class Backfill:
    name: ClassVar[str] = "backfill"

    def execute(self, ssn: Session) -> None:
        if not ssn.best_effort_tasks:
            return  # no best-effort pod in the session (the common case): nothing for backfill to place
        for queue in ssn.in_queue_order(ssn.queues.values()):
            # Only jobs with a best-effort pod to place: allocate handles the others.
            candidates = [j for j in schedulable_jobs(ssn, queue) if any(t.best_effort for t in j.pending_tasks())]
            for job in ssn.in_job_order(candidates):
                stmt = ssn.statement()
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    if not task.best_effort:
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
