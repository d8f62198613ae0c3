"""drf: Dominant Resource Fairness between jobs: the job with the smallest dominant share goes first."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import JobInfo, TaskInfo
from tidegate.scheduler.node_table import IntArray
from tidegate.scheduler.session import Session


class DrfPlugin(Plugin):
    name = "drf"

    def on_session_open(self, ssn: Session) -> None:
        dims = ssn.quota_mask & (ssn.total > 0)
        total = ssn.total[dims].astype(np.float64)

        def share(allocated: IntArray) -> float:
            if not len(total):
                return 0.0
            return float((allocated[dims] / total).max())

        cols = [int(c) for c in np.flatnonzero(dims)]
        totals: list[float] = total.tolist()

        shares: dict[JobInfo, float] = {}

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

        def forget(task: TaskInfo) -> None:
            shares.pop(task.job, None)

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
