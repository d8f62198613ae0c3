"""binpack: prefer nodes that are already full, so whole nodes stay free for large jobs.

Arguments as in Volcano: binpack.weight (1), binpack.cpu (1), binpack.memory (1),
binpack.resources ("nvidia.com/gpu, ...") and binpack.resources.<name> (weight, default 1).
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
#: numpy sums 8 or more numbers pairwise; below that, left to right like score_row does.
PAIRWISE = 8


class BinpackPlugin(Plugin):
    name: ClassVar[str] = "binpack"
    reopens_in_place = True  # its score reads the request and the node table

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        if getattr(self, "_generation", None) != ssn.table.generation:
            self._setup(ssn)
        if self.weight and len(self.cols):
            ssn.ext.dynamic_scores.append(self.dynamic_score)
            if len(self.cols) < PAIRWISE:
                ssn.ext.row_scores[self.dynamic_score] = self.score_row
                ssn.ext.node_state_only.add(self.score_row)

    def _setup(self, ssn: Session) -> None:
        """Weights and node capacities: fixed while the node table is (a long-lived session rebuilds
        them only when nodes change)."""
        self._generation = ssn.table.generation
        self.weight, weights = self._weights()
        cols = [(ssn.index.col[name], w) for name, w in weights.items() if name in ssn.index.col and w > 0]
        self.cols = np.array([c for c, _ in cols], dtype=np.int64)
        self.weights = np.array([w for _, w in cols], dtype=np.float64)
        self._col_weights = [(int(c), float(w)) for c, w in zip(self.cols, self.weights, strict=True)]
        #: Per node, its allocatable of the weighted resources as floats (as numpy converts them), made when the
        #: node is first scored: a long-lived session sets up again whenever nodes change, and scores a few.
        self._alloc_rows: dict[int, list[float]] = {}
        self._table_rows = ssn.table.alloc_rows

    def check_arguments(self) -> None:
        self._weights()

    def _weights(self) -> tuple[float, dict[str, float]]:
        """binpack.weight, and each resource's weight (cpu, memory, and those binpack.resources names)."""
        weights = {CPU: self.float_arg("binpack.cpu", 1), MEMORY: self.float_arg("binpack.memory", 1)}
        extra = [r.strip() for r in self.str_arg("binpack.resources", "").split(",") if r.strip()]
        for resource in extra:
            weights[resource] = self.float_arg(f"binpack.resources.{resource}", 1)
        return self.float_arg("binpack.weight", 1), weights

    def dynamic_score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        table = self.ssn.table
        request = task.request[self.cols]
        asked = request > 0
        if not asked.any():
            return np.zeros(len(table.alloc[rows]), dtype=np.float64)
        alloc = table.alloc[rows][:, self.cols].astype(np.float64)
        final = (table.used[rows][:, self.cols] + request).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where((alloc > 0) & (final <= alloc), final / alloc, 0.0)
        weights = self.weights * asked
        score: FloatArray = (per * weights).sum(axis=1) / weights.sum() * MAX_SCORE * self.weight
        return score

    def score_row(self, task: TaskInfo, row: int) -> float:
        """dynamic_score() for one node, with Python floats doing the same IEEE operations in the same order."""
        used = self.ssn.table.used_row(row)
        alloc_row = self._alloc_rows.get(row)
        if alloc_row is None:
            allocatable = self._table_rows[row]
            alloc_row = self._alloc_rows[row] = [float(allocatable[col]) for col, _ in self._col_weights]
        request = task.request_list or task.request.tolist()
        if len(self._col_weights) == 2:  # the usual cpu + memory, unrolled
            (c0, w0), (c1, w1) = self._col_weights
            a0, a1 = request[c0], request[c1]
            if a0 <= 0 and a1 <= 0:
                return 0.0
            if a0 <= 0:
                w0 = w0 * False
            if a1 <= 0:
                w1 = w1 * False
            alloc0, alloc1 = alloc_row
            f0, f1 = float(used[c0] + a0), float(used[c1] + a1)
            t0 = (f0 / alloc0 if alloc0 > 0 and f0 <= alloc0 else 0.0) * w0
            t1 = (f1 / alloc1 if alloc1 > 0 and f1 <= alloc1 else 0.0) * w1
            return (t0 + t1) / (w0 + w1) * MAX_SCORE * self.weight
        weighted = weight_sum = 0.0
        asked = False
        for i, (col, weight) in enumerate(self._col_weights):
            amount = request[col]
            if amount > 0:
                asked = True
            else:
                weight = weight * False  # numpy's weights * asked
            alloc = alloc_row[i]
            final = float(used[col] + amount)
            term = (final / alloc if alloc > 0 and final <= alloc else 0.0) * weight
            # numpy sums left to right from the first element (below PAIRWISE numbers)
            weighted = term if i == 0 else weighted + term
            weight_sum = weight if i == 0 else weight_sum + weight
        if not asked:
            return 0.0
        return weighted / weight_sum * MAX_SCORE * self.weight
