"""proportion: queues share the cluster by weight (water-filling), each capped by what it asks for
and by its capability (quota.capability_cap: a declared 0 is a cap of 0, except for cpu and memory).

Idle quota flows to queues with demand; when an owner's demand returns, its deserved share grows
back and the reclaim action takes resources back from queues above theirs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tidegate.model.objects import QueueState
from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo
from tidegate.scheduler.node_table import FloatArray
from tidegate.scheduler.plugins.quota import amount, as_float, capability_cap, first_exceeded
from tidegate.scheduler.session import Session


class ProportionPlugin(Plugin):
    name = "proportion"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.dims = ssn.quota_mask
        queues = [q for q in ssn.queues.values() if q.jobs or q.settled]
        total = as_float(ssn.total)
        total_guarantee = sum(
            (as_float(ssn.vector(q.queue.guarantee)) for q in ssn.queues.values()), np.zeros_like(total)
        )
        self.real_capability: dict[str, FloatArray] = {}
        self.deserved: dict[str, FloatArray] = {}
        for q in queues:
            guarantee = as_float(ssn.vector(q.queue.guarantee))
            real = np.maximum(total - total_guarantee, 0) + guarantee
            if q.queue.capability is not None:
                real = np.minimum(real, capability_cap(ssn.index, q.queue))
            self.real_capability[q.name] = real
        previous = getattr(self, "deserved", None)
        self._water_fill(queues, total)
        if previous is not None and (
            previous.keys() != self.deserved.keys()
            or any(not np.array_equal(previous[name], share) for name, share in self.deserved.items())
        ):
            ssn.freed += 1  # a deserved share moved: quota-blocked jobs must be looked at again
        self._deserved_cache: dict[QueueInfo, list[tuple[int, float]]] = {}
        ssn.ext.queue_order.append(self._queue_order)
        ssn.ext.queue_overused.append(self._overused)
        ssn.ext.queue_allocatable.append(self._allocatable)
        ssn.ext.job_enqueueable.append(self._enqueueable)
        ssn.ext.reclaimable.append(self._reclaimable)
        # Volcano's PreemptiveFn: a queue reclaims a task only while it stays within its deserved share.
        ssn.ext.queue_reclaim_allowed.append(self._allocatable)

    def _water_fill(self, queues: list[QueueInfo], total: FloatArray) -> None:
        """Split the cluster by weight; a queue never deserves more than it requests or may use."""
        deserved = {q.name: np.zeros_like(total) for q in queues}
        remaining = total.copy()
        met: set[str] = set()
        while True:
            weight = sum(q.queue.weight for q in queues if q.name not in met)
            if weight == 0:
                break
            before = remaining.copy()
            increased = np.zeros_like(total)
            decreased = np.zeros_like(total)
            for q in queues:
                if q.name in met:
                    continue
                old = deserved[q.name].copy()
                new = old + remaining * (q.queue.weight / weight)
                new = np.minimum(new, self.real_capability[q.name])
                new = np.minimum(new, as_float(q.request))
                new = np.maximum(new, as_float(self.ssn.vector(q.queue.guarantee)))
                deserved[q.name] = new
                if (as_float(q.request)[self.dims] <= new[self.dims]).all() or np.array_equal(new, old):
                    met.add(q.name)
                diff = new - old
                increased += np.maximum(diff, 0)
                decreased += np.maximum(-diff, 0)
            remaining = np.maximum(remaining + decreased - increased, 0)
            if not remaining[self.dims].any() or np.array_equal(remaining, before):
                break
        self.deserved = deserved

    def deserved_of(self, queue: QueueInfo) -> FloatArray:
        return self.deserved.get(queue.name, np.zeros(len(self.ssn.index)))

    def _deserved_dims(self, queue: QueueInfo) -> list[tuple[int, float]]:
        """(column, deserved) over the quota dimensions as Python numbers: the per-placement checks below
        run on a handful of numbers, where numpy's per-call cost would dominate."""
        found = self._deserved_cache.get(queue)
        if found is None:
            deserved = self.deserved_of(queue)
            found = [(int(col), float(deserved[col])) for col in np.flatnonzero(self.dims)]
            self._deserved_cache[queue] = found
        return found

    def _queue_order(self, queue: Any) -> float:
        """share(as_float(queue.allocated), deserved, dims), in the same float operations."""
        allocated = queue.allocated.tolist()
        result = 0.0
        for col, want in self._deserved_dims(queue):
            have = float(allocated[col])
            if want > 0:
                have = have / want
                if have > result:  # max(result, have)
                    result = have
            elif have > 0 and result < 1.0:
                result = 1.0
        return result

    def _overused(self, queue: QueueInfo) -> str | None:
        allocated = queue.allocated.tolist()
        for col, want in self._deserved_dims(queue):
            if not want <= float(allocated[col]):
                return None
        return f"queue {queue.name} overused: allocated reached its deserved share"

    def _allocatable(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        if queue.queue.state is not QueueState.OPEN:
            return f"queue {queue.name} is {queue.queue.state.value}"
        allocated = queue.allocated.tolist()
        request = task.request_list or task.request.tolist()
        col = next(
            (
                col
                for col, want in self._deserved_dims(queue)
                if request[col] > 0 and float(allocated[col] + request[col]) > want
            ),
            None,
        )
        if col is None:
            return None
        deserved = self.deserved_of(queue)
        index = self.ssn.index
        if deserved[col] >= self.ssn.total[col]:
            return (
                f"cluster full: {index.names[col]} "
                f"{amount(index, col, float(queue.allocated[col]))}/{amount(index, col, float(self.ssn.total[col]))}"
                f" allocated to queue {queue.name}"
            )
        return (
            f"queue {queue.name} at deserved share {index.names[col]} "
            f"{amount(index, col, float(queue.allocated[col]))}/{amount(index, col, float(deserved[col]))}"
        )

    def _enqueueable(self, job: JobInfo) -> str | None:
        queue = job.queue
        if queue.queue.state is not QueueState.OPEN:
            return f"queue {queue.name} is {queue.queue.state.value}"
        if not job.min_resources.any():
            return None
        real = self.real_capability.get(queue.name)
        if real is None:
            return None
        dims = self.dims & (job.min_resources > 0)
        used = as_float(job.min_resources + queue.allocated + queue.inqueue)
        col = first_exceeded(used, real, dims)
        if col is None:
            return None
        index = self.ssn.index
        return (
            f"queue {queue.name} at capability {index.names[col]} "
            f"{amount(index, col, float(queue.allocated[col] + queue.inqueue[col]))}/{amount(index, col, real[col])}"
        )

    def _reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        allocations: dict[str, FloatArray] = {}
        victims = []
        for victim in candidates:
            queue = victim.job.queue
            allocated = allocations.setdefault(queue.name, as_float(queue.allocated))
            deserved = self.deserved_of(queue)
            if (allocated[self.dims] <= deserved[self.dims]).all():
                continue  # the victim queue is within its deserved share
            guarantee = as_float(self.ssn.vector(queue.queue.guarantee))
            if ((allocated - victim.request)[self.dims] < guarantee[self.dims]).any():
                continue  # never below the victim queue's guarantee (as capability's checkGuaranteeConstraint)
            allocated -= victim.request
            victims.append(victim)
        return victims
