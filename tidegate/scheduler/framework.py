"""The plugin framework: typed extension points, tiers and an explicit plugin registry.

Actions are the algorithm, plugins are the policy (as in Volcano). A plugin registers the
extension points it implements when a session opens; the session combines them:

- order keys (jobs, queues, tasks): concatenated in tier order, so the first plugin that tells
  two objects apart decides, exactly like Volcano's first non-zero comparison;
- votes (job valid/enqueueable/ready/pipelined, queue allocatable/overused): every plugin must agree;
  an enqueueable vote reads only the job's queue and minResources (and the session's state). A permit
  (job enqueueable/pipelined: Volcano's Permit, where a vote that allows is its Abstain) ends the vote
  after its plugin's tier: plugins of later tiers are not asked, refusals in its tier and before still win;
- filters: every filter must pass; static ones (labels, taints) are cached per pod shape, dynamic ones
  (resources, cards) per request: they may read only the task's request (and what derives from it) and
  node-table state, and are recomputed for the rows listed in NodeTable.changes; a plugin whose
  results move for another reason appends the rows concerned to NodeTable.changes, or registers a
  placement filter (pod affinity: where other pods are), which keeps its own state and masks the shape's
  totals for the tasks it constrains;
- scores: summed (static first, then dynamic ones in registration order);
- victims (preempt/reclaim): a task is a victim only when every plugin with an opinion allows it
  (stricter than Volcano's per-tier fall-through, so a gang is never broken below minMember). A victim
  filter judges candidates in order, each given the ones it accepted before (never the ones it
  rejected), so a filter that accepts none of a list accepts none of any part of it. Candidates are
  judged and taken in Volcano's victim order: by victim queue order (`victim_queue_order` keys, then queue
  order reversed), job order reversed, task order reversed (`eviction.victim_order`);
- plugins whose quotas can grow between cycles for reasons other than freed capacity (a deserved share
  recomputed from demand) bump `Session.freed` and `Session.quotas_moved` when they do, so jobs blocked on
  quota get another look.

Each plugin registers into an `ExtensionPoints` of its own; the session merges them in tier order,
leaving out the points the plugin's tier entry switches off (volcano-scheduler.conf's `enableJobOrder:
false` and the like: `SWITCHED_POINTS`), as Volcano's session skips a plugin's function when its switch is
off. Switches with no tidegate counterpart are accepted and change nothing (`IGNORED_SWITCHES`, each with
its reason).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tidegate.model.objects import PluginOption
from tidegate.scheduler.info import JobInfo, QueueInfo, TaskInfo
from tidegate.scheduler.node_table import BoolArray, FloatArray, IntArray
from tidegate.scheduler.refusal import Refusal

if TYPE_CHECKING:
    from tidegate.scheduler.session import Session


class OrderValue(Protocol):
    """What an order key returns besides a float: a value that compares like one (hdrf's PathKey, whose `==` is
    Volcano's comparison returning 0, so the next key decides)."""

    def __lt__(self, other: Any, /) -> bool: ...


OrderKey = Callable[[Any], float | OrderValue]
#: A vote returns None to allow, or why it refuses: a message shown to users, with a code hosts read.
JobVote = Callable[[JobInfo], Refusal | None]
JobCheck = Callable[[JobInfo], bool]
QueueVote = Callable[[QueueInfo], Refusal | None]
AllocatableVote = Callable[[QueueInfo, TaskInfo], Refusal | None]
#: Static filters return (reason, mask of nodes that pass) pairs for one pod shape.
StaticFilter = Callable[[TaskInfo], list[tuple[str, BoolArray]]]
StaticScore = Callable[[TaskInfo], FloatArray]
#: Victim selection: from candidate tasks, those this plugin allows to be evicted for `task`.
VictimFilter = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
#: A victim filter's job-wide twin: True when the filter takes no pod of the job as a victim, whatever the
#: other candidates are (while the session stands as it is).
VictimJobRefusal = Callable[[JobInfo], bool]
#: A reclaim vote's queue-wide twin: True when the vote refuses every task the queue could ask for (while the
#: session stands as it is).
QueueRefusal = Callable[[QueueInfo], bool]
#: Victim queue order (Volcano's VictimQueueOrderFn): a key of a victim's queue given the preemptor's queue;
#: victims of queues with lower keys go first.
VictimQueueKey = Callable[[QueueInfo, QueueInfo], float]
EventHandler = Callable[[TaskInfo], None]


class DynamicFilter(Protocol):
    """A filter that depends on what is already placed (resources, GPU cards)."""

    def fit(self, task: TaskInfo, rows: IntArray | slice) -> BoolArray: ...

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]: ...


