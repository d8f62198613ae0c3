"""The live control plane: the simulator's scheduling core, run on the wall clock over the jobs users submit.

`tidegate serve` puts it behind a REST API (tidegate/server). Its nodes, queues, priority classes and
scheduler configuration come from a folder of manifests, as `tidegate simulate` reads them; users then
submit Volcano Jobs, PodGroups with their pods and bare pods, several at once, and edit queues while
it runs (`PATCH /queues/<name>` with `{"spec": {"weight": 10}}`), which the next cycle sees.

Every `period` seconds a cycle of the same `OnlineScheduler` the simulator drives decides: bound pods
are listed on their node for that node's agent (a kubelet's part), which reports when each one has
succeeded or failed. A pod evicted by reclaim or preempt (`PodEvicted`) or reported failed
(`PodFailed`) makes its job follow its vcjob's lifecycle policies and maxRetry
(tidegate/lifecycle/policies.py): restart (its pods recreated, pending again), fail or complete.
A succeeded pod frees its share at once; a job whose pods have all succeeded is complete.

With a store (tidegate/store) every change the API can observe is written through, in one transaction
per call, before the call returns: a submission's text, each changed job's state and new events, a
patched queue's manifest, a deletion. Only what changed is written (a cycle that changes nothing writes
nothing). `from_manifests` with a store that holds state restores it: see `ControlPlane._restore`.
Every method is safe to call from any thread (one lock around them).

Served a simulation folder, it also hosts the fleet (pools sized by their HPAs, burst, spot notices,
links, the budget): the fleet's controllers (`tidegate.fleet.hybrid.HybridFleet`), as the simulator and
`tidegate kube` host them; the control plane is their port (`FleetPort`: `tidegate/live/fleet_port.py`). What
the API shows is in `tidegate/live/views.py`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import yaml

from tidegate.autoscale.hpa import HPASpec
from tidegate.clock import Callback, Clock, EventLoop, Timer
from tidegate.fleet.bill import Bill
from tidegate.fleet.budget import Budget
from tidegate.fleet.burst import Burst
from tidegate.fleet.hpa_supply import QueueFigures
from tidegate.fleet.hybrid import HybridFleet
from tidegate.fleet.links import KEEP_RUNNING, CloudPods
from tidegate.fleet.pool import Pool, pinned_to_idc
from tidegate.fleet.port import EventKind, RunningJob, WaitingJob
from tidegate.fleet.scaling import QueueTree
from tidegate.fleet.spec import BudgetSpec
from tidegate.lifecycle.policies import JobPolicy, Resolution, job_policy, verdict
from tidegate.live.jobs import (
    FINISHED,
    AlreadyExists,
    Conflict,
    Forbidden,
    JobPhase,
    LiveJob,
    Marked,
    NotFound,
    QueueMetrics,
)
from tidegate.live.queue_manifests import budgeted_manifest, merge_patch, parsed_queue, queue_manifest
from tidegate.live.views import PlaneViews
from tidegate.model.errors import ManifestError, ManifestErrors, Source
from tidegate.model.expand import BARE_POD_GROUP_PREFIX, workload_from
from tidegate.model.manifests import ManifestSet, load_objects, load_text
from tidegate.model.objects import (
    Job,
    JobEvent,
    Node,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PriorityClass,
    Queue,
    SchedulerConfiguration,
)
from tidegate.model.resources import Resources
from tidegate.model.validation import validate
from tidegate.scheduler.admission import admission_errors
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.snapshot import Decisions, Pipeline
from tidegate.store import Batch, JobState, PodState, Saved, StoredJob, StoreError

if TYPE_CHECKING:
    from tidegate.store.sql import Store

_log = logging.getLogger(__name__)
#: Volcano's schedulePeriod default.
DEFAULT_PERIOD_SECONDS = 1.0
#: Priority of the scheduling cycle among events due at the same time (after the API's changes).
PRIORITY_CYCLE = 10
#: Priority of the fleet's timers (HPA syncs, budget periods and checks) among events due at the same time.
PRIORITY_FLEET = 11
#: Kinds a submission may hold; the rest of the cluster comes from the served folder.
SUBMITTED_KINDS = ("Job", "PodGroup", "Pod")
#: Pods one submission may create (a vcjob at most MAX_JOB_PODS): a larger one is refused whole.
MAX_SUBMISSION_PODS = 20_000
#: The file name of the batch the served folder's own workloads are accepted (and stored) as.
FOLDER_BATCH_FILE = "served folder"


#: The PodGroup phase a restored job is handed to the scheduler in (admitted jobs stay admitted).
_GROUP_PHASE = {JobPhase.INQUEUE: PodGroupPhase.INQUEUE, JobPhase.RUNNING: PodGroupPhase.RUNNING}
#: A job as a submission admits it: its PodGroup, its pods, its lifecycle policies by task.
_Admitted = tuple[PodGroup, tuple[Pod, ...], dict[str, JobPolicy]]


class _Locked:
    """The clock as the fleet sees it: what it schedules (a node joining after its provisioning delay) runs
    under the control plane's lock, as API calls and cycles do, and what it changed is written after."""

    def __init__(self, clock: Clock, lock: threading.RLock, written: Callable[[], None]) -> None:
        self.clock, self.lock, self.written = clock, lock, written

    def now(self) -> float:
        return self.clock.now()

    def call_at(self, when: float, callback: Callback, priority: int = 0) -> Timer:
        return self.clock.call_at(when, self._locked(callback), priority)

    def call_later(self, delay: float, callback: Callback, priority: int = 0) -> Timer:
        return self.clock.call_later(delay, self._locked(callback), priority)

    def _locked(self, callback: Callback) -> Callback:
        def run() -> None:
            with self.lock:
                callback()
                try:
                    self.written()
                except StoreError:  # kept marked: the next call writes it
                    _log.exception("writing the fleet's change failed")

        return run


