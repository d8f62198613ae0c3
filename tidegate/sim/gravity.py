"""Data gravity: a placed job waits for its data before it runs, and cloud jobs ship checkpoints home.

- **IDC pods** read their dataset through the IDC's cache (`datasets.LruCache`). A hit costs nothing;
  a miss fills the cache and, if the cache has `missReadGbps`, first reads the dataset from the object
  store at that rate (one read per job; the IDC fabric is not shared in the model). Without
  `missReadGbps` a miss is read through while the job runs.
- **Cloud pods** first prefetch the dataset to their node's local NVMe over the cloud's link
  (`link.Link`, shared max-min fairly, each transfer capped at `perPodGbps`). One copy per node:
  pods of one job on the same node, and later jobs on that node while it lives, share it; a job that
  lands on a node where the same dataset is still arriving waits for that transfer.
- **Checkpoints.** A job with pods on cloud nodes writes a checkpoint to local disk every epoch
  (`checkpointEverySeconds`) and uploads it (`checkpointSize`) over the link. A checkpoint is durable
  once uploaded; a restarted job resumes from its last durable one. Two checkpoints are kept locally:
  when a third is written while two uploads are still pending (a slow or cut link), the oldest is
  deleted and its upload cancelled, so at most two uploads per job queue on the link. A job restarted
  onto the same cloud node(s) resumes from the newest local checkpoint without any download; elsewhere
  on the cloud it first downloads its last durable checkpoint over the link.

The job's GPUs are held from placement until every pod's data is there (gang semantics: training
starts when all workers have their data); the engine counts that idle time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from tidegate.clock import Clock, Timer
from tidegate.sim.datasets import LruCache
from tidegate.sim.link import GBPS, Link, Transfer
from tidegate.sim.meter import Meter
from tidegate.sim.workload import SimJob

#: Checkpoints a cloud job keeps on local disk.
KEPT_LOCALLY = 2


@dataclass(slots=True, eq=False)
class Fetch:
    """A dataset being prefetched to one cloud node, and the placed jobs waiting for it."""

    node: str
    dataset: str
    link: Link
    transfer: Transfer | None = None
    waiting: list[str] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Staging:
    """A placed job waiting for its data: how many fetches, downloads and reads are outstanding."""

    job: SimJob
    outstanding: int = 0
    fetches: list[Fetch] = field(default_factory=list)
    downloads: list[tuple[Link, Transfer]] = field(default_factory=list)
    timer: Timer | None = None


@dataclass(slots=True, eq=False)
class Checkpoints:
    """A cloud job's checkpoint state across attempts (seconds of work each checkpoint holds)."""

    uploaded_s: float = 0.0
    local_s: float = 0.0
    local_nodes: frozenset[str] = frozenset()
    #: This attempt's pending uploads: (progress, link, transfer), oldest first.
    uploads: list[tuple[float, Link, Transfer]] = field(default_factory=list)
    timer: Timer | None = None


@dataclass(frozen=True, slots=True)
class Where:
    """Where a node is: its cluster, and whether it is a cloud node."""

    cluster: str
    is_cloud: bool


