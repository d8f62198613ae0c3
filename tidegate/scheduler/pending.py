"""A queue's jobs still waiting for admission (PodGroup phase Pending), kept apart from its admitted ones.

A queue with a long backlog of jobs its quota refuses would otherwise cost its backlog every cycle: allocate,
reclaim and preempt walked the queue's jobs, and enqueue judged every waiting job in job order and wrote each
refused one's reason, even when only a job's worth of quota had come free. Here the waiting jobs are:

- apart from `QueueInfo.jobs` (admitted, not settled), so the other actions never walk them;
- kept in job order (`entries`, and per minResources in `by_ask`), sorted again only when a key may have
  moved (the node table changed, or a waiting job's pods did), so enqueue does not sort its backlog;
- counted by minResources, so the least any job after a point asks is known without stacking the backlog;
- judged lazily (`Cover`): jobs enqueue refuses without asking a vote (their minResources was refused
  earlier in the pass, or even the least any later job asks was) are not written one by one; the queue keeps
  one record of the pass, and a job reads its reason, `enqueue_seen` and `enqueue_blocked_at` through it
  (`JobInfo.reason` and friends) until something writes them. The values read are the ones the eager
  writes would have left, so what users see (reasons) and what later cycles decide are unchanged.

Jobs and records are stamped from one counter per queue (`tick`): a record covers the jobs that were waiting
when its pass began (stamped before it) and that no one has written to since (`JobInfo.touched`); which part
of the record applies is found by the job's key in the order the pass walked (`JobInfo.entry_key`).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tidegate.scheduler.info import JobInfo
    from tidegate.scheduler.node_table import IntArray

Key = tuple[object, ...]
Entry = tuple[Key, "JobInfo"]


@dataclass(frozen=True, slots=True)
class Cover:
    """What one enqueue pass wrote, in effect, into the jobs it did not write to: seen, refused at `freed`,
    with the reason the eager pass gave. A job in one of `runs` (keys in (previous run's end, `ends[i]`]) was
    refused by the reason given earlier in the pass to a job asking the same minResources (`runs[i]`); a job
    after `after` by the namespace's refusal, else that memo (`refused`), else the probe's (`refusal`)."""

    seq: int
    freed: int
    ends: list[Key]
    runs: list[dict[bytes, str]]
    after: Key | None
    refused: dict[bytes, str]
    refusal: str
    #: (name, namespaces) of the queue and its ancestors as the pass saw them, for the namespace refusal.
    levels: tuple[tuple[str, tuple[str, ...]], ...]
    hierarchical: bool

    def reason_for(self, job: JobInfo) -> str:
        refused = self.namespace_refusal(job.group.namespace)
        if refused:
            return refused
        key = job.entry_key
        if self.after is not None and key > self.after:
            return self.refused.get(job.min_bytes) or self.refusal
        return self.runs[bisect_left(self.ends, key)][job.min_bytes]

    def namespace_refusal(self, namespace: str) -> str:
        """`Session.namespace_refusal` over the specs the pass saw (`Queue.refuses`, level by level)."""
        levels = self.levels
        if levels[0][1] or self.hierarchical:
            for name, namespaces in levels:
                if namespaces and namespace not in namespaces:
                    return f"queue {name} takes work from namespace(s) {', '.join(namespaces)} only, not {namespace}"
        return ""


def _entry_key(entry: Entry) -> Key:
    return entry[0]


@dataclass(slots=True)
class PendingJobs:
    """The waiting (Pending-phase) jobs of one queue; see the module docstring."""

    #: id(job) -> job, in arrival order.
    jobs: dict[int, JobInfo] = field(default_factory=dict)
    #: (job key, job) in job order, and the same per minResources, while `sorted_on` is the node table's
    #: generation and nothing is `dirty` (then each job's `entry_key` is its key here).
    entries: list[Entry] = field(default_factory=list)
    by_ask: dict[bytes, list[Entry]] = field(default_factory=dict)
    sorted_on: int = -1
    dirty: bool = False
    #: Jobs enqueue has not judged yet.
    unseen: dict[int, JobInfo] = field(default_factory=dict)
    #: (freed, how many waiting jobs are refused at that `Session.freed`).
    blocked: tuple[int, int] = (-1, 0)
    #: minResources bytes -> how many waiting jobs ask it, and the vector.
    min_counts: dict[bytes, int] = field(default_factory=dict)
    min_vectors: dict[bytes, IntArray] = field(default_factory=dict)
    cover: Cover | None = None
    tick: int = 0

    def __len__(self) -> int:
        return len(self.jobs)

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.jobs.values())

    def stamp(self) -> int:
        self.tick += 1
        return self.tick

    def add(self, job: JobInfo, key: Key | None, generation: int) -> None:
        """A job starts waiting (`key`: its job key now, or None when the order is not kept now)."""
        self.jobs[id(job)] = job
        self.tick += 1
        job.seq = self.tick
        if not job.enqueue_seen_raw:
            self.unseen[id(job)] = job
        if job.enqueue_blocked_raw == self.blocked[0]:
            self.blocked = (self.blocked[0], self.blocked[1] + 1)
        asked = job.min_bytes
        held = self.min_counts.get(asked)
        if held is None:
            self.min_counts[asked] = 1
            self.min_vectors[asked] = job.min_resources
        else:
            self.min_counts[asked] = held + 1
        if key is None or self.dirty or generation != self.sorted_on:
            self.dirty = True  # sorted when a pass needs the order (`sort`)
            return
        job.entry_key = key
        insort(self.entries, (key, job), key=_entry_key)
        insort(self.by_ask.setdefault(asked, []), (key, job), key=_entry_key)

    def discard(self, job: JobInfo) -> bool:
        """The job stops waiting (admitted, placed, or removed); False if it was not waiting here."""
        if self.jobs.pop(id(job), None) is None:
            return False
        if self.cover is not None:
            job.materialize()  # what the queue's record says of it becomes its own
        if self.unseen:
            self.unseen.pop(id(job), None)
        if job.enqueue_blocked_raw == self.blocked[0]:
            self.blocked = (self.blocked[0], self.blocked[1] - 1)
        asked = job.min_bytes
        held = self.min_counts[asked] - 1
        if held:
            self.min_counts[asked] = held
        else:
            del self.min_counts[asked], self.min_vectors[asked]
        if not self.jobs:  # the next jobs are put in order only if a pass needs it (no key asked till then)
            self.entries, self.by_ask, self.dirty = [], {}, True
        elif not self.dirty:
            _remove(self.entries, job)
            same = self.by_ask[asked]
            _remove(same, job)
            if not same:
                del self.by_ask[asked]
        return True

    def sort(self, keys: list[tuple[Key, JobInfo]], generation: int) -> None:
        """Take the waiting jobs' keys now (in any order): what the record says of each job becomes its own
        first when the order moves (it finds its part of the record by its key in the old order)."""
        if not self.dirty and all(job.entry_key == key for key, job in keys):
            self.sorted_on = generation
            return
        for job in self.jobs.values():
            job.materialize()
        self.cover = None
        keys.sort(key=_entry_key)
        self.entries = keys
        self.by_ask = {}
        for key, job in keys:
            job.entry_key = key
            self.by_ask.setdefault(job.min_bytes, []).append((key, job))
        self.sorted_on, self.dirty = generation, False

    def blocked_now(self, freed: int) -> int:
        epoch, count = self.blocked
        return count if epoch == freed else 0

    def note_blocked(self, old: int, new: int) -> None:
        """A waiting job's `enqueue_blocked_at` moved from `old` to `new` (keeps `blocked`)."""
        epoch, count = self.blocked
        if old == epoch:
            count -= 1
        if new > epoch:
            epoch, count = new, 0
        if new == epoch:
            count += 1
        self.blocked = (epoch, count)

    def floor_after(self, walked: dict[bytes, int], width: int) -> IntArray:
        """The least each resource any waiting job asks, leaving out `walked` (minResources bytes -> jobs)."""
        floor: IntArray | None = None
        for asked, count in self.min_counts.items():
            if count > walked.get(asked, 0):
                vector = self.min_vectors[asked]
                floor = vector if floor is None else np.minimum(floor, vector)
        return floor if floor is not None else np.zeros(width, dtype=np.int64)


def _remove(entries: list[Entry], job: JobInfo) -> None:
    index = bisect_left(entries, job.entry_key, key=_entry_key)
    if index < len(entries) and entries[index][1] is job:
        del entries[index]
        return
    for index, entry in enumerate(entries):  # not where its key says: the key is not what it was sorted by
        if entry[1] is job:
            del entries[index]
            return
