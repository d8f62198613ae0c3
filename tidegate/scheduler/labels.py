"""Node labels and taints encoded as integer columns so selectors evaluate over all nodes at once."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from tidegate.model.objects import NodeSelectorRequirement, NodeSelectorTerm, Taint, TaintEffect, Toleration
from tidegate.scheduler.node_table import BoolArray, IntArray

MISSING = -1
#: Up to this many codes, membership is a comparison per code: np.isin's set-up costs more than a few.
FEW_CODES = 8


def member(codes: IntArray, wanted: Collection[int]) -> BoolArray:
    """Per element of `codes`, whether it is one of `wanted` (what `np.isin(codes, list(wanted))` says)."""
    if len(wanted) > FEW_CODES:
        found: BoolArray = np.isin(codes, list(wanted))
        return found
    out = np.zeros(len(codes), dtype=bool)
    for code in wanted:
        out |= codes == code
    return out


class LabelIndex:
    """Lazily built per-key code columns: code -1 where a node lacks the label."""

    def __init__(self, labels: Sequence[dict[str, str]]) -> None:
        self._labels = labels
        self._columns: dict[str, tuple[IntArray, dict[str, int]]] = {}

    def column(self, key: str) -> tuple[IntArray, dict[str, int]]:
        found = self._columns.get(key)
        if found is None:
            vocab: dict[str, int] = {}
            codes = np.fromiter(
                (
                    MISSING if (v := labels.get(key)) is None else vocab.setdefault(v, len(vocab))
                    for labels in self._labels
                ),
                dtype=np.int64,
                count=len(self._labels),
            )
            found = (codes, vocab)
            self._columns[key] = found
        return found

    def carried(self, labels: Sequence[dict[str, str]], kept: IntArray) -> LabelIndex:
        """The index of a node list made of this one's `kept` rows (in order) and then joining nodes (`labels`:
        every node's, in that order): the columns built so far are carried, the joining nodes' codes added (a
        value new to a key takes the next code; codes of values no node has any more stay unused)."""
        index = LabelIndex(labels)
        joined = labels[len(kept) :]
        for key, (codes, vocab) in self._columns.items():
            vocab = dict(vocab)
            tail = np.fromiter(
                (MISSING if (v := node.get(key)) is None else vocab.setdefault(v, len(vocab)) for node in joined),
                dtype=np.int64,
                count=len(joined),
            )
            index._columns[key] = (np.concatenate([codes[kept], tail]), vocab)
        return index

    def equals(self, key: str, value: str) -> BoolArray:
        codes, vocab = self.column(key)
        code = vocab.get(value)
        if code is None:
            return np.zeros(len(codes), dtype=bool)
        out: BoolArray = codes == code
        return out

    def requirement(self, req: NodeSelectorRequirement) -> BoolArray:
        codes, vocab = self.column(req.key)
        op = req.operator
        if op in ("In", "NotIn"):
            wanted = [vocab[v] for v in req.values if v in vocab]
            hit = member(codes, wanted)
            if op == "In":
                return hit
            out: BoolArray = ~hit
            return out
        if op == "Exists":
            exists: BoolArray = codes != MISSING
            return exists
        if op == "DoesNotExist":
            missing: BoolArray = codes == MISSING
            return missing
        # Gt / Lt compare integers: evaluate per distinct value.
        by_code = {code: req.matches({req.key: value}) for value, code in vocab.items()}
        lookup = np.array([by_code[c] for c in range(len(vocab))] + [False], dtype=bool)
        result: BoolArray = lookup[codes]  # MISSING (-1) picks the trailing False
        return result

    def term(self, term: NodeSelectorTerm) -> BoolArray:
        """Nodes matching every requirement; Kubernetes: "A null or empty node selector term matches no objects"."""
        mask = np.full(len(self._labels), bool(term.match_expressions), dtype=bool)
        for req in term.match_expressions:
            mask &= self.requirement(req)
        return mask

    def selector(self, node_selector: dict[str, str]) -> BoolArray:
        mask = np.ones(len(self._labels), dtype=bool)
        for key, value in node_selector.items():
            mask &= self.equals(key, value)
        return mask


class TaintIndex:
    """Nodes grouped by identical taint sets, so toleration checks run once per distinct set."""

    def __init__(self, taints: Sequence[tuple[Taint, ...]]) -> None:
        sets: dict[tuple[Taint, ...], int] = {}
        self.set_of_node: IntArray = np.fromiter(
            (sets.setdefault(t, len(sets)) for t in taints), dtype=np.int64, count=len(taints)
        )
        self.sets: list[tuple[Taint, ...]] = list(sets)

    def carried(self, taints: Sequence[tuple[Taint, ...]], kept: IntArray) -> TaintIndex:
        """The index a node list made of this one's `kept` rows (in order) and then joining nodes (`taints`:
        every node's, in that order) would have, the sets numbered as that list first shows them (the order
        reasons are charged in), with only the joining nodes' taints looked up."""
        codes = {taint_set: i for i, taint_set in enumerate(self.sets)}
        tail = [codes.setdefault(taint_set, len(codes)) for taint_set in taints[len(kept) :]]
        of_node = np.concatenate([self.set_of_node[kept], np.array(tail, dtype=np.int64)])
        present, first = np.unique(of_node, return_index=True)
        order = present[np.argsort(first, kind="stable")]  # set numbers by first appearance
        renumber = np.zeros(len(codes), dtype=np.int64)
        renumber[order] = np.arange(len(order))
        every = list(codes)
        index = TaintIndex(())
        index.set_of_node = renumber[of_node]
        index.sets = [every[code] for code in order.tolist()]
        return index

    def untolerated(self, tolerations: tuple[Toleration, ...]) -> list[Taint | None]:
        """Per taint set, the first NoSchedule/NoExecute taint the tolerations do not cover."""
        out: list[Taint | None] = []
        for taint_set in self.sets:
            blocking = None
            for taint in taint_set:
                if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
                    continue
                if not any(tol.tolerates(taint) for tol in tolerations):
                    blocking = taint
                    break
            out.append(blocking)
        return out

    def intolerable_preferred(self, tolerations: tuple[Toleration, ...]) -> IntArray:
        """Per node, how many PreferNoSchedule taints the tolerations leave uncovered."""
        per_set = [
            sum(
                1
                for taint in taint_set
                if taint.effect is TaintEffect.PREFER_NO_SCHEDULE
                and not any(tol.tolerates(taint) for tol in tolerations)
            )
            for taint_set in self.sets
        ]
        counts: IntArray = np.array([*per_set, 0], dtype=np.int64)[self.set_of_node]
        return counts
