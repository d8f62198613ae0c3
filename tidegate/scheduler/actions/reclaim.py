"""reclaim: a queue below its deserved share takes back what other (reclaimable) queues borrowed."""

from __future__ import annotations

from functools import partial

from tidegate.scheduler.actions.eviction import evict_for, running_by_node, starving_jobs
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.session import Session


def _reclaimable_elsewhere(queue: QueueInfo, victim: TaskInfo) -> bool:
    return victim.job.queue is not queue and victim.job.queue.queue.reclaimable


class Reclaim:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        by_node: dict[int, list[TaskInfo]] | None = None  # built on first need: most cycles starve no one
        for queue in sorted(ssn.queues.values(), key=ssn.queue_key):
            if ssn.queue_overused_reason(queue):
                continue
            for job in starving_jobs(ssn, queue):
                stmt = ssn.statement()
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    if not ssn.job_starving(job):
                        break
                    if not ssn.queue_may_reclaim(queue, task):
                        continue
                    if by_node is None:
                        by_node = running_by_node(ssn)
                    evict_for(
                        ssn,
                        stmt,
                        task,
                        by_node,
                        eligible=partial(_reclaimable_elsewhere, queue),
                        filters=ssn.ext.reclaimable,
                        reason=f"reclaimed by queue {queue.name} for {job.key}",
                    )
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
