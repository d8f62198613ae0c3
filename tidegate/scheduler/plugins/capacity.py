"""capacity: queues with explicit deserved / capability / guarantee, optionally in a hierarchy.

- capability is a hard cap (realCapability also leaves room for other queues' guarantees); a resource
  it declares at 0 is capped at 0, except cpu and memory, where 0 is no cap (quota.capability_cap);
- deserved is the share a queue may lend out and reclaim back;
- guarantee is never reclaimed;
- with `parent` set, queues form a tree: usage counts against every ancestor, a child inherits
  its parent's capability where it sets none, and only leaf queues take jobs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tidegate.model.objects import ROOT_QUEUE, QueueState
from tidegate.model.resources import GPU_MEMORY, GPU_MILLI, NVIDIA_GPU, PODS
from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo
from tidegate.scheduler.node_table import FloatArray, IntArray
from tidegate.scheduler.plugins.quota import amount, as_float, capability_cap
from tidegate.scheduler.refusal import Refusal, RefusalCode
from tidegate.scheduler.session import Session

#: Resources that are GPU cards or parts of one.
CARD_RESOURCES = (NVIDIA_GPU, GPU_MEMORY, GPU_MILLI)


#: `CapacityPlugin._limit_reason` keeps at most this many refusals (then starts again).
MAX_REFUSALS = 4096


class CapacityPlugin(Plugin):
    name: ClassVar[str] = "capacity"
    reopens_in_place = True  # on_cycle_open recomputes the quotas; the votes are methods reading them

    def on_session_open(self, ssn: Session) -> None:
        self.on_cycle_open(ssn)
        ext = ssn.ext
        ext.queue_order.append(self._queue_order)
        ext.queue_allocatable.append(self._allocatable)
        ext.job_enqueueable.append(self._enqueueable)
        ext.reclaimable.append(self._reclaimable)
        ext.queue_reclaim_allowed.append(self._may_reclaim)
        ext.queue_reclaim_refusals[self._may_reclaim] = self._reclaims_nothing
        if ssn.hierarchical:
            ext.victim_queue_order.append(self._victim_queue_order)

    def on_cycle_open(self, ssn: Session) -> None:
        """Quotas for the queue specs and nodes as the cycle starts."""
        # Quotas depend only on the queue specs and the cluster's nodes: a session that lives across
        # cycles recomputes them only when one of those changed.
        inputs = (ssn.table.generation, ssn.queue_specs())
        if getattr(self, "_inputs", None) != inputs:
            self.ssn = ssn
            self.dims = ssn.quota_mask
            self.real_capability: dict[str, FloatArray] = {}
            self.deserved: dict[str, FloatArray] = {}
            self.guarantee: dict[str, FloatArray] = {
                name: as_float(ssn.vector(q.queue.guarantee)) for name, q in ssn.queues.items()
            }
            if ssn.hierarchical:
                self._build_tree(ssn.queues[ROOT_QUEUE])
            else:
                self._build_flat()
            #: Queues the tree walk never reached (parent missing, or a cycle of parents): they take no jobs,
            #: and the rest of the cluster schedules as usual (Volcano stops every queue instead).
            self.detached = {name for name in ssn.queues if name not in self.real_capability}
            for name in self.detached:
                self.real_capability[name] = np.zeros(len(ssn.index))
                self.deserved[name] = self.guarantee[name]
            #: Per queue, the (column, deserved) pairs its share is computed over.
            self._share_cols = {
                name: [(int(c), float(d[c])) for c in np.flatnonzero(self.dims & (d > 0))]
                for name, d in self.deserved.items()
            }
            #: Per queue, (column, real capability) over the quota dimensions, for the per-pod check.
            self._real_cols = {
                name: [(int(c), float(real[c])) for c in np.flatnonzero(self.dims)]
                for name, real in self.real_capability.items()
            }
            self._real_by_col = {name: dict(cols) for name, cols in self._real_cols.items()}
            dims = [int(c) for c in np.flatnonzero(self.dims)]
            #: Per queue, for the victim filter: the (column, guarantee) pairs it may not go below and
            #: the (column, deserved) pairs with a deserved amount, over the quota dimensions.
            self._guarantee_cols = {
                name: [(c, float(g[c])) for c in dims if g[c] > 0] for name, g in self.guarantee.items()
            }
            self._deserved_cols = {
                name: {c: float(d[c]) for c in dims if d[c] > 0} for name, d in self.deserved.items()
            }
            #: Per queue, the queue then its ancestors (`_chain`), made when first asked.
            self._chains: dict[str, list[QueueInfo]] = {}
            #: `_allocatable`'s answers by (queue, the task's request vector), with `Session.charged` when given:
            #: they hold while no queue's allocation changes (the quotas are these inputs').
            self._allocatable_memo: dict[tuple[str, int], tuple[int, Refusal | None]] = {}
            #: The (column, amount) pairs a minResources vector asks, by the session's (read-only) vector.
            self._asked_by_vector: dict[int, tuple[IntArray, list[tuple[int, int]]]] = {}
            #: `_limit_reason`'s refusals by (queue, resource column, amount held).
            self._refusals: dict[tuple[str, int, int], Refusal] = {}
            self._inputs = inputs
            self._pods_col = ssn.index.col[PODS]
            #: GPU card resources count as one when a victim's request is matched against the reclaimer's:
            #: whole cards hold their memory and thousandths, which a GPU slice asks for.
            cards = [ssn.index.col[name] for name in CARD_RESOURCES if name in ssn.index.col]
            self._family = dict.fromkeys(cards, cards[0]) if cards else {}

    # -- quotas ------------------------------------------------------------------------------------
    def _capability(self, queue: QueueInfo, inherited: FloatArray | None) -> FloatArray:
        cap = capability_cap(self.ssn.index, queue.queue)
        if inherited is not None:
            cap = np.minimum(cap, inherited)
        return cap

    def _deserved(self, queue: QueueInfo, real: FloatArray) -> FloatArray:
        spec = queue.queue.deserved
        deserved = as_float(self.ssn.index.vector(spec)) if spec is not None else np.zeros(len(self.ssn.index))
        return np.maximum(np.minimum(deserved, real), self.guarantee[queue.name])

    def _build_flat(self) -> None:
        total = as_float(self.ssn.total)
        total_guarantee = sum(self.guarantee.values(), np.zeros_like(total))
        for name, queue in self.ssn.queues.items():
            real = np.minimum(
                self._capability(queue, None), np.maximum(total - total_guarantee, 0) + self.guarantee[name]
            )
            self.real_capability[name] = real
            self.deserved[name] = self._deserved(queue, real)

    def _build_tree(self, root: QueueInfo) -> None:
        cap = self._capability(root, None)
        self.real_capability[root.name] = cap
        self.deserved[root.name] = self._deserved(root, cap)
        self._build_children(root)

    def _build_children(self, parent: QueueInfo) -> None:
        parent_real = self.real_capability[parent.name]
        siblings_guarantee = sum((self.guarantee[c.name] for c in parent.children), np.zeros_like(parent_real))
        for child in parent.children:
            room = np.maximum(parent_real - siblings_guarantee, 0) + self.guarantee[child.name]
            real = np.minimum(self._capability(child, parent_real), room)
            self.real_capability[child.name] = real
            self.deserved[child.name] = self._deserved(child, real)
            self._build_children(child)

    def _chain(self, queue: QueueInfo) -> list[QueueInfo]:
        """The queue then its ancestors up to the root: every level must allow a placement."""
        return [queue, *reversed(queue.ancestors)]

    # -- extension points --------------------------------------------------------------------------
    def _queue_order(self, queue: Any) -> float:
        """Volcano's share: the largest allocated/deserved over the resources the queue deserves."""
        cols = self._share_cols[queue.name]
        if not cols:
            return 1.0
        allocated = queue.allocated.tolist()  # max(0.0, ...) as a loop over Python numbers: once per placement
        result = 0.0
        for c, d in cols:
            share = float(allocated[c]) / d
            if share > result:
                result = share
        return result

    @staticmethod
    def _victim_queue_order(victim: QueueInfo, preemptor: QueueInfo) -> float:
        """Volcano's hierarchical victim queue order: victims of queues sharing more ancestors with the
        preemptor's go first (getQueueLevel: the last depth at which the two ancestor chains still agree,
        0 when they part at once)."""
        level = 0
        for depth, (mine, theirs) in enumerate(zip(victim.ancestors, preemptor.ancestors, strict=False)):
            if mine is not theirs:
                break
            level = depth
        return -float(level)

    def _limit_reason(self, queue: QueueInfo, col: int, current: int) -> Refusal:
        """The refusal of a queue (or ancestor) that holds `current` of resource `col` and would go past its real
        capability there (the first such resource the vote met, in column order). The same refusal for the same
        amount held: kept until the quotas change (votes refuse many jobs at one usage)."""
        key = (queue.name, col, current)
        found = self._refusals.get(key)
        if found is None:
            if len(self._refusals) >= MAX_REFUSALS:
                self._refusals.clear()
            index, real = self.ssn.index, float(self.real_capability[queue.name][col])
            found = self._refusals[key] = Refusal(
                f"queue {queue.name} at capability {index.names[col]} "
                f"{amount(index, col, float(current))}/{amount(index, col, real)}",
                RefusalCode.AT_CAPABILITY,
            )
        return found

    def _detached_reason(self, queue: QueueInfo) -> Refusal | None:
        if queue.name not in self.detached:
            return None
        parent = queue.queue.parent or ROOT_QUEUE
        message = f"queue {queue.name} is not in the queue tree: parent {parent} does not exist or forms a cycle"
        return Refusal(message, RefusalCode.NOT_A_LEAF)

    def _allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        """Whether the queue may take the pod now (Volcano's allocatable: open, a leaf, within its real
        capability at every level), asked again only once some queue's allocation changed."""
        if task.shape_id < 0:
            return self._allocatable_now(queue, task)
        # It reads only the task's request: tasks the session made share one vector per request, kept while it lives.
        key, charged = (queue.name, id(task.request)), self.ssn.charged
        held = self._allocatable_memo.get(key)
        if held is not None and held[0] == charged:
            return held[1]
        found = self._allocatable_now(queue, task)
        self._allocatable_memo[key] = (charged, found)
        return found

    def _allocatable_now(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        if queue.queue.state is not QueueState.OPEN:
            return Refusal(f"queue {queue.name} is {queue.queue.state.value}", RefusalCode.QUEUE_NOT_OPEN)
        if reason := self._detached_reason(queue):
            return reason
        if not queue.is_leaf:
            return Refusal(f"queue {queue.name} has child queues; only leaf queues take jobs", RefusalCode.NOT_A_LEAF)
        asked_cols = _nonzero(task)
        chain = self._chains.get(queue.name)
        if chain is None:
            chain = self._chains[queue.name] = self._chain(queue)
        for level in chain:
            # _limit_reason's test in Python floats (the same conversions and addition as the arrays'),
            # which is most of the cost of placing a pod otherwise; the message still comes from it. Only the
            # resources the task asks for can exceed: the quota ones among them are looked at.
            allocated = level.allocated.tolist()
            limits = self._real_by_col[level.name]
            for col, asked in asked_cols:
                limit = limits.get(col)
                if limit is not None and asked > 0 and float(allocated[col]) + float(asked) > limit:
                    return self._limit_reason(level, col, allocated[col])
        return None

    def _enqueueable(self, job: JobInfo) -> Refusal | None:
        queue = job.queue
        if queue.queue.state is not QueueState.OPEN:
            return Refusal(f"queue {queue.name} is {queue.queue.state.value}", RefusalCode.QUEUE_NOT_OPEN)
        if reason := self._detached_reason(queue):
            return reason
        if not queue.is_leaf:
            return Refusal(f"queue {queue.name} has child queues; only leaf queues take jobs", RefusalCode.NOT_A_LEAF)
        floor = job.min_resources
        held = self._asked_by_vector.get(id(floor))
        if held is not None and held[0] is floor:
            asked = held[1]
        else:
            asked = [(col, least) for col, least in enumerate(floor.tolist()) if least > 0]
            if not floor.flags.writeable:  # the session's vector of a minResources (held here: its id stays its own)
                self._asked_by_vector[id(floor)] = (floor, asked)
        if not asked:
            return None
        for level in self._chain(queue):
            # _limit_reason's test in Python floats (the same conversions and additions as the arrays'; a
            # pass of enqueue asks this of each minResources it meets); the message still comes from it.
            allocated, inqueue, limits = level.allocated.tolist(), level.inqueue.tolist(), self._real_by_col[level.name]
            for col, least in asked:
                limit = limits.get(col)
                if limit is not None and float(allocated[col] + inqueue[col]) + float(least) > limit:
                    return self._limit_reason(level, col, allocated[col] + inqueue[col])
        return None

    def _may_reclaim(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        """A queue may reclaim while, on some resource it asks for, it stays within its deserved share."""
        if reason := self._detached_reason(queue):
            return reason
        # In Python floats, the same conversions and additions as the arrays' (asked of every starving pod
        # of a queue below its share, every cycle): over the quota resources the task asks for, none may go
        # beyond the real capability, and some must stay within a deserved amount.
        allocated, limits = queue.allocated.tolist(), self._real_by_col[queue.name]
        deserved = self._deserved_cols[queue.name]
        within = False
        for col, asked in _nonzero(task):
            limit = limits.get(col)
            if limit is None:
                continue  # not a quota resource (pod slots)
            future = float(allocated[col] + asked)
            if future > limit:
                return Refusal(f"queue {queue.name} would exceed its capability", RefusalCode.AT_CAPABILITY)
            share = deserved.get(col)
            if share is not None and future <= share:
                within = True
        return None if within else Refusal(f"queue {queue.name} is at its deserved share", RefusalCode.AT_DESERVED)

    def _reclaims_nothing(self, queue: QueueInfo) -> bool:
        """`_may_reclaim`'s queue-wide twin: it refuses every task of the queue (each asks at least one unit
        of something) when the queue is detached, or when one more unit would take it past every deserved
        amount it has (a queue at its share on each resource: the common case for a queue with a backlog)."""
        if queue.name in self.detached:
            return True
        allocated = queue.allocated.tolist()
        return all(float(allocated[col] + 1) > share for col, share in self._deserved_cols[queue.name].items())

    def _reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims that hold some resource the reclaimer asks for (pod slots aside: Volcano's
        shouldSkipReclaimee), whose queue stays at or above its guarantee and is above its deserved share on
        some resource the victim uses (a victim using only resources without a deserved amount always is).
        Python numbers, not arrays: reclaim asks this of every running pod of the lending queues."""
        allocations: dict[str, list[float]] = {}
        victims = []
        family = self._family
        wanted = {family.get(col, col) for col, _ in _nonzero(reclaimer)} - {self._pods_col}
        for victim in candidates:
            request = _nonzero(victim)
            if not any(family.get(col, col) in wanted for col, _ in request):
                continue  # evicting it frees nothing the reclaimer asks for
            queue = victim.job.queue
            name = queue.name
            allocated = allocations.get(name)
            if allocated is None:
                allocated = allocations[name] = [float(x) for x in queue.allocated.tolist()]
            asked = dict(request)
            if any(allocated[c] - asked.get(c, 0) < g for c, g in self._guarantee_cols[name]):
                continue  # never below the victim queue's guarantee
            deserved = self._deserved_cols[name]
            relevant = [(c, deserved[c]) for c, _ in request if c in deserved]
            if relevant and not any(allocated[c] > d for c, d in relevant):
                continue  # the victim queue is within its deserved share
            for c, a in request:
                allocated[c] -= a
            victims.append(victim)
        return victims


def _nonzero(task: TaskInfo) -> tuple[tuple[int, int], ...]:
    """(column, amount) for every resource the task's request names."""
    return task.request_nonzero or tuple((int(c), int(task.request[c])) for c in np.flatnonzero(task.request))
