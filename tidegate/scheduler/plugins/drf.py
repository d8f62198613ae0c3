"""drf: Dominant Resource Fairness between jobs: the job with the smallest dominant share goes first.

With `enableHierarchy: true` (next to the plugin's name, as in Volcano) it also orders queues, and judges
reclaim victims, by hierarchical DRF (hdrf.py)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, TaskInfo
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.plugins.hdrf import HdrfTree
from tidegate.scheduler.session import Session


class DrfPlugin(Plugin):
    name: ClassVar[str] = "drf"
    reopens_in_place = True  # see on_cycle_open

    def on_session_open(self, ssn: Session) -> None:
        # The resources shares are taken over, and the cluster totals, change only with the node table: a
        # session that lives across cycles computes them once per node list.
        if getattr(self, "_generation", None) != ssn.table.generation:
            self._generation = ssn.table.generation
            self._dims = ssn.quota_mask & (ssn.total > 0)
            self._total = ssn.total[self._dims].astype(np.float64)
            self._cols = [int(c) for c in np.flatnonzero(self._dims)]
            self._totals: list[float] = self._total.tolist()
        dims, total, cols, totals = self._dims, self._total, self._cols, self._totals

        def share(allocated: IntArray) -> float:
            if not len(total):
                return 0.0
            return float((allocated[dims] / total).max())

        shares: dict[JobInfo, float] = {}
        self._shares = shares

        def job_order(job: Any) -> float:
            """share(job.allocated) in Python floats (numpy's per-call cost dominates on a few numbers),
            remembered until the job's allocation changes (every change fires on_allocate/on_deallocate)."""
            found = shares.get(job)
            if found is None:
                if cols:
                    allocated: list[int] = job.allocated.tolist()
                    found = max(allocated[col] / amount for col, amount in zip(cols, totals, strict=True))
                else:
                    found = 0.0
                shares[job] = found
            return found

        hierarchy = self.switches.get("enableHierarchy", False)
        tree = HdrfTree(ssn.queues.values(), cols, totals) if hierarchy else None
        self._tree = tree

        def forget(task: TaskInfo) -> None:
            shares.pop(task.job, None)
            if tree is not None:
                tree.touch(task.job)

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            mine = share(preemptor.job.allocated + preemptor.request)
            victims = []
            for victim in candidates:
                theirs = share(victim.job.allocated - victim.request)
                if mine < theirs or abs(mine - theirs) < 1e-9:
                    victims.append(victim)
            return victims

        ssn.ext.job_order.append(job_order)
        ssn.ext.preemptable.append(preemptable)
        ssn.ext.on_allocate.append(forget)
        ssn.ext.on_deallocate.append(forget)
        if tree is not None:
            ssn.ext.queue_order.append(tree.key)
            ssn.ext.reclaimable.append(tree.victims)

    def on_cycle_open(self, ssn: Session) -> None:
        """Shares are remembered for one cycle (jobs that left are forgotten with them); the totals they
        are taken over hold while the node table does."""
        self._shares.clear()
        if self._tree is not None:
            self._tree.forget()
