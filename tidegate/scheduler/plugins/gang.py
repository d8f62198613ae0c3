"""gang: a PodGroup runs only when minMember pods (and each task's minTaskMember) can run together."""

from __future__ import annotations

from typing import Any, ClassVar

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import READY_STATUSES, VALID_STATUSES, JobInfo, TaskInfo
from tidegate.scheduler.refusal import Refusal, RefusalCode
from tidegate.scheduler.session import Session


def _task_counts(job: JobInfo, statuses: frozenset[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in job.tasks:
        if task.status in statuses:
            counts[task.pod.task] = counts.get(task.pod.task, 0) + 1
    return counts


class GangPlugin(Plugin):
    name: ClassVar[str] = "gang"
    reopens_in_place = True  # its votes and keys read only the job

    def on_session_open(self, ssn: Session) -> None:
        ext = ssn.ext
        ext.job_valid.append(self._valid)
        ext.job_ready.append(self._ready)
        ext.job_pipelined.append(lambda job: job.ready_num + job.waiting_num >= job.min_available)
        ext.job_starving.append(lambda job: job.ready_num + job.waiting_num < job.min_available)

        def job_order(job: Any) -> float:
            return 1.0 if self._ready(job) else 0.0

        ext.job_order.append(job_order)
        ext.preemptable.append(self._victims)
        ext.reclaimable.append(self._victims)
        ext.victim_job_refusals[self._victims] = self._keeps_every_pod

    @staticmethod
    def _valid(job: JobInfo) -> Refusal | None:
        valid = job.valid_num
        if valid < job.min_available:
            return Refusal(
                f"gang: {valid}/{job.min_available} pods exist (minMember {job.min_available})",
                RefusalCode.GANG_INCOMPLETE,
            )
        if job.group.min_task_member:
            have = _task_counts(job, VALID_STATUSES)
            for task, need in sorted(job.group.min_task_member.items()):
                if have.get(task, 0) < need:
                    return Refusal(
                        f"gang: task {task} has {have.get(task, 0)}/{need} pods (minTaskMember)",
                        RefusalCode.GANG_INCOMPLETE,
                    )
        return None

    @staticmethod
    def _ready(job: JobInfo) -> bool:
        if job.ready_num < job.min_available:
            return False
        if job.group.min_task_member:
            have = _task_counts(job, READY_STATUSES)
            return all(have.get(task, 0) >= need for task, need in job.group.min_task_member.items())
        return True

    @staticmethod
    def _keeps_every_pod(job: JobInfo) -> bool:
        """`_victims` takes none of the job's pods: its gang is at minMember (and more than one pod)."""
        return job.min_available > 1 and job.ready_num <= job.min_available

    @staticmethod
    def _victims(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims that leave every gang at or above minMember; a one-pod gang may go as a whole."""
        occupied: dict[int, int] = {}
        victims = []
        for victim in candidates:
            job = victim.job
            left = occupied.setdefault(id(job), job.ready_num)
            if left > job.min_available or job.min_available <= 1:
                occupied[id(job)] = left - 1
                victims.append(victim)
        return victims
