"""gpushare: GPU slices (volcano.sh/gpu-memory, tidegate.io/gpu-milli) fit inside one card; whole
cards (nvidia.com/gpu) take untouched cards; no card is ever over-committed.

The chosen cards are recorded on the placement (Volcano writes them to volcano.sh/gpu-index).
Placement policy, `gpushare.policy`: first-fit (the default, Volcano's: no node score, the lowest
card index that fits), best-fit, random (seeded by `gpushare.seed`), dot-product, gpu-packing or
frag-aware, each ranking nodes (a dynamic score, times `gpushare.weight`) and choosing a slice's card;
see gpu_placement.py. `gpushare.cardPolicy` = first-fit or best-fit (the card with the least memory
left after placing), when given, overrides the policy's card choice.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import TaskInfo
from tidegate.scheduler.node_table import BoolArray, FloatArray, IntArray
from tidegate.scheduler.plugins.gpu_placement import make_policy, policy_options
from tidegate.scheduler.session import Session

CARD_MILLI = 1000
#: What gpushare.cardPolicy may say.
CARD_POLICIES = ("first-fit", "best-fit")


class GpuSharePlugin(Plugin):
    name: ClassVar[str] = "gpushare"
    reopens_in_place = True  # see on_cycle_open

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.card_policy, self.weight = self._options()
        ssn.ext.dynamic_filters.append(self)
        ssn.ext.row_filters[self] = self.fit_row
        ssn.ext.row_explains[self] = self.explain_row
        ssn.ext.node_state_only.add(self.fit_row)
        ssn.ext.card_selector = self.select
        self.explicit_card_policy = "gpushare.cardPolicy" in self.arguments
        self._policy_options = policy_options(self)
        self.policy = make_policy(self._policy_options, ssn)
        if self.policy.scores_nodes and self.weight:
            ssn.ext.dynamic_scores.append(self.score)
            if self.policy.has_row_score():
                ssn.ext.row_scores[self.score] = self.score_row

    def on_cycle_open(self, ssn: Session) -> None:
        """The placement policy starts afresh each cycle, as in a new session (a random policy's draws
        restart from its seed, frag-aware recounts the mix); what registered reads it through `self`."""
        self.policy = make_policy(self._policy_options, ssn)

    def check_arguments(self) -> None:
        self._options()
        policy_options(self)

    def _options(self) -> tuple[str, float]:
        """gpushare.cardPolicy and gpushare.weight (the placement policy's own: `policy_options`)."""
        return self.str_arg("gpushare.cardPolicy", "first-fit", CARD_POLICIES), self.float_arg("gpushare.weight", 1)

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        """The placement policy's node score."""
        score = self.policy.score(task, rows)
        return score if self.weight == 1 else self.weight * score

    def score_row(self, task: TaskInfo, row: int) -> float:
        """score() for one node (the policy's scalar twin)."""
        score = self.policy.score_row(task, row)
        return score if self.weight == 1 else self.weight * score

    def _slice_fits(self, task: TaskInfo, rows: IntArray | slice, promises: bool = True) -> BoolArray:
        """Per node and card: can the task's slice go on this card? Not on an untouched card of a node
        whose untouched cards are all promised to pipelined pods (`NodeTable.promised`)."""
        table = self.ssn.table
        ok: BoolArray = table.card_exists[rows] & ~table.card_whole[rows]
        if task.gpu.mem_mib:
            ok = ok & (table.card_mem[rows] - table.card_used_mem[rows] >= task.gpu.mem_mib)
        if task.gpu.milli:
            ok = ok & (CARD_MILLI - table.card_used_milli[rows] >= task.gpu.milli)
        closed = table.untouched_closed(rows) if promises else None
        if closed is not None:
            untouched = ~table.card_whole[rows] & (table.card_used_mem[rows] == 0) & (table.card_used_milli[rows] == 0)
            ok = ok & ~(untouched & closed[:, None])
        return ok

    def fit(self, task: TaskInfo, rows: IntArray | slice) -> BoolArray:
        gpu = task.gpu
        if gpu.whole:
            return np.asarray(self.ssn.table.free_cards(rows) >= gpu.whole, dtype=bool)
        if gpu.shared:
            return np.asarray(self._slice_fits(task, rows).any(axis=1), dtype=bool)
        return np.ones(len(self.ssn.table.names) if isinstance(rows, slice) else len(rows), dtype=bool)

    def fit_row(self, task: TaskInfo, row: int) -> bool:
        """fit() for one node, in Python ints."""
        gpu = task.gpu
        table = self.ssn.table
        if gpu.whole:
            return table.card_free_bits[row].bit_count() >= gpu.whole
        if gpu.shared:
            return bool(self._slice_cards(task, row, first=True))
        return True

    def _slice_cards(self, task: TaskInfo, row: int, first: bool = False, promises: bool = True) -> list[int]:
        """`_slice_fits` for one node, in Python ints: the cards the task's slice fits on, ascending (with
        `first`, only the first of them)."""
        mem_mib, milli = task.gpu.mem_mib, task.gpu.milli
        table = self.ssn.table
        exists, whole, mem, used_mem, used_milli = table.card_row(row)
        untouched_closed = promises and not table.slice_may_take_untouched(row)
        out: list[int] = []
        for card, present in enumerate(exists):
            if not present or whole[card]:
                continue
            if untouched_closed and not used_mem[card] and not used_milli[card]:
                continue
            if mem_mib and mem[card] - used_mem[card] < mem_mib:
                continue
            if milli and CARD_MILLI - used_milli[card] < milli:
                continue
            out.append(card)
            if first:
                break
        return out

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        if task.gpu.whole:
            return [("insufficient free GPU cards", self.fit(task, slice(None)))]
        if task.gpu.shared:
            room = np.asarray(self._slice_fits(task, slice(None), promises=False).any(axis=1), dtype=bool)
            return [
                ("no GPU card with enough free memory", room),
                ("its untouched GPU cards are promised to pipelined pods", self.fit(task, slice(None))),
            ]
        return []

    def explain_row(self, task: TaskInfo, row: int) -> int:
        """explain() for one node: the index of the first of its reasons that leaves the node out, or -1."""
        gpu = task.gpu
        if gpu.whole:
            return -1 if self.fit_row(task, row) else 0
        if gpu.shared:
            if not self._slice_cards(task, row, first=True, promises=False):
                return 0
            return -1 if self._slice_cards(task, row, first=True) else 1
        return -1

    def select(self, task: TaskInfo, row: int) -> tuple[int, ...]:
        table = self.ssn.table
        gpu = task.gpu
        if gpu.whole:  # the first untouched cards, lowest index first, from the node's free-card bits
            bits = table.card_free_bits[row]
            chosen: list[int] = []
            while bits and len(chosen) < gpu.whole:
                lowest = bits & -bits
                chosen.append(lowest.bit_length() - 1)
                bits ^= lowest
            return tuple(chosen)
        cards = np.array(self._slice_cards(task, row), dtype=np.int64)
        if not len(cards):
            return ()
        if not self.explicit_card_policy:
            return (self.policy.choose_card(task, row, cards),)
        if self.card_policy == "best-fit":
            if gpu.mem_mib:
                left = table.card_mem[row, cards] - table.card_used_mem[row, cards]
            else:
                left = CARD_MILLI - table.card_used_milli[row, cards]
            return (int(cards[int(np.argmin(left))]),)
        return (int(cards[0]),)
