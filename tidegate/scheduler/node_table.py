"""Node state as numpy columns, so filters and scores run over all nodes at once.

One row a node, one column a resource (canonical integer units). GPU cards get their own
matrices (row a node, column a card) so shared slices and whole cards are never over-committed.
Every change to a row is appended to `changes`, which lets cached per-shape filter and score
vectors refresh only the rows that moved. Change `used` only through add_used and the card matrices
only through take_cards / release_cards: they keep the Python mirrors (used rows, free-card bits) and
`changes` in step.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from tidegate.model.objects import Node, Taint
from tidegate.model.resources import (
    CPU,
    GPU_MEMORY,
    GPU_MILLI,
    GPU_NUMBER,
    MEMORY,
    NVIDIA_GPU,
    PODS,
    Resources,
)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

UNLIMITED = np.int64(2**62)
_GENERATIONS = itertools.count()
#: Resources whose per-card use the gpushare plugin tracks in the card matrices.
CARD_RESOURCES = (GPU_MEMORY, GPU_MILLI)
_FIRST = (CPU, MEMORY, PODS, NVIDIA_GPU, GPU_MEMORY, GPU_MILLI)
#: Distinct node states a table numbers before it forgets the oldest (`NodeTable.state_id`).
MAX_STATES = 65_536


class ResourceIndex:
    """Maps resource names to columns; fixed for one session."""

    __slots__ = ("col", "names")

    def __init__(self, names: Iterable[str]) -> None:
        wanted = set(names) | {CPU, MEMORY, PODS}
        ordered = [n for n in _FIRST if n in wanted] + sorted(wanted - set(_FIRST))
        self.names: tuple[str, ...] = tuple(ordered)
        self.col: dict[str, int] = {name: i for i, name in enumerate(ordered)}

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, resources: Resources, fill: int = 0) -> IntArray:
        out = np.full(len(self.names), fill, dtype=np.int64)
        for name, amount in resources.items():
            col = self.col.get(name)
            if col is not None:
                out[col] = amount
        return out

    def to_resources(self, vector: IntArray) -> Resources:
        return Resources({self.names[i]: int(v) for i, v in enumerate(vector) if v and v < UNLIMITED})


def card_count(node: Node) -> int:
    """How many GPU cards a node has: from its card list, nvidia.com/gpu or volcano.sh/gpu-number."""
    whole = node.allocatable[NVIDIA_GPU] // 1000
    numbered = node.allocatable[GPU_NUMBER] // 1000
    return max(len(node.gpu_memory_mib), whole, numbered)


class CardRow(NamedTuple):
    """One node's GPU cards as Python lists, card by card (see `NodeTable.card_row`)."""

    exists: list[bool]
    whole: list[bool]  # taken whole by a pod
    mem: list[int]  # MiB
    used_mem: list[int]
    used_milli: list[int]


_T = TypeVar("_T")


def without_rows(values: list[_T], gone: Sequence[int]) -> list[_T]:
    """A copy of a per-row list without the rows `gone` (ascending): whoever holds the old list keeps it as it
    was."""
    out = values[:]
    drop_rows(out, gone)
    return out


def drop_rows(values: list[_T], gone: Sequence[int]) -> None:
    """`without_rows` in place, for a list no one else holds."""
    for row in reversed(gone):
        del values[row]


