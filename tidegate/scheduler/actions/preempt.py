"""preempt: inside one queue, a starving job evicts lower-priority pods of other jobs to run."""

from __future__ import annotations

from functools import partial

from tidegate.scheduler.actions.eviction import evict_for, running_by_node, starving_jobs
from tidegate.scheduler.info import JobInfo, TaskInfo
from tidegate.scheduler.session import Session


def _same_queue_other_job(job: JobInfo, victim: TaskInfo) -> bool:
    return victim.job.queue is job.queue and victim.job is not job


class Preempt:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        by_node = running_by_node(ssn)
        for queue in sorted(ssn.queues.values(), key=ssn.queue_key):
            for job in starving_jobs(ssn, queue):
                stmt = ssn.statement()
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    if not ssn.job_starving(job):
                        break
                    evict_for(
                        ssn,
                        stmt,
                        task,
                        by_node,
                        eligible=partial(_same_queue_other_job, job),
                        filters=ssn.ext.preemptable,
                        reason=f"preempted by {job.key} (higher priority in queue {queue.name})",
                    )
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
