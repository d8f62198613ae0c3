"""One scheduling session over a snapshot: the state actions and plugins share.

The session owns the columnar node table, the job/queue views, the plugins' extension points and
the per-shape placement caches. It never reads a clock or does I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from tidegate.model.objects import (
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    Node,
    NodeAffinity,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    Queue,
    SchedulerConfiguration,
)
from tidegate.model.quantity import scale_of
from tidegate.model.resources import PODS, Resources
from tidegate.scheduler.framework import (
    ExtensionPoints,
    JobCheck,
    Plugin,
    PluginRegistry,
    RowExplain,
    RowFilter,
    RowScore,
    switched_off,
)
from tidegate.scheduler.info import GpuRequest, JobInfo, QueueInfo, RunningIndex, TaskInfo, TaskStatus
from tidegate.scheduler.labels import LabelIndex, TaintIndex
from tidegate.scheduler.node_table import BoolArray, FloatArray, IntArray, NodeTable, ResourceIndex, drop_rows
from tidegate.scheduler.refusal import Refusal, RefusalCode
from tidegate.scheduler.snapshot import Snapshot
from tidegate.scheduler.statement import Statement

NEG_INF = float("-inf")
#: Every pod takes one of its node's pod slots (`pods` is counted in milli-units like any count).
ONE_POD = Resources({PODS: scale_of(PODS)})


#: Changed nodes refreshed one by one with the plugins' scalar twins (~5-8 us a node); beyond this, numpy
#: refreshes them together (~250 us however few, on 5,000 nodes with the default plugins).
SCALAR_ROWS = 32
#: Changed nodes patched one by one into a shape's totals (~0.2 us a node); beyond this, the totals are
#: recomputed whole (~25-35 us on 5,000 nodes).
SCALAR_TOTAL_ROWS = 128
#: Results one request keeps by node state before it forgets them (`DynamicCache.by_state`).
MAX_STATE_RESULTS = 8_192
#: Rows the scalar path may refresh in a request's lists before its arrays catch up.
MAX_STALE_ROWS = 1024
#: Changed nodes patched one by one into a shape's explanation (a few us a node); beyond this, it is counted
#: again over every node with numpy.
SCALAR_EXPLAIN_ROWS = 256
#: Pod entries a long-lived session keeps by the identity of a pod's request, selector, affinity and
#: tolerations (arrivals from one template share them: their entry is found without building the shape).
MAX_IDENT_ENTRIES = 4096
#: Pod shapes no task has any more whose caches a long-lived session keeps (the ones left last): a shape that
#: comes and goes with its jobs (a pod list's requests) is not cached afresh every time, while one-off shapes
#: (data gravity's, one per burst job) do not pile up.
KEEP_UNUSED_SHAPES = 256


@dataclass(slots=True)
class DynamicCache:
    """Dynamic filter and score results over all nodes for one request, refreshed row by row.

    Pods asking the same resources share it whatever their selectors and tolerations: dynamic
    filters and scores read only the request. `scores` holds each dynamic score's vector, in
    registration order; both are meaningful only where `fit` is True. The lists mirror the
    arrays for the scalar path (reading numpy one element at a time costs more than the sum),
    which writes only the lists: the arrays catch up on the rows it wrote (`stale`) when read.
    """

    fit: BoolArray
    scores: list[FloatArray]
    fit_list: list[bool]
    score_lists: list[list[float]]
    seen: int  # position in NodeTable.changes already folded in
    slots: list[tuple[FloatArray, list[float]]] = field(default_factory=list)  # (score, its list), paired
    #: Scalar results by node state (`NodeTable.state_id`): whether the request fits, and its scores there.
    by_state: dict[int, tuple[bool, tuple[float, ...]]] = field(default_factory=dict)
    #: Rows whose lists the scalar path refreshed and the arrays do not show yet (repeats allowed).
    stale: list[int] = field(default_factory=list)
    #: A shape asked for it since nodes last joined or left (`Session.change_nodes` carries only those).
    asked: bool = True

    def __post_init__(self) -> None:
        self.slots = list(zip(self.scores, self.score_lists, strict=True))

    def sync_arrays(self) -> None:
        """Copy the stale rows from the lists into the arrays (one numpy call per vector, not per row)."""
        stale = self.stale
        if stale:
            rows = np.array(stale, dtype=np.int64)
            self.fit[rows] = [self.fit_list[row] for row in stale]
            for vector, values in self.slots:
                vector[rows] = [values[row] for row in stale]
            self.stale = []


@dataclass(slots=True)
class StaticPart:
    """The static filters' mask or the static scores' sum over every node for some placement terms, shared
    by the pod shapes with those terms (`Session._static_parts`), read only. The same as a Python list is
    made when first read: many shapes are placed at once and never refreshed row by row."""

    array: np.ndarray
    _values: list[Any] | None = None
    _reads: int = 0  # rows read from the array itself (`rows`) before the list was made

    def values(self) -> list[Any]:
        if self._values is None:
            self._values = self.array.tolist()
        return self._values

    def rows(self, count: int) -> Sequence[Any]:
        """Something to read `count` rows from: the array itself until the rows read would have paid for the
        list (a row read from the array costs about what 16 rows cost to list), then the list. A shape placed
        once (data gravity gives most burst jobs their own) then never lists every node."""
        if self._values is None:
            self._reads += count
            if self._reads << 4 < len(self.array):
                return cast(Sequence[Any], self.array)
        return self.values()


@dataclass(slots=True)
class ShapeCache:
    """Filter and score vectors over all nodes for one pod shape, refreshed row by row."""

    mask: StaticPart  # the static filters' (bools)
    score: StaticPart  # the static scores' (floats)
    dynamic: DynamicCache
    total: FloatArray  # score where the pod fits now, -inf elsewhere
    seen: int  # position in NodeTable.changes already folded in (never ahead of dynamic.seen)
    #: `total` is -inf everywhere: found so by `Session.best_node`, and no row refreshed since takes the pod.
    #: Capacity freed somewhere then costs a shape that still fits nowhere the changed rows, not a pass.
    empty: bool = False


@dataclass(slots=True)
class ExplainCache:
    """Why one pod shape finds no node, node by node, patched for the nodes that change (`Session.explain`).

    `reasons` lists every (reason, mask) pair `Session._explain` charges, in its order (unschedulable, the static
    filters', then each dynamic filter's); a node is charged to the first reason whose mask leaves it out
    (`first`, -1 for none), and `counts` says how many nodes each reason holds. The static part of a node's
    charge (`static_first`) holds while the node table's generation does; the rest is asked again of the
    dynamic filters' row twins (`ExtensionPoints.row_explains`) for each node that changed."""

    generation: int
    seen: int  # position in NodeTable.changes folded in
    reasons: list[str]
    offsets: list[int]  # per dynamic filter, where its reasons start in `reasons`
    static_first: list[int]
    first: list[int]
    counts: list[int]
    text: str = ""


#: A request vector, the same as Python ints, the GPU ask it makes, its (column, amount) pairs, and whether
#: it is best-effort (it asks for nothing but the pod slot).
_Request = tuple[IntArray, tuple[int, ...], GpuRequest, tuple[tuple[int, int], ...], bool]
#: What a pod's task takes from the session's interning: its _Request, then its shape and shape number.
_PodEntry = tuple[IntArray, tuple[int, ...], GpuRequest, tuple[tuple[int, int], ...], bool, tuple[object, ...], int]
#: A new job's counts (copied: iterating the enum for every job shows in profiles).
_NO_TASKS = dict.fromkeys(TaskStatus, 0)
_PENDING = TaskStatus.PENDING  # reading a member through the enum class costs ~0.2 us on Python 3.11
_ALLOCATED = TaskStatus.ALLOCATED
_PIPELINED = TaskStatus.PIPELINED
_POD_PENDING = PodPhase.PENDING
_RELEASING = TaskStatus.RELEASING
_FINISHED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
#: Statuses whose request is counted in the node's used resources, and in the job's and queue's allocation.
_ON_NODE = frozenset({TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.RELEASING})
_CHARGED = frozenset({TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.PIPELINED})


_WAITING = PodGroupPhase.PENDING
#: `JobInfo.key_memo`'s generation for a key that holds over any node table (its job held nothing).
_ANY_TABLE = -1
#: The actions that look for victims among running pods (they read `Session.running`).
EVICTING = frozenset({"reclaim", "preempt"})


_T = TypeVar("_T")


def _sorted(items: Iterable[_T], key: Callable[[_T], tuple[object, ...]]) -> list[_T]:
    """items sorted by key; a lone item is not keyed: order keys only read, so leaving one uncomputed
    changes nothing, and with one queue or job (the common case) the plugins' share computations are skipped."""
    out = list(items)
    if len(out) > 1:
        out.sort(key=key)
    return out


_V = TypeVar("_V")


def _by_tier(
    votes: list[_V], permits: list[JobCheck], ends: list[tuple[int, int]]
) -> list[tuple[list[_V], list[JobCheck]]] | None:
    """The votes and permits of each tier (`ends`: where each tier ends in both lists), or None without permits."""
    if not permits:
        return None
    out, start = [], (0, 0)
    for end in ends:
        out.append((votes[start[0] : end[0]], permits[start[1] : end[1]]))
        start = end
    return out


