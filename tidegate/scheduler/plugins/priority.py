"""priority: higher-priority jobs and tasks first; only lower-priority work may be preempted."""

from __future__ import annotations

from typing import Any, ClassVar

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, TaskInfo
from tidegate.scheduler.session import Session


class PriorityPlugin(Plugin):
    name: ClassVar[str] = "priority"
    reopens_in_place = True  # its keys and votes read only the job or task

    def on_session_open(self, ssn: Session) -> None:
        def job_order(job: Any) -> float:
            return -float(job.priority)

        def task_order(task: Any) -> float:
            return -float(task.priority)

        ssn.ext.job_order.append(job_order)
        ssn.ext.task_order.append(task_order)
        ssn.ext.preemptable.append(self._preemptable)
        # Volcano's: a job starves while some of its pods are neither placed nor pipelined.
        ssn.ext.job_starving.append(lambda job: job.ready_num + job.waiting_num < len(job.tasks))

    @staticmethod
    def _preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        victims = []
        for victim in candidates:
            if victim.job is preemptor.job:
                if victim.priority < preemptor.priority:
                    victims.append(victim)
            elif victim.job.priority < preemptor.job.priority:
                victims.append(victim)
        return victims


def job_priority(job: JobInfo) -> int:
    return job.priority