class ControlPlane:
    """The live loop's state: nodes, queues, submitted jobs, and the scheduler that places them."""

    def __init__(
        self,
        clock: Clock,
        nodes: Sequence[Node],
        queues: Sequence[Queue],
        config: SchedulerConfiguration | None = None,
        priority_classes: Sequence[PriorityClass] = (),
        store: Store | None = None,
        pools: Sequence[Pool] = (),
        hpas: Sequence[HPASpec] = (),
        burst: Burst | None = None,
        kept_pools: Mapping[str, Mapping[str, Any]] | None = None,
        budget: BudgetSpec | None = None,
        cloud_pods: CloudPods = KEEP_RUNNING,
    ) -> None:
        """`pools` add their nodes (`spec.count` each, at once; a pool in `kept_pools`, a store's, the nodes
        it had); `hpas` size the cloud pools they target, one node a replica, every HPA sync (15 s) from the
        queues' pending seconds; `burst` moves waiting jobs to the burst queue; `budget` patches its queue
        and caps the HPAs as the period's cloud spend crosses its thresholds (its first period starts now);
        `cloud_pods` is what pods running in a cloud do when its link is reported down.
        Without them the nodes are `nodes` alone, as a plain folder of Nodes says."""
        for what, wanted in (("burst", burst), ("budget", budget)):
            if wanted is not None and wanted.queue not in {q.name for q in queues}:
                raise ValueError(f"{what} queue {wanted.queue!r} is not defined")
        self.clock = clock
        self.store = store
        self.config = config or SchedulerConfiguration()
        self.nodes = {node.name: node for node in nodes}
        self.queues = {queue.name: queue for queue in queues}
        self.priority_classes = list(priority_classes)
        offered = {name for pool in pools for name in pool.node(pool.name).allocatable}  # nodes still to come
        self.core = OnlineScheduler(nodes, queues, self.config, resources=offered, report_waiting=False)
        self.jobs: dict[str, LiveJob] = {}
        #: Each pod's job, and the pods bound to each node and still to run there (what its agent runs).
        self.pod_job: dict[str, str] = {}
        self.bound: dict[str, dict[str, Pod]] = {name: {} for name in self.nodes}
        self._lock = threading.RLock()
        self._timer: Timer | None = None
        self.cycles = 0
        self.last_cycle_s = 0.0
        #: Cycles that raised, and the last one's error ("" once a cycle has succeeded since).
        self.failed_cycles = 0
        self.last_error = ""
        #: What restoring from the store had to drop (e.g. a patch of a queue the folder no longer has). A
        #: folder's own warnings (its HPAs' included) are its loader's: `tidegate serve` prints them.
        self.warnings: list[str] = []
        # Written to the store at the end of the current call (kept if the write fails, to retry).
        self._dirty = Marked()  # job keys; a key no longer in `jobs` is a deletion
        self._dirty_queues = Marked()
        self._new_batches: list[Batch] = []
        self._saved_events: dict[str, int] = {}  # job key -> events already in the store
        #: Jobs with pods nominated to a node (pipelined) after the last cycle.
        self._nominated: set[str] = set()
        self.burst = burst
        self._tree = QueueTree(queues)
        #: What each pool bills, and the fleet's scaling and budget events.
        self.bill = Bill(pools, clock.now())
        self.fleet_events: list[tuple[float, str]] = []
        self._dirty_pools = Marked()
        locked = _Locked(clock, self._lock, self._flush)
        self.fleet = HybridFleet(self, locked, pools, hpas, self.queues, burst, budget, cloud_pods)
        kept = kept_pools or {}
        self.fleet.sizing.start(pool for pool in pools if pool.name not in kept)
        for pool in pools:
            if pool.name in kept:
                state = kept[pool.name]
                arriving = state.get("arriving", ())
                self.fleet.sizing.restore(pool, state["nodes"], state["draining"], state["created"], arriving)
                self.bill.resume(pool.name, state, clock.now())
        self._saved_controllers: dict[str, dict[str, Any]] = {}  # controllers' states as last stored
        #: What the API shows of it.
        self.views = PlaneViews(self)

    @classmethod
    def from_manifests(
        cls,
        ms: ManifestSet,
        clock: Clock,
        store: Store | None = None,
        pools: Sequence[Pool] = (),
        hpas: Sequence[HPASpec] = (),
        burst: Burst | None = None,
        budget: BudgetSpec | None = None,
        claim: Callable[[], None] | None = None,
        cloud_pods: CloudPods = KEEP_RUNNING,
    ) -> ControlPlane:
        """Nodes, queues, priority classes and the scheduler configuration of a loaded folder.

        Without a store, or with one no control plane has started on, the jobs, PodGroups and pods the
        folder holds are submitted at once (and stored). With a store that holds state, that state is
        restored instead (`_restore`): the folder's workloads were accepted at the first start, and jobs
        deleted since stay deleted. Raises ManifestErrors for any problem, naming file, object and field.
        `claim` runs once the folder is valid, before the store is first touched (`tidegate serve` takes
        the store's lease there), so a folder refused leaves no store behind.
        """
        errors = [*ms.errors, *admission_errors(ms)]
        if errors:
            raise ManifestErrors(errors)
        if claim is not None:
            claim()
        config = ms.configurations[0] if ms.configurations else None
        saved = store.load() if store is not None else None
        kept = saved.pools if saved is not None else {}
        plane = cls(
            clock, ms.nodes, ms.queues, config, ms.priority_classes, store, pools, hpas, burst, kept, budget, cloud_pods
        )
        plane.core.set_namespaces({namespace.name: namespace.labels for namespace in ms.namespaces})
        with plane._lock:
            if saved is not None:
                plane._restore(saved)
                plane._resume_fleet(saved.controllers)
            elif ms.jobs or ms.podgroups or ms.pods:
                workloads = ManifestSet(jobs=ms.jobs, podgroups=ms.podgroups, pods=ms.pods)
                plane._accept(workloads, plane.clock.now(), _folder_batch(workloads))
            plane._flush(started=saved is None)
        return plane

    # -- what users do ------------------------------------------------------------------------------
    def submit(
        self, text: str, file: str = "request", user: str = "", namespaces: Collection[str] | None = None
    ) -> list[str]:
        """Accept Jobs, PodGroups with their pods, and bare pods (YAML or JSON, one or more documents) and
        return their job keys. All or nothing: raises ManifestErrors naming document, object and field,
        AlreadyExists when its only problem is jobs that exist, or Forbidden when an object is outside
        `namespaces` (None: any). The jobs' first event names `user`."""
        ms = load_text(text, file)  # a text of no object is an error there
        if namespaces is not None:
            objects: list[Job | PodGroup | Pod] = [*ms.jobs, *ms.podgroups, *ms.pods]
            outside = [obj for obj in objects if obj.namespace not in namespaces]
            if outside:
                obj = outside[0]
                raise Forbidden(
                    f"{obj.source}: {type(obj).__name__} {obj.name}: metadata.namespace {obj.namespace}: "
                    f"{user or 'the caller'} may submit to {', '.join(sorted(namespaces)) or 'no namespace'} only",
                    type(obj).__name__,
                    obj.name,
                )
        with self._lock:
            keys = self._accept(ms, self.clock.now(), Batch(uuid.uuid4().hex, file, text), user)
            try:
                self._flush()
            except StoreError:  # not stored, so not accepted: the caller hears so and nothing of it stays
                for key in keys:
                    self._forget(self.jobs[key])
                    self._dirty.discard(key)
                self._new_batches.clear()
                raise
            return keys

    def patch_queue(self, name: str, patch: Mapping[str, Any]) -> Queue:
        """Apply a JSON merge patch (RFC 7386) to a queue's manifest, e.g. `{"spec": {"weight": 10}}`; the
        next cycle sees it. Raises NotFound, or ManifestErrors naming the field."""
        with self._changing():
            current = self.queues.get(name)
            if current is None:
                raise NotFound(f"queue {name} does not exist", "Queue", name)
            queue = self._set_queue(
                name, merge_patch(current.raw or queue_manifest(current), patch), f"PATCH /queues/{name}"
            )
            self._dirty_queues.add(name)
            budget = self.budget
            if budget is not None and name == budget.spec.queue:
                # the operator's word is the queue's own spec, which the next period restores
                original = budget.original
                budget.original = parsed_queue(merge_patch(original.raw or queue_manifest(original), patch))
                budget.current = queue
            return queue

    def delete_job(self, key: str) -> None:
        """Forget a job: its pods leave their nodes at once (their agents stop them)."""
        with self._changing():
            self._forget(self.job(key))
            self._saved_events.pop(key, None)
            self._dirty.add(key)

    def report_pod(self, pod_key: str, phase: PodPhase, message: str = "") -> LiveJob:
        """A node's agent reports a bound pod Succeeded or Failed (Running changes nothing)."""
        with self._changing():
            job = self.job(self.pod_job.get(pod_key, ""), "Pod", pod_key)
            index = next(i for i, pod in enumerate(job.pods) if pod.key == pod_key)
            pod = job.pods[index]
            if job.phase in FINISHED:
                raise Conflict(f"job {job.key} is {job.phase.value}: its pods were stopped", "Pod", pod_key)
            if phase is PodPhase.RUNNING or phase is pod.phase:
                return job
            if not pod.node_name or pod.phase is not PodPhase.RUNNING:
                raise Conflict(f"pod {pod_key} is {pod.phase.value}, not running on a node", "Pod", pod_key)
            now = self.clock.now()
            if phase is PodPhase.SUCCEEDED:
                job.pods[index] = replace(pod, phase=PodPhase.SUCCEEDED)
                if all(p.phase is PodPhase.SUCCEEDED for p in job.pods):
                    self._end(job, JobPhase.COMPLETED, "all pods succeeded", now)
                else:  # its share is free for the next cycle while the rest of the gang runs on
                    self.core.finish_pod(pod_key, succeeded=True)
                    self._unbind(pod)
                    self._dirty.add(job.key)
            elif phase is PodPhase.FAILED:
                job.pods[index] = replace(pod, phase=PodPhase.FAILED)
                self._apply_policy(job, pod, JobEvent.POD_FAILED, f"pod {pod_key} failed: {message}".rstrip(": "), now)
            else:
                raise Conflict(f"an agent reports Running, Succeeded or Failed, not {phase.value}", "Pod", pod_key)
            return job

    # -- the loop -----------------------------------------------------------------------------------
    def cycle(self) -> Decisions:
        """One scheduling cycle now: pods bound, evicted pods' jobs handled by their policies."""
        with self._changing():
            now = self.clock.now()
            decisions = self.core.cycle(now)
            self.cycles += 1
            self.last_cycle_s = now
            placed: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {}
            for bind in decisions.binds:
                placed.setdefault(self.pod_job[bind.pod], {})[bind.pod] = (bind.node, bind.gpu_indices)
            for key, binds in placed.items():
                self._bind(self.jobs[key], binds, now)
            self._nominate(decisions.pipelined)
            for key, info in self.core.waiting.items():
                job = self.jobs[key]
                if not job.waiting:
                    continue  # running, with pods evicted just now: handled below
                was = job.phase, job.reason
                job.phase = JobPhase.INQUEUE if info.phase is PodGroupPhase.INQUEUE else JobPhase.PENDING
                job.reason = self.core.pending_reason(key) or job.reason
                if (job.phase, job.reason) != was:
                    self._dirty.add(key)
            for eviction in decisions.evictions:  # a gang's first evicted pod decides; the job is then pending
                hit = self.jobs.get(self.pod_job.get(eviction.pod, ""))
                if hit is not None and hit.phase is JobPhase.RUNNING:
                    pod = next(p for p in hit.pods if p.key == eviction.pod)
                    self._apply_policy(hit, pod, JobEvent.POD_EVICTED, f"pod {pod.key} evicted: {eviction.reason}", now)
            self.fleet.after_cycle(now)
            return decisions

    def autoscale(self) -> None:
        """One HPA sync: each cloud pool sized from the queues' pending seconds (as `/metrics` exports them)."""
        with self._changing():
            self.fleet.sizing.sync(self.pending_seconds())

    def start(self, clock: EventLoop, period: float = DEFAULT_PERIOD_SECONDS) -> None:
        """Schedule a cycle every `period` seconds on `clock` (whose `run` the caller drives)."""
        if not period > 0:
            raise ValueError(f"period {period!r} must be positive")

        def tick() -> None:
            try:
                self.cycle()
                self.last_error = ""
            except Exception as exc:  # the loop outlives a bad cycle; /healthz reports it until one succeeds
                # (a StoreError among them: the cycle's changes stay marked, and the next call writes them)
                self.failed_cycles += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                _log.exception("scheduling cycle failed")
            self._timer = clock.call_later(period, tick, PRIORITY_CYCLE)

        self._timer = clock.call_later(0.0, tick, PRIORITY_CYCLE)
        self.fleet.start(PRIORITY_FLEET)  # on the control plane's clock, under its lock

    def stop(self) -> None:
        """No further cycles (a WallClock's `run` then returns once its queue is empty)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self.fleet.stop()

    # -- what the plane tells ------------------------------------------------------------------------
    def pending_seconds(self) -> dict[str, float]:
        """volcano_queue_pending_jobs_duration_seconds: per queue, the seconds its waiting jobs that may burst
        (not pinned to the IDC) have waited, summed; a parent queue adds its children's. What the cloud
        pools' HPAs read, as the simulator computes it."""
        with self._lock:
            now = self.clock.now()
            own: dict[str, float] = {}
            for job in self.jobs.values():
                if job.waiting and not any(pinned_to_idc(pod) for pod in job.template):
                    queue = job.group.queue
                    own[queue] = own.get(queue, 0.0) + (now - job.queued_since)
            return self._tree.totals(own)

    def metrics(self) -> list[QueueMetrics]:
        """Per queue: `pending_seconds`, its waiting and running jobs, what its running pods hold, its weight."""
        with self._lock:
            pending = self.pending_seconds()
            out = {name: QueueMetrics(name, queue.weight, pending[name]) for name, queue in self.queues.items()}
            for job in self.jobs.values():
                row = out.get(job.group.queue)
                if row is None:
                    continue
                if job.waiting:
                    row.pending += 1
                elif job.phase is JobPhase.RUNNING:
                    row.running += 1
                    for pod in job.pods:
                        if pod.phase is PodPhase.RUNNING:
                            row.allocated = row.allocated + pod.requests
            return list(out.values())

    def job(self, key: str, kind: str = "Job", name: str = "") -> LiveJob:
        """The job of that key; NotFound names the object asked for (the job, or `kind` `name`: a pod)."""
        job = self.jobs.get(key)
        if job is None:
            raise NotFound(f"{kind.lower()} {name or key} does not exist", kind, name or key)
        return job

    # -- what the fleet's agents and probers report -----------------------------------------------------
    def spot_notice(self, node: str, notice_seconds: float | None = None) -> float:
        """A provider's spot interruption notice for a cloud node, as its agent reports it
        (`POST /nodes/<name>/interruption`); returns when the instance goes. What follows is the fleet's
        (`tidegate.fleet.spot`): the node is cordoned and leaves the HPA's count, each job running there is told
        to checkpoint, and when the notice runs out (`notice_seconds`, by default the pool's or its provider's)
        the node is removed and its pods are evicted (their jobs follow their lifecycle policies). A second
        notice changes nothing. Raises NotFound for a node of no cloud pool."""
        with self._changing():
            served = self.nodes.get(node)
            pool = self.fleet.pool_of(served) if served is not None else None
            if pool is None or not pool.is_cloud:
                raise NotFound(f"node {node} is not a node of a served cloud pool", "Node", node)
            goes_at = self.fleet.spot.notice(pool, node, notice_seconds)
            assert goes_at is not None  # a served node of the pool
            return goes_at

    def set_link(self, cluster: str, up: bool, reason: str = "") -> None:
        """A prober's or an operator's word on a cloud cluster's link to the IDC (`PUT /links/<cluster>`);
        what follows is the fleet's (`tidegate.fleet.links`): while it is down nothing new goes there, and once
        every cloud's link is down burst jobs still waiting go back home. Pods running there run on (their
        agents report them). Raises NotFound for a cluster not served."""
        with self._changing():
            try:
                self.fleet.links.set_link(cluster, up, reason)
            except KeyError:
                raise NotFound(f"cloud cluster {cluster} is not served", "Cluster", cluster) from None

    @property
    def links_down(self) -> dict[str, tuple[float, str]]:
        """Cloud clusters whose link to the IDC is down: since when, and why."""
        return self.fleet.links.down

    @property
    def notices(self) -> dict[str, float]:
        """Cloud nodes under a spot interruption notice: when the provider takes each back."""
        return self.fleet.spot.noticed

    @property
    def budget(self) -> Budget | None:
        return self.fleet.budget

    # -- the fleet's port (tidegate/fleet/port.py) ------------------------------------------------------
    def add_nodes(self, nodes: Sequence[Node]) -> None:
        self.core.add_nodes(nodes)

    def remove_nodes(self, names: Iterable[str]) -> None:
        self.core.remove_nodes(names)

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        self.core.set_schedulable(name, schedulable)
        served = self.nodes.get(name)
        pool = self.fleet.pool_of(served) if served is not None else None
        if pool is not None:
            self._dirty_pools.add(pool.name)  # its draining list may have changed: kept in the store

    def node_ready(self, pool: Pool, node: Node) -> None:
        self.nodes[node.name] = node
        self.bound[node.name] = {}

    def evict_node(self, pool: Pool, node: str) -> None:
        now = self.clock.now()
        for pod in list(self.bound.get(node, {}).values()):
            job = self.jobs.get(self.pod_job.get(pod.key, ""))
            if job is not None and job.phase is JobPhase.RUNNING:
                self._apply_policy(job, pod, JobEvent.POD_EVICTED, f"pod {pod.key} evicted: node {node} removed", now)
        self.nodes.pop(node, None)
        self.bound.pop(node, None)

    def busy(self, node: str) -> int:
        return len({self.pod_job[key] for key in self.bound.get(node, {})})

    def node_requests(self, node: str) -> Resources:
        total = Resources()
        for pod in self.bound.get(node, {}).values():
            total = total + pod.requests
        return total

    def pods_on(self, node: str) -> int:
        return len(self.bound.get(node, {}))

    def queue_figures(self) -> dict[str, QueueFigures]:
        return {row.queue: QueueFigures(row.pending, row.running, row.allocated, row.weight) for row in self.metrics()}

    def billed(self, pool: Pool, change: int) -> None:
        self.bill.change(pool.name, change, self.clock.now())
        self._dirty_pools.add(pool.name)

    def sized(self, pool: Pool) -> None:
        self._dirty_pools.add(pool.name)  # kept in the store, so a restart has the same nodes

    def interrupt(self, pool: Pool, node: str, notice_s: float) -> list[str]:
        """Each job running on the node is told to checkpoint now (its pods' agents run their preStop)."""
        now = self.clock.now()
        stopping = sorted({self.pod_job[key] for key in self.bound.get(node, {})})
        for key in stopping:
            self.jobs[key].events.append((now, f"spot interruption notice for {node}: checkpoint now"))
            self._dirty.add(key)
        return stopping

    def waiting(self, outside: str = "") -> list[WaitingJob]:
        out = []
        for key in self.core.waiting:
            job = self.jobs[key]
            if job.waiting and job.group.queue != outside:
                pinned = any(pinned_to_idc(pod) for pod in job.template)
                running = any(pod.node_name for pod in job.pods)
                queue = job.group.queue
                out.append(
                    WaitingJob(
                        key, queue, job.home[0], job.queued_since, job.group.namespace, pinned, bool(job.pods), running
                    )
                )
        return out

    def reason(self, key: str) -> str:
        return self.jobs[key].reason

    def admits(self, queue: str, namespace: str) -> bool:
        return self.core.has_queue(queue) and self.core.namespace_refusal(queue, namespace) is None

    def move(self, key: str, queue: str) -> None:
        job = self.jobs[key]
        self.core.remove_group(key)
        if queue == job.home[0]:
            job.back_home()
        else:
            job.overflow_to(queue)
        self.core.add_group(job.group, list(job.pods))
        self._dirty.add(key)

    def running_on(self, nodes: Collection[str]) -> list[RunningJob]:
        keys = {self.pod_job[pod] for node in nodes for pod in self.bound.get(node, {})}
        return [RunningJob(key) for key in self.jobs if key in keys]

    def fail(self, key: str, why: str) -> None:
        job = self.jobs[key]
        pod = next((pod for pod in job.pods if pod.node_name), None)
        if pod is not None and job.phase is JobPhase.RUNNING:
            self._apply_policy(job, pod, JobEvent.POD_EVICTED, f"pod {pod.key} evicted: {why}", self.clock.now())

    def link_changed(self, cluster: str, up: bool) -> None:
        pass  # no transfer is modelled here

    def spend(self, at: float) -> float:
        return self.bill.spent(at)

    def set_queue(self, queue: Queue) -> Queue:
        """A budget threshold's patch (or a new period's restore) of its queue, as `PATCH /queues` makes it."""
        current = self.queues[queue.name]
        manifest = budgeted_manifest(current.raw or queue_manifest(current), queue)
        self._dirty_queues.add(queue.name)
        return self._set_queue(queue.name, manifest, f"budget of queue {queue.name}")

    def record(self, text: str, kind: EventKind, job: str = "") -> None:
        """A job's event goes to the job; the others are logged, and the recent ones listed by `GET /pools`
        and `GET /budget`."""
        now = self.clock.now()
        if job:
            self.jobs[job].events.append((now, text))
            self._dirty.add(job)
            return
        _log.info("%s", text)
        self.fleet_events.append((now, text))
        del self.fleet_events[:-1000]

    def want_cycle(self) -> None:
        pass  # a cycle runs every period anyway

    def active(self) -> bool:
        return True

    def failed(self, what: str, exc: Exception) -> None:
        _log.error("%s failed", what, exc_info=exc)  # as a cycle: logged, and the next step runs on time

    def _resume_fleet(self, controllers: Mapping[str, Any]) -> None:
        """The fleet's controllers as the store kept them: the budget's period, the links down, the spot
        notices, each HPA's status."""
        self._resume_budget(controllers.get("budget"))
        for cluster, (since, reason) in controllers.get("links", {}).items():
            self.fleet.links.resume(cluster, float(since), str(reason))
        for node, goes_at in controllers.get("notices", {}).items():
            served = self.nodes.get(node)
            pool = self.fleet.pool_of(served) if served is not None else None
            if pool is not None:
                self.fleet.spot.resume(pool, node, float(goes_at))
        self.fleet.sizing.resume_statuses(controllers.get("hpas", {}))

    def _resume_budget(self, state: Mapping[str, Any] | None) -> None:
        """Go on with the kept period, or start the one a restart falls in (restoring the queue's own spec)."""
        budget = self.budget
        if budget is not None and state is not None:
            current = self.queues[budget.spec.queue]
            budget.restore(dict(state), current, parsed_queue(state["original"]), self.clock.now())

    def _controllers(self) -> dict[str, dict[str, Any]]:
        """What the store keeps of the controllers: the budget's period and its queue's own spec, the links
        that are down, the spot notices, each HPA's status (its object's, which outlives a controller)."""
        states: dict[str, dict[str, Any]] = {
            "links": {c: list(down) for c, down in self.links_down.items()},
            "notices": dict(self.notices),
        }
        if self.fleet.sizing.autoscalers:
            states["hpas"] = self.fleet.sizing.statuses()
        budget = self.budget
        if budget is not None:
            original = budget.original.raw or queue_manifest(budget.original)
            states["budget"] = budget.state() | {"original": original}
        return states

    # -- internals ----------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock while reading several things that must agree (a scrape of every metric)."""
        with self._lock:
            yield

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the lock for a call that may change state, and write what it changed when it returns."""
        with self._lock:
            yield
            self._flush()

    def _flush(self, started: bool = False) -> None:
        """Write what changed since the last write, in one transaction (nothing if nothing changed). If it
        fails the changes stay marked, and the next call writes them. `started` marks the store as holding
        this control plane's state (its first start)."""
        if self.store is None:
            self._dirty.clear()
            self._dirty_queues.clear()
            self._dirty_pools.clear()
            self._new_batches.clear()
            return
        controllers = self._controllers()
        moved = {name: state for name, state in controllers.items() if state != self._saved_controllers.get(name)}
        changed = self._dirty or self._dirty_queues or self._dirty_pools or self._new_batches or moved
        if not (changed or started):
            return
        with self.store.write() as writer:
            if started:
                writer.mark_started()
            for batch in self._new_batches:
                writer.add_batch(batch)
            for key in self._dirty:
                job = self.jobs.get(key)
                if job is None:
                    writer.delete_job(key)
                    continue
                saved = self._saved_events.get(key, 0)
                writer.put_job(_state(job), [(seq, *event) for seq, event in enumerate(job.events[saved:], saved)])
            for name in self._dirty_queues:
                queue = self.queues.get(name)
                if queue is None:
                    writer.drop_queue(name)
                else:
                    writer.put_queue(name, queue.raw or queue_manifest(queue))
            for name in self._dirty_pools:
                pool = self.fleet.pools[name]
                state = {"created": pool.created, "nodes": pool.nodes, "draining": pool.draining}
                state |= {"arriving": [arrival.due for arrival in pool.arriving], **self.bill.state(name)}
                writer.put_pool(name, state)
            for name, state in moved.items():
                writer.put_controller(name, state)
        for key in self._dirty:
            if key in self.jobs:
                self._saved_events[key] = len(self.jobs[key].events)
        self._saved_controllers = controllers
        self._dirty.clear()
        self._dirty_queues.clear()
        self._dirty_pools.clear()
        self._new_batches.clear()

    def _accept(self, ms: ManifestSet, now: float, batch: Batch, user: str = "") -> list[str]:
        """Admit a submission and hand its jobs to the scheduler; all or nothing (raises ManifestErrors)."""
        keys = []
        for group, pods, policies in self._admit(ms, self.jobs):
            job = _new_job(group, pods, policies, batch.id, now)
            job.events.append((now, f"submitted by {user}" if user else "submitted"))
            self._install(job)
            self._dirty.add(job.key)
            keys.append(job.key)
        if keys:  # a batch is kept while a job of it is
            self._new_batches.append(batch)
        return keys

    def _admit(
        self, ms: ManifestSet, existing: Collection[str], ratcheted: list[ManifestError] | None = None
    ) -> list[_Admitted]:
        """A submission's jobs, validated against the served cluster and expanded as Volcano's job controller
        does: what both a submission and a restore build jobs from. Raises ManifestErrors with every problem,
        or AlreadyExists when the only problem is jobs in `existing`. With `ratcheted` (a restore), the
        problems of the queue rules that ratchet go there (`validate`)."""
        errors = list(ms.errors)
        errors.extend(_misplaced(ms))
        too_many = _too_many_pods(ms)
        if too_many:  # not expanded at all
            raise ManifestErrors([*errors, *too_many])
        check = ManifestSet(
            queues=list(self.queues.values()),
            priority_classes=self.priority_classes,
            jobs=ms.jobs,
            podgroups=ms.podgroups,
            pods=ms.pods,
        )
        submitted = {source.file for source in _sources(ms)}
        errors.extend(e for e in validate(check, ratcheted) if e.source.file in submitted)
        workload = workload_from(check)
        errors.extend(workload.errors)
        columns = self.core.resources
        vcjobs = {job.key: job for job in ms.jobs}
        there: list[ManifestError] = []
        for group in workload.groups:
            if group.key in existing:
                kind, name = _written_as(group, vcjobs, workload.pods_of(group))
                message = f"job {group.key} already exists; delete it first"
                there.append(ManifestError(group.source, kind, name, "metadata.name", message))
            for pod in workload.pods_of(group):
                unknown = sorted(name for name in pod.requests if name not in columns)
                if unknown:
                    field_ = "spec.containers[*].resources.requests"
                    message = f"no node offers {', '.join(unknown)}"
                    errors.append(ManifestError(pod.source, "Pod", pod.name, field_, message))
        if errors:  # every problem at once, jobs that exist among them
            raise ManifestErrors([*errors, *there])
        if there:
            raise AlreadyExists(there)
        return [(group, tuple(workload.pods_of(group)), _policies(vcjobs.get(group.key))) for group in workload.groups]

    def _install(self, job: LiveJob, group_phase: PodGroupPhase | None = None) -> None:
        """Make a built job known: to the API, to its nodes' agents (its running pods), and to the scheduler
        unless it has finished (in `group_phase` if given: a restored job keeps its admission)."""
        self.jobs[job.key] = job
        for pod in job.pods:
            self.pod_job[pod.key] = job.key
            if pod.phase is PodPhase.RUNNING and pod.node_name and job.phase not in FINISHED:
                self.bound[pod.node_name][pod.key] = pod
        if job.phase not in FINISHED:
            group = job.group if group_phase is None else replace(job.group, phase=group_phase)
            self.core.add_group(group, list(job.pods))

    def _forget(self, job: LiveJob) -> None:
        """The job leaves the scheduler, its nodes and the API (the store hears of it if it is marked)."""
        self._release(job)
        for pod in job.pods:
            self.pod_job.pop(pod.key, None)
        del self.jobs[job.key]

    def _release(self, job: LiveJob) -> None:
        """The job leaves the scheduler and its pods their nodes' agents (it stays known to the API)."""
        self.core.remove_group(job.key)
        for pod in job.pods:
            self._unbind(pod)

    def _set_queue(self, name: str, doc: Any, file: str) -> Queue:
        """Replace a queue by a manifest; see `_set_queues`."""
        return self._set_queues({name: (doc, file)})[name]

    def _set_queues(
        self, docs: Mapping[str, tuple[Any, str]], ratcheted: list[ManifestError] | None = None
    ) -> dict[str, Queue]:
        """Replace queues by manifests (each with the file its errors name), validated as loaded ones, together,
        against the other queues: a queue cannot be renamed, its parent must exist, and the tree must hold
        (a problem the change makes in another queue, a child's capability above its parent's say, is named
        too, as the change's). All or nothing: raises ManifestErrors. With `ratcheted` (stored manifests read
        back), the problems of the rules that ratchet go there, each value kept as written."""
        errors: list[ManifestError] = []
        new: dict[str, Queue] = {}
        for name, (doc, file) in docs.items():
            # as parsed: written back as JSON and read as YAML, an emoji was refused
            ms = load_objects([doc], file, ratchet=ratcheted is not None)
            errors += ms.errors
            if ratcheted is not None:
                ratcheted += ms.ratcheted
            if not ms.errors and [q.name for q in ms.queues] != [name]:
                field_, message = "metadata.name", "a queue cannot be renamed"
                if not ms.queues:
                    field_, message = "kind", "a Queue stays a Queue (scheduling.volcano.sh/v1beta1)"
                errors.append(ManifestError(Source(file), "Queue", name, field_, message))
            elif not ms.errors:
                new[name] = ms.queues[0]
        if not errors:
            before = {_problem_key(e) for e in validate(ManifestSet(queues=list(self.queues.values())))}
            tree = ManifestSet(queues=[new.get(q.name, q) for q in self.queues.values()])
            files = {file for _, file in docs.values()}
            for error in validate(tree):
                if error.source.file in files:
                    errors.append(error)
                elif _problem_key(error) not in before:  # another queue, made wrong by this change
                    file = next(iter(docs.values()))[1]
                    errors.append(replace(error, source=Source(file)))
        if errors:
            raise ManifestErrors(errors)
        for name, queue in new.items():
            self.queues[name] = queue
            self.core.set_queue(queue)
        return new

    # -- restoring from the store -------------------------------------------------------------------
    def _restore(self, saved: Saved) -> None:
        """Continue where the stored control plane stopped.

        Queues patched live replace the folder's (a patch of a queue the folder no longer has is dropped,
        with a warning: the queue was removed on purpose; one breaking a rule that ratchets is kept, with a
        warning). Each job is rebuilt by admitting its batch's
        text again, through the submission's own code, and given its stored state: running pods on their
        nodes with their cards (used from the first cycle), succeeded pods finished, waiting jobs waiting
        since `queued_since`; finished jobs are kept for the API only. A job with a pod on a node the folder
        no longer has restarts pending (no retry counted), with an event naming the node. A job that breaks
        an admission rule that ratchets (a label value, half a GPU, its queue Closed since: it was accepted
        before) is kept, with a warning and an event naming the rule; one that cannot be rebuilt (its queue or
        priority class gone, a resource no node offers) is an error naming it.
        """
        kept = {
            name: (doc, f"{self._where()}: queue {name}") for name, doc in saved.queues.items() if name in self.queues
        }
        broken: list[ManifestError] = []
        self._set_queues(kept, broken)  # together: one patch may have been accepted only after another
        self.warnings += [f"{error}; kept as it was accepted (validation ratcheting)" for error in broken]
        for name in [name for name in saved.queues if name not in kept]:
            self.warnings.append(f"queue {name} was patched live but the folder no longer has it: patch dropped")
            self._dirty_queues.add(name)
        admitted: dict[str, dict[str, tuple[_Admitted, list[ManifestError]]]] = {}
        for stored in saved.jobs:
            batch_id = stored.state.batch
            if batch_id not in admitted:
                admitted[batch_id] = self._readmit(saved.batches[batch_id], saved.jobs)
            built = admitted[batch_id].get(stored.state.key)
            if built is None:
                source = Source(f"{self._where()}: batch {saved.batches[batch_id].file}")
                problem = "is not in the text it was submitted in"
                raise ManifestErrors([ManifestError(source, "Job", stored.state.key, "", problem)])
            self._restore_job(stored, *built)

    def _readmit(self, batch: Batch, stored: Sequence[StoredJob]) -> dict[str, tuple[_Admitted, list[ManifestError]]]:
        """A stored batch's jobs by key, admitted again, each with the problems of the rules that ratchet it
        has (read as written: it was accepted before them); errors name the store, the batch and its jobs."""
        ms = load_text(batch.text, batch.file, ratchet=True)
        broken = list(ms.ratcheted)
        try:
            built = self._admit(ms, (), broken)
        except ManifestErrors as exc:
            keys = ", ".join(job.state.key for job in stored if job.state.batch == batch.id)
            where = f"{self._where()}: job(s) {keys} submitted as {batch.file}"
            raise ManifestErrors(
                [replace(error, source=replace(error.source, file=where)) for error in exc.errors]
            ) from exc
        out = {}
        for group, pods, policies in built:
            objects = {(group.source, group.name), *((pod.source, pod.name) for pod in pods)}
            out[group.key] = (group, pods, policies), [e for e in broken if (e.source, e.name) in objects]
        return out

    def _restore_job(self, stored: StoredJob, built: _Admitted, broken: Sequence[ManifestError] = ()) -> None:
        state = stored.state
        job = _new_job(*built, state.batch, state.submitted)
        job.phase, job.reason, job.retries = JobPhase(state.phase), state.reason, state.retries
        job.queued_since, job.started, job.finished = state.queued_since, state.started, state.finished
        job.events = list(stored.events)
        self._saved_events[job.key] = len(job.events)
        for error in broken:  # validation ratcheting: what was accepted stays readable
            where = f"{self._where()}: job {job.key} submitted as {error.source.file}"
            kept = replace(error, source=replace(error.source, file=where))
            self.warnings.append(f"{kept}; kept as it was accepted (validation ratcheting)")
            said = f"kept at restart as it was accepted, though now {error.field}: {error.message}"
            if said not in {message for _, message in job.events}:
                job.events.append((self.clock.now(), said))
                self._dirty.add(job.key)
        pods = {pod.key: pod for pod in state.pods}
        job.pods = [_restored_pod(pod, pods.get(pod.key)) for pod in job.template]
        if state.queue and state.queue != job.group.queue:
            if state.queue in self.queues:
                job.overflow_to(state.queue)
            else:
                self.warnings.append(
                    f"job {job.key} had overflowed to queue {state.queue}, which the folder no longer has: "
                    f"back in queue {job.group.queue}"
                )
                self._dirty.add(job.key)
        lost = sorted({p.node_name for p in job.pods if p.phase is PodPhase.RUNNING and p.node_name not in self.nodes})
        if lost and job.phase not in FINISHED:
            now = self.clock.now()
            why = f"node {', '.join(lost)} no longer exists"
            job.events.append((now, why))
            self._reset(job, why, now)
        self._install(job, _GROUP_PHASE.get(job.phase))

    def _where(self) -> str:
        return f"store {self.store.where}" if self.store is not None else "store"

    def _bind(self, job: LiveJob, binds: Mapping[str, tuple[str, tuple[int, ...]]], now: float) -> None:
        for i, pod in enumerate(job.pods):
            found = binds.get(pod.key)
            if found is None:
                continue
            node, cards = found
            bound = replace(pod, node_name=node, gpu_indices=cards, phase=PodPhase.RUNNING, nominated_node_name="")
            job.pods[i] = bound
            self.bound[node][bound.key] = bound
        if job.waiting:
            job.phase, job.reason = JobPhase.RUNNING, ""
            job.started = job.started if job.started is not None else now
            job.events.append((now, f"started on {', '.join(sorted({p.node_name for p in job.pods if p.node_name}))}"))
        self._dirty.add(job.key)

    def _nominate(self, pipelined: Sequence[Pipeline]) -> None:
        """Pods pipelined to a node show (and store) it as their nominated node, so a restart holds its room
        for them; a nomination the scheduler dropped is cleared."""
        nominated = {p.pod: p for p in pipelined}
        now = {self.pod_job[key] for key in nominated}
        for key in self._nominated | now:
            job = self.jobs.get(key)
            if job is None:
                continue
            for i, pod in enumerate(job.pods):
                if pod.node_name:
                    continue
                found = nominated.get(pod.key)
                node, cards = (found.node, found.gpu_indices) if found is not None else ("", ())
                if (pod.nominated_node_name, pod.gpu_indices) != (node, cards):
                    job.pods[i] = replace(pod, nominated_node_name=node, gpu_indices=cards)
                    self._dirty.add(key)
        self._nominated = now

    def _unbind(self, pod: Pod) -> None:
        if pod.node_name:
            pods = self.bound.get(pod.node_name)
            if pods is not None:
                pods.pop(pod.key, None)
                if not pods:
                    served = self.nodes.get(pod.node_name)
                    pool = self.fleet.pool_of(served) if served is not None else None
                    if pool is not None:
                        self.fleet.sizing.emptied(pool, pod.node_name)

    def _apply_policy(self, job: LiveJob, pod: Pod, event: JobEvent, what: str, now: float) -> None:
        """What Volcano's job controller does for the event on one of the job's pods."""
        decided = verdict(job.policies.get(pod.task) or job.policies[""], event, job.retries)
        self._dirty.add(job.key)
        job.retries = decided.retries
        job.events.append((now, what))
        why = f"{what}; {decided.rule}" if decided.rule else what
        if decided.resolution is Resolution.FAIL:
            self._end(job, JobPhase.FAILED, why, now)
        elif decided.resolution is Resolution.COMPLETE:
            self._end(job, JobPhase.COMPLETED, why, now)
        else:
            self._restart(job, why, now)

    def _restart(self, job: LiveJob, why: str, now: float) -> None:
        self._release(job)
        self._reset(job, why, now)
        overflow = self.fleet.overflow
        if overflow is not None and overflow.queue_for(job.key, job.group.queue, job.home[0]) != job.group.queue:
            job.back_home()  # restarted into the burst queue while every link is down
        self.core.add_group(job.group, list(job.pods))

    def _reset(self, job: LiveJob, why: str, now: float) -> None:
        """The job's pods are recreated pending from its template: it waits again from now."""
        job.pods = list(job.template)
        job.phase, job.reason, job.queued_since = JobPhase.PENDING, why, now
        job.events.append((now, "restarted"))
        self._dirty.add(job.key)

    def _end(self, job: LiveJob, phase: JobPhase, why: str, now: float) -> None:
        """The job is over: pods still pending or running are stopped (shown Failed), its share freed."""
        self._release(job)
        for i, pod in enumerate(job.pods):
            if pod.phase is not PodPhase.SUCCEEDED:
                job.pods[i] = replace(pod, phase=PodPhase.FAILED)
        job.phase, job.reason, job.finished = phase, why, now
        job.events.append((now, f"{phase.value.lower()}: {why}"))
        self._dirty.add(job.key)


