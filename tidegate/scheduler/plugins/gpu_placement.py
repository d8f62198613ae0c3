"""GPU placement policies of the gpushare plugin (`gpushare.policy`): how nodes are ranked and which
card a GPU slice takes. Whole cards (nvidia.com/gpu) always take the lowest-index untouched cards:
untouched cards are alike. Ties between nodes go to the lowest node index, as everywhere in tidegate.

- first-fit (the default): Volcano's gpushare, which does not rank nodes; a slice takes the
  lowest-index card it fits on.
- best-fit: the least left after placing, 100 x (1 - (CPU left / the largest node's CPU + GPU left /
  the largest node's GPU) / 2); a slice takes the card with the least free share.
- random: for each request, each node holds a uniform draw from a generator seeded by
  `gpushare.seed`, drawn again whenever the node changes; the highest draw among the nodes that fit
  wins (each request walks the nodes in its own random order, a node that takes a pod going back in
  at a random place); a slice takes a uniformly drawn card among those it fits on.
- dot-product: Tetris' alignment of the request with the node's free resources, each divided by the
  node's allocatable, over CPU and GPU; the smallest dot product wins (100 x (1 - dot / 2)), which
  packs; a slice takes the card with the least free share.
- gpu-packing: a partly used card the slice fits on (the tightest first), then a node with GPUs in
  use, then an idle node; in the last two tiers, the least GPU left relative to the node's cards. Pods
  without GPUs are not ranked. A slice takes the card with the least free share.
- frag-aware: the least increase of the node's expected fragmentation (fragmentation.py) for the mix
  of pod shapes the session has seen, 10 points per card of fragmentation added, plus up to
  `gpushare.fragPack` points (default 1) for the node left with the least GPU relative to its cards;
  a slice takes the card adding the least fragmentation.

best-fit, dot-product and gpu-packing follow the baselines of the ATC'23 fragmentation paper. A node's
GPU is its cards' free share in thousandths (fragmentation.py); a slice asked in volcano.sh/gpu-memory
only counts as its share of the node's first card. Scores are dynamic scores (they read the node
table), times `gpushare.weight` (default 1), with scalar twins for one node that give bit for bit
what the vector forms give.

frag-aware's packing term breaks near-ties (placements within about a tenth of a card of expected
fragmentation of each other) in favour of fuller nodes, which keeps idle nodes whole for pods the mix
has not shown yet; on the openb traces it adds about half a point of allocation.

frag-aware keeps state across placements: the counts of the GPU pod shapes of every task the session
knows (the snapshot's and those added later with `Session.add_group`). The session caches scores per
node, and they must all come from one mix, so the mix in use is refreshed only when the count of GPU
pods seen has grown by `gpushare.mixRefresh` (a fraction, default 1: doubled) since the last refresh,
after a placement; a refresh marks every node changed, so every cached score is recomputed with the new
mix. A session that reopens for a new cycle (the online scheduler's) builds the policy afresh, so the
mix is then recounted from the jobs the session holds.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tidegate.model.resources import CPU, MEMORY, Resources
from tidegate.scheduler.fragmentation import NEVER, CardShares, FragmentationModel, MixShape
from tidegate.scheduler.framework import Plugin
from tidegate.scheduler.info import TaskInfo
from tidegate.scheduler.node_table import FloatArray, IntArray
from tidegate.scheduler.session import Session

MAX_SCORE = 100.0
CARD_MILLI = 1000
#: Score points per card of expected fragmentation a placement adds (frag-aware).
FRAG_POINTS_PER_CARD = 10.0
#: Up to this many nodes, frag-aware's vector score runs its scalar twin node by node (same floats).
SCALAR_ROWS = 32
POLICIES = ("first-fit", "best-fit", "random", "dot-product", "gpu-packing", "frag-aware")


class PlacementPolicy(Protocol):
    """What gpushare asks of a placement policy."""

    #: Whether the policy ranks nodes (first-fit does not: it leaves node order to other plugins).
    scores_nodes: bool

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        """Node scores for the task on `rows` (read only where the task fits)."""
        ...

    def score_row(self, task: TaskInfo, row: int) -> float:
        """score(task, [row])[0], bit for bit."""
        ...

    def has_row_score(self) -> bool:
        """Whether score_row is available (every built-in policy has one; a policy drawing anew per call could not)."""
        ...

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        """One of `cards` (the node's cards the slice fits on, ascending) for the task."""
        ...


class _Policy:
    """Shared helpers: the rows asked for, card shares kept in sync with the node table, the task's asks."""

    scores_nodes = True

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.table = ssn.table
        self.cpu_col = ssn.index.col[CPU]
        self.memory_col = ssn.index.col[MEMORY]
        self.shares = CardShares(ssn.table)
        self.cards: IntArray = ssn.table.card_exists.sum(axis=1).astype(np.int64)
        self._cards_list: list[int] = self.cards.tolist()
        self._first_card_mem: list[int] = ssn.table.card_mem[:, 0].tolist() if self.table.card_mem.shape[1] else []

    def _rows(self, rows: IntArray | slice) -> IntArray:
        if isinstance(rows, slice):
            out: IntArray = np.arange(len(self.table))[rows]
            return out
        return rows

    def has_row_score(self) -> bool:
        return True

    def _cpu_free(self, rows: IntArray) -> IntArray:
        out: IntArray = self.table.alloc[:, self.cpu_col][rows] - self.table.used[:, self.cpu_col][rows]
        return out

    def _memory_free(self, rows: IntArray) -> IntArray:
        out: IntArray = self.table.alloc[:, self.memory_col][rows] - self.table.used[:, self.memory_col][rows]
        return out

    def _cpu_free_row(self, row: int) -> int:
        return int(self.table.alloc[row, self.cpu_col]) - int(self.table.used[row, self.cpu_col])

    def _gpu_ask(self, task: TaskInfo, rows: IntArray) -> IntArray:
        """The share of a card (thousandths) the task takes, per node."""
        gpu = task.gpu
        if gpu.mem_mib and not gpu.milli and not gpu.whole:
            mem = self.table.card_mem[rows, 0] if self.table.card_mem.shape[1] else np.zeros(len(rows), np.int64)
            out: IntArray = np.where(mem > 0, -(-gpu.mem_mib * CARD_MILLI // np.maximum(mem, 1)), 0)
            return out
        return np.full(len(rows), gpu.whole * CARD_MILLI + gpu.milli, dtype=np.int64)

    def _gpu_ask_row(self, task: TaskInfo, row: int) -> int:
        gpu = task.gpu
        if gpu.mem_mib and not gpu.milli and not gpu.whole:
            mem = self._first_card_mem[row] if self._first_card_mem else 0
            return -(-gpu.mem_mib * CARD_MILLI // max(mem, 1)) if mem > 0 else 0
        return gpu.whole * CARD_MILLI + gpu.milli

    def _slice_room(self, task: TaskInfo, rows: IntArray) -> IntArray:
        """Per node and card, the card's free share where the slice fits on it, else NEVER."""
        table, gpu = self.table, task.gpu
        ok = table.card_exists[rows] & ~table.card_whole[rows]
        ok &= table.card_used_milli[rows] + gpu.milli <= CARD_MILLI
        if gpu.mem_mib:
            ok &= table.card_used_mem[rows] + gpu.mem_mib <= table.card_mem[rows]
        out: IntArray = np.where(ok, self.shares.share[rows], NEVER)
        return out

    def _slice_room_row(self, task: TaskInfo, row: int) -> list[int]:
        table, gpu = self.table, task.gpu
        exists, whole, mem, used_mem, used_milli = table.card_row(row)
        share = self.shares.row(row)
        return [
            share[c]
            if exists[c]
            and not whole[c]
            and used_milli[c] + gpu.milli <= CARD_MILLI
            and (not gpu.mem_mib or used_mem[c] + gpu.mem_mib <= mem[c])
            else NEVER
            for c in range(len(exists))
        ]

    def _least_left(self, row: int, cards: IntArray) -> int:
        """The card with the least free share (first of equals): slices fill partly used cards first."""
        self.shares.sync()
        share = self.shares.row(row)
        return int(min(cards.tolist(), key=lambda card: share[card]))


class FirstFit(_Policy):
    """Volcano's behaviour: no node score, the lowest-index card that fits. It needs none of the shared
    per-node state, so the default configuration's session opens without building it."""

    scores_nodes = False

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        count = len(range(len(self.ssn.table))[rows]) if isinstance(rows, slice) else len(rows)
        return np.zeros(count)

    def score_row(self, task: TaskInfo, row: int) -> float:
        return 0.0

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        return int(cards[0])


class BestFit(_Policy):
    """The node with the least CPU and GPU left after placing, each relative to the largest node's."""

    def __init__(self, ssn: Session) -> None:
        super().__init__(ssn)
        self.cpu_max = float(max(int(self.table.alloc[:, self.cpu_col].max(initial=0)), 1))
        self.gpu_max = float(max(int(self.cards.max(initial=0)) * CARD_MILLI, 1))

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        rows = self._rows(rows)
        self.shares.sync()
        cpu_left = self._cpu_free(rows) - int(task.request[self.cpu_col])
        gpu_left = self.shares.share[rows].sum(axis=1) - self._gpu_ask(task, rows)
        out: FloatArray = MAX_SCORE * (1.0 - (cpu_left / self.cpu_max + gpu_left / self.gpu_max) / 2.0)
        return out

    def score_row(self, task: TaskInfo, row: int) -> float:
        self.shares.sync()
        cpu_left = self._cpu_free_row(row) - int(task.request[self.cpu_col])
        gpu_left = sum(self.shares.row(row)) - self._gpu_ask_row(task, row)
        return MAX_SCORE * (1.0 - (cpu_left / self.cpu_max + gpu_left / self.gpu_max) / 2.0)

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        return self._least_left(row, cards)


class RandomPolicy(_Policy):
    """For each request (the session caches scores per request), each node holds a seeded uniform draw,
    drawn again whenever the node changes; the highest draw among the nodes that fit wins. Every
    request walks the nodes in its own random order, and a node that takes a pod goes back in at a
    random place, so pods spread over the cluster as uniform choices would. A slice takes a uniformly
    drawn card among those it fits on."""

    def __init__(self, ssn: Session, seed: int) -> None:
        self.ssn = ssn
        self.table = ssn.table
        self.rng = np.random.default_rng(seed)
        #: request -> (draws as an array and as a list, position in NodeTable.changes folded in)
        self._draws: dict[Resources, tuple[FloatArray, list[float], list[int]]] = {}

    def _draws_for(self, task: TaskInfo) -> tuple[FloatArray, list[float]]:
        changes = self.table.changes
        found = self._draws.get(task.pod.requests)
        if found is None:
            values = MAX_SCORE * self.rng.random(len(self.table))
            found = self._draws[task.pod.requests] = (values, values.tolist(), [len(changes)])
        values, listed, seen = found
        if seen[0] < len(changes):
            rows = sorted(set(changes[seen[0] :]))
            seen[0] = len(changes)
            for row, value in zip(rows, (MAX_SCORE * self.rng.random(len(rows))).tolist(), strict=True):
                values[row] = listed[row] = value
        return values, listed

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        out: FloatArray = self._draws_for(task)[0][rows].copy()
        return out

    def score_row(self, task: TaskInfo, row: int) -> float:
        return self._draws_for(task)[1][row]

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        return int(cards[int(self.rng.integers(len(cards)))])


class DotProduct(_Policy):
    """Tetris' alignment score over CPU and GPU, the smallest winning (the ATC'23 paper's baseline)."""

    def __init__(self, ssn: Session) -> None:
        super().__init__(ssn)
        self.cpu_alloc: IntArray = np.maximum(self.table.alloc[:, self.cpu_col], 1)
        self._cpu_alloc_list: list[int] = self.cpu_alloc.tolist()
        self.card_count: IntArray = np.maximum(self.cards, 1)

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        rows = self._rows(rows)
        self.shares.sync()
        cpu_alloc = self.cpu_alloc[rows]
        cpu = (int(task.request[self.cpu_col]) / cpu_alloc) * (self._cpu_free(rows) / cpu_alloc)
        gpu = task.gpu
        if gpu.whole:
            cards = self.card_count[rows]
            untouched = (self.shares.share[rows] == CARD_MILLI).sum(axis=1)
            dot = cpu + (gpu.whole / cards) * (untouched / cards)
        elif gpu.shared:
            room = self._slice_room(task, rows).min(axis=1)
            room = np.where(room == NEVER, 0, room)
            dot = cpu + (self._gpu_ask(task, rows) / CARD_MILLI) * (room / CARD_MILLI)
        else:
            dot = cpu + 0.0
        out: FloatArray = MAX_SCORE * (1.0 - dot / 2.0)
        return out

    def score_row(self, task: TaskInfo, row: int) -> float:
        self.shares.sync()
        cpu_alloc = self._cpu_alloc_list[row]
        cpu = (int(task.request[self.cpu_col]) / cpu_alloc) * (self._cpu_free_row(row) / cpu_alloc)
        gpu = task.gpu
        if gpu.whole:
            cards = max(self._cards_list[row], 1)
            untouched = self.shares.row(row).count(CARD_MILLI)
            dot = cpu + (gpu.whole / cards) * (untouched / cards)
        elif gpu.shared:
            room = min(self._slice_room_row(task, row), default=NEVER)
            room = 0 if room == NEVER else room
            dot = cpu + (self._gpu_ask_row(task, row) / CARD_MILLI) * (room / CARD_MILLI)
        else:
            dot = cpu + 0.0
        return MAX_SCORE * (1.0 - dot / 2.0)

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        return self._least_left(row, cards)


class GpuPacking(_Policy):
    """Partly used cards first, then nodes with GPUs in use, then idle nodes (the ATC'23 baseline)."""

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        rows = self._rows(rows)
        if not task.gpu.any:
            return np.zeros(len(rows))
        self.shares.sync()
        share = self.shares.share[rows]
        capacity = np.maximum(self.cards[rows], 1) * CARD_MILLI
        in_use = (self.cards[rows] - (share == CARD_MILLI).sum(axis=1)) > 0
        left = share.sum(axis=1) - self._gpu_ask(task, rows)
        tier = np.where(in_use, 1.0 + (1.0 - left / capacity), 0.0 + (1.0 - left / capacity))
        if task.gpu.shared:
            room = self._slice_room(task, rows)
            partly = np.where(room < CARD_MILLI, room, NEVER).min(axis=1)
            tier = np.where(partly < NEVER, 2.0 + (1.0 - partly / CARD_MILLI), tier)
        out: FloatArray = MAX_SCORE * (tier / 3.0)
        return out

    def score_row(self, task: TaskInfo, row: int) -> float:
        if not task.gpu.any:
            return 0.0
        self.shares.sync()
        share = self.shares.row(row)
        cards = self._cards_list[row]
        capacity = max(cards, 1) * CARD_MILLI
        in_use = cards - share.count(CARD_MILLI) > 0
        left = sum(share) - self._gpu_ask_row(task, row)
        tier = 1.0 + (1.0 - left / capacity) if in_use else 0.0 + (1.0 - left / capacity)
        if task.gpu.shared:
            partly = min((x for x in self._slice_room_row(task, row) if x < CARD_MILLI), default=NEVER)
            if partly < NEVER:
                tier = 2.0 + (1.0 - partly / CARD_MILLI)
        return MAX_SCORE * (tier / 3.0)

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        return self._least_left(row, cards)


class FragAware(_Policy):
    """Least increase of expected fragmentation for the mix of pod shapes seen (the module docstring)."""

    def __init__(self, ssn: Session, refresh: float, pack: float) -> None:
        super().__init__(ssn)
        self.refresh = refresh
        self.pack = pack
        self.capacity: IntArray = np.maximum(self.cards, 1) * CARD_MILLI
        self._capacity_list: list[int] = self.capacity.tolist()
        self.model = FragmentationModel(ssn.table, self.cpu_col, self.memory_col, self.shares)
        self._jobs_seen = 0
        self._counts: dict[tuple[int, int, int, int, int], int] = {}
        self._static: dict[tuple[object, ...], tuple[int, TaskInfo]] = {}
        self._seen = 0  # GPU pods counted
        self._used = -1  # GPU pods counted when the mix in use was set (-1: never)
        self._before: IntArray = np.zeros(len(ssn.table), dtype=np.int64)  # fragmented x C now, per node
        self._before_valid = False
        ssn.ext.on_allocate.append(self._after_allocate)

    # -- the mix -------------------------------------------------------------------------------------
    def _fold(self) -> None:
        """Count the GPU pod shapes of jobs the session gained since the last look."""
        jobs = self.ssn.jobs
        while self._jobs_seen < len(jobs):
            for task in jobs[self._jobs_seen].tasks:
                gpu = task.gpu
                if gpu.whole:
                    cards, milli = gpu.whole, 0
                elif 0 < gpu.milli < CARD_MILLI:
                    cards, milli = 0, gpu.milli
                elif gpu.milli == CARD_MILLI:
                    cards, milli = 1, 0  # a slice of a whole card needs an untouched card
                else:
                    continue  # no GPU, or GPU memory only: outside the mix (fragmentation.py)
                pod = task.pod
                static_key = (tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations)
                static = self._static.get(static_key)
                if static is None:
                    static = self._static[static_key] = (len(self._static), task)
                cpu, memory = int(task.request[self.cpu_col]), int(task.request[self.memory_col])
                key = (cpu, memory, cards, milli, static[0])
                self._counts[key] = self._counts.get(key, 0) + 1
                self._seen += 1
            self._jobs_seen += 1

    def _use_mix(self) -> None:
        table = self.table
        masks = np.ones((max(1, len(self._static)), len(table)), dtype=bool)
        for index, task in self._static.values():
            mask = table.schedulable.copy()
            for static_filter in self.ssn.ext.static_filters:
                for _, passing in static_filter(task):
                    mask &= passing
            masks[index] = mask
        shapes = [
            MixShape(cpu=cpu, memory=memory, cards=cards, milli=milli, count=count, static=static)
            for (cpu, memory, cards, milli, static), count in self._counts.items()
        ]
        self.model.set_mix(shapes, masks)
        self._used = self._seen
        self._before_valid = False

    def _ensure_mix(self) -> None:
        """The first query takes in the jobs known so far; later refreshes happen after placements."""
        if self._used < 0:
            self._fold()
            self._use_mix()

    def _after_allocate(self, task: TaskInfo) -> None:
        """Take in newly seen jobs; a grown mix invalidates every cached score (every node is marked changed)."""
        self._fold()
        if self._used >= 0 and self._seen > self._used and self._seen >= self._used * (1.0 + self.refresh):
            self._use_mix()
            self.table.changes.extend(range(len(self.table)))

    def _sync(self) -> None:
        """Bring card shares and each node's current fragmentation up to date."""
        self._ensure_mix()
        changed = self.shares.sync()
        if not self._before_valid:
            self._before = self.model.fragmented(np.arange(len(self.table)))
            self._before_valid = True
        elif changed:
            rows = self.shares.rows_changed
            if len(rows) > 16:
                self._before[rows] = self.model.fragmented(np.array(rows, dtype=np.int64))
            else:
                for row in rows:
                    self._before[row] = self.model.fragmented_row(row)

    # -- policy --------------------------------------------------------------------------------------
    def _scale(self) -> float:
        return FRAG_POINTS_PER_CARD / (CARD_MILLI * max(self.model.total, 1))

    def score(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray:
        rows = self._rows(rows)
        if len(rows) <= SCALAR_ROWS:  # the twin, node by node, costs less than the ~40 numpy calls below
            return np.array([self.score_row(task, row) for row in rows.tolist()], dtype=np.float64)
        self._sync()
        cpu, memory = int(task.request[self.cpu_col]), int(task.request[self.memory_col])
        gpu = task.gpu
        free_cpu, free_memory, share = self._cpu_free(rows), self._memory_free(rows), self.shares.share[rows]
        fits = (free_cpu >= cpu) & (free_memory >= memory)
        if gpu.whole:
            fits &= (share == CARD_MILLI).sum(axis=1) >= gpu.whole
        elif gpu.shared and not gpu.mem_mib and not self.table.card_used_mem.any():
            fits &= share.max(axis=1, initial=0) >= gpu.milli  # shares are 1000 - thousandths used
        elif gpu.shared:
            fits &= (self._slice_room(task, rows) < NEVER).any(axis=1)
        out: FloatArray = np.zeros(len(rows))
        placed = rows[fits]  # scores elsewhere are never read: spare the work
        if len(placed):
            share = share[fits]
            known = (share, free_cpu[fits], free_memory[fits])
            added = self.model.after(placed, cpu, memory, gpu, known).min(axis=1) - self._before[placed]
            left = share.sum(axis=1) - self._gpu_ask(task, placed)
            out[fits] = -(added * self._scale()) + self.pack * (1.0 - left / self.capacity[placed])
        return out

    def score_row(self, task: TaskInfo, row: int) -> float:
        self._sync()
        cpu, memory = int(task.request[self.cpu_col]), int(task.request[self.memory_col])
        table, gpu = self.table, task.gpu
        if (
            self._cpu_free_row(row) < cpu
            or int(table.alloc[row, self.memory_col]) - int(table.used[row, self.memory_col]) < memory
        ):
            return 0.0
        if gpu.whole and self.shares.row(row).count(CARD_MILLI) < gpu.whole:
            return 0.0
        if gpu.shared and min(self._slice_room_row(task, row), default=NEVER) == NEVER:
            return 0.0
        added = min(self.model.after_row(row, cpu, memory, gpu)) - int(self._before[row])
        left = sum(self.shares.row(row)) - self._gpu_ask_row(task, row)
        return -(added * self._scale()) + self.pack * (1.0 - left / self._capacity_list[row])

    def choose_card(self, task: TaskInfo, row: int, cards: IntArray) -> int:
        self._sync()
        cpu, memory = int(task.request[self.cpu_col]), int(task.request[self.memory_col])
        after = self.model.after_row(row, cpu, memory, task.gpu)
        return int(min(cards.tolist(), key=lambda card: after[card]))


PolicyOptions = tuple[str, int, float, float]


def policy_options(plugin: Plugin) -> PolicyOptions:
    """The gpushare plugin's policy arguments: `gpushare.policy`, `gpushare.seed` (random),
    `gpushare.mixRefresh` and `gpushare.fragPack` (frag-aware). Raises PluginArgumentError."""
    return (
        plugin.str_arg("gpushare.policy", "first-fit", POLICIES),
        plugin.int_arg("gpushare.seed", 0),
        plugin.float_arg("gpushare.mixRefresh", 1.0, minimum=0.0),
        plugin.float_arg("gpushare.fragPack", 1.0),
    )


def make_policy(options: PolicyOptions, ssn: Session) -> PlacementPolicy:
    """The placement policy the gpushare plugin's arguments name (`policy_options`)."""
    name, seed, refresh, pack = options
    if name == "best-fit":
        return BestFit(ssn)
    if name == "random":
        return RandomPolicy(ssn, seed)
    if name == "dot-product":
        return DotProduct(ssn)
    if name == "gpu-packing":
        return GpuPacking(ssn)
    if name == "frag-aware":
        return FragAware(ssn, refresh, pack)
    return FirstFit(ssn)