def _filter_terms(shape: tuple[object, ...]) -> tuple[object, ...]:
    """What static filters read of a pod shape (`_shape_of`): its node selector, required node affinity and
    tolerations (`ExtensionPoints.static_filters`)."""
    affinity = shape[2]
    return (shape[1], affinity.required if isinstance(affinity, NodeAffinity) else None, shape[3])


def _score_terms(shape: tuple[object, ...]) -> tuple[object, ...]:
    """What static scores read of a pod shape (`_shape_of`): its node affinity and tolerations."""
    return shape[2:4]


def _shape_of(pod: Pod, affinity: NodeAffinity | None) -> tuple[object, ...]:
    shape = (pod.requests, tuple(sorted(pod.node_selector.items())), affinity, pod.tolerations)
    # pods with other pod (anti-)affinity terms fare differently: a failed one says nothing of the other
    return shape if pod.pod_affinity is None else (*shape, pod.pod_affinity)


class Session:
    """State of one scheduling cycle."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: SchedulerConfiguration,
        registry: PluginRegistry,
        extra_resources: Collection[str] = (),
    ) -> None:
        self.now = snapshot.now
        self.config = config
        self.index = ResourceIndex(self._resource_names(snapshot) | set(extra_resources))
        self.table = NodeTable(snapshot.nodes, self.index)
        self.label_index = LabelIndex(self.table.labels)
        self.taint_index = TaintIndex(self.table.taints)
        width = len(self.index)
        self.quota_mask: BoolArray = np.ones(width, dtype=bool)
        self.quota_mask[self.index.col[PODS]] = False
        self.total = self._schedulable_total()
        self.warnings: list[str] = []
        #: Running pods that preempt and reclaim may evict, by node (kept by `JobInfo.set_status`), when the
        #: configuration has either.
        self.running = RunningIndex() if EVICTING & set(config.actions) else None
        self.queues = self._build_queues(snapshot.queues)
        self.hierarchical = any(q.ancestors for q in self.queues.values())
        #: Every job, in the order it was registered (`JobInfo.order`, also kept in `_orders`).
        self.jobs: list[JobInfo] = []
        self._orders: list[int] = []
        self._registered = 0
        self._opened_on = -1
        self.tasks: dict[str, TaskInfo] = {}
        #: How many of `tasks` are best-effort (`TaskInfo.best_effort`): backfill has nothing to do without one.
        self.best_effort_tasks = 0
        #: How many of `tasks` have required pod (anti-)affinity: without one, no pod affinity is looked at.
        self.affinity_tasks = 0
        #: Labels of the namespaces that have a Namespace object, for pod affinity's namespaceSelector.
        self.namespace_labels = snapshot.namespaces
        self.ext = ExtensionPoints()
        self.allocation_log: list[TaskInfo] = []
        #: Pipelined tasks (nominated to a node whose victims are leaving), by key: allocate binds them
        #: first once their node has room. Their requests count as used, so nobody else takes it.
        self.pipelined: dict[str, TaskInfo] = {}
        #: Counts every time capacity is given back (undo, job removed, nodes replaced): a shape that
        #: found no node at some count finds none while the count is unchanged.
        self.freed = 0
        #: Bumped whenever a pod takes resources (allocated or pipelined, or bound by the caller): new
        #: candidate victims for preempt and reclaim. With `freed`, the state an eviction attempt saw.
        self.placed = 0
        #: Bumped (with `freed`) when a queue's quota may have moved other than with the node table: a queue
        #: edited, a deserved share recomputed from demand. What reclaim's memo of refused attempts reads.
        self.quotas_moved = 0
        self._specs: tuple[Queue, ...] | None = None  # `queue_specs`, until a spec is edited
        #: Bumped whenever some queue's allocation changes (a pod charged to it or given back).
        self.charged = 0
        self._failed: dict[object, int] = {}  # `fit_key` -> `freed` when it found no node
        #: By `fit_key`, as `_failed`.
        self._explained: dict[object, tuple[tuple[int, int, int], str]] = {}
        self._explain_caches: dict[object, ExplainCache] = {}
        #: Whether `explain` counts the nodes by what leaves them out ('0/40 nodes: 32 untolerated taint ...');
        #: without, it says only that no node takes the task (a host that shows no reasons: the simulator).
        self.explain_nodes = True
        #: `explain`'s text without the count, and the node table generation it was made for (`explain`).
        self._unexplained: tuple[int, str] = (-1, "")
        self._never: dict[object, tuple[int, bool]] = {}  # `fit_key` -> (table generation, never fits)
        #: By request: per node, whether its allocatable covers it (`never_fits`; dropped with the node table's
        #: other per-node caches, `_forget_node_caches`).
        self._room: dict[Resources, BoolArray] = {}
        self._vectors: dict[Resources, IntArray] = {}
        self._requests: dict[Resources, _Request] = {}
        self._shape_ids: dict[tuple[object, ...], tuple[tuple[object, ...], int]] = {}
        #: Per shape number, the number of what its filters read (`fit_key`), and those numbers.
        self._fit_of: list[int] = []
        self._fit_ids: dict[tuple[object, ...], int] = {}
        #: Per shape number some task of the session has, or had lately: the shape and how many tasks have it.
        #: What is kept for a shape goes some time after its last task left (`_shape_left`): a long-lived session
        #: would otherwise keep every shape it ever saw, and data gravity gives most burst jobs one of their own.
        self._shape_users: dict[int, list[Any]] = {}
        #: The shapes no task has, the one left longest ago first: the last `KEEP_UNUSED_SHAPES` of them stay.
        self._unused_shapes: dict[int, None] = {}
        #: How many of those shapes read each set of static filter terms, and of static score terms.
        self._mask_users: dict[tuple[object, ...], int] = {}
        self._score_users: dict[tuple[object, ...], int] = {}
        #: The static filters' masks and the static scores' sums, by the terms they read (`_static_parts`).
        self._masks: dict[tuple[object, ...], StaticPart] = {}
        self._scores: dict[tuple[object, ...], StaticPart] = {}
        self._pods_by_ident: dict[tuple[int, int, int, int], tuple[object, object, object, object, _PodEntry]] = {}
        #: While construction runs: (queue, request vector) -> pods, added to the queues' requests at the end.
        self._deferred_requests: dict[tuple[int, int], tuple[QueueInfo, IntArray, int]] | None = None
        self._build_jobs(snapshot.groups, snapshot.pods)
        self.evictions: dict[str, str] = {}
        self.plugins: list[Plugin] = []
        #: Per plugin, the extension points its tier entry switches off (`framework.switched_off`).
        self._switched_off: list[frozenset[str]] = []
        #: Per plugin: is it the last of its tier (votes with permits combine tier by tier)?
        self._ends_tier: list[bool] = []
        for tier in config.tiers:
            for i, option in enumerate(tier.plugins):
                self.plugins.append(registry.create(option.name, option.arguments, option.switches))
                self._switched_off.append(switched_off(option))
                self._ends_tier.append(i + 1 == len(tier.plugins))
        #: Every plugin keeps its registrations from cycle to cycle (`Plugin.reopens_in_place`).
        self._in_place = all(plugin.reopens_in_place for plugin in self.plugins)
        self._open_plugins()
        self._shapes: dict[int, ShapeCache] = {}  # by shape number
        self._shapes_by_key: dict[tuple[object, ...], ShapeCache] = {}  # tasks made outside _build_jobs
        self._dynamic: dict[Resources, DynamicCache] = {}

    # -- construction ------------------------------------------------------------------------------
    @staticmethod
    def _resource_names(snapshot: Snapshot) -> set[str]:
        names: set[str] = set()
        for node in snapshot.nodes:
            names.update(node.allocatable)
        for requests in {pod.requests for pod in snapshot.pods}:  # pods repeat a few requests
            names.update(requests)
        for queue in snapshot.queues:
            for spec in (queue.capability, queue.deserved, queue.guarantee):
                if spec is not None:
                    names.update(spec)
        for group in snapshot.groups:
            names.update(group.min_resources)
        return names

    def vector(self, resources: Resources) -> IntArray:
        vec = self._vectors.get(resources)
        if vec is None:
            vec = self.index.vector(resources)
            vec.flags.writeable = False
            self._vectors[resources] = vec
        return vec

    def _build_queues(self, queues: list[Queue]) -> dict[str, QueueInfo]:
        width = len(self.index)
        by_name = {q.name: q for q in queues}
        hierarchical = any(q.parent and q.name != ROOT_QUEUE for q in queues)
        if DEFAULT_QUEUE not in by_name:
            by_name[DEFAULT_QUEUE] = Queue(name=DEFAULT_QUEUE, parent=ROOT_QUEUE if hierarchical else "")
        if hierarchical and ROOT_QUEUE not in by_name:
            by_name[ROOT_QUEUE] = Queue(name=ROOT_QUEUE)
        infos = {
            name: QueueInfo(
                queue=q,
                allocated=np.zeros(width, np.int64),
                request=np.zeros(width, np.int64),
                inqueue=np.zeros(width, np.int64),
            )
            for name, q in by_name.items()
        }
        for info in infos.values():
            info.running = self.running
        if hierarchical:
            for info in infos.values():
                if info.name == ROOT_QUEUE:
                    continue
                chain: list[QueueInfo] = []
                parent = info.queue.parent or ROOT_QUEUE
                while parent and parent in infos and infos[parent] not in chain and parent != info.name:
                    chain.append(infos[parent])
                    if parent == ROOT_QUEUE:
                        break
                    parent = infos[parent].queue.parent or ROOT_QUEUE
                if parent not in infos:
                    self.warnings.append(f"queue {info.name}: parent queue {parent} does not exist")
                info.ancestors = list(reversed(chain))
                if chain:
                    chain[0].children.append(info)
        return infos

    def _build_jobs(self, groups: list[PodGroup], pods: list[Pod]) -> None:
        pods_by_group: dict[tuple[str, str], list[Pod]] = {}
        for pod in pods:
            pods_by_group.setdefault((pod.namespace, pod.group), []).append(pod)
        self._deferred_requests = {}
        for group in groups:
            queue = self.queues.get(group.queue)
            if queue is None:
                self.warnings.append(f"podgroup {group.key}: queue {group.queue} does not exist; skipped")
                continue
            self._add_job(group, queue, pods_by_group.pop((group.namespace, group.name), []))
        for queue, request, pods_asking in self._deferred_requests.values():  # integer sums: same as one by one
            total = request * pods_asking
            queue.request += total
            for ancestor in queue.ancestors:
                ancestor.request += total
        self._deferred_requests = None
        # Identity entries hold the pods' objects: a snapshot's pods rarely share them with later arrivals.
        self._pods_by_ident.clear()
        for (namespace, name), orphans in pods_by_group.items():
            self.warnings.append(
                f"{len(orphans)} pod(s) in {namespace} name PodGroup {name!r}, which does not exist; not scheduled"
            )

    def _add_job(self, group: PodGroup, queue: QueueInfo, pods: Sequence[Pod]) -> JobInfo:
        """Register one PodGroup and its pods: the job view, its tasks (bound pods take their node's
        resources), the queue's request. Shared by construction and `add_group`."""
        floor = self.vector(group.min_resources)
        self._registered += 1
        job = JobInfo(
            group=group,
            queue=queue,
            min_resources=floor,
            priority=group.priority,
            allocated=np.zeros(len(self.index), np.int64),
            counts=_NO_TASKS.copy(),
            phase=group.phase,
            min_bytes=floor.tobytes(),
            order=self._registered,
            key=group.key,
        )
        deferred = self._deferred_requests
        by_ident = self._pods_by_ident
        shape_users = self._shape_users
        tasks, counts = job.tasks, job.counts
        for pod in pods:
            # Pods from one template share the objects their shape is made of: found by identity, the
            # pod skips building and hashing its shape (the entry holds the objects, so their ids
            # cannot be reused while the session lives; pods are values, not changed once here).
            requests, selector, affinity, tolerations = pod.requests, pod.node_selector, pod.affinity, pod.tolerations
            ident = (id(requests), id(selector), id(affinity), id(tolerations))
            known = by_ident.get(ident) if pod.pod_affinity is None else None
            if (
                known is not None
                and known[0] is requests
                and known[1] is selector
                and known[2] is affinity
                and known[3] is tolerations
            ):
                entry = known[4]
            else:
                entry = self._pod_entry(pod)
                if pod.pod_affinity is None:
                    by_ident[ident] = (requests, selector, affinity, tolerations, entry)
            request, request_list, gpu, nonzero, best_effort, shape, shape_id = entry
            pod_key = pod.key
            task = TaskInfo(
                pod, job, request, gpu, shape, _PENDING, -1, (), request_list, shape_id, nonzero, best_effort, pod_key
            )
            tasks.append(task)
            counts[_PENDING] += 1
            self.tasks[pod_key] = task
            if shape_id >= 0:
                used = shape_users.get(shape_id)
                if used is None:
                    self._shape_used(shape_id, shape)
                else:
                    if not used[1]:
                        del self._unused_shapes[shape_id]  # back before it was forgotten
                    used[1] += 1
            if best_effort:
                self.best_effort_tasks += 1
            if pod.pod_affinity is not None:
                self.affinity_tasks += 1
            if pod.node_name or pod.nominated_node_name or pod.phase is not _POD_PENDING:
                self._account_existing(task)
                if task.status in _FINISHED:
                    continue  # finished pods ask for nothing (Volcano: request = allocated + pending)
            if deferred is None:
                queue.request += request
                for ancestor in queue.ancestors:
                    ancestor.request += request
            else:
                key = (id(queue), id(request))
                held = deferred.get(key)
                deferred[key] = (queue, request, 1 if held is None else held[2] + 1)
        minimum: list[int] = job.min_resources.tolist() if group.min_resources else []
        if any(minimum):  # the pods' requests summed in Python ints (numpy's per-call cost dominates)
            requested = [0] * len(minimum)
            for task in tasks:
                for col, amount in task.request_nonzero:
                    requested[col] += amount
            for least, asked in zip(minimum, requested, strict=True):
                if least > asked:
                    job.min_within_requests = False
                    break
        if job.phase is _WAITING:
            self._wait(job)
        else:
            queue.jobs[id(job)] = job
        self.jobs.append(job)
        self._orders.append(job.order)
        return job

    def _wait(self, job: JobInfo) -> None:
        """The job waits for admission: among its queue's pending jobs, in job order when that is kept."""
        pending = job.queue.pending
        generation = self.table.generation
        # keys need the plugins (not yet registered while the session is built) and the order kept so far
        keep = not pending.dirty and pending.sorted_on == generation == self._opened_on
        pending.add(job, self.job_key(job) if keep else None, generation)

    def set_phase(self, job: JobInfo, phase: PodGroupPhase) -> None:
        """The job's PodGroup phase; a job leaving Pending joins its queue's admitted jobs."""
        was, job.phase = job.phase, phase
        if was is _WAITING and phase is not _WAITING and job.queue.pending.discard(job):
            job.queue.jobs[id(job)] = job

    def waiting_in_order(self, queue: QueueInfo) -> list[tuple[tuple[object, ...], JobInfo]]:
        """The queue's jobs waiting for admission as (job key, job), in job order (sorted again only when a
        key may have moved: the node table changed, or a waiting job's pods did)."""
        pending = queue.pending
        generation = self.table.generation
        if pending.dirty or pending.sorted_on != generation:
            pending.sort([(self.job_key(job), job) for job in pending], generation)
        return pending.entries

    def add_group(self, group: PodGroup, pods: Sequence[Pod]) -> JobInfo:
        """Register a PodGroup and its pods that arrive after the session opened, exactly as construction
        registers the snapshot's, and return its job for the actions (e.g. `allocate_job`).

        This lets one long-lived session take a stream of arrivals instead of opening a session (O(nodes))
        per arrival; the GPU placement experiment feeds a whole trace through one session this way.
        Raises ValueError for an unknown queue, a pod naming another group, a pod the session already
        has, or a resource no column of the session holds (columns are fixed when the session opens).
        Plugins see the job from now on, but state they computed when the session opened (such as
        proportion's deserved shares) is not recomputed.
        """
        queue = self.queues.get(group.queue)
        if queue is None:
            raise ValueError(f"podgroup {group.key}: queue {group.queue} does not exist")
        keys: set[str] = set()
        for pod in pods:
            key = pod.key
            if pod.group != group.name or pod.namespace != group.namespace:
                raise ValueError(f"pod {key} names PodGroup {pod.group!r}, not {group.name!r}")
            if key in self.tasks or key in keys:
                raise ValueError(f"pod {key} is already in the session")
            keys.add(key)
            if pod.requests in self._requests:
                continue  # asked before: every resource it names has a column
            unknown = sorted(name for name in pod.requests if name not in self.index.col)
            if unknown:
                raise ValueError(f"pod {pod.key} asks for {', '.join(unknown)}, which this session has no column for")
        had_affinity = self.affinity_tasks
        job = self._add_job(group, queue, pods)
        if self.affinity_tasks and not had_affinity:
            self._open_plugins()  # the first pod with pod (anti-)affinity: plugins that look for them register now
        if len(self._pods_by_ident) > MAX_IDENT_ENTRIES:
            # Arrivals made from templates share their objects, so the entries stay few; pods that share
            # nothing must not make a long-lived session keep every object it ever saw.
            self._pods_by_ident.clear()
        return job

    def _pod_entry(self, pod: Pod) -> _PodEntry:
        """The pod's request vector (plus one pod), the same as Python ints, its GPU ask, its shape key
        (one tuple per distinct shape) and the shape's number; equal requests and shapes share them."""
        requests = pod.requests
        found = self._requests.get(requests)
        if found is None:
            vector = self.vector(requests + ONE_POD)
            listed: tuple[int, ...] = tuple(vector.tolist())
            nonzero = tuple((c, a) for c, a in enumerate(listed) if a)
            pods_col = self.index.col[PODS]
            found = (vector, listed, GpuRequest.of(pod), nonzero, all(c == pods_col for c, _ in nonzero))
            self._requests[requests] = found
        shape = _shape_of(pod, pod.affinity)
        numbered = self._shape_ids.get(shape)
        if numbered is None:
            numbered = self._shape_ids[shape] = (shape, len(self._fit_of))  # numbers are never given twice
            # What the filters read of the shape: its requests, static terms and pod affinity (not its preferences).
            fit = (shape[0], *_filter_terms(shape), *shape[4:])
            self._fit_of.append(self._fit_ids.setdefault(fit, len(self._fit_ids)))
        return (*found, *numbered)

    def _static_users(
        self, shape: tuple[object, ...]
    ) -> tuple[tuple[dict[tuple[object, ...], int], dict[tuple[object, ...], StaticPart], tuple[object, ...]], ...]:
        """For the static filters' and the static scores' parts: the shapes in use per terms, the parts, and the
        shape's terms (`_static_parts`)."""
        return (
            (self._mask_users, self._masks, _filter_terms(shape)),
            (self._score_users, self._scores, _score_terms(shape)),
        )

    def _shape_used(self, shape_id: int, shape: tuple[object, ...]) -> None:
        """A task of the session is the first to have this shape (again)."""
        self._shape_users[shape_id] = [shape, 1]
        for users, _, terms in self._static_users(shape):
            users[terms] = users.get(terms, 0) + 1

    def _shape_left(self, shape_id: int) -> None:
        """A task with this shape left the session. After the last one the shape waits among the unused ones;
        the oldest beyond `KEEP_UNUSED_SHAPES` is forgotten (`_forget_shape`)."""
        used = self._shape_users.get(shape_id)
        if used is None:
            return
        used[1] -= 1
        if used[1]:
            return
        unused = self._unused_shapes
        unused[shape_id] = None
        if len(unused) > KEEP_UNUSED_SHAPES:
            oldest = next(iter(unused))
            del unused[oldest]
            self._forget_shape(oldest)

    def _forget_shape(self, shape_id: int) -> None:
        """The shape's number, placement cache and the static parts no other shape reads go (a pod with the
        shape later is numbered and cached afresh: numbers are never given twice)."""
        shape = self._shape_users.pop(shape_id)[0]
        if self._shape_ids.get(shape, (None, -1))[1] == shape_id:
            del self._shape_ids[shape]
        self._shapes.pop(shape_id, None)
        for users, parts, terms in self._static_users(shape):
            left = users[terms] - 1
            if left:
                users[terms] = left
            else:
                del users[terms]
                parts.pop(terms, None)

    def fit_key(self, task: TaskInfo) -> object:
        """What per-shape memos of filters alone (no node fits, why not) key the task by: pod shapes that differ
        only in their preferred node affinity share it (a number; the shape for a task without one)."""
        return self._fit_of[task.shape_id] if task.shape_id >= 0 else task.shape

    def _open_plugins(self) -> None:
        """Every plugin registers its extension points afresh (for the node table as it is now), each into
        an `ExtensionPoints` of its own, merged in tier order without the points its switches turn off."""
        merged = ExtensionPoints()
        ends: list[tuple[int, int, int, int]] = []  # where each tier's votes and permits end
        for plugin, dropped, last in zip(self.plugins, self._switched_off, self._ends_tier, strict=True):
            self.ext = ExtensionPoints()
            plugin.on_session_open(self)
            merged.merge(self.ext, dropped)
            if last:
                ends.append(
                    (
                        len(merged.job_enqueueable),
                        len(merged.job_enqueue_permit),
                        len(merged.job_pipelined),
                        len(merged.job_pipeline_permit),
                    )
                )
        self.ext = ext = merged
        self._enqueue_tiers = _by_tier(ext.job_enqueueable, ext.job_enqueue_permit, [(e[0], e[1]) for e in ends])
        self._pipeline_tiers = _by_tier(ext.job_pipelined, ext.job_pipeline_permit, [(e[2], e[3]) for e in ends])
        self._row_twins = self._scalar_twins()
        explains = [ext.row_explains.get(f) for f in ext.dynamic_filters]
        #: Row twins of every dynamic filter's explanation, or None when one lacks its twin.
        self._explain_twins: list[RowExplain] | None = (
            None if any(e is None for e in explains) else [e for e in explains if e is not None]
        )
        self._explain_caches = {}
        #: Every twin reads only the request and the node's state: results are shared per state.
        self._twins_by_state = self._row_twins is not None and all(
            twin in self.ext.node_state_only for twin in (*self._row_twins[0], *self._row_twins[1])
        )
        self._opened_on = self.table.generation

    def _scalar_twins(self) -> tuple[list[RowFilter], list[RowScore]] | None:
        """Scalar twins of every dynamic filter and score, or None when one lacks its twin."""
        ext = self.ext
        filters = [ext.row_filters.get(f) for f in ext.dynamic_filters]
        scores = [ext.row_scores.get(s) for s in ext.dynamic_scores]
        if any(f is None for f in filters) or any(s is None for s in scores):
            return None
        return [f for f in filters if f is not None], [s for s in scores if s is not None]

    def _account_existing(self, task: TaskInfo) -> None:
        pod = task.pod
        if pod.phase is PodPhase.SUCCEEDED:
            task.job.set_status(task, TaskStatus.SUCCEEDED)
            return
        if pod.phase is PodPhase.FAILED:
            task.job.set_status(task, TaskStatus.FAILED)
            return
        if not pod.node_name:
            row = self.table.row.get(pod.nominated_node_name) if pod.nominated_node_name else None
            if row is not None:  # pipelined in an earlier cycle: the node (and its GPU slice's card) stays held
                self.apply_pipeline(task, row, self._known_cards(task, row) if task.gpu.shared else ())
            return
        row = self.table.row.get(pod.node_name)
        if row is None:
            self.warnings.append(f"pod {pod.key} is bound to unknown node {pod.node_name}")
            task.job.set_status(task, TaskStatus.RUNNING)
            return
        cards = self._known_cards(task, row) or self.select_cards(task, row)
        self.apply_allocate(task, row, cards, TaskStatus.RUNNING)
        if pod.deleting:  # terminating: its room is being released (not its queue's, not a victim)
            self.apply_evict(task, "terminating")

    def _known_cards(self, task: TaskInfo, row: int) -> tuple[int, ...]:
        """The pod's GPU cards as its annotation names them, or () when it names none, or one the node lacks
        (written by hand, or the node has fewer cards now): then the cards are chosen anew, with a warning."""
        cards = task.pod.gpu_indices
        if cards and not self.table.has_cards(row, cards):
            node = self.table.names[row]
            self.warnings.append(f"pod {task.key}: gpu-index {cards} names a card node {node} does not have")
            return ()
        return cards

    # -- order: plugin keys in tier order, then creation time and name ---------------------------
    # (list comprehensions: a generator unpacked into a tuple costs more, and keys are built per placement)
    def job_key(self, job: JobInfo) -> tuple[object, ...]:
        """Job order votes read only the job and the node table, and the table only through what the job
        holds (see `ExtensionPoints.job_order`), so a key holds until the job's pods change status, or, for a
        job with a pod placed, the nodes change: long queues (their jobs hold nothing) sort on held keys."""
        held = job.key_memo
        generation = self.table.generation
        if held is not None and held[0] == job.version and (held[1] == generation or held[1] == _ANY_TABLE):
            return held[2]
        key = (*[key(job) for key in self.ext.job_order], job.group.created, job.key)
        holds_nothing = job.counts[_PENDING] == len(job.tasks)
        job.key_memo = (job.version, _ANY_TABLE if holds_nothing else generation, key)
        return key

    def queue_key(self, queue: QueueInfo) -> tuple[object, ...]:
        return (-queue.queue.priority, *[key(queue) for key in self.ext.queue_order], queue.name)

    def task_key(self, task: TaskInfo) -> tuple[object, ...]:
        return (*[key(task) for key in self.ext.task_order], task.pod.created, task.key)

    def in_queue_order(self, queues: Iterable[QueueInfo]) -> list[QueueInfo]:
        """The queues sorted by `queue_key` (see `_sorted`)."""
        return _sorted(queues, self.queue_key)

    def in_job_order(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        """The jobs sorted by `job_key` (see `_sorted`)."""
        return _sorted(jobs, self.job_key)

    # -- votes -------------------------------------------------------------------------------------
    def job_invalid_reason(self, job: JobInfo) -> Refusal | None:
        """Why the job may not be scheduled: its queue does not take work from its namespace (asked afresh, as
        a queue may be edited), or a validity vote (which reads only the job, see `ExtensionPoints.job_valid`:
        held until its pods change)."""
        refusal = self.namespace_refusal(job.queue, job.group.namespace)
        if refusal:
            return refusal
        held = job.valid_memo
        if held is not None and held[0] == job.version:
            return held[1]
        found = None
        for vote in self.ext.job_valid:
            reason = vote(job)
            if reason:
                found = reason
                break
        job.valid_memo = (job.version, found)
        return found

    def respec_queue(self, info: QueueInfo, queue: Queue) -> None:
        """A queue's spec is edited live (its weight, quotas, namespaces...): it counts from now on."""
        info.queue = queue
        self._specs = None
        for each in self.queues.values():
            each.every_namespace = None  # a parent's namespaces bound its children's work too
        self.freed += 1  # quotas may have grown: jobs blocked on them get another look
        self.quotas_moved += 1

    def queue_specs(self) -> tuple[Queue, ...]:
        """Every queue's spec, in the session's order (one tuple until a spec is edited)."""
        specs = self._specs
        if specs is None:
            specs = self._specs = tuple([info.queue for info in self.queues.values()])
        return specs

    @staticmethod
    def takes_every_namespace(queue: QueueInfo) -> bool:
        """Neither the queue nor an ancestor names the namespaces it takes work from (kept until a spec changes)."""
        every = queue.every_namespace
        if every is None:
            every = queue.every_namespace = not any(level.queue.namespaces for level in (queue, *queue.ancestors))
        return every

    @staticmethod
    def namespace_refusal(queue: QueueInfo, namespace: str) -> Refusal | None:
        """Why the queue, or one of its ancestors, does not take work from the namespace (None if they all do)."""
        every = queue.every_namespace
        if not (every if every is not None else Session.takes_every_namespace(queue)):
            for level in (queue, *queue.ancestors):
                refusal = level.queue.refuses(namespace)
                if refusal:
                    return Refusal(refusal, RefusalCode.NAMESPACE)
        return None

    def job_not_enqueueable_reason(self, job: JobInfo) -> Refusal | None:
        tiers = self._enqueue_tiers
        if tiers is None:  # no permits: every vote must agree
            for vote in self.ext.job_enqueueable:
                reason = vote(job)
                if reason:
                    return reason
            return None
        for votes, permits in tiers:  # Volcano's JobEnqueueable: a Reject ends it; a Permit ends it after its tier
            for vote in votes:
                reason = vote(job)
                if reason:
                    return reason
            if any(permit(job) for permit in permits):
                return None
        return None

    def enqueue_permitted(self, job: JobInfo) -> bool:
        """Some plugin permits the job's admission (its later tiers' refusals do not count): enqueue's memos of
        refusals by minResources and usage do not hold for it."""
        return any(permit(job) for permit in self.ext.job_enqueue_permit)

    def job_ready(self, job: JobInfo) -> bool:
        for check in self.ext.job_ready:  # noqa: SIM110 -- all() without a generator: asked per placement
            if not check(job):
                return False
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        tiers = self._pipeline_tiers
        if tiers is None:
            return all(check(job) for check in self.ext.job_pipelined)
        for checks, permits in tiers:  # as job_not_enqueueable_reason combines them
            if not all(check(job) for check in checks):
                return False
            if any(permit(job) for permit in permits):
                return True
        return True

    def job_starving(self, job: JobInfo) -> bool:
        """Does the job want more pods placed (preempt and reclaim work for it)? As in Volcano, not when no
        plugin says so (gang and priority do)."""
        checks = self.ext.job_starving
        if not checks:
            return False
        for check in checks:  # noqa: SIM110 -- all() without a generator: asked of every waiting job a cycle
            if not check(job):
                return False
        return True

    def queue_overused_reason(self, queue: QueueInfo) -> Refusal | None:
        for vote in self.ext.queue_overused:
            reason = vote(queue)
            if reason:
                return reason
        return None

    def queue_not_allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        for vote in self.ext.queue_allocatable:
            reason = vote(queue, task)
            if reason:
                return reason
        return None

    def queue_may_reclaim(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(vote(queue, task) is None for vote in self.ext.queue_reclaim_allowed)

    def queue_reclaims_nothing(self, queue: QueueInfo) -> bool:
        """Some reclaim vote refuses every task of the queue now, as its queue-wide twin says
        (`ExtensionPoints.queue_reclaim_refusals`)."""
        twins = self.ext.queue_reclaim_refusals
        return any(twins[vote](queue) for vote in self.ext.queue_reclaim_allowed if vote in twins)

    def victims(
        self,
        filters: list[Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]],
        task: TaskInfo,
        candidates: list[TaskInfo],
    ) -> list[TaskInfo]:
        """Candidates every victim filter allows, in the candidates' order."""
        if not filters:
            return []
        allowed = candidates
        for victim_filter in filters:
            keep = {id(t) for t in victim_filter(task, allowed)}
            allowed = [t for t in allowed if id(t) in keep]
            if not allowed:
                break
        return allowed

    # -- placement ---------------------------------------------------------------------------------
    def _shape_cache(self, task: TaskInfo) -> ShapeCache:
        cache = self._shapes.get(task.shape_id) if task.shape_id >= 0 else self._shapes_by_key.get(task.shape)
        changes = self.table.changes
        if cache is None:
            mask, score = self._static_parts(task)
            dynamic = self._dynamic_cache(task)
            total = self._totals(mask.array, score.array, dynamic)
            cache = ShapeCache(mask, score, dynamic, total, len(changes))
            if task.shape_id >= 0:
                self._shapes[task.shape_id] = cache
            else:
                self._shapes_by_key[task.shape] = cache
        elif cache.seen < len(changes):
            dynamic = cache.dynamic
            if dynamic.seen < len(changes):
                self._sync_dynamic(task, dynamic)
            pending: Collection[int] = changes[cache.seen :]
            cache.seen = len(changes)
            if len(pending) > 8:  # binpack stacks pods on a node: most rows repeat (a set costs less than them)
                pending = set(pending)
            if len(pending) > SCALAR_TOTAL_ROWS:
                cache.total = self._totals(cache.mask.array, cache.score.array, dynamic)
                cache.empty = False
            else:  # the same sums in Python floats (IEEE doubles, added in the same order)
                count = len(pending)
                mask_list, static_list, total = cache.mask.rows(count), cache.score.rows(count), cache.total
                fit_list, score_lists = dynamic.fit_list, dynamic.score_lists
                for row in pending:
                    if mask_list[row] and fit_list[row]:
                        value = static_list[row]
                        for score_list in score_lists:
                            value = value + score_list[row]
                        total[row] = value
                        cache.empty = False
                    else:
                        total[row] = NEG_INF
        return cache

    def _static_parts(self, task: TaskInfo) -> tuple[StaticPart, StaticPart]:
        """The static filters' mask and the static scores' sum over every node for the task's placement terms,
        each shared by the pod shapes with the terms it reads (`ExtensionPoints.static_filters`): the filters'
        by node selector, required node affinity and tolerations, the scores' by node affinity and tolerations."""
        filtered = _filter_terms(task.shape)
        mask = self._masks.get(filtered)
        if mask is None:
            passing = self.table.schedulable.copy()
            for static_filter in self.ext.static_filters:
                for _, passes in static_filter(task):
                    passing &= passes
            passing.flags.writeable = False
            mask = self._masks[filtered] = StaticPart(passing)
        scored = _score_terms(task.shape)
        score = self._scores.get(scored)
        if score is None:
            summed = np.zeros(len(self.table), dtype=np.float64)
            for static_score in self.ext.static_scores:
                summed += static_score(task)
            summed.flags.writeable = False
            score = self._scores[scored] = StaticPart(summed)
        return mask, score

    @staticmethod
    def _totals(mask: BoolArray, static: FloatArray, dynamic: DynamicCache) -> FloatArray:
        """Static score plus each dynamic score (in that order, as floats add), -inf where the pod cannot go."""
        dynamic.sync_arrays()
        if not dynamic.scores:
            score = static
        else:
            score = static + dynamic.scores[0]
            for vector in dynamic.scores[1:]:
                score += vector
        total: FloatArray = np.where(mask & dynamic.fit, score, NEG_INF)
        return total

    def _dynamic_cache(self, task: TaskInfo) -> DynamicCache:
        """The request's dynamic results, brought up to date with the node table."""
        cache = self._dynamic.get(task.pod.requests)
        if cache is None:
            n = len(self.table)
            fit = np.zeros(n, dtype=bool)
            scores = [np.zeros(n, dtype=np.float64) for _ in self.ext.dynamic_scores]
            rows = np.flatnonzero(self.table.schedulable)
            if len(rows):
                self._refresh_vectors(task, fit, scores, rows)
            cache = DynamicCache(fit, scores, fit.tolist(), [v.tolist() for v in scores], len(self.table.changes))
            self._dynamic[task.pod.requests] = cache
        else:
            cache.asked = True
            if cache.seen < len(self.table.changes):
                self._sync_dynamic(task, cache)
        return cache

    def _sync_dynamic(self, task: TaskInfo, cache: DynamicCache) -> None:
        changes = self.table.changes
        pending = set(changes[cache.seen :]) if len(changes) - cache.seen > 1 else (changes[-1],)
        cache.seen = len(changes)
        twins = self._row_twins
        if twins is not None and len(pending) <= SCALAR_ROWS:
            # Inline (this runs for nearly every placement): each changed node through the scalar twins.
            row_filters, row_scores = twins
            table = self.table
            schedulable, fit_list, score_lists, stale = (
                table.schedulable_rows,
                cache.fit_list,
                cache.score_lists,
                cache.stale,
            )
            by_state = cache.by_state if self._twins_by_state else None
            if by_state is not None and len(by_state) >= MAX_STATE_RESULTS:
                by_state.clear()
            if len(stale) >= MAX_STALE_ROWS:
                cache.sync_arrays()
                stale = cache.stale
            for row in pending:
                if not schedulable[row]:
                    continue
                state = -1 if by_state is None else table.state_id(row)
                found = None if by_state is None else by_state.get(state)
                if found is None:
                    ok = True
                    for row_filter in row_filters:
                        if not row_filter(task, row):
                            ok = False
                            break
                    # scores are read only where the task fits; a row that stops fitting changes again first
                    found = (ok, tuple([row_score(task, row) for row_score in row_scores]) if ok else ())
                    if by_state is not None:
                        by_state[state] = found
                ok, values = found
                fit_list[row] = ok
                stale.append(row)
                if ok:
                    for score_list, value in zip(score_lists, values, strict=True):
                        score_list[row] = value
            return
        cache.sync_arrays()
        rows = np.array(sorted(pending), dtype=np.int64)
        rows = rows[self.table.schedulable[rows]]
        if not len(rows):
            return
        self._refresh_vectors(task, cache.fit, cache.scores, rows)
        listed = rows.tolist()
        fit_list = cache.fit_list
        for row, fits in zip(listed, cache.fit[rows].tolist(), strict=True):
            fit_list[row] = fits
        for vector, score_list in cache.slots:
            for row, score in zip(listed, vector[rows].tolist(), strict=True):
                score_list[row] = score

    def _refresh_vectors(self, task: TaskInfo, fit: BoolArray, scores: list[FloatArray], rows: IntArray) -> None:
        fits: BoolArray | None = None
        for dynamic_filter in self.ext.dynamic_filters:
            passing = dynamic_filter.fit(task, rows)
            fits = passing if fits is None else fits & passing
        fit[rows] = True if fits is None else fits
        for vector, dynamic_score in zip(scores, self.ext.dynamic_scores, strict=True):
            vector[rows] = dynamic_score(task, rows)

    def best_node(self, task: TaskInfo) -> int | None:
        """The highest-scoring node the task fits on now (lowest index on ties), or None.

        A shape that found no node stays without one until some capacity is freed (placements only
        take capacity away), so a saturated cluster answers its long queue in O(1) a job."""
        shape = self.fit_key(task)
        if self._failed.get(shape) == self.freed:
            return None
        cache = self._shape_cache(task)
        if cache.empty:
            self._failed[shape] = self.freed
            return None
        total = cache.total
        if self.ext.placement_filters:
            allowed = self.placement_mask(task)
            if allowed is not None:  # pod affinity: where other pods are now leaves nodes out for this task only
                masked = np.where(allowed, total, NEG_INF)
                row = int(masked.argmax()) if len(masked) else 0
                return None if not len(masked) or masked[row] == NEG_INF else row
        row = int(total.argmax()) if len(total) else 0
        if not len(total) or total[row] == NEG_INF:  # no node at all, or none it fits on
            self._failed[shape] = self.freed
            cache.empty = True
            return None
        return row

    def never_fits(self, task: TaskInfo) -> bool:
        """No node could take the task even empty: each one fails a static filter (labels, taints,
        cordon) or has less allocatable than the task asks. Freeing capacity cannot change that; only a
        new node list can."""
        shape = self.fit_key(task)
        generation = self.table.generation
        held = self._never.get(shape)
        if held is None or held[0] != generation:
            room = self._shape_cache(task).mask.array & self._room_for(task)
            held = (generation, not room.any())
            self._never[shape] = held
        return held[1]

    def _room_for(self, task: TaskInfo) -> BoolArray:
        """Per node, whether its allocatable covers the task's request, shared by the shapes asking it: only the
        resources asked for are compared (allocatable is never negative)."""
        room = self._room.get(task.pod.requests)
        if room is None:
            cols = np.flatnonzero(task.request)
            room = np.asarray((self.table.alloc[:, cols] >= task.request[cols]).all(axis=1), dtype=bool)
            self._room[task.pod.requests] = room
        return room

    def hopeless(self, job: JobInfo) -> bool:
        """Allocate found every pending pod of the job unplaceable on any node, and neither the node list
        nor the job's pending pods changed since: no action can place it, so cycles skip it."""
        return job.hopeless_at == (self.table.generation, job.counts[_PENDING])

    def static_candidates(self, task: TaskInfo) -> list[bool]:
        """Per node, whether it passes every filter that does not depend on resources (for preempt/reclaim): the
        static ones, and the placement filters as the other pods stand now (evicting pods does not make room for
        pod affinity). Do not modify."""
        static = self._shape_cache(task).mask
        allowed = self.placement_mask(task)
        passing: list[bool] = static.values() if allowed is None else (static.array & allowed).tolist()
        return passing

    def fits_now(self, task: TaskInfo, row: int) -> bool:
        """Does the task pass every dynamic filter (resources, cards) and placement filter (pod affinity) on this
        node as it is now?"""
        rows = np.array([row])
        if not all(bool(dynamic_filter.fit(task, rows)[0]) for dynamic_filter in self.ext.dynamic_filters):
            return False
        allowed = self.placement_mask(task)
        return allowed is None or bool(allowed[row])

    def placement_mask(self, task: TaskInfo) -> BoolArray | None:
        """The nodes the placement filters (pod affinity) let the task go to now; None when they leave none out."""
        filters = self.ext.placement_filters
        if not filters:
            return None
        out: BoolArray | None = None
        for placement_filter in filters:
            allowed = placement_filter.mask(task)
            if allowed is not None:
                out = allowed if out is None else out & allowed
        return out

    def fits_future_idle(self, task: TaskInfo, row: int, extra: IntArray | None = None) -> bool:
        future = self.table.future_idle_row(row)
        if extra is not None:
            future = future + extra
        return bool((task.request <= future).all())

    def explain(self, task: TaskInfo) -> str:
        """Why no node takes the task: '0/40 nodes: 32 untolerated taint ..., 8 insufficient ...'.

        Allocate keeps a job's reason while the text is the very object it wrote (`Allocate._no_node`): a text
        is made again whenever what it counts may have changed, and always for a new node table. Without
        `explain_nodes` the text says only how many nodes there are, one object a node table."""
        if not self.explain_nodes:
            unexplained = self._unexplained
            if unexplained[0] != self.table.generation:
                unexplained = self._unexplained = (self.table.generation, f"none of {len(self.table)} nodes takes it")
            return unexplained[1]
        if self.placement_mask(task) is not None:  # it reads where other pods are: not the shape's to keep
            return self._explain(task)
        if self._explain_twins is not None:
            return self._patched_explanation(task)
        state = (self.freed, len(self.table.changes), self.table.generation)
        shape = self.fit_key(task)
        held = self._explained.get(shape)
        if held is not None and held[0] == state:
            return held[1]
        text = self._explain(task)
        self._explained[shape] = (state, text)
        return text

    def _patched_explanation(self, task: TaskInfo) -> str:
        """`_explain`'s text from the shape's `ExplainCache`, brought up to date with the node table: the
        nodes changed since are charged again through the dynamic filters' row twins (or, past
        SCALAR_EXPLAIN_ROWS of them, every node is counted again)."""
        table = self.table
        changes = table.changes
        shape = self.fit_key(task)
        cache = self._explain_caches.get(shape)
        if (
            cache is None
            or cache.generation != table.generation
            or len(changes) - cache.seen > SCALAR_EXPLAIN_ROWS
            or cache.seen > len(changes)
        ):
            cache = self._explain_caches[shape] = self._explain_cache(task)
        elif cache.seen < len(changes):
            pending = set(changes[cache.seen :]) if len(changes) - cache.seen > 1 else (changes[-1],)
            cache.seen = len(changes)
            twins = self._explain_twins
            assert twins is not None
            static_first, first, counts, offsets = cache.static_first, cache.first, cache.counts, cache.offsets
            moved = False
            for row in pending:
                if static_first[row] >= 0:
                    continue  # left out by a static filter (or cordoned) while the generation holds
                charged = -1
                for offset, twin in zip(offsets, twins, strict=True):
                    at = twin(task, row)
                    if at >= 0:
                        charged = offset + at
                        break
                was = first[row]
                if charged != was:
                    if was >= 0:
                        counts[was] -= 1
                    if charged >= 0:
                        counts[charged] += 1
                    first[row] = charged
                    moved = True
            if moved:
                cache.text = ""
        if not cache.text:
            cache.text = self._explanation_text(cache.reasons, cache.counts, len(table))
        return cache.text

    def _explain_cache(self, task: TaskInfo) -> ExplainCache:
        """Every node charged to the first reason that leaves it out, as `_explain` charges them."""
        table = self.table
        n = len(table)
        first = np.full(n, -1, dtype=np.int64)
        reasons: list[str] = []

        def charge(reason: str, passing: BoolArray) -> None:
            first[~passing & (first < 0)] = len(reasons)
            reasons.append(reason)

        charge("unschedulable", table.schedulable)
        for static_filter in self.ext.static_filters:
            for reason, passing in static_filter(task):
                charge(reason, passing)
        static_first = first.tolist()
        offsets = []
        for dynamic_filter in self.ext.dynamic_filters:
            offsets.append(len(reasons))
            for reason, passing in dynamic_filter.explain(task):
                charge(reason, passing)
        charged = first[first >= 0]
        counts = np.bincount(charged, minlength=len(reasons)).tolist() if len(charged) else [0] * len(reasons)
        return ExplainCache(
            table.generation, len(table.changes), reasons, offsets, static_first, first.tolist(), counts
        )

    @staticmethod
    def _explanation_text(reasons: list[str], counts: list[int], n: int) -> str:
        """What `_explain` says of nodes charged `counts` (per reason, in charge order)."""
        tally: Counter[str] = Counter()
        for reason, count in zip(reasons, counts, strict=True):
            if count:
                tally[reason] += count
        available = n - sum(counts)
        detail = ", ".join(f"{count} {reason}" for reason, count in tally.most_common())
        return f"{available}/{n} nodes: {detail}" if detail else f"{available}/{n} nodes available"

    def _explain(self, task: TaskInfo) -> str:
        n = len(self.table)
        failed = np.zeros(n, dtype=bool)
        reasons: Counter[str] = Counter()

        def charge(reason: str, passing: BoolArray) -> None:
            newly = ~passing & ~failed
            count = int(newly.sum())
            if count:
                reasons[reason] += count
                failed[newly] = True

        charge("unschedulable", self.table.schedulable)
        for static_filter in self.ext.static_filters:
            for reason, passing in static_filter(task):
                charge(reason, passing)
        for dynamic_filter in self.ext.dynamic_filters:
            for reason, passing in dynamic_filter.explain(task):
                charge(reason, passing)
        for placement_filter in self.ext.placement_filters:
            for reason, passing in placement_filter.explain(task):
                charge(reason, passing)
        available = n - int(failed.sum())
        detail = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
        return f"{available}/{n} nodes: {detail}" if detail else f"{available}/{n} nodes available"

    def select_cards(self, task: TaskInfo, row: int) -> tuple[int, ...]:
        if not task.gpu.any or self.ext.card_selector is None:
            return ()
        return self.ext.card_selector(task, row)

    # -- state changes (called by Statement) -------------------------------------------------------
    def _charge_queue(self, job: JobInfo, request: IntArray, sign: int) -> None:
        self.charged += 1
        if sign == -1:  # in place, no negated copy: the same integers
            job.allocated -= request
            job.queue.allocated -= request
            for ancestor in job.queue.ancestors:
                ancestor.allocated -= request
            return
        delta = request if sign == 1 else sign * request
        job.allocated += delta
        job.queue.allocated += delta
        for ancestor in job.queue.ancestors:
            ancestor.allocated += delta

    def apply_allocate(self, task: TaskInfo, row: int, cards: tuple[int, ...], status: TaskStatus) -> None:
        request, job = task.request, task.job
        self.table.add_used(row, request)
        if cards:
            gpu = task.gpu
            self.table.take_cards(row, cards, gpu.mem_mib, gpu.milli, gpu.whole > 0)
        task.node, task.cards = row, cards
        job.set_status(task, status)
        job.allocated += request  # _charge_queue(job, request, 1), inline: once per placement
        self.charged += 1
        queue = job.queue
        queue.allocated += request
        for ancestor in queue.ancestors:
            ancestor.allocated += request
        self.placed += 1
        if status is _ALLOCATED:
            self.allocation_log.append(task)
        for handler in self.ext.on_allocate:
            handler(task)

    def undo_allocate(self, task: TaskInfo, row: int, cards: tuple[int, ...], previous: TaskStatus) -> None:
        self.freed += 1
        self.table.add_used(row, task.request, -1)
        if cards:
            self.table.release_cards(row, cards, task.gpu.mem_mib, task.gpu.milli, task.gpu.whole > 0)
        task.node, task.cards = -1, ()
        task.job.set_status(task, previous)
        self._charge_queue(task.job, task.request, -1)
        for handler in self.ext.on_deallocate:
            handler(task)

    def apply_pipeline(self, task: TaskInfo, row: int, cards: tuple[int, ...] = ()) -> None:
        """The task waits for the node while its victims leave: its request is held there, with that many
        untouched cards promised when it asks for whole ones, and `cards` held for its GPU slice."""
        table = self.table
        table.add_pipelined(row, task.request, task.gpu.whole)
        if cards:
            table.take_cards(row, cards, task.gpu.mem_mib, task.gpu.milli, False)
        task.node, task.cards = row, cards
        task.job.set_status(task, TaskStatus.PIPELINED)
        self.pipelined[task.key] = task
        self.placed += 1
        self._charge_queue(task.job, task.request, 1)
        for handler in self.ext.on_allocate:
            handler(task)

    def undo_pipeline(self, task: TaskInfo, row: int, previous: TaskStatus) -> None:
        self.freed += 1
        self._release_pipelined(task, row)
        task.node, task.cards = -1, ()
        task.job.set_status(task, previous)
        self._charge_queue(task.job, task.request, -1)
        for handler in self.ext.on_deallocate:
            handler(task)

    def _release_pipelined(self, task: TaskInfo, row: int) -> None:
        self.table.add_pipelined(row, task.request, task.gpu.whole, -1)
        if task.cards:
            self.table.release_cards(row, task.cards, task.gpu.mem_mib, task.gpu.milli, False)
        self.pipelined.pop(task.key, None)

    def apply_evict(self, task: TaskInfo, reason: str) -> None:
        self.freed += 1  # the victim's quota is given back
        self.table.releasing[task.node] += task.request
        self.table.changes.append(task.node)
        task.job.set_status(task, TaskStatus.RELEASING)
        self._charge_queue(task.job, task.request, -1)
        for handler in self.ext.on_deallocate:
            handler(task)

    def undo_evict(self, task: TaskInfo, previous: TaskStatus) -> None:
        self.table.releasing[task.node] -= task.request
        self.table.changes.append(task.node)
        task.job.set_status(task, previous)
        self._charge_queue(task.job, task.request, 1)
        for handler in self.ext.on_allocate:
            handler(task)

    def statement(self) -> Statement:
        return Statement(self)

    # -- iteration helpers for actions -------------------------------------------------------------
    def close(self) -> None:
        for plugin in self.plugins:
            plugin.on_session_close(self)

    def forget_plugins(self) -> None:
        """Drop the plugins and what they registered (the end of a one-cycle session): they point back at
        the session, and without this cycle reference counting frees it at once."""
        self.plugins, self._switched_off, self._ends_tier = [], [], []
        self.ext = ExtensionPoints()
        self._row_twins = None
        self._explain_twins = None
        self._enqueue_tiers = self._pipeline_tiers = None

    def final_phase(self, job: JobInfo) -> PodGroupPhase:
        ready = job.ready_num
        if ready > 0 and ready >= job.min_available:
            return PodGroupPhase.RUNNING
        return PodGroupPhase.PENDING if job.phase is PodGroupPhase.PENDING else PodGroupPhase.INQUEUE

    # -- a session that lives across cycles (the simulator, the live loop) -------------------------
    def remove_job(self, job: JobInfo) -> None:
        """Forget a job that finished or was deleted: its pods free their nodes, cards and quota. The job
        keeps no tasks: they point back at it, and a long-lived session forgets thousands of jobs, which
        reference counting then frees at once instead of the cyclic collector finding them later."""
        self.freed += 1
        queue = job.queue
        for task in job.tasks:
            self._release_task(task)
            if self.running is not None:
                self.running.discard(task)
            if self.tasks.pop(task.key, None) is not None:
                self.best_effort_tasks -= task.best_effort
                self.affinity_tasks -= task.pod.pod_affinity is not None
                if task.shape_id >= 0:
                    self._shape_left(task.shape_id)
        if queue.settled.pop(id(job), None) is None and queue.jobs.pop(id(job), None) is None:
            queue.pending.discard(job)
        orders = self._orders  # `jobs` is in registration order: found by bisection, not a scan of every job
        index = bisect_left(orders, job.order)
        if index < len(orders) and self.jobs[index] is job:
            del self.jobs[index], orders[index]
        job.tasks = []
        job.no_node_memo = None  # its tasks point back at the job: a reference cycle else

    def finish_task(self, task: TaskInfo, status: TaskStatus) -> None:
        """A placed pod ended (Succeeded or Failed) while its job goes on: it frees its node, cards and
        quota at once and asks for nothing more (Volcano counts a finished pod as neither)."""
        if task.status in _FINISHED:
            return
        self.freed += 1
        self._release_task(task)
        task.node, task.cards = -1, ()
        task.job.set_status(task, status)

    def _release_task(self, task: TaskInfo) -> None:
        """The task gives back what it holds (its node's resources and cards, a nomination, its queue's
        quota) and its request leaves its queue's."""
        status, row, job = task.status, task.node, task.job
        if row >= 0:
            if status in _ON_NODE:
                self.table.add_used(row, task.request, -1)
                if task.cards:
                    self.table.release_cards(row, task.cards, task.gpu.mem_mib, task.gpu.milli, task.gpu.whole > 0)
            if status is _RELEASING:
                self.table.releasing[row] -= task.request
            elif status is _PIPELINED:
                self._release_pipelined(task, row)
        if status in _CHARGED:
            self._charge_queue(job, task.request, -1)
        if status not in _FINISHED:
            queue = job.queue
            queue.request -= task.request
            for ancestor in queue.ancestors:
                ancestor.request -= task.request

    def settle(self, job: JobInfo) -> bool:
        """Set a fully placed gang aside so cycles stop looking at it; True if it was settled."""
        counts = job.counts
        settled = (
            job.phase is PodGroupPhase.RUNNING
            and not (counts[TaskStatus.PENDING] or counts[TaskStatus.PIPELINED] or counts[TaskStatus.RELEASING])
            and job.ready_num >= job.min_available
            and job.min_within_requests
        )
        if settled and id(job) not in job.queue.settled:
            del job.queue.jobs[id(job)]
            job.queue.settled[id(job)] = job
        return settled

    def unsettle(self, job: JobInfo) -> None:
        """Bring a settled job back under the actions' eyes (a pod was evicted or lost its node)."""
        if job.queue.settled.pop(id(job), None) is not None:
            job.queue.jobs[id(job)] = job

    def resize_nodes(self, nodes: Sequence[Node]) -> None:
        """Take nodes whose allocatable or schedulability changed and nothing else (`NodeTable.resizes`), as
        `replace_nodes` would, without rebuilding the table: what is placed on them stays where it is, and the
        dynamic caches are kept, their rows refreshed (`_carried_dynamic`)."""
        table = self.table
        refresh = self._rows_behind()
        for node in nodes:
            table.resize(node)
            refresh.add(table.row[node.name])
        self._carry_dynamic(np.arange(len(table)), [], 0, refresh)

    def _schedulable_total(self) -> IntArray:
        """What the schedulable nodes offer together (pods are no quota resource)."""
        schedulable_alloc = self.table.alloc[self.table.schedulable]
        total: IntArray = (
            schedulable_alloc.sum(axis=0) if len(schedulable_alloc) else np.zeros(len(self.index), np.int64)
        )
        total[self.index.col[PODS]] = 0
        return total

    def _forget_node_caches(self) -> None:
        """The node table changed beyond pods coming and going: capacity may have grown, the cluster's total
        moved, and per-shape placement caches are stale."""
        self.freed += 1
        self.total = self._schedulable_total()
        self._shapes = {}
        self._shapes_by_key = {}
        self._masks, self._scores = {}, {}
        self._dynamic = {}
        self._room = {}

    def change_nodes(self, leaving: Collection[str], joining: Sequence[Node], resized: Sequence[Node]) -> None:
        """Nodes leave and join, and others are resized (`NodeTable.resizes`), as `replace_nodes` would take the
        node list with them, without rebuilding the table: the leaving rows are removed (the rest keep their
        order), the joining ones appended. A task on a leaving node goes back to Pending as there."""
        table = self.table
        gone = {table.row[name] for name in leaving}
        order = sorted(gone)
        behind = self._rows_behind()  # refreshed at their new place
        moved = list(range(len(table)))
        if gone:
            first = order[0]  # rows before the first one gone keep their number: their tasks are left alone
            later = [task for task in self.tasks.values() if task.node >= first]
            for task in later:
                if task.node in gone:
                    self._lose_node(task)
            moved = table.remove_rows(order)
            for task in later:
                if task.node >= 0:
                    task.node = moved[task.node]
            if self.running is not None:
                self.running.renumber(moved, later)
        kept = len(table)
        table.add_rows(joining)
        for node in resized:
            table.resize(node)
        if not gone and not joining and not resized:
            table.new_generation()  # as replace_nodes builds the table again over the same nodes
        refresh = {moved[row] for row in behind if moved[row] >= 0}
        refresh.update(range(kept, len(table)))
        refresh.update(table.row[node.name] for node in resized)
        # The nodes that stay keep their labels and taints (a resized one changed neither: `NodeTable.resizes`).
        rows = np.flatnonzero(np.array(moved, dtype=np.int64) >= 0)
        self.label_index = self.label_index.carried(table.labels, rows)
        self.taint_index = self.taint_index.carried(table.taints, rows)
        self._carry_dynamic(rows, order, len(table) - kept, refresh)

    def _rows_behind(self) -> set[int]:
        """The rows some dynamic cache has not folded in yet (`NodeTable.changes` past its `seen`)."""
        changes = self.table.changes
        return {row for cache in self._dynamic.values() for row in changes[cache.seen :]}

    def _carry_dynamic(self, keep: IntArray, gone: list[int], joined: int, rows: set[int]) -> None:
        """The node table's rows changed (`rows`: to refresh, at their new place): they become its changes, the
        per-shape caches go, and the dynamic caches are carried (`_carried_dynamic`)."""
        self.table.changes[:] = sorted(rows)
        carried = self._carried_dynamic(keep, gone, joined, self.table.changes)
        self._forget_node_caches()
        self._dynamic = carried

    def _carried_dynamic(
        self, keep: IntArray, gone: list[int], joined: int, refresh: list[int]
    ) -> dict[Resources, DynamicCache]:
        """The dynamic caches shapes asked for since nodes last changed, with the rows of nodes that left (`gone`,
        ascending; `keep`: the others) taken out and those that joined added. Dynamic filters and scores read
        only the request and the node's own row (that is what lets them be refreshed row by row), so a node that
        stays keeps its results; the rows to `refresh` (the joining, the resized, and those a cache had not
        folded in yet: `NodeTable.changes`) fit nowhere until they are, when next asked, as in a new cache
        (which leaves unschedulable rows so)."""
        carried: dict[Resources, DynamicCache] = {}
        for request, cache in self._dynamic.items():
            if not cache.asked:
                continue
            cache.sync_arrays()
            fit = np.concatenate([cache.fit[keep], np.zeros(joined, dtype=bool)])
            fit[refresh] = False
            scores = [np.concatenate([vector[keep], np.zeros(joined, dtype=np.float64)]) for vector in cache.scores]
            # The lists as the arrays' tolist() would make them, changed in place (the cache they were made for is
            # dropped): the rows gone are most often the last ones (cloud nodes join after the IDC's), so neither
            # taking them out nor adding the joining rows copies the rest.
            fit_list, score_lists = cache.fit_list, cache.score_lists
            drop_rows(fit_list, gone)
            fit_list.extend([False] * joined)
            for row in refresh:
                fit_list[row] = False
            for values in score_lists:
                drop_rows(values, gone)
                values.extend([0.0] * joined)
            carried[request] = DynamicCache(fit, scores, fit_list, score_lists, 0, asked=False)
        return carried

    def _lose_node(self, task: TaskInfo) -> None:
        """The task's node is gone: it holds nothing any more and is pending again (callers normally restart its
        job first)."""
        if task.status in (TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.PIPELINED):
            self._charge_queue(task.job, task.request, -1)
        self.pipelined.pop(task.key, None)
        task.node, task.cards = -1, ()
        task.job.set_status(task, TaskStatus.PENDING)
        self.unsettle(task.job)

    def replace_nodes(self, nodes: Sequence[Node]) -> None:
        """Take a new node list (nodes added, removed or cordoned): rebuild the node table, keep every
        placed task on its node by name, and drop placement caches. A task whose node is gone goes back
        to Pending (callers normally restart such jobs first)."""
        old_names = self.table.names
        self.table = NodeTable(nodes, self.index)
        self.label_index = LabelIndex(self.table.labels)
        self.taint_index = TaintIndex(self.table.taints)
        self._forget_node_caches()
        table = self.table
        for task in self.tasks.values():
            if task.node < 0:
                continue
            row = table.row.get(old_names[task.node])
            status = task.status
            if row is None:
                self._lose_node(task)
                continue
            task.node = row
            if task.cards and not table.has_cards(row, task.cards):  # the node came back with fewer cards
                self.warnings.append(f"pod {task.key}: node {table.names[row]} no longer has cards {task.cards}")
                task.cards = self.select_cards(task, row) if status is not TaskStatus.PIPELINED else ()
            if status in (TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.RELEASING):
                table.used[row] += task.request
                if task.cards:
                    table.take_cards(row, task.cards, task.gpu.mem_mib, task.gpu.milli, task.gpu.whole > 0)
            if status is TaskStatus.RELEASING:
                table.releasing[row] += task.request
            elif status is TaskStatus.PIPELINED:
                table.add_pipelined(row, task.request, task.gpu.whole)
                if task.cards:
                    table.take_cards(row, task.cards, task.gpu.mem_mib, task.gpu.milli, False)
        table.changes.clear()
        if self.running is not None:
            self.running.rebuild(self.tasks.values())

    def reopen(self, now: float) -> None:
        """Start a new cycle over the current state: plugins recompute their per-cycle figures (shares,
        deserved), keeping their registrations while the node table is the same and every plugin reopens
        in place (else all register afresh); admitted jobs' reservations are recounted by enqueue when it judges."""
        self.now = now
        if self._opened_on == self.table.generation and self._in_place:
            for plugin in self.plugins:
                plugin.on_cycle_open(self)
        else:
            self._open_plugins()
        self.allocation_log = []
        self.evictions = {}
