"""Hierarchical dominant resource fairness: Volcano's drf plugin with `enableHierarchy: true`.

Queues sit in a tree (a queue's `volcano.sh/hierarchy` path from "root" with a weight per level in
`volcano.sh/hierarchy-weights`; without them, its spec.parent chain, each level weighted by that queue's
spec.weight; with neither, under the root itself), and each job is a leaf under its queue. Shares are
computed bottom-up as Volcano's `updateHierarchicalShare` does:

- a job's share is its dominant share (allocated over the cluster's total, the largest resource); it is
  saturated when it has all it asks of a resource it holds, or holds a resource the cluster has no more of;
- a node scales its unsaturated children that hold something so each dominant share equals the smallest of
  theirs (at most 1), adds its saturated ones as they are, and takes the dominant share of the sum; it is
  saturated when every child is (a node with no job is);
- queues compare along their paths from the root: at each level an unsaturated node first, then the smaller
  share over weight (a weight below 1 counts as 1), else the next level down; queues that tie down to the
  shorter path are equal, and the next plugin decides (`PathKey`).

Reclaim: a running task of another queue may be reclaimed for a task when, with the reclaimer's job holding
the task's request more and the victim's job the victim's request less, the reclaimer's queue comes first.

A placement changes one job: its node keeps, for its jobs, the sum of the saturated ones' allocations (integers),
the sum of the others' allocations over their shares (in fixed point, 2^-60 of a unit, so an exact integer sum)
and a heap of their shares, so it updates in O(log jobs) and gives the same figures for the same state whatever
the history (a long-lived session decides as a fresh one); only the nodes above it are computed again, when a
queue's key is next compared.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tidegate.model.objects import ROOT_QUEUE
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo

#: (saturated, share / weight) of each node on a queue's path below the root.
Levels = tuple[tuple[bool, float], ...]


class PathKey:
    """A queue's place in hdrf's order, comparing as Volcano's compareQueues: level by level from the root, an
    unsaturated node before a saturated one, then the smaller share over weight; equal when every level down to
    the shorter path ties (so, in a queue's order key, the next plugin's key decides).

    A key made by `HdrfTree.key` reads the tree when it is compared, as Volcano's queue heap calls its order
    function: a queue waiting in allocate's heap is compared with the shares as they are now (a sibling's
    placement moves its parent's share), not as they were when it was pushed."""

    __slots__ = ("_levels", "_queue", "_tree")

    def __init__(self, levels: Levels = (), tree: HdrfTree | None = None, queue: str = "") -> None:
        self._levels, self._tree, self._queue = levels, tree, queue

    @property
    def levels(self) -> Levels:
        tree = self._tree
        if tree is None:
            return self._levels
        tree.refresh()
        return tree.levels(self._queue)

    def compare(self, other: PathKey) -> int:
        for (mine_saturated, mine), (theirs_saturated, theirs) in zip(self.levels, other.levels, strict=False):
            if mine_saturated != theirs_saturated:
                return 1 if mine_saturated else -1
            if mine != theirs:
                return -1 if mine < theirs else 1
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PathKey) and self.compare(other) == 0

    def __lt__(self, other: PathKey) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: PathKey) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: PathKey) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: PathKey) -> bool:
        return self.compare(other) >= 0

    __hash__ = None  # type: ignore[assignment]  # equal keys need not be equal tuples

    def __repr__(self) -> str:
        return f"PathKey({self._queue or self.levels!r})"


