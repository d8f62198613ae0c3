"""proportion: queues share the cluster by weight (water-filling), each capped by what it asks for
and by its capability (quota.capability_cap: a declared 0 is a cap of 0, except for cpu and memory).

Idle quota flows to queues with demand; when an owner's demand returns, its deserved share grows
back and the reclaim action takes resources back from queues above theirs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tidegate.model.objects import QueueState
from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo
from tidegate.scheduler.node_table import FloatArray
from tidegate.scheduler.plugins.quota import amount, as_float, capability_cap
from tidegate.scheduler.refusal import Refusal, RefusalCode
from tidegate.scheduler.session import Session


class ProportionPlugin(Plugin):
    name: ClassVar[str] = "proportion"
    reopens_in_place = True  # on_cycle_open recomputes the quotas; the votes are methods reading them

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.dims = ssn.quota_mask
        self.on_cycle_open(ssn)
        ssn.ext.queue_order.append(self._queue_order)
        ssn.ext.queue_overused.append(self._overused)
        ssn.ext.queue_allocatable.append(self._allocatable)
        ssn.ext.job_enqueueable.append(self._enqueueable)
        ssn.ext.reclaimable.append(self._reclaimable)
        # Volcano's PreemptiveFn: a queue reclaims a task only while it stays within its deserved share.
        ssn.ext.queue_reclaim_allowed.append(self._allocatable)

    def on_cycle_open(self, ssn: Session) -> None:
        """Real capabilities and deserved shares for the queues with jobs, as the cycle starts."""
        # Limits depend only on the queue specs and the cluster's nodes: a session that lives across
        # cycles recomputes them only when one of those changed (like capacity's quotas).
        specs = (ssn.table.generation, ssn.queue_specs())
        if getattr(self, "_specs", None) != specs:
            self._specs = specs
            self._set_limits(ssn)
        queues = [q for q in ssn.queues.values() if q.has_jobs or q.settled]
        self.real_capability = {q.name: self._real_all[q.name] for q in queues}
        # The water-fill reads the limits and what each active queue asks: redone only when one moved
        # (queue requests move with every arrival and departure, so it must be cheap as well).
        demand = (specs, [(q.name, q.request.tolist()) for q in queues])
        if getattr(self, "_demand", None) != demand:
            previous = getattr(self, "_deserved", None)
            self._demand = demand
            self._deserved = self._water_fill(queues, demand[1])
            if previous is not None and previous != self._deserved:
                ssn.freed += 1  # a deserved share moved: quota-blocked jobs must be looked at again
                ssn.quotas_moved += 1
        self._deserved_arrays: dict[str, FloatArray] = {}
        self._deserved_cache: dict[QueueInfo, list[tuple[int, float]]] = {}

    def _set_limits(self, ssn: Session) -> None:
        """Every queue's real capability (what it may use at most) and guarantee, as vectors and as
        Python floats for the water-fill and the per-job checks."""
        total = as_float(ssn.total)
        total_guarantee = sum(
            (as_float(ssn.vector(q.queue.guarantee)) for q in ssn.queues.values()), np.zeros_like(total)
        )
        self._real_all: dict[str, FloatArray] = {}
        self._real_lists: dict[str, list[float]] = {}
        self._guarantees: dict[str, list[float]] = {}
        for q in ssn.queues.values():
            guarantee = as_float(ssn.vector(q.queue.guarantee))
            real = np.maximum(total - total_guarantee, 0) + guarantee
            if q.queue.capability is not None:
                real = np.minimum(real, capability_cap(ssn.index, q.queue))
            self._real_all[q.name] = real
            self._real_lists[q.name] = real.tolist()
            self._guarantees[q.name] = guarantee.tolist()
        self._total: list[float] = total.tolist()
        self._dim_cols = [int(col) for col in np.flatnonzero(self.dims)]

    def _water_fill(self, queues: list[QueueInfo], requests: list[tuple[str, list[int]]]) -> dict[str, list[float]]:
        """Split the cluster by weight; a queue never deserves more than it requests or may use.

        Python floats on the handful of resource columns (numpy's per-call cost dwarfs the work on vectors
        this short); the same IEEE operations, column by column, as the vector form
        `min(old + remaining * weight share, real capability, request)`, then `max(.., guarantee)`."""
        width = len(self._total)
        dims = self._dim_cols
        real_lists, guarantees = self._real_lists, self._guarantees
        asked = {name: [float(value) for value in request] for name, request in requests}
        deserved = {q.name: [0.0] * width for q in queues}
        remaining = self._total
        met: set[str] = set()
        while True:
            weight = 0
            for q in queues:
                if q.name not in met:
                    weight += q.queue.weight
            if weight == 0:
                break
            before = remaining
            served: list[tuple[list[float], list[float]]] = []  # (old, new) of each queue served this round
            for q in queues:
                name = q.name
                if name in met:
                    continue
                old = deserved[name]
                part = q.queue.weight / weight
                request = asked[name]
                new = []
                for had, left, real, floor, want in zip(
                    old, remaining, real_lists[name], guarantees[name], request, strict=True
                ):
                    value = had + left * part  # then min(value, real, want) and max(value, floor), as builtins would
                    if real < value:
                        value = real
                    if want < value:
                        value = want
                    if floor > value:
                        value = floor
                    new.append(value)
                deserved[name] = new
                served.append((old, new))
                for col in dims:  # met: asks no more than it deserves now, or gained nothing
                    if not request[col] <= new[col]:
                        if new == old:
                            met.add(name)
                        break
                else:
                    met.add(name)
            if len(met) == len(queues):
                break  # the next round would find no weight left: what remains is not needed
            increased = [0.0] * width
            decreased = [0.0] * width
            for old, new in served:  # increased += max(new - old, 0), decreased += max(old - new, 0), queue by queue
                for col, (value, had) in enumerate(zip(new, old, strict=True)):
                    if value > had:
                        increased[col] += value - had
                    elif value < had:
                        decreased[col] -= value - had
            remaining = [
                max(left + down - up, 0.0) for left, down, up in zip(remaining, decreased, increased, strict=True)
            ]
            if remaining == before:
                break
            for col in dims:
                if remaining[col]:
                    break
            else:
                break  # nothing left to share on any quota resource
        return deserved

    def deserved_of(self, queue: QueueInfo) -> FloatArray:
        found = self._deserved_arrays.get(queue.name)
        if found is None:
            listed = self._deserved.get(queue.name)
            found = np.array(listed, dtype=np.float64) if listed is not None else np.zeros(len(self.ssn.index))
            self._deserved_arrays[queue.name] = found
        return found

    def _deserved_dims(self, queue: QueueInfo) -> list[tuple[int, float]]:
        """(column, deserved) over the quota dimensions as Python numbers: the per-placement checks below
        run on a handful of numbers, where numpy's per-call cost would dominate."""
        found = self._deserved_cache.get(queue)
        if found is None:
            listed = self._deserved.get(queue.name)
            found = [(col, listed[col] if listed is not None else 0.0) for col in self._dim_cols]
            self._deserved_cache[queue] = found
        return found

    def _queue_order(self, queue: Any) -> float:
        """Volcano's queue share: the largest allocated/deserved over the resources deserved names (1 where
        it deserves none of a resource it holds)."""
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

    def _overused(self, queue: QueueInfo) -> Refusal | None:
        allocated = queue.allocated.tolist()
        for col, want in self._deserved_dims(queue):
            if not want <= float(allocated[col]):
                return None
        return Refusal(f"queue {queue.name} overused: allocated reached its deserved share", RefusalCode.OVERUSED)

    def _allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        if queue.queue.state is not QueueState.OPEN:
            return Refusal(f"queue {queue.name} is {queue.queue.state.value}", RefusalCode.QUEUE_NOT_OPEN)
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
            return Refusal(
                f"cluster full: {index.names[col]} "
                f"{amount(index, col, float(queue.allocated[col]))}/{amount(index, col, float(self.ssn.total[col]))}"
                f" allocated to queue {queue.name}",
                RefusalCode.CLUSTER_FULL,
            )
        return Refusal(
            f"queue {queue.name} at deserved share {index.names[col]} "
            f"{amount(index, col, float(queue.allocated[col]))}/{amount(index, col, float(deserved[col]))}",
            RefusalCode.AT_DESERVED,
        )

    def _enqueueable(self, job: JobInfo) -> Refusal | None:
        """Is minResources + allocated + reserved within the queue's real capability on every quota
        resource the job asks for? In Python numbers (the same int sums, then the same float compare)."""
        queue = job.queue
        if queue.queue.state is not QueueState.OPEN:
            return Refusal(f"queue {queue.name} is {queue.queue.state.value}", RefusalCode.QUEUE_NOT_OPEN)
        asked: list[int] = job.min_resources.tolist()
        if not any(asked) or queue.name not in self.real_capability:
            return None
        real = self._real_lists[queue.name]
        allocated: list[int] = queue.allocated.tolist()
        inqueue: list[int] = queue.inqueue.tolist()
        for col in self._dim_cols:
            if asked[col] > 0 and float(asked[col] + allocated[col] + inqueue[col]) > real[col]:
                index = self.ssn.index
                return Refusal(
                    f"queue {queue.name} at capability {index.names[col]} "
                    f"{amount(index, col, float(allocated[col] + inqueue[col]))}/{amount(index, col, real[col])}",
                    RefusalCode.AT_CAPABILITY,
                )
        return None

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
