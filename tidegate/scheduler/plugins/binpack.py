"""binpack: prefer nodes that are already full, so whole nodes stay free for large jobs.

Arguments as in Volcano: binpack.weight (1), binpack.cpu (1), binpack.memory (1),
binpack.resources ("nvidia.com/gpu, ...") and binpack.resources.<name> (weight, default 1).
"""

from __future__ import annotations

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
    name = "binpack"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.weight = self.float_arg("binpack.weight", 1)
        weights = {CPU: self.float_arg("binpack.cpu", 1), MEMORY: self.float_arg("binpack.memory", 1)}
        extra = [r.strip() for r in self.str_arg("binpack.resources", "").split(",") if r.strip()]
        for resource in extra:
            weights[resource] = self.float_arg(f"binpack.resources.{resource}", 1)
        cols = [(ssn.index.col[name], w) for name, w in weights.items() if name in ssn.index.col and w > 0]
        self.cols = np.array([c for c, _ in cols], dtype=np.int64)
        self.weights = np.array([w for _, w in cols], dtype=np.float64)
        self.col_list = [c for c, _ in cols]
        self.weight_list = [float(w) for w in self.weights]
        if self.weight and len(self.cols):
            ssn.ext.dynamic_scores.append(self.dynamic_score)
            if len(self.cols) < PAIRWISE:
                ssn.ext.row_scores[self.dynamic_score] = self.score_row

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
        table = self.ssn.table
        alloc_row, used_row = table.alloc_rows[row], table.used_row(row)
        request = task.request_list or task.request.tolist()
        asked = [request[col] > 0 for col in self.col_list]
        if not any(asked):
            return 0.0
        weighted: float | None = None
        weight_sum: float | None = None
        for col, weight, wanted in zip(self.col_list, self.weight_list, asked, strict=True):
            alloc = float(alloc_row[col])
            final = float(used_row[col] + request[col])
            per = final / alloc if alloc > 0 and final <= alloc else 0.0
            weight = weight * wanted
            term = per * weight
            weighted = term if weighted is None else weighted + term
            weight_sum = weight if weight_sum is None else weight_sum + weight
        assert weighted is not None and weight_sum is not None
        return weighted / weight_sum * MAX_SCORE * self.weight