class DataGravity:
    """Stages placed jobs' data, tracks dataset copies, and ships cloud checkpoints over the links.

    The engine calls `stage` when a gang is placed (True: the data is already there), `working`
    when its run starts, `restart_progress` when it is restarted, `release` when its pods go, and
    `node_removed`; `on_ready(key)` is called back when a staged job's data has all arrived.
    """

    def __init__(
        self,
        clock: Clock,
        meter: Meter,
        sizes: dict[str, float],
        caches: dict[str, LruCache],
        miss_read: dict[str, float],
        links: dict[str, Link],
        per_pod: dict[str, float],
        checkpoint_size: float,
        where: Callable[[str], Where],
        on_ready: Callable[[str], None],
    ) -> None:
        self.clock = clock
        self.meter = meter
        self.sizes = sizes
        self.caches = caches
        self.miss_read = miss_read
        self.links = links
        self.per_pod = per_pod
        self.checkpoint_size = checkpoint_size
        self.where = where
        self.on_ready = on_ready
        self.node_data: dict[str, set[str]] = {}
        self.holders: dict[str, set[str]] = {}  # dataset -> cloud nodes holding it
        self.fetching: dict[tuple[str, str], Fetch] = {}
        self.staging: dict[str, Staging] = {}
        self.checkpoints: dict[str, Checkpoints] = {}  # job name -> state
        self.uploading: dict[str, tuple[SimJob, list[str]]] = {}  # group key -> (job, cloud nodes)

    # -- placement ------------------------------------------------------------------------------------
    def data_nodes(self, dataset: str) -> tuple[str, ...]:
        """Cloud nodes that hold the dataset now (what a burst job prefers), in a stable order."""
        return tuple(sorted(self.holders.get(dataset, ())))

    def stage(self, key: str, job: SimJob, nodes: list[str]) -> bool:
        """Start what the placed job needs before it runs; True if nothing is needed."""
        distinct = list(dict.fromkeys(nodes))
        places = [(node, self.where(node)) for node in distinct]
        cloud = [node for node, where in places if where.is_cloud and where.cluster in self.links]
        staging = Staging(job)
        dataset = job.dataset
        if dataset:
            idc = next((where.cluster for _, where in places if not where.is_cloud), None)
            cache = self.caches.get(idc) if idc is not None else None
            if cache is not None and idc is not None:
                hit = cache.access(dataset, self.sizes[dataset])
                self.meter["idc_cache_hits" if hit else "idc_cache_misses"].add(1, self.clock.now())
                if not hit and idc in self.miss_read:
                    delay = self.sizes[dataset] / self.miss_read[idc]
                    staging.outstanding += 1
                    staging.timer = self.clock.call_later(delay, partial(self._arrived, key, staging))
            for node in cloud:
                if dataset in self.node_data.get(node, ()):
                    self.meter["dataset_reuses"].add(1, self.clock.now())
                    continue
                fetch = self.fetching.get((node, dataset))
                if fetch is None:
                    fetch = self._fetch(node, dataset)
                fetch.waiting.append(key)
                staging.fetches.append(fetch)
                staging.outstanding += 1
        self._restore_checkpoint(key, job, cloud, staging)
        if not staging.outstanding:
            return True
        self.staging[key] = staging
        return False

    def _fetch(self, node: str, dataset: str) -> Fetch:
        cluster = self.where(node).cluster
        fetch = Fetch(node, dataset, self.links[cluster])
        self.fetching[(node, dataset)] = fetch
        fetch.transfer = fetch.link.start(
            "dataset", self.sizes[dataset], self.per_pod[cluster], partial(self._fetched, fetch)
        )
        self.meter["prefetches"].add(1, self.clock.now())
        return fetch

    def _restore_checkpoint(self, key: str, job: SimJob, cloud: list[str], staging: Staging) -> None:
        """A restarted job on cloud nodes: resume from a local checkpoint on the same nodes, or
        download the last durable one over the link."""
        state = self.checkpoints.get(job.name)
        if not cloud:
            return
        if state is not None and state.local_s > job.done_s and set(cloud) <= state.local_nodes:
            job.done_s = state.local_s
            self.meter["local_resumes"].add(1, self.clock.now())
            return
        if job.done_s <= 0 or self.checkpoint_size <= 0:
            return
        for node in cloud:
            cluster = self.where(node).cluster
            link = self.links[cluster]
            transfer = link.start(
                "checkpoint-download", self.checkpoint_size, self.per_pod[cluster], partial(self._arrived, key, staging)
            )
            staging.downloads.append((link, transfer))
            staging.outstanding += 1

    def _fetched(self, fetch: Fetch) -> None:
        del self.fetching[(fetch.node, fetch.dataset)]
        self.node_data.setdefault(fetch.node, set()).add(fetch.dataset)
        self.holders.setdefault(fetch.dataset, set()).add(fetch.node)
        for key in fetch.waiting:
            staging = self.staging.get(key)
            if staging is not None:
                staging.fetches.remove(fetch)
                self._arrived(key, staging)

    def _arrived(self, key: str, staging: Staging) -> None:
        staging.outstanding -= 1
        if staging.outstanding == 0 and self.staging.get(key) is staging:
            del self.staging[key]
            self.on_ready(key)

    # -- running --------------------------------------------------------------------------------------
    def working(self, key: str, job: SimJob, nodes: list[str]) -> None:
        """The job's run started: a job with cloud pods uploads a checkpoint every epoch."""
        every = job.checkpoint_every_s
        if every <= 0 or self.checkpoint_size <= 0:
            return
        cloud = [n for n in dict.fromkeys(nodes) if self.where(n).is_cloud and self.where(n).cluster in self.links]
        if not cloud:
            return
        state = self.checkpoints.setdefault(job.name, Checkpoints(uploaded_s=job.done_s))
        state.uploads = []
        self.uploading[key] = (job, cloud)
        self._next_checkpoint(key, job, state, job.done_s, self.clock.now())

    def _next_checkpoint(self, key: str, job: SimJob, state: Checkpoints, base: float, since: float) -> None:
        every = job.checkpoint_every_s
        progress = base + every
        if progress >= job.record.duration_s:
            state.timer = None
            return  # the job ends first
        state.timer = self.clock.call_at(since + every, partial(self._checkpoint, key, job, state, progress))

    def _checkpoint(self, key: str, job: SimJob, state: Checkpoints, progress: float) -> None:
        """Write a checkpoint locally and upload it; the third pending one supersedes the oldest."""
        _, cloud = self.uploading[key]
        now = self.clock.now()
        state.local_s = progress
        state.local_nodes = frozenset(cloud)
        if len(state.uploads) >= KEPT_LOCALLY:
            _, old_link, old = state.uploads.pop(0)
            old_link.cancel(old)
            self.meter["checkpoint_uploads_superseded"].add(1, now)
        cluster = self.where(cloud[0]).cluster
        link = self.links[cluster]
        upload: list[tuple[float, Link, Transfer]] = []
        transfer = link.start(
            "checkpoint-upload", self.checkpoint_size, self.per_pod[cluster], partial(self._uploaded, state, upload)
        )
        upload.append((progress, link, transfer))
        state.uploads.append(upload[0])
        self._next_checkpoint(key, job, state, progress, now)

    def _uploaded(self, state: Checkpoints, upload: list[tuple[float, Link, Transfer]]) -> None:
        entry = upload[0]
        state.uploads.remove(entry)
        state.uploaded_s = max(state.uploaded_s, entry[0])
        self.meter["checkpoint_uploads"].add(1, self.clock.now())

    def restart_progress(self, key: str, job: SimJob, saved: float) -> float:
        """Seconds of work a restarted job keeps: for a cloud job, only what its uploaded checkpoints
        hold (its newest local one is remembered for a restart on the same nodes); else `saved`."""
        if key not in self.uploading:
            return saved
        state = self.checkpoints[job.name]
        return max(0.0, min(state.uploaded_s - job.done_s, saved))

    def release(self, key: str) -> None:
        """The job's pods are gone: cancel what it was waiting for or uploading."""
        staging = self.staging.pop(key, None)
        if staging is not None:
            if staging.timer is not None:
                staging.timer.cancel()
            for link, transfer in staging.downloads:
                link.cancel(transfer)
            for fetch in staging.fetches:
                fetch.waiting.remove(key)
                if not fetch.waiting and fetch.transfer is not None:  # nobody left to receive it
                    fetch.link.cancel(fetch.transfer)
                    del self.fetching[(fetch.node, fetch.dataset)]
        running = self.uploading.pop(key, None)
        if running is not None:
            state = self.checkpoints[running[0].name]
            if state.timer is not None:
                state.timer.cancel()
                state.timer = None
            for _, link, transfer in state.uploads:
                link.cancel(transfer)
            state.uploads = []

    def node_removed(self, node: str) -> None:
        """A cloud node left: the datasets on its NVMe go with it."""
        for dataset in self.node_data.pop(node, ()):
            self.holders[dataset].discard(node)


def link_capacity(gbps: float) -> float:
    """Bytes per second of a link quoted in Gbit/s."""
    return gbps * GBPS


def per_pod_cap(gbps: float | None) -> float:
    """Bytes per second a transfer may use at most (math.inf: no cap)."""
    return gbps * GBPS if gbps else math.inf
