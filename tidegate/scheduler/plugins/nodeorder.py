"""nodeorder: kube-scheduler's scores (least/most requested, balanced, node affinity, taint toleration).

Weights use Volcano's argument names and defaults: leastrequested.weight 1, mostrequested.weight 0,
balancedresource.weight 1, nodeaffinity.weight 2, tainttoleration.weight 3. Each score is 0..100.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from tidegate.model.resources import CPU, MEMORY
from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import TaskInfo
from tidegate.scheduler.node_table import FloatArray, IntArray
from tidegate.scheduler.session import Session

MAX_SCORE = 100.0


class NodeOrderPlugin(Plugin):
    name: ClassVar[str] = "nodeorder"
    reopens_in_place = True  # its scores read the pod and the node table

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        if getattr(self, "_generation", None) != ssn.table.generation:
            self._setup(ssn)
        if self.affinity or self.taint:
            ssn.ext.static_scores.append(self.static_score)
        if self.least or self.most or self.balanced:
            ssn.ext.dynamic_scores.append(self.dynamic_score)
            ssn.ext.row_scores[self.dynamic_score] = self.score_row
            ssn.ext.node_state_only.add(self.score_row)

    def _setup(self, ssn: Session) -> None:
        """Weights and node capacities: fixed while the node table is (a long-lived session rebuilds
        them only when nodes change)."""
        self._generation = ssn.table.generation
        self.least, self.most, self.balanced, self.affinity, self.taint = self._weights()
        self.cols = np.array([ssn.index.col[CPU], ssn.index.col[MEMORY]])
        self._cpu, self._mem = (int(c) for c in self.cols)
        #: Per node, its cpu and memory allocatable as floats (as numpy converts them), made when the node is first
        #: scored: a long-lived session sets up again whenever nodes change, and scores a few.
        self._alloc: dict[int, tuple[float, float]] = {}
        self._table_rows = ssn.table.alloc_rows

    def check_arguments(self) -> None:
        self._weights()

    def _weights(self) -> tuple[float, float, float, float, float]:
        """The weights of least-requested, most-requested, balanced, node affinity and taint toleration."""
        return (
            self.float_arg("leastrequested.weight", 1),
            self.float_arg("mostrequested.weight", 0),
            self.float_arg("balancedresource.weight", 1),
            self.float_arg("nodeaffinity.weight", 2),
            self.float_arg("tainttoleration.weight", 3),
        )

    def static_score(self, task: TaskInfo) -> FloatArray:
        n = len(self.ssn.table)
        score = np.zeros(n, dtype=np.float64)
        affinity = task.pod.affinity
        if self.affinity and affinity is not None and affinity.preferred and n:
            raw = np.zeros(n, dtype=np.float64)
            for term in affinity.preferred:
                raw += term.weight * self.ssn.label_index.term(term.preference)
            top = raw.max()
            if top > 0:
                score += self.affinity * raw * (MAX_SCORE / top)
        if self.taint:
            counts = self.ssn.taint_index.intolerable_preferred(task.pod.tolerations)
            top = counts.max() if len(counts) else 0
            if top > 0:
                score += self.taint * (MAX_SCORE - counts * (MAX_SCORE / top))
            else:
                score += self.taint * MAX_SCORE
        return score

    def dynamic_score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        table = self.ssn.table
        alloc = table.alloc[rows][:, self.cols].astype(np.float64)
        requested = (table.used[rows][:, self.cols] + task.request[self.cols]).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(alloc > 0, requested / alloc, 1.0)
        fraction = np.clip(fraction, 0.0, 1.0)
        score = np.zeros(len(fraction), dtype=np.float64)
        if self.least:
            score += self.least * (1.0 - fraction).mean(axis=1) * MAX_SCORE
        if self.most:
            score += self.most * fraction.mean(axis=1) * MAX_SCORE
        if self.balanced:
            score += self.balanced * (1.0 - np.abs(fraction[:, 0] - fraction[:, 1])) * MAX_SCORE
        return score

    def score_row(self, task: TaskInfo, row: int) -> float:
        """dynamic_score() for one node, with Python floats doing the same IEEE operations in the same order."""
        used = self.ssn.table.used_row(row)
        request = task.request_list or task.request.tolist()
        cpu, mem = self._cpu, self._mem
        allocs = self._alloc.get(row)
        if allocs is None:
            allocatable = self._table_rows[row]
            allocs = self._alloc[row] = (float(allocatable[cpu]), float(allocatable[mem]))
        alloc = allocs[0]
        f_cpu = float(used[cpu] + request[cpu]) / alloc if alloc > 0 else 1.0
        f_cpu = 0.0 if f_cpu < 0.0 else 1.0 if f_cpu > 1.0 else f_cpu  # np.clip(fraction, 0.0, 1.0)
        alloc = allocs[1]
        f_mem = float(used[mem] + request[mem]) / alloc if alloc > 0 else 1.0
        f_mem = 0.0 if f_mem < 0.0 else 1.0 if f_mem > 1.0 else f_mem
        score = 0.0
        if self.least:
            score += self.least * (((1.0 - f_cpu) + (1.0 - f_mem)) / 2) * MAX_SCORE
        if self.most:
            score += self.most * ((f_cpu + f_mem) / 2) * MAX_SCORE
        if self.balanced:
            score += self.balanced * (1.0 - abs(f_cpu - f_mem)) * MAX_SCORE
        return score
