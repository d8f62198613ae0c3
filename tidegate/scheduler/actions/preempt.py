"""preempt: inside one queue, a starving job evicts lower-priority pods of other jobs to run."""

from __future__ import annotations

from functools import partial

from tidegate.scheduler.actions.eviction import evict_for, running_by_node, starving_jobs
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.session import Session


def _may_preempt(preemptor: TaskInfo, victim: TaskInfo) -> bool:
    """Pods of other jobs in the same queue; a best-effort pod (no requests) only preempts best-effort pods,
    as in Volcano (it needs no room, and backfill places it)."""
    if victim.job.queue is not preemptor.job.queue or victim.job is preemptor.job:
        return False
    return bool(preemptor.pod.requests) or not victim.pod.requests


def _queue_takes(ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
    return ssn.queue_not_allocatable_reason(queue, task) is None


class Preempt:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        by_node: dict[int, list[TaskInfo]] | None = None  # built on first need: most cycles starve no one
        for queue in sorted(ssn.queues.values(), key=ssn.queue_key):
            for job in starving_jobs(ssn, queue):
                stmt = ssn.statement()
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    if not ssn.job_starving(job):
                        break
                    if by_node is None:
                        by_node = running_by_node(ssn)
                    evict_for(
                        ssn,
                        stmt,
                        task,
                        by_node,
                        eligible=partial(_may_preempt, task),
                        filters=ssn.ext.preemptable,
                        reason=f"preempted by {job.key} (higher priority in queue {queue.name})",
                        quota_fits=partial(_queue_takes, ssn, queue, task),
                    )
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