class RowExplain(Protocol):
    """Optional scalar twin of a DynamicFilter's `explain` for one node: the index, in the list `explain(task)`
    gives, of the first reason whose mask leaves the node out, or -1 when the node passes them all. A
    filter with one lists the same reasons in the same order for a task whatever the node state (only the
    masks move), so a session patches a shape's explanation for the nodes that changed."""

    def __call__(self, task: TaskInfo, row: int) -> int: ...


class DynamicScore(Protocol):
    def __call__(self, task: TaskInfo, rows: IntArray | slice) -> FloatArray: ...


class RowFilter(Protocol):
    """Optional scalar twin of a DynamicFilter for one node: exactly `fit(task, [row])[0]`."""

    def __call__(self, task: TaskInfo, row: int) -> bool: ...


class RowScore(Protocol):
    """Optional scalar twin of a DynamicScore for one node: bit for bit `score(task, [row])[0]`."""

    def __call__(self, task: TaskInfo, row: int) -> float: ...


class PlacementFilter(Protocol):
    """A filter whose result moves with where other pods are rather than with a node's resources (pod affinity).
    The session asks it beside each shape's cached totals, for the tasks it constrains only, so it keeps its own
    state up to date (allocate/deallocate handlers) and its own caches."""

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """The nodes the task may go to now; None when the filter leaves no node out for it."""
        ...

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]: ...


class CardSelector(Protocol):
    """Chooses the GPU cards a task takes on the node picked for it."""

    def __call__(self, task: TaskInfo, row: int) -> tuple[int, ...]: ...


class Plugin:
    """A scheduling policy; subclasses register extension points in on_session_open."""

    name: ClassVar[str] = "plugin"
    #: The switches its tier entry sets (`PluginOption.switches`), for a plugin whose behaviour one changes
    #: beyond dropping an extension point (Volcano's enableHierarchy); set by `PluginRegistry.create`.
    switches: Mapping[str, bool] = MappingProxyType({})
    #: The extension points it registers stay valid across the cycles of a long-lived session while the
    #: node table is the same: `Session.reopen` then keeps every registration and calls `on_cycle_open`
    #: on each plugin, when every plugin of the session says so (otherwise each registers afresh).
    reopens_in_place: ClassVar[bool] = False

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.arguments = dict(arguments)

    def on_session_open(self, ssn: Session) -> None:
        """Register extension points and compute per-session state."""

    def on_cycle_open(self, ssn: Session) -> None:
        """Another cycle of a long-lived session on the same node table, its registrations kept (only
        for plugins that reopen in place): recompute what depends on the jobs, queues or usage (shares,
        deserved quotas), as on_session_open would."""

    def on_session_close(self, ssn: Session) -> None:
        """Release per-session state."""

    def check_arguments(self) -> None:
        """Read every argument the plugin takes, as a session would: raises PluginArgumentError at a bad one.
        What validation calls, so a bad configuration is refused before any session opens."""

    # -- argument helpers --------------------------------------------------------------------
    def float_arg(self, key: str, default: float, minimum: float | None = None) -> float:
        value = self.arguments.get(key, default)
        try:
            number = float(value)
        except (TypeError, ValueError) as exc:
            raise PluginArgumentError(self.name, key, f"{value!r} is not a number") from exc
        if minimum is not None and number < minimum:
            raise PluginArgumentError(self.name, key, f"{value!r}: must be >= {minimum:g}")
        return number

    def int_arg(self, key: str, default: int) -> int:
        value = self.arguments.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise PluginArgumentError(self.name, key, f"{value!r} is not an integer")
        try:
            return int(value)
        except ValueError as exc:
            raise PluginArgumentError(self.name, key, f"{value!r} is not an integer") from exc

    def str_arg(self, key: str, default: str, choices: Sequence[str] = ()) -> str:
        value = str(self.arguments.get(key, default))
        if choices and value not in choices:
            raise PluginArgumentError(self.name, key, f"{value!r}: use one of {', '.join(choices)}")
        return value


class PluginArgumentError(ValueError):
    """A plugin argument that is not what the plugin reads; names the plugin and the argument."""

    def __init__(self, plugin: str, key: str, message: str) -> None:
        super().__init__(f"plugin {plugin}: argument {key}: {message}")
        self.key, self.message = key, message


