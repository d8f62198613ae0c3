"""predicates: can a pod run on a node at all? nodeSelector, required node affinity, taints, resources."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import TaskInfo
from tidegate.scheduler.node_table import BoolArray, IntArray
from tidegate.scheduler.session import Session


class PredicatesPlugin(Plugin):
    name: ClassVar[str] = "predicates"
    reopens_in_place = True  # its filters read the pod and the node table (its taint cache is the table's)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.ext.static_filters.append(self.static_filters)
        ssn.ext.dynamic_filters.append(self)
        ssn.ext.row_filters[self] = self.fit_row
        ssn.ext.node_state_only.add(self.fit_row)
        self._taint_cache: dict[object, list[tuple[str, BoolArray]]] = {}

    def static_filters(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        pod = task.pod
        out: list[tuple[str, BoolArray]] = []
        if pod.node_selector:
            out.append(("nodeSelector mismatch", self.ssn.label_index.selector(pod.node_selector)))
        if pod.affinity is not None and pod.affinity.required is not None:
            mask = np.logical_or.reduce(
                [self.ssn.label_index.term(term) for term in pod.affinity.required],
                initial=False,
            )
            out.append(("node affinity mismatch", mask))
        out.extend(self._taint_filters(task))
        return out

    def _taint_filters(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        cached = self._taint_cache.get(task.pod.tolerations)
        if cached is None:
            index = self.ssn.taint_index
            blocking = index.untolerated(task.pod.tolerations)
            cached = []
            by_reason: dict[str, list[int]] = {}
            for set_id, taint in enumerate(blocking):
                if taint is not None:
                    by_reason.setdefault(f"untolerated taint {taint}", []).append(set_id)
            for reason, set_ids in by_reason.items():
                cached.append((reason, ~np.isin(index.set_of_node, set_ids)))
            self._taint_cache[task.pod.tolerations] = cached
        return cached

    # -- resources (dynamic) -----------------------------------------------------------------------
    def fit(self, task: TaskInfo, rows: IntArray | slice) -> BoolArray:
        table = self.ssn.table
        cols = np.flatnonzero(task.request)
        idle = table.alloc[rows][:, cols] - table.used[rows][:, cols]
        return np.asarray((idle >= task.request[cols]).all(axis=1), dtype=bool)

    def fit_row(self, task: TaskInfo, row: int) -> bool:
        """fit() for one node, in Python ints."""
        table = self.ssn.table
        alloc, used = table.alloc_rows[row], table.used_row(row)
        for col, amount in task.request_nonzero or [(c, a) for c, a in enumerate(task.request.tolist()) if a]:
            if alloc[col] - used[col] < amount:
                return False
        return True

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        table = self.ssn.table
        idle = table.idle()
        return [
            (f"insufficient {table.index.names[col]}", idle[:, col] >= task.request[col])
            for col in np.flatnonzero(task.request)
        ]
