"""predicates: can a pod run on a node at all? nodeSelector, required node affinity, taints, resources, and
required pod affinity and anti-affinity (`pod_affinity.py`; Volcano's predicate.PodAffinityEnable, on by default)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from tidegate.scheduler.framework import Plugin, PluginArgumentError
from tidegate.scheduler.info import TaskInfo
from tidegate.scheduler.labels import member
from tidegate.scheduler.node_table import BoolArray, IntArray
from tidegate.scheduler.pod_affinity import HOLDING, PodAffinityIndex
from tidegate.scheduler.session import Session

POD_AFFINITY_ARGUMENT = "predicate.PodAffinityEnable"


class PredicatesPlugin(Plugin):
    name: ClassVar[str] = "predicates"
    reopens_in_place = True  # its filters read the pod and the node table (its taint cache is the table's)

    def check_arguments(self) -> None:
        self._pod_affinity_enabled()

    def _pod_affinity_enabled(self) -> bool:
        value = self.arguments.get(POD_AFFINITY_ARGUMENT, True)
        if not isinstance(value, bool):
            raise PluginArgumentError(self.name, POD_AFFINITY_ARGUMENT, f"{value!r} is not true or false")
        return value

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.ext.static_filters.append(self.static_filters)
        ssn.ext.dynamic_filters.append(self)
        ssn.ext.row_filters[self] = self.fit_row
        ssn.ext.row_explains[self] = self.explain_row
        ssn.ext.node_state_only.add(self.fit_row)
        self._taint_cache: dict[object, list[tuple[str, BoolArray]]] = {}
        self.pod_affinity: PodAffinityIndex | None = None
        if ssn.affinity_tasks and self._pod_affinity_enabled():  # no pod asks for any: nothing is looked at
            self._open_pod_affinity(ssn)

    def _open_pod_affinity(self, ssn: Session) -> None:
        index = self.pod_affinity = PodAffinityIndex(len(ssn.table), ssn.label_index.column, ssn.namespace_labels)
        index.reset(ssn.namespace_labels, _holding(ssn))

        def placed(task: TaskInfo) -> None:
            grown = index.grown
            index.place(task)
            if index.grown != grown:  # a pod that others want to be with: pods blocked on it get another look
                ssn.freed += 1

        ssn.ext.placement_filters.append(index)
        ssn.ext.on_allocate.append(placed)
        ssn.ext.on_deallocate.append(placed)

    def on_cycle_open(self, ssn: Session) -> None:
        """Pods that left between cycles (their jobs removed, finished) stop counting, and pending pods' masks
        are made afresh; with other namespace labels, everything is counted afresh."""
        index = self.pod_affinity
        if index is None:
            return
        if index.namespace_labels is not ssn.namespace_labels:
            index.reset(ssn.namespace_labels, _holding(ssn))
            return
        for task in list(index.counted):
            index.place(task, gone=ssn.tasks.get(task.key) is not task)
        index.forget_askers()

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
                cached.append((reason, ~member(index.set_of_node, set_ids)))
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

    def explain_row(self, task: TaskInfo, row: int) -> int:
        """explain() for one node, in Python ints: the first requested resource (in column order) the node
        lacks, or -1."""
        table = self.ssn.table
        alloc, used = table.alloc_rows[row], table.used_row(row)
        asked = task.request_nonzero or [(c, a) for c, a in enumerate(task.request.tolist()) if a]
        for i, (col, amount) in enumerate(asked):
            if alloc[col] - used[col] < amount:
                return i
        return -1


def _holding(ssn: Session) -> list[TaskInfo]:
    return [task for task in ssn.tasks.values() if task.status in HOLDING and task.node >= 0]
