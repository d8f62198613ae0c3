"""reclaim: a queue below its deserved share takes back what other (reclaimable) queues borrowed."""

from __future__ import annotations

from typing import ClassVar

from tidegate.scheduler.actions.eviction import EvictionAction, VictimFilter
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.session import Session


class Reclaim(EvictionAction):
    name: ClassVar[str] = "reclaim"
    reason = "reclaimed by queue {queue} for {job}"

    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return ssn.queue_overused_reason(queue) is not None or ssn.queue_reclaims_nothing(queue)

    def may_try(self, ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
        return ssn.queue_may_reclaim(queue, task)

    def attempt_key(self, task: TaskInfo) -> tuple[object, ...]:
        return (task.job.queue.name, task.shape_key, task.job.priority, task.priority)

    def eligible(self, queue: QueueInfo, task: TaskInfo, victim: TaskInfo) -> bool:
        return _gives_to(victim.job.queue, queue)

    def victim_queues(self, ssn: Session, queue: QueueInfo) -> frozenset[int]:
        return frozenset(id(other) for other in ssn.queues.values() if _gives_to(other, queue))

    def filters(self, ssn: Session) -> list[VictimFilter]:
        return ssn.ext.reclaimable


def _gives_to(victims: QueueInfo, reclaimer: QueueInfo) -> bool:
    """Pods of `victims` may be reclaimed for `reclaimer`: another queue, marked reclaimable."""
    return victims is not reclaimer and victims.queue.reclaimable
