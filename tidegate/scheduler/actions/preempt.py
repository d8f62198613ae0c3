"""preempt: inside one queue, a starving job evicts lower-priority pods of other jobs to run."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from tidegate.scheduler.actions.eviction import EvictionAction, VictimFilter
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.session import Session


def _queue_takes(ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
    return ssn.queue_not_allocatable_reason(queue, task) is None


class Preempt(EvictionAction):
    name: ClassVar[str] = "preempt"
    reason = "preempted by {job} (higher priority in queue {queue})"
    victims_in_own_queue: ClassVar[bool] = True

    def eligible(self, queue: QueueInfo, preemptor: TaskInfo, victim: TaskInfo) -> bool:
        """Pods of other jobs in the same queue; a best-effort pod (no requests) only preempts best-effort
        pods, as in Volcano (it needs no room, and backfill places it)."""
        if victim.job.queue is not preemptor.job.queue or victim.job is preemptor.job:
            return False
        return bool(preemptor.pod.requests) or not victim.pod.requests

    def filters(self, ssn: Session) -> list[VictimFilter]:
        return ssn.ext.preemptable

    def quota_fits(self, ssn: Session, queue: QueueInfo, task: TaskInfo) -> Callable[[], bool] | None:
        return partial(_queue_takes, ssn, queue, task)