@dataclass(slots=True)
class ExtensionPoints:
    """Everything plugins registered for one session, in tier order."""

    #: Job order keys may read only the job (its pods' statuses, allocation, priority, group) and the
    #: node table, the table only through what the job holds (drf's share of the cluster): sessions hold a
    #: job's key until one of those changes, and the key of a job whose pods are all pending across tables.
    job_order: list[OrderKey] = field(default_factory=list)
    queue_order: list[OrderKey] = field(default_factory=list)
    task_order: list[OrderKey] = field(default_factory=list)
    #: Validity votes may read only the job (its pods and group), like job order keys.
    job_valid: list[JobVote] = field(default_factory=list)
    #: Admission votes must be monotone in queue usage and minResources: refused at some allocated +
    #: reserved, refused at any higher, and so is a job asking more (enqueue relies on it to skip a
    #: queue's refused backlog).
    job_enqueueable: list[JobVote] = field(default_factory=list)
    #: Permits (True: Volcano's Permit, False: Abstain): the job is enqueueable whatever the votes of later
    #: tiers say (those of the permit's tier and earlier ones still count). May also read `Session.now`.
    job_enqueue_permit: list[JobCheck] = field(default_factory=list)
    job_ready: list[JobCheck] = field(default_factory=list)
    job_pipelined: list[JobCheck] = field(default_factory=list)
    #: Permits for job_pipelined, combined the same way.
    job_pipeline_permit: list[JobCheck] = field(default_factory=list)
    job_starving: list[JobCheck] = field(default_factory=list)
    queue_overused: list[QueueVote] = field(default_factory=list)
    queue_allocatable: list[AllocatableVote] = field(default_factory=list)
    #: May the reclaimer's queue reclaim at all (capacity: below its deserved share)? These votes may read only
    #: the queue (its spec and `allocated`), the task, and quotas that move only with the node table or a bump
    #: of `Session.quotas_moved`; and they must be monotone in the queue's allocation: refused at some
    #: allocation, refused at any at least as high on every resource (reclaim remembers a job its votes
    #: refused by the allocation they read, and skips it while that holds).
    queue_reclaim_allowed: list[AllocatableVote] = field(default_factory=list)
    #: Queue-wide twins of those votes, keyed by what was registered above: True only when the vote refuses
    #: every task the queue could ask for now (each asks at least one unit of something). Reclaim then passes
    #: over the queue without looking at its jobs; it remembers nothing of them, and a memo written earlier
    #: still holds only while the queue holds at least as much (`queue_reclaim_allowed` is monotone).
    queue_reclaim_refusals: dict[AllocatableVote, QueueRefusal] = field(default_factory=dict)
    #: Static filters may read only the pod's node selector, required node affinity and tolerations, static
    #: scores only its node affinity and tolerations, and both the node table's labels, taints and
    #: schedulability: pod shapes with the same terms share their results while the table's generation holds.
    static_filters: list[StaticFilter] = field(default_factory=list)
    dynamic_filters: list[DynamicFilter] = field(default_factory=list)
    placement_filters: list[PlacementFilter] = field(default_factory=list)
    static_scores: list[StaticScore] = field(default_factory=list)
    dynamic_scores: list[DynamicScore] = field(default_factory=list)
    #: Scalar twins of dynamic filters and scores, keyed by what was registered above. When every
    #: dynamic filter and score has one, the session refreshes a few changed nodes without numpy
    #: (whose per-call cost dwarfs the work for one row); otherwise it always uses the vector forms.
    row_filters: dict[DynamicFilter, RowFilter] = field(default_factory=dict)
    row_scores: dict[DynamicScore, RowScore] = field(default_factory=dict)
    #: Scalar twins of dynamic filters' explanations (`RowExplain`). When every dynamic filter has one, why a
    #: pod shape finds no node is patched for the nodes that changed instead of counted over every node.
    row_explains: dict[DynamicFilter, RowExplain] = field(default_factory=dict)
    #: Twins whose result depends only on the request and the node's resource state (allocatable, used,
    #: GPU cards; `NodeTable.state_id`), not on which node it is. When every twin is, results are shared
    #: by nodes in the same state: most placements and departures leave a node in a state seen before.
    node_state_only: set[RowFilter | RowScore] = field(default_factory=set)
    card_selector: CardSelector | None = None
    preemptable: list[VictimFilter] = field(default_factory=list)
    reclaimable: list[VictimFilter] = field(default_factory=list)
    #: Job-wide twins of victim filters, keyed by what was registered above: an eviction search passes over
    #: a node whose every candidate some filter's twin refuses, without asking the filters (they could take
    #: none of them). So a twin may refuse a job only if its filter takes none of the job's pods whatever
    #: candidates come with them (gang: a job at its minMember gives up no pod, first or not).
    victim_job_refusals: dict[VictimFilter, VictimJobRefusal] = field(default_factory=dict)
    #: Orders victims of different queues before queue order reversed does (no switch turns it off, as in
    #: Volcano); read per eviction attempt, so it may depend on the queues' allocations.
    victim_queue_order: list[VictimQueueKey] = field(default_factory=list)
    on_allocate: list[EventHandler] = field(default_factory=list)
    on_deallocate: list[EventHandler] = field(default_factory=list)
    #: When a plugin's votes next change with `Session.now` alone (a deadline passing): the earliest such time
    #: after now, inf for none (`Decisions.wake_at`).
    wake_at: list[Callable[[], float]] = field(default_factory=list)

    def merge(self, other: ExtensionPoints, dropped: Collection[str] = ()) -> None:
        """Add what one plugin registered (`other`) after what is here, leaving out the points named in
        `dropped` (its switched-off ones). Scalar twins and node-state marks come along whole: they are
        looked up only for the filters and scores registered, so those of a dropped point are never read."""
        for name in _POINT_FIELDS:
            value = getattr(other, name)
            if isinstance(value, list):
                if value and name not in dropped:
                    getattr(self, name).extend(value)
            elif isinstance(value, dict | set):
                getattr(self, name).update(value)
            elif value is not None:  # the card selector: one plugin's
                setattr(self, name, value)