def _new_job(
    group: PodGroup, pods: Sequence[Pod], policies: Mapping[str, JobPolicy], batch: str, submitted: float
) -> LiveJob:
    """A job as admitted at `submitted`: objects the manifests gave no creation time are created then."""
    stamped = replace(group, created=group.created or submitted)
    template = tuple(replace(pod, created=pod.created or submitted) for pod in pods)
    job = LiveJob(stamped, template, list(template), policies, submitted, submitted, batch=batch)
    job.home = (stamped.queue, template)
    return job


def _folder_batch(workloads: ManifestSet) -> Batch:
    """The served folder's workloads as one batch of text (their documents as read), stored like a submission."""
    objects: list[Job | PodGroup | Pod] = [*workloads.jobs, *workloads.podgroups, *workloads.pods]
    text = yaml.safe_dump_all([obj.raw for obj in objects], sort_keys=False)
    return Batch(uuid.uuid4().hex, FOLDER_BATCH_FILE, text)


def _state(job: LiveJob) -> JobState:
    """What the store keeps of a job besides its batch and events."""
    pods = tuple(
        PodState(pod.key, pod.phase.value, pod.node_name, pod.gpu_indices, pod.nominated_node_name) for pod in job.pods
    )
    return JobState(
        job.key,
        job.batch,
        job.phase.value,
        job.reason,
        job.retries,
        job.submitted,
        job.queued_since,
        job.started,
        job.finished,
        pods,
        job.group.queue,
    )