def queue_path(queue: QueueInfo) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The queue's path from the root and each level's weight (the root's included): its annotations, else its
    spec.parent chain (weights from each queue's spec.weight), else the root alone."""
    spec = queue.queue
    if spec.hierarchy:
        return spec.hierarchy, spec.hierarchy_weights
    if queue.ancestors:
        chain = [*queue.ancestors, queue]
        names = tuple(level.name for level in chain)
        if names[0] != ROOT_QUEUE:  # a parent that does not exist: the chain hangs under the root
            return ("root", *names), (1.0, *(float(level.queue.weight) for level in chain))
        return names, (1.0, *(float(level.queue.weight) for level in chain[1:]))
    return ("root",), (1.0,)


#: Fixed point of the unsaturated jobs' allocation over share: exact integer sums in any order.
FIXED = float(2**60)


@dataclass(eq=False, slots=True)
class _Node:
    name: str
    weight: float
    parent: _Node | None = None
    children: dict[str, _Node] = field(default_factory=dict)
    #: The jobs whose queue's path ends here (a row each): allocation and request on the shared resources, dominant
    #: share, saturated or not.
    jobs: list[JobInfo] = field(default_factory=list)
    alloc: list[list[int]] = field(default_factory=list)
    request: list[list[int]] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)
    full: list[bool] = field(default_factory=list)
    #: Over the rows: the saturated ones' allocations that hold something, the others' allocation over share (FIXED),
    #: a heap of the others' (share, row) (entries of rows that changed since are skipped), rows not saturated.
    full_sum: list[int] = field(default_factory=list)
    scaled_sum: list[int] = field(default_factory=list)
    heap: list[tuple[float, int]] = field(default_factory=list)
    open_rows: int = 0
    #: Volcano's attributes: allocated (children scaled), dominant share, saturated.
    allocated: list[float] = field(default_factory=list)
    share: float = 0.0
    saturated: bool = True
    dirty: bool = True


class HdrfTree:
    """hdrf's tree over a session's queues and jobs, over the resources drf shares (`cols`, `total`)."""

    def __init__(self, queues: Iterable[QueueInfo], cols: list[int], total: list[float]) -> None:
        self.cols = cols
        self.total = total
        self.queues = list(queues)
        self._rows: dict[JobInfo, tuple[_Node, int]] = {}
        self._changed: dict[JobInfo, None] = {}
        self._grow()

    def _grow(self) -> None:
        """The tree of the queues' paths (their specs as they are now), without jobs."""
        self.root = _Node("root", 1.0)
        self.node_of: dict[str, _Node] = {}
        self.path_of: dict[str, tuple[_Node, ...]] = {}
        for queue in sorted(self.queues, key=lambda q: q.name):  # a level's weight: the first queue's to name it
            names, weights = queue_path(queue)
            node, path = self.root, [self.root]
            for depth in range(1, len(names)):
                child = node.children.get(names[depth])
                if child is None:
                    child = _Node(names[depth], max(weights[depth], 1.0), node)
                    node.children[names[depth]] = child
                node = child
                path.append(node)
            self.node_of[queue.name] = node
            self.path_of[queue.name] = tuple(path)
        self._post_order = list(self._walk(self.root))
        self._stale = True
        self._dirty = True  # a node changed since the last refresh
        self._allocated = [0] * len(self.cols)  # every job's allocation, summed
        self._demanding: list[bool] = []

    def _walk(self, node: _Node) -> Iterable[_Node]:
        for name in sorted(node.children):
            yield from self._walk(node.children[name])
        yield node

    # -- what changed -------------------------------------------------------------------------------
    def touch(self, job: JobInfo) -> None:
        """The job's allocation changed (a task placed, pipelined, evicted or given back)."""
        self._changed[job] = None

    def forget(self) -> None:
        """Another cycle of a long-lived session: jobs came or went, queues may have been edited (their weights,
        their annotations), so the tree is grown again and its rows laid out afresh."""
        self._grow()

    def _allocation(self, job: JobInfo) -> list[int]:
        allocated: list[int] = job.allocated.tolist()
        return [allocated[col] for col in self.cols]

    def _lay_out(self) -> None:
        members: dict[int, list[JobInfo]] = {}
        for queue in self.queues:
            node = self.node_of[queue.name]
            members.setdefault(id(node), []).extend([*queue.unsettled(), *queue.settled.values()])
        self._rows = {}
        width = len(self.cols)
        self._allocated = [0] * width
        for node in self._post_order:
            node.jobs = sorted(members.get(id(node), []), key=lambda job: job.key)
            node.alloc, node.request = [], []
            for row, job in enumerate(node.jobs):
                node.alloc.append(self._allocation(job))
                requested = [0] * len(job.allocated)
                for task in job.tasks:  # Volcano's TotalRequest: every task's request
                    for col, amount in task.request_nonzero:
                        requested[col] += amount
                node.request.append([requested[col] for col in self.cols])
                self._rows[job] = (node, row)
                for r, amount in enumerate(node.alloc[row]):
                    self._allocated[r] += amount
        self._changed.clear()
        self._stale = False
        self._demanding = [amount < total for amount, total in zip(self._allocated, self.total, strict=True)]
        for node in self._post_order:
            self._judge_rows(node)

    # -- a node's jobs --------------------------------------------------------------------------------
    def _judge_rows(self, node: _Node) -> None:
        """Every row's share and saturation, and the node's sums, afresh (the layout, or `demanding` moved)."""
        width = len(self.cols)
        node.shares, node.full = [0.0] * len(node.jobs), [False] * len(node.jobs)
        node.full_sum, node.scaled_sum, node.heap, node.open_rows = [0] * width, [0] * width, [], 0
        for row in range(len(node.jobs)):
            self._judge(node, row)
            self._count(node, row, 1)
        heapq.heapify(node.heap)
        node.dirty = True

    def _judge(self, node: _Node, row: int) -> None:
        """The row's dominant share, and whether it is saturated: it has all it asks of a resource it holds, or
        holds a resource the cluster has no more of (Volcano's resourceSaturated)."""
        alloc, request, demanding = node.alloc[row], node.request[row], self._demanding
        node.shares[row] = max((a / t for a, t in zip(alloc, self.total, strict=True)), default=0.0)
        node.full[row] = any(
            a > 0 and q > 0 and (a >= q or not d) for a, q, d in zip(alloc, request, demanding, strict=True)
        )

    def _count(self, node: _Node, row: int, sign: int) -> None:
        """Add (sign 1) or take away (-1) the row's part of the node's sums."""
        share, alloc = node.shares[row], node.alloc[row]
        if not node.full[row]:
            node.open_rows += sign
        if share == 0:
            return
        if node.full[row]:
            for r, amount in enumerate(alloc):
                node.full_sum[r] += sign * amount
            return
        for r, amount in enumerate(alloc):
            node.scaled_sum[r] += sign * int(amount / share * FIXED)
        if sign > 0:
            node.heap.append((share, row))  # heapified by the caller, or pushed in `_update`

    def _update(self, node: _Node, row: int, alloc: list[int]) -> None:
        self._count(node, row, -1)
        for r, (before, after) in enumerate(zip(node.alloc[row], alloc, strict=True)):
            self._allocated[r] += after - before
        node.alloc[row] = alloc
        self._judge(node, row)
        self._count(node, row, 1)
        if node.shares[row] != 0 and not node.full[row]:
            heapq.heappush(node.heap, node.heap.pop())  # the entry `_count` appended, into its place
        if len(node.heap) > 4 * len(node.jobs) + 64:  # entries of rows that changed since pile up
            node.heap = [(node.shares[i], i) for i in range(len(node.jobs)) if node.shares[i] and not node.full[i]]
            heapq.heapify(node.heap)
        node.dirty = True
        self._dirty = True

    @staticmethod
    def _smallest_open_share(node: _Node) -> float:
        """The smallest share of a row that holds something and is not saturated (1 without one, Volcano's start)."""
        heap, shares, full = node.heap, node.shares, node.full
        while heap:
            share, row = heap[0]
            if shares[row] == share and share != 0 and not full[row]:
                return min(share, 1.0)
            heapq.heappop(heap)
        return 1.0

    # -- shares ---------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Bring every node's share up to date with the jobs' allocations."""
        if self._changed or self._stale or self._dirty:
            self._refresh()

    def _refresh(self) -> None:
        if self._stale:
            self._lay_out()
        for job in self._changed:
            where = self._rows.get(job)
            if where is None:  # a job the layout has not seen
                self._lay_out()
                break
            self._update(*where, self._allocation(job))
        self._changed.clear()
        demanding = [amount < total for amount, total in zip(self._allocated, self.total, strict=True)]
        if demanding != self._demanding:  # saturation may have changed anywhere
            self._demanding = demanding
            for node in self._post_order:
                self._judge_rows(node)
        for node in self._post_order:
            if node.dirty or any(child.dirty for child in node.children.values()):
                self._compute(node)
        for node in self._post_order:
            node.dirty = False
        self._dirty = False

    def _compute(self, node: _Node) -> None:
        """Volcano's updateHierarchicalShare for one node whose children are up to date; marks it changed."""
        node.dirty = True
        smallest = self._smallest_open_share(node)
        saturated = node.open_rows == 0
        for child in node.children.values():
            if child.share != 0 and not child.saturated:
                smallest = min(smallest, child.share)
            saturated = saturated and child.saturated
        allocated = [float(a) + smallest * (b / FIXED) for a, b in zip(node.full_sum, node.scaled_sum, strict=True)]
        if not allocated:
            allocated = [0.0] * len(self.cols)
        for name in sorted(node.children):
            child = node.children[name]
            if child.share != 0:
                factor = 1.0 if child.saturated else smallest / child.share
                allocated = [mine + theirs * factor for mine, theirs in zip(allocated, child.allocated, strict=True)]
        node.allocated = allocated
        node.share = max((a / t for a, t in zip(allocated, self.total, strict=True)), default=0.0)
        node.saturated = saturated

    def levels(self, queue_name: str) -> Levels:
        return tuple((node.saturated, node.share / node.weight) for node in self.path_of[queue_name][1:])

    def key(self, queue: Any) -> PathKey:
        """The queue's hdrf order key (read when compared)."""
        return PathKey(tree=self, queue=queue.name)

    # -- reclaim ----------------------------------------------------------------------------------------
    def victims(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's hdrf reclaimFn: each candidate on its own, after the reclaimer's job took the task's request,
        is a victim when its job giving its request back still leaves the reclaimer's queue first."""
        self.refresh()
        mine = self._rows.get(reclaimer.job)
        if mine is None:
            return []
        my_node, my_row = mine
        my_before = my_node.alloc[my_row]
        asked = reclaimer.request.tolist()
        self._update(my_node, my_row, [a + asked[col] for a, col in zip(my_before, self.cols, strict=True)])
        judged: dict[tuple[int, tuple[int, ...]], bool] = {}
        victims = []
        try:
            for victim in candidates:
                theirs = self._rows.get(victim.job)
                if theirs is None or victim.job is reclaimer.job:
                    continue
                memo = (id(victim.job), victim.request_list)
                ok = judged.get(memo)
                if ok is None:
                    node, row = theirs
                    before = node.alloc[row]
                    given = victim.request.tolist()
                    self._update(node, row, [a - given[col] for a, col in zip(before, self.cols, strict=True)])
                    self._refresh()
                    ok = PathKey(self.levels(reclaimer.job.queue.name)) < PathKey(self.levels(victim.job.queue.name))
                    self._update(node, row, before)
                    judged[memo] = ok
                if ok:
                    victims.append(victim)
        finally:
            self._update(my_node, my_row, my_before)
            self._refresh()
        return victims