_POINT_FIELDS = tuple(f.name for f in fields(ExtensionPoints))

#: Volcano's per-plugin switches and the extension points each one turns off for that plugin only.
SWITCHED_POINTS: Mapping[str, tuple[str, ...]] = {
    "enableJobOrder": ("job_order",),
    "enableTaskOrder": ("task_order",),
    "enableQueueOrder": ("queue_order",),
    "enableJobReady": ("job_ready",),
    "enableJobPipelined": ("job_pipelined", "job_pipeline_permit"),
    "enableJobStarving": ("job_starving",),
    # Volcano reads enableJobEnqueued for both JobEnqueueable and JobEnqueued.
    "enableJobEnqueued": ("job_enqueueable", "job_enqueue_permit"),
    "enabledOverused": ("queue_overused",),
    "enabledAllocatable": ("queue_allocatable",),
    "enablePreemptive": ("queue_reclaim_allowed",),
    "enablePreemptable": ("preemptable",),
    "enableReclaimable": ("reclaimable",),
    # Predicates: the static filters (nodeSelector, node affinity, taints). Resource and GPU card fit stay:
    # Volcano's actions check a node's idle resources themselves, whatever the plugins say.
    "enablePredicate": ("static_filters",),
    "enableNodeOrder": ("static_scores", "dynamic_scores"),
}
#: Switches accepted for compatibility with volcano-scheduler.conf that turn off nothing here, and why.
IGNORED_SWITCHES: Mapping[str, str] = {
    "enableHierarchy": "a plugin mode, not an extension point: plugins read it from Plugin.switches "
    "(capacity builds its queue tree from spec.parent whether or not it is set)",
    "enabledClusterOrder": "no multi-cluster scheduling: no plugin orders clusters",
    "enableBestNode": "no plugin picks the node: the session takes the best total score",
    "enableTargetJob": "no plugin names a target job",
    "enableReservedNodes": "no plugin reserves nodes",
    "enabledVictim": "no shuffle action or rescheduling plugin, which read victim tasks",
    "enabledHyperNodeOrder": "no network topology (HyperNodes)",
    "enabledHyperNodeGradient": "no network topology (HyperNodes)",
    "enabledSubJobReady": "no sub-groups of a PodGroup",
    "enabledSubJobPipelined": "no sub-groups of a PodGroup",
    "enabledSubJobOrder": "no sub-groups of a PodGroup",
}


def switched_off(option: PluginOption) -> frozenset[str]:
    """The extension points the option's switches turn off."""
    return frozenset(
        point for switch, points in SWITCHED_POINTS.items() if not option.enabled(switch) for point in points
    )


PluginFactory = Callable[[Mapping[str, Any]], Plugin]


class PluginRegistry:
    """Plugin names to factories; explicit, no import-time side effects."""

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})

    def register(self, name: str, factory: PluginFactory) -> None:
        self._factories[name] = factory

    def create(self, name: str, arguments: Mapping[str, Any], switches: Mapping[str, bool] | None = None) -> Plugin:
        factory = self._factories.get(name)
        if factory is None:
            known = ", ".join(sorted(self._factories))
            raise KeyError(f"unknown plugin {name!r} (known: {known})")
        plugin = factory(arguments)
        if switches:
            plugin.switches = dict(switches)
        return plugin

    def names(self) -> Sequence[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories


class Action(Protocol):
    """A step of the scheduling cycle (enqueue, allocate, backfill, preempt, reclaim)."""

    name: ClassVar[str]

    def execute(self, ssn: Session) -> None: ...