def _restored_pod(pod: Pod, state: PodState | None) -> Pod:
    """A pod rebuilt from its template, as it was stored (on its node with its cards, or finished)."""
    if state is None:
        return pod
    return replace(
        pod,
        phase=PodPhase(state.phase),
        node_name=state.node,
        gpu_indices=state.gpu_indices,
        nominated_node_name=state.nominated,
    )


def _misplaced(ms: ManifestSet) -> list[ManifestError]:
    """Objects a submission may not hold: the cluster (nodes, queues, classes, configuration) is served."""
    kinds: list[tuple[str, Sequence[Node | Queue | PriorityClass | SchedulerConfiguration]]] = [
        ("Node", ms.nodes),
        ("Queue", ms.queues),
        ("PriorityClass", ms.priority_classes),
        ("SchedulerConfiguration", ms.configurations),
    ]
    message = f"submit {', '.join(SUBMITTED_KINDS)} objects; the cluster itself comes from the served folder"
    errors = [ManifestError(obj.source, kind, obj.name, "kind", message) for kind, objs in kinds for obj in objs]
    errors.extend(ManifestError(s.source, s.kind, s.name, "kind", message) for s in ms.skipped)
    return errors


def _problem_key(error: ManifestError) -> tuple[str, str, str, str]:
    """An error without its place: the same problem, wherever it was read."""
    return error.kind, error.name, error.field, error.message


