"""Datasets and where copies of them live: the IDC's cache and the cloud nodes' local NVMe.

The datasets' home is the IDC's object store. The IDC fronts it with a cache (Alluxio-like): an LRU
by dataset over a capacity in bytes; a dataset larger than the whole cache is never cached. A cloud
node keeps every dataset prefetched to it for as long as it lives (its NVMe is not modelled as full).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from tidegate.sim.spec import DatasetShare

#: The pod annotation naming a job's dataset (what a user writes on the vcjob's pod template).
DATASET_ANNOTATION = "tidegate.io/dataset"


class LruCache:
    """Datasets cached by recency of use, within `capacity` bytes."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.used = 0.0
        self._entries: OrderedDict[str, float] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    @property
    def names(self) -> list[str]:
        """Cached datasets, least recently used first."""
        return list(self._entries)

    def access(self, name: str, size: float) -> bool:
        """Read a dataset through the cache: True on a hit. A miss loads it (evicting the least
        recently used datasets until it fits), unless it is larger than the whole cache."""
        if name in self._entries:
            self._entries.move_to_end(name)
            self.hits += 1
            return True
        self.misses += 1
        if size > self.capacity:
            return False
        while self.used + size > self.capacity:
            _, evicted = self._entries.popitem(last=False)
            self.used -= evicted
        self._entries[name] = size
        self.used += size
        return False


def pick_dataset(shares: Sequence[DatasetShare], u: float, total: float | None = None) -> str:
    """The dataset a uniform draw `u` in [0, 1) picks, each share with probability proportional to its
    weight; "" when there are no shares. `total` is the shares' weights summed (`share_total`), for a
    caller picking from the same shares again and again."""
    if not shares:
        return ""
    if total is None:
        total = share_total(shares)
    threshold = u * total
    for share in shares:
        threshold -= share.weight
        if threshold < 0:
            return share.name
    return shares[-1].name


def assign_datasets(
    queues: Sequence[str], shares: Sequence[DatasetShare], by_queue: Mapping[str, Sequence[DatasetShare]], seed: int
) -> list[str]:
    """One dataset per job (jobs given by their queue): drawn from the queue's own shares if it has
    some, else the workload's; seeded, so the same workload always reads the same datasets."""
    if not shares and not by_queue:
        return [""] * len(queues)
    draws = np.random.default_rng(seed).random(len(queues)).tolist()
    # Each queue's shares and their total, found once (a workload has a few queues and many jobs).
    picks: dict[str, tuple[Sequence[DatasetShare], float]] = {}
    for queue in dict.fromkeys(queues):
        chosen = by_queue.get(queue) or shares
        picks[queue] = chosen, share_total(chosen)
    out = []
    for queue, u in zip(queues, draws, strict=True):
        chosen, total = picks[queue]
        out.append(pick_dataset(chosen, u, total))
    return out


def share_total(shares: Sequence[DatasetShare]) -> float:
    """The shares' weights summed, in order (what `pick_dataset` scales its draw by)."""
    return sum(s.weight for s in shares)