class NodeTable:
    """Columnar node state for one scheduling session."""

    def __init__(self, nodes: Sequence[Node], index: ResourceIndex) -> None:
        #: Distinct for every table built in this process: plugins key node-derived caches on it.
        self.generation = next(_GENERATIONS)
        n, r = len(nodes), len(index)
        self.index = index
        self.nodes = list(nodes)
        self.names = [node.name for node in nodes]
        self.row = {name: i for i, name in enumerate(self.names)}
        self.labels = [node.labels for node in nodes]
        self.taints: list[tuple[Taint, ...]] = [node.taints for node in nodes]
        self.schedulable: BoolArray = np.array([node.ready and not node.unschedulable for node in nodes], dtype=bool)
        cards = [card_count(node) for node in nodes]
        width = max(cards, default=0)
        # Built as Python rows, converted once (numpy's per-call cost is per node otherwise).
        alloc_rows: list[list[int]] = []
        mem_rows: list[list[int]] = []
        for node, count in zip(nodes, cards, strict=True):
            alloc_rows.append(self._alloc_row(node, count))
            mems = list(node.gpu_memory_mib or (0,) * count)
            mem_rows.append(mems + [0] * (width - len(mems)))
        self.alloc: IntArray = np.array(alloc_rows, dtype=np.int64).reshape(n, r)
        self.card_exists: BoolArray = np.arange(width) < np.array(cards, dtype=np.int64).reshape(n, 1)
        self.card_mem: IntArray = np.array(mem_rows, dtype=np.int64).reshape(n, width)
        self.used: IntArray = np.zeros((n, r), dtype=np.int64)
        self.releasing: IntArray = np.zeros((n, r), dtype=np.int64)
        self.pipelined: IntArray = np.zeros((n, r), dtype=np.int64)
        self.card_used_mem: IntArray = np.zeros((n, width), dtype=np.int64)
        self.card_used_milli: IntArray = np.zeros((n, width), dtype=np.int64)
        self.card_whole: BoolArray = np.zeros((n, width), dtype=bool)
        #: Per node, cards untouched by any pod (kept up to date by take_cards / release_cards).
        self.card_free: IntArray = self.card_exists.sum(axis=1).astype(np.int64)
        #: The same as bits of a Python int per node (bit c: card c untouched), for scalar code.
        self.card_free_bits: list[int] = [(1 << count) - 1 for count in cards]
        #: Per node, untouched cards promised to pipelined pods that ask for whole cards: a slice may take
        #: an untouched card only while more are untouched than promised, or the nominee finds its cards
        #: taken when its victims have left.
        self.promised: list[int] = [0] * n
        self.promised_total = 0  # over all nodes: without promises the rule below costs nothing
        self.changes: list[int] = []
        #: Rows as Python ints for scalar code: alloc never changes in a session; used rows are
        #: converted on demand and forgotten when the row changes.
        self.alloc_rows: list[list[int]] = self.alloc.tolist()
        self.schedulable_rows: list[bool] = self.schedulable.tolist()
        self._used_rows: dict[int, list[int]] = {}
        self._card_rows: dict[int, CardRow] = {}
        self._state_ids: dict[int, int] = {}
        self._state_numbers: dict[tuple[bytes | int, ...], int] = {}
        self._fixed_keys: dict[int, bytes] = {}  # per node: what never changes (allocatable, cards, their memory)
        self._next_state = itertools.count()

    def _alloc_row(self, node: Node, cards: int) -> list[int]:
        index = self.index
        row = [0] * len(index)
        for name, amount in node.allocatable.items():
            col = index.col.get(name)
            if col is not None:
                row[col] = amount
        if PODS not in node.allocatable:
            row[index.col[PODS]] = int(UNLIMITED)
        milli_col = index.col.get(GPU_MILLI)
        if milli_col is not None and GPU_MILLI not in node.allocatable:
            row[milli_col] = cards * 1000 * 1000
        return row

    def __len__(self) -> int:
        return len(self.names)

    def resizes(self, node: Node) -> bool:
        """Whether the node is in the table and differs from its row only in what `resize` changes in place."""
        row = self.row.get(node.name)
        if row is None:
            return False
        before = self.nodes[row]
        return (
            node.labels == before.labels
            and node.taints == before.taints
            and node.gpu_memory_mib == before.gpu_memory_mib
            and card_count(node) == card_count(before)
        )

    def resize(self, node: Node) -> None:
        """The node's allocatable or schedulability changed, nothing else (`resizes`): its row changes in
        place, what is placed on it stays, and the table takes a new generation, so caches keyed on it start
        afresh as over a new table."""
        row = self.row[node.name]
        alloc = self._alloc_row(node, card_count(node))
        self.alloc[row] = alloc
        self.alloc_rows[row] = alloc
        self.schedulable[row] = self.schedulable_rows[row] = node.ready and not node.unschedulable
        self.nodes[row] = node
        self._fixed_keys.pop(row, None)
        self._state_ids.pop(row, None)
        self.changes.append(row)
        self.generation = next(_GENERATIONS)

    def add_rows(self, nodes: Sequence[Node]) -> None:
        """Nodes joining the table after its rows, with nothing placed on them: the table becomes what one built
        over its nodes and these would be (with what is placed on its rows kept). Takes a new generation."""
        if not nodes:
            return
        n, r = len(self.names), len(self.index)
        cards = [card_count(node) for node in nodes]
        width = self.card_exists.shape[1]
        wider = max(width, *cards)
        if wider > width:  # a fresh table's card matrices are as wide as its node with the most cards
            self._set_width(wider)
        alloc_rows = [self._alloc_row(node, count) for node, count in zip(nodes, cards, strict=True)]
        mem_rows = []
        for node, count in zip(nodes, cards, strict=True):
            mems = list(node.gpu_memory_mib or (0,) * count)
            mem_rows.append(mems + [0] * (wider - len(mems)))
        k = len(nodes)
        self.alloc = np.concatenate([self.alloc, np.array(alloc_rows, dtype=np.int64).reshape(k, r)])
        self.card_exists = np.concatenate(
            [self.card_exists, np.arange(wider) < np.array(cards, dtype=np.int64).reshape(k, 1)]
        )
        self.card_mem = np.concatenate([self.card_mem, np.array(mem_rows, dtype=np.int64).reshape(k, wider)])
        for name in ("used", "releasing", "pipelined"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros((k, r), dtype=np.int64)]))
        self.card_used_mem = np.concatenate([self.card_used_mem, np.zeros((k, wider), dtype=np.int64)])
        self.card_used_milli = np.concatenate([self.card_used_milli, np.zeros((k, wider), dtype=np.int64)])
        self.card_whole = np.concatenate([self.card_whole, np.zeros((k, wider), dtype=bool)])
        self.card_free = np.concatenate([self.card_free, np.array(cards, dtype=np.int64)])
        self.card_free_bits.extend((1 << count) - 1 for count in cards)
        self.promised.extend([0] * k)
        schedulable = [node.ready and not node.unschedulable for node in nodes]
        self.schedulable = np.concatenate([self.schedulable, np.array(schedulable, dtype=bool)])
        self.schedulable_rows.extend(schedulable)
        self.alloc_rows.extend(alloc_rows)
        self.nodes.extend(nodes)
        for i, node in enumerate(nodes):
            self.names.append(node.name)
            self.row[node.name] = n + i
            self.labels.append(node.labels)
            self.taints.append(node.taints)
        self.generation = next(_GENERATIONS)

    def remove_rows(self, rows: Sequence[int]) -> list[int]:
        """The nodes of these rows leave the table, and whatever is placed on them with it (the caller takes
        their pods off first); the rows after them move up, keeping their order, so the table becomes what one
        built over the remaining nodes would be. Returns each old row's new row (-1 for a removed one). Takes a
        new generation."""
        n = len(self.names)
        gone = set(rows)
        if not gone:
            return list(range(n))
        order = sorted(gone)
        keep = np.ones(n, dtype=bool)
        keep[order] = False
        moved: list[int] = (np.cumsum(keep) - 1).tolist()
        for row in order:
            moved[row] = -1
        # Each array in place: the kept rows past the first one gone move up (rows before it stay where they are),
        # and the table keeps a view of the rows left. Cloud nodes come last, so few rows move.
        first, left = order[0], n - len(order)
        kept_after = keep[first:]
        for name in (
            "alloc",
            "card_exists",
            "card_mem",
            "used",
            "releasing",
            "pipelined",
            "card_used_mem",
            "card_used_milli",
            "card_whole",
            "card_free",
            "schedulable",
        ):
            array = getattr(self, name)
            array[first:left] = array[first:][kept_after]
            setattr(self, name, array[:left])
        self.promised_total -= sum(self.promised[row] for row in gone)
        gone_names = [self.names[row] for row in order]
        for name in (
            "card_free_bits",
            "promised",
            "schedulable_rows",
            "alloc_rows",
            "nodes",
            "names",
            "labels",
            "taints",
        ):
            setattr(self, name, without_rows(getattr(self, name), order))
        by_name, names = self.row, self.names
        for name in gone_names:
            del by_name[name]
        for i in range(order[0], len(names)):  # the rows before the first one gone keep their number
            by_name[names[i]] = i
        # Each row's cards exist from the first on (card_count of its node): the widest row is the last column
        # any row has.
        present = np.flatnonzero(self.card_exists.any(axis=0))
        width = int(present[-1]) + 1 if len(present) else 0
        if width < self.card_exists.shape[1]:
            self._set_width(width)
        self._used_rows, self._card_rows, self._state_ids, self._fixed_keys = {}, {}, {}, {}
        self.generation = next(_GENERATIONS)
        return moved

    def new_generation(self) -> None:
        """The table stands for one built afresh over the same nodes: caches keyed on its generation start anew."""
        self.generation = next(_GENERATIONS)

    def _set_width(self, width: int) -> None:
        """Card matrices `width` cards wide: cut (the cards beyond exist on no node) or padded with none."""
        for name in ("card_exists", "card_mem", "card_used_mem", "card_used_milli", "card_whole"):
            matrix = getattr(self, name)
            have = matrix.shape[1]
            if width <= have:
                setattr(self, name, np.ascontiguousarray(matrix[:, :width]))
            else:
                pad = np.zeros((matrix.shape[0], width - have), dtype=matrix.dtype)
                setattr(self, name, np.concatenate([matrix, pad], axis=1))
        self._card_rows, self._state_ids, self._fixed_keys = {}, {}, {}

    # -- derived state -------------------------------------------------------------------------
    def idle(self) -> IntArray:
        return self.alloc - self.used

    def future_idle_row(self, row: int) -> IntArray:
        """Volcano's FutureIdle = Idle + Releasing - Pipelined, for one node (`used` counts pipelined pods)."""
        out: IntArray = self.alloc[row] - self.used[row] + self.releasing[row]
        return out

    def free_cards(self, rows: slice | IntArray) -> IntArray:
        """Cards untouched by any pod, per node: what whole-card requests may take."""
        out: IntArray = self.card_free[rows]
        return out.copy() if isinstance(rows, slice) else out

    def used_row(self, row: int) -> list[int]:
        """The node's used resources as Python ints (do not modify)."""
        found = self._used_rows.get(row)
        if found is None:
            found = self._used_rows[row] = self.used[row].tolist()
        return found

    def card_row(self, row: int) -> CardRow:
        """The node's cards as Python lists (do not modify), converted on demand and forgotten when a
        card changes: scalar code reading one node would otherwise pay five numpy conversions."""
        found = self._card_rows.get(row)
        if found is None:
            found = self._card_rows[row] = CardRow(
                self.card_exists[row].tolist(),
                self.card_whole[row].tolist(),
                self.card_mem[row].tolist(),
                self.card_used_mem[row].tolist(),
                self.card_used_milli[row].tolist(),
            )
        return found

    def state_id(self, row: int) -> int:
        """A number for the node's resource state: its allocatable, what is used, and its cards (which
        exist, their memory, what is taken of each). Nodes in the same state share it, so results that
        depend only on the request and that state are computed once for all of them; a number is never
        given to another state while this table lives."""
        found = self._state_ids.get(row)
        if found is None:
            fixed = self._fixed_keys.get(row)
            if fixed is None:
                fixed = self._fixed_keys[row] = (
                    self.alloc[row].tobytes() + self.card_exists[row].tobytes() + self.card_mem[row].tobytes()
                )
            key = (
                fixed,
                self.used[row].tobytes(),
                self.card_whole[row].tobytes(),
                self.card_used_mem[row].tobytes(),
                self.card_used_milli[row].tobytes(),
                self.promised[row],
            )
            found = self._state_numbers.get(key)
            if found is None:
                if len(self._state_numbers) >= MAX_STATES:  # forget old states; their numbers are not reused
                    self._state_numbers.clear()
                found = self._state_numbers[key] = next(self._next_state)
            self._state_ids[row] = found
        return found

    def _card_is_free(self, row: int, card: int) -> bool:
        return bool(
            self.card_exists[row, card]
            and not self.card_whole[row, card]
            and self.card_used_mem[row, card] == 0
            and self.card_used_milli[row, card] == 0
        )

    # -- mutation ------------------------------------------------------------------------------
    def add_used(self, row: int, request: IntArray, sign: int = 1) -> None:
        if sign == 1:
            self.used[row] += request
        elif sign == -1:
            self.used[row] -= request
        else:
            self.used[row] += sign * request
        self._used_rows.pop(row, None)
        self._state_ids.pop(row, None)
        self.changes.append(row)

    def add_pipelined(self, row: int, request: IntArray, whole_cards: int, sign: int = 1) -> None:
        """A pod pipelined to the node (sign 1) or no longer (-1): it holds its request there (counted in
        `used` too) and, asking for whole cards, that many of the node's untouched cards."""
        if sign == 1:
            self.pipelined[row] += request
        else:
            self.pipelined[row] -= request
        if whole_cards:
            self.promised[row] += sign * whole_cards
            self.promised_total += sign * whole_cards
        self.add_used(row, request, sign)  # also forgets the node's state number: promises are part of it

    def slice_may_take_untouched(self, row: int) -> bool:
        """Whether a GPU slice may start on an untouched card of the node (see `promised`)."""
        promised = self.promised[row]
        return not promised or self.card_free_bits[row].bit_count() > promised

    def untouched_closed(self, rows: IntArray | slice) -> BoolArray | None:
        """Per node, not `slice_may_take_untouched`: its untouched cards are all promised (None: no promises)."""
        if not self.promised_total:
            return None
        promised = np.asarray(self.promised, dtype=np.int64)[rows]
        closed: BoolArray = (promised > 0) & (promised >= self.card_free[rows])
        return closed

    def has_cards(self, row: int, cards: tuple[int, ...]) -> bool:
        """Every index names a card of the node (an annotation written elsewhere may name none)."""
        exists = self.card_exists[row]
        return all(0 <= card < len(exists) and bool(exists[card]) for card in cards)

    def take_cards(self, row: int, cards: tuple[int, ...], mem_mib: int, milli: int, whole: bool) -> None:
        self._card_rows.pop(row, None)
        self._state_ids.pop(row, None)
        for card in cards:
            was_free = bool(self.card_free_bits[row] >> card & 1)
            if whole:
                self.card_whole[row, card] = True  # a whole-taken card is never free
                now_free = False
            else:
                self.card_used_mem[row, card] += mem_mib
                self.card_used_milli[row, card] += milli
                now_free = self._card_is_free(row, card)
            if now_free != was_free:
                self._set_free(row, card, now_free)

    def release_cards(self, row: int, cards: tuple[int, ...], mem_mib: int, milli: int, whole: bool) -> None:
        self._card_rows.pop(row, None)
        self._state_ids.pop(row, None)
        for card in cards:
            was_free = bool(self.card_free_bits[row] >> card & 1)
            if whole:
                self.card_whole[row, card] = False
            else:
                self.card_used_mem[row, card] -= mem_mib
                self.card_used_milli[row, card] -= milli
            now_free = self._card_is_free(row, card)
            if now_free != was_free:
                self._set_free(row, card, now_free)

    def _set_free(self, row: int, card: int, free: bool) -> None:
        self.card_free[row] += 1 if free else -1
        self.card_free_bits[row] ^= 1 << card
