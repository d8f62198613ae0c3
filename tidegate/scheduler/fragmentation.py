"""Expected GPU fragmentation of nodes for a mix of pod shapes, vectorised over nodes and cards.

The idea comes from Alibaba's ATC'23 paper "Beware of Fragmentation" (its "fragmentation gradient
descent"); this is tidegate's own formulation and code.

Definition. Capacity is counted in thousandths of a card ("milli-GPU"). A card's *free share* is
what is left of it: 1000 minus the thousandths in use, and no more than its free memory as a
fraction of its memory (0 for a card taken whole). For a node and one GPU pod shape `s`, the node's
free share is *fragmented for s* where `s` cannot use it:

- all of it, when `s` cannot go on the node at all: the node fails `s`'s static constraints (node
  selector, required affinity such as a GPU model, taints), has too little free CPU or memory, has
  no card with room for the slice, or has fewer untouched cards than `s` takes whole;
- otherwise, for a slice of `m` thousandths, the free share of every card with less than `m` free;
  for whole cards, the free share of every partly used card.

The node's expected fragmentation for a mix of shapes is the count-weighted mean over the shapes.
Pods without GPUs take no part in the mix (they cannot use a GPU, so every free card would be
"fragmented" for them, whatever the placement); nor do slices asked only in GPU memory, whose
share of a card differs from node to node.

How it is computed. Write `T` for the node's free share, `f_j` for card j's, `Z` for its untouched
cards and `W_g` for the mix count of shapes of GPU class `g` (a slice size or a whole-card count)
that pass the node's static constraints and fit its free CPU and memory. Then

    fragmented x C = C*T - sum_j f_j * CS(f_j) - 1000 * Z * CW(Z)

with `C` the mix's total count, `CS(x)` the sum of `W_g` over slice classes of at most `x`
thousandths and `CW(z)` the sum over whole classes of at most `z` cards. `CS` and `CW` come from
tables over the mix's distinct CPU and memory requests (one lookup per node), so a node costs
O(cards), not O(shapes x cards), and the change a placement would make is cheap to evaluate for
every node and every card at once. Everything is integer arithmetic ("fragmented x C" is an
integer), so the vector forms and the one-node forms agree exactly.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidegate.scheduler.info import GpuRequest
from tidegate.scheduler.node_table import BoolArray, FloatArray, IntArray, NodeTable

CARD_MILLI = 1000
#: Stands for "cannot be placed there" in integer fragmentation results.
NEVER = 2**60


@dataclass(frozen=True, slots=True)
class MixShape:
    """One GPU pod shape of a mix and how many pods of it were seen.

    `cpu` and `memory` are in the node table's units (milli-cores, bytes). A shape takes either
    `cards` whole cards or a slice of `milli` thousandths of one card. `static` indexes the node
    mask (passed with the mix) of the nodes its static constraints allow.
    """

    cpu: int
    memory: int
    cards: int
    milli: int
    count: int
    static: int = 0

    def __post_init__(self) -> None:
        if (self.cards > 0) == (self.milli > 0):
            raise ValueError(f"a mix shape takes whole cards or a slice, not both or neither: {self}")
        if not 0 <= self.milli < CARD_MILLI:
            raise ValueError(f"a slice is 1..999 thousandths of a card: {self}")
        if self.count < 0:
            raise ValueError(f"negative count: {self}")


def card_share(table: NodeTable, rows: IntArray, used_milli: IntArray, used_mem: IntArray) -> IntArray:
    """Free share (thousandths) of each card of `rows` if the cards had this much in use.

    1000 minus the thousandths in use, capped by the free fraction of the card's memory (for cards
    whose memory is known); 0 for missing cards and cards taken whole.
    """
    share = CARD_MILLI - used_milli
    if used_mem.any():  # with no memory in use, the memory cap is the whole card
        mem = table.card_mem[rows]
        has_mem = mem > 0
        by_mem = np.where(has_mem, (mem - used_mem) * CARD_MILLI // np.where(has_mem, mem, 1), CARD_MILLI)
        share = np.minimum(share, by_mem)
    share = np.where(table.card_exists[rows] & ~table.card_whole[rows], share, 0)
    out: IntArray = np.minimum(np.maximum(share, 0), CARD_MILLI)
    return out


def _share_one(milli_left: int, mem: int, mem_left: int) -> int:
    """card_share for one card that exists and is not taken whole, in Python ints."""
    share = milli_left
    if mem > 0:
        share = min(share, mem_left * CARD_MILLI // mem)
    return min(max(share, 0), CARD_MILLI)


class CardShares:
    """Every card's free share, kept up to date with the node table (as an array and as Python lists).

    Reads `NodeTable.changes` to recompute only the nodes that changed since the last `sync()`.
    """

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.share: IntArray = np.zeros(table.card_exists.shape, dtype=np.int64)
        self._lists: list[list[int] | None] = [None] * len(table)
        self.rows_changed: list[int] = []
        self._refresh(np.arange(len(table)))
        self._seen = len(table.changes)

    def sync(self) -> bool:
        """Fold in the table's changes; True when some row changed (listed in `rows_changed`)."""
        changes = self.table.changes
        if self._seen == len(changes):
            self.rows_changed = []
            return False
        pending = changes[self._seen :]
        self._seen = len(changes)
        if len(pending) > max(16, len(self.table) // 8):
            self._refresh(np.arange(len(self.table)))
        else:
            self._refresh(np.array(sorted(set(pending)), dtype=np.int64))
        return True

    def _refresh(self, rows: IntArray) -> None:
        table = self.table
        self.share[rows] = card_share(table, rows, table.card_used_milli[rows], table.card_used_mem[rows])
        self.rows_changed = rows.tolist()
        for row in self.rows_changed:
            self._lists[row] = None

    def row(self, row: int) -> list[int]:
        """The node's card shares as Python ints (do not modify)."""
        found = self._lists[row]
        if found is None:
            found = self._lists[row] = self.share[row].tolist()
        return found


class FragmentationModel:
    """Expected fragmentation of a node table's nodes for one mix of shapes (see the module docstring).

    Results are "fragmented milli-GPU x C" as integers (C = `total`, the mix count); divide by
    `total` for expected fragmented milli-GPU. The node state comes from `shares` and the table;
    call `shares.sync()` before querying after the table changed.
    """

    def __init__(self, table: NodeTable, cpu_col: int, memory_col: int, shares: CardShares | None = None) -> None:
        self.table = table
        self.cpu_col = cpu_col
        self.memory_col = memory_col
        self.shares = shares or CardShares(table)
        self.set_mix([], np.ones((1, len(table)), dtype=bool))

    # -- the mix -------------------------------------------------------------------------------------
    def set_mix(self, shapes: Sequence[MixShape], masks: BoolArray) -> None:
        """Use this mix from now on. `masks[k]` is the node mask of shapes whose `static` is k."""
        self.masks = masks
        self.masked = not bool(masks.all())
        self._mask_lists: list[list[bool]] = masks.tolist()
        shapes = [s for s in shapes if s.count > 0]
        slices = np.array(sorted({s.milli for s in shapes if s.milli}), dtype=np.int64)
        wholes = np.array(sorted({s.cards for s in shapes if s.cards}), dtype=np.int64)
        self.cpu_values = np.array(sorted({s.cpu for s in shapes}), dtype=np.int64)
        self.memory_values = np.array(sorted({s.memory for s in shapes}), dtype=np.int64)
        self._cpu_list: list[int] = self.cpu_values.tolist()
        self._memory_list: list[int] = self.memory_values.tolist()
        n_cpu, n_mem = len(self.cpu_values) + 1, len(self.memory_values) + 1
        slice_counts = np.zeros((len(masks), n_cpu, n_mem, len(slices) + 1), dtype=np.int64)
        whole_counts = np.zeros((len(masks), n_cpu, n_mem, len(wholes) + 1), dtype=np.int64)
        for s in shapes:
            i = int(np.searchsorted(self.cpu_values, s.cpu)) + 1
            j = int(np.searchsorted(self.memory_values, s.memory)) + 1
            if s.milli:
                slice_counts[s.static, i, j, int(np.searchsorted(slices, s.milli)) + 1] += s.count
            else:
                whole_counts[s.static, i, j, int(np.searchsorted(wholes, s.cards)) + 1] += s.count
        # [k, i, j, g]: count of static-k shapes asking at most the i-th CPU and j-th memory value (index 0:
        # less than any request) and of class at most g (index 0: none), classes ordered by size.
        self.slice_table: IntArray = slice_counts.cumsum(axis=1).cumsum(axis=2).cumsum(axis=3)
        self.whole_table: IntArray = whole_counts.cumsum(axis=1).cumsum(axis=2).cumsum(axis=3)
        self._slice_width, self._whole_width = len(slices) + 1, len(wholes) + 1
        self._slice_flat = [table.ravel() for table in self.slice_table]
        self._whole_flat = [table.ravel() for table in self.whole_table]
        self._slice_lists: list[list[list[list[int]]]] = self.slice_table.tolist()
        self._whole_lists: list[list[list[list[int]]]] = self.whole_table.tolist()
        self.total = sum(s.count for s in shapes)
        #: slice_rank[x]: slice classes of at most x thousandths; whole_rank[z]: whole classes of at most z cards.
        self.slice_rank: IntArray = np.searchsorted(slices, np.arange(CARD_MILLI + 1), side="right").astype(np.int64)
        width = self.table.card_exists.shape[1]
        self.whole_rank: IntArray = np.searchsorted(wholes, np.arange(width + 1), side="right").astype(np.int64)
        self._slice_rank_list: list[int] = self.slice_rank.tolist()
        self._whole_rank_list: list[int] = self.whole_rank.tolist()

    # -- vector forms --------------------------------------------------------------------------------
    def _free(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """Free CPU and memory of `rows` (a column first, then the rows: cheaper than 2-D indexing)."""
        table = self.table
        cpu = table.alloc[:, self.cpu_col][rows] - table.used[:, self.cpu_col][rows]
        memory = table.alloc[:, self.memory_col][rows] - table.used[:, self.memory_col][rows]
        return cpu, memory

    def _cells(self, cpu: IntArray, memory: IntArray) -> IntArray:
        """Per row, the (CPU, memory) cell of the tables its free CPU and memory fall in, flattened."""
        i = np.searchsorted(self.cpu_values, cpu, side="right")
        j = np.searchsorted(self.memory_values, memory, side="right")
        out: IntArray = i * (len(self.memory_values) + 1) + j
        return out

    def _mix_count(self, flat: list[IntArray], rows: IntArray, index: IntArray) -> IntArray:
        """flat[k][index] summed over the static classes k whose mask lets each row in (index: rows first)."""
        out: IntArray = flat[0].take(index)
        if self.masked:
            shape = (len(rows),) + (1,) * (index.ndim - 1)
            out = out * self.masks[0, rows].reshape(shape)
            for k in range(1, len(flat)):
                out = out + flat[k].take(index) * self.masks[k, rows].reshape(shape)
        return out

    def _usable(self, rows: IntArray, cells: IntArray, share: IntArray) -> IntArray:
        """Per card: its free share times the mix count of slices that fit the node and the card (CS)."""
        index = (cells * self._slice_width)[:, None] + self.slice_rank[share]
        out: IntArray = share * self._mix_count(self._slice_flat, rows, index)
        return out

    def _whole_usable(self, rows: IntArray, cells: IntArray, untouched: IntArray) -> IntArray:
        """Per node (or per node and option, for a 2-D `untouched`): 1000 x untouched cards x the mix
        count of whole-card shapes that fit the node and that many cards (CW)."""
        base = cells * self._whole_width
        index = (base if untouched.ndim == 1 else base[:, None]) + self.whole_rank[untouched]
        out: IntArray = CARD_MILLI * untouched * self._mix_count(self._whole_flat, rows, index)
        return out

    def fragmented(self, rows: IntArray) -> IntArray:
        """Fragmented milli-GPU x C of each node of `rows` now."""
        share = self.shares.share[rows]
        cells = self._cells(*self._free(rows))
        untouched = (share == CARD_MILLI).sum(axis=1)
        usable = self._usable(rows, cells, share).sum(axis=1) + self._whole_usable(rows, cells, untouched)
        out: IntArray = self.total * share.sum(axis=1) - usable
        return out

    def expected(self, rows: IntArray | None = None) -> FloatArray:
        """Expected fragmented milli-GPU of each node (all nodes when rows is None)."""
        rows = np.arange(len(self.table)) if rows is None else rows
        if not self.total:
            return np.zeros(len(rows))
        out: FloatArray = self.fragmented(rows) / self.total
        return out

    def after(
        self,
        rows: IntArray,
        cpu: int,
        memory: int,
        gpu: GpuRequest,
        known: tuple[IntArray, IntArray, IntArray] | None = None,
    ) -> IntArray:
        """Fragmented milli-GPU x C of each node of `rows` after placing this request on it.

        Shape (rows, cards) for a GPU slice: the slice on each card (NEVER where the card has no room);
        shape (rows, 1) otherwise (whole cards take untouched ones, which are all alike; NEVER where too
        few are untouched). CPU and memory are not checked: callers place only where the pod fits.
        `known` spares gathering again what the caller has: (card shares, free CPU, free memory) of `rows`.
        """
        table = self.table
        if known is None:
            share = self.shares.share[rows]
            free_cpu, free_memory = self._free(rows)
        else:
            share, free_cpu, free_memory = known
        cells = self._cells(free_cpu - cpu, free_memory - memory)
        usable = self._usable(rows, cells, share)
        base = usable.sum(axis=1)
        free = share.sum(axis=1)
        full = share == CARD_MILLI
        untouched = full.sum(axis=1)
        total = self.total
        if gpu.shared:
            if not gpu.mem_mib and not table.card_used_mem[rows].any():  # shares are 1000 - thousandths used
                fits = share >= gpu.milli
                left = np.where(fits, share - gpu.milli, 0)
            else:
                used_milli = table.card_used_milli[rows] + gpu.milli
                used_mem = table.card_used_mem[rows] + gpu.mem_mib
                fits = table.card_exists[rows] & ~table.card_whole[rows] & (used_milli <= CARD_MILLI)
                if gpu.mem_mib:
                    fits &= used_mem <= table.card_mem[rows]
                left = np.where(fits, card_share(table, rows, used_milli, used_mem), 0)
            usable_after = base[:, None] - usable + self._usable(rows, cells, left)
            whole_after = self._whole_usable(rows, cells, untouched[:, None] - full)
            frag: IntArray = total * (free[:, None] - share + left) - usable_after - whole_after
            frag[~fits] = NEVER
            return frag
        if gpu.whole:
            k = gpu.whole
            rest = np.maximum(untouched - k, 0)
            one_card = self._usable(rows, cells, np.full((len(rows), 1), CARD_MILLI))[:, 0]
            usable_after = base - k * one_card + self._whole_usable(rows, cells, rest)
            frag = total * (free - CARD_MILLI * k) - usable_after
            frag[untouched < k] = NEVER
            return frag[:, None]
        frag = total * free - base - self._whole_usable(rows, cells, untouched)
        return frag[:, None]

    # -- one-node forms (the same integers, in Python) -------------------------------------------------
    def _row_tables(self, row: int, cpu: int, memory: int) -> tuple[list[int], list[int]]:
        i = bisect_right(self._cpu_list, cpu)
        j = bisect_right(self._memory_list, memory)
        if not self.masked:
            return self._slice_lists[0][i][j], self._whole_lists[0][i][j]
        slice_cum = [0] * (len(self._slice_lists[0][0][0]))
        whole_cum = [0] * (len(self._whole_lists[0][0][0]))
        for k, mask in enumerate(self._mask_lists):
            if mask[row]:
                slice_cum = [a + b for a, b in zip(slice_cum, self._slice_lists[k][i][j], strict=True)]
                whole_cum = [a + b for a, b in zip(whole_cum, self._whole_lists[k][i][j], strict=True)]
        return slice_cum, whole_cum

    def _row_free(self, row: int) -> tuple[int, int]:
        table = self.table
        alloc, used = table.alloc[row], table.used[row]
        return int(alloc[self.cpu_col] - used[self.cpu_col]), int(alloc[self.memory_col] - used[self.memory_col])

    def fragmented_row(self, row: int) -> int:
        """fragmented(rows=[row])[0], in Python ints."""
        share = self.shares.row(row)
        free_cpu, free_memory = self._row_free(row)
        slice_cum, whole_cum = self._row_tables(row, free_cpu, free_memory)
        rank = self._slice_rank_list
        usable = sum(x * slice_cum[rank[x]] for x in share)
        untouched = share.count(CARD_MILLI)
        usable += CARD_MILLI * untouched * whole_cum[self._whole_rank_list[untouched]]
        return self.total * sum(share) - usable

    def after_row(self, row: int, cpu: int, memory: int, gpu: GpuRequest) -> list[int]:
        """after(rows=[row], ...)[0] as a list, in Python ints."""
        table = self.table
        share = self.shares.row(row)
        free_cpu, free_memory = self._row_free(row)
        slice_cum, whole_cum = self._row_tables(row, free_cpu - cpu, free_memory - memory)
        rank, whole_rank, total = self._slice_rank_list, self._whole_rank_list, self.total
        usable = [x * slice_cum[rank[x]] for x in share]
        base = sum(usable)
        free = sum(share)
        untouched = share.count(CARD_MILLI)
        if gpu.shared:
            exists, whole, mem, used_mem, used_milli = table.card_row(row)
            out = []
            for card, x in enumerate(share):
                milli_after, mem_after = used_milli[card] + gpu.milli, used_mem[card] + gpu.mem_mib
                if (
                    not exists[card]
                    or whole[card]
                    or milli_after > CARD_MILLI
                    or (gpu.mem_mib and mem_after > mem[card])
                ):
                    out.append(NEVER)
                    continue
                left = _share_one(CARD_MILLI - milli_after, mem[card], mem[card] - mem_after)
                rest = untouched - (x == CARD_MILLI)
                usable_after = base - usable[card] + left * slice_cum[rank[left]]
                whole_after = CARD_MILLI * rest * whole_cum[whole_rank[rest]]
                out.append(total * (free - x + left) - usable_after - whole_after)
            return out
        if gpu.whole:
            k = gpu.whole
            if untouched < k:
                return [NEVER]
            rest = untouched - k
            usable_after = base - k * (CARD_MILLI * slice_cum[rank[CARD_MILLI]])
            usable_after += CARD_MILLI * rest * whole_cum[whole_rank[rest]]
            return [total * (free - CARD_MILLI * k) - usable_after]
        return [total * free - base - CARD_MILLI * untouched * whole_cum[whole_rank[untouched]]]