def _too_many_pods(ms: ManifestSet) -> list[ManifestError]:
    """A submission creates at most MAX_SUBMISSION_PODS pods (each is built, stored and scheduled)."""
    total = sum(task.replicas for job in ms.jobs for task in job.tasks) + len(ms.pods)
    if total <= MAX_SUBMISSION_PODS:
        return []
    first = next(iter(_sources(ms)), Source())
    message = f"{total:,} pods in all: a submission creates at most {MAX_SUBMISSION_PODS:,}; submit it in parts"
    return [ManifestError(Source(first.file), "", "", "", message)]


def _sources(ms: ManifestSet) -> list[Source]:
    objects: list[Job | PodGroup | Pod] = [*ms.jobs, *ms.podgroups, *ms.pods]
    return [obj.source for obj in objects]


def _written_as(group: PodGroup, vcjobs: Mapping[str, Job], pods: Sequence[Pod]) -> tuple[str, str]:
    """The kind and name the user wrote for a group: a vcjob, a PodGroup, or a bare pod's own group."""
    if group.key in vcjobs:
        return "Job", group.name
    if group.name.startswith(BARE_POD_GROUP_PREFIX) and len(pods) == 1 and pods[0].source == group.source:
        return "Pod", pods[0].name
    return "PodGroup", group.name


def _policies(job: Job | None) -> dict[str, JobPolicy]:
    """Per task name, the policies its pods follow (the task's, then the job's); "" for other pods."""
    if job is None:
        return {"": JobPolicy()}
    base = job_policy(job)
    out = {"": replace(base, task_policies=())}
    for task in job.tasks:
        out[task.name] = replace(base, task_policies=task.policies)
    return out
