"""The port between the fleet's controllers and the host that runs them.

The hybrid-cloud rules (pool sizing, spot notices, link state, overflow to the burst queue, the budget) are
written once, in `tidegate/fleet/`, as controllers on a `Clock`. Each host (the simulator, `tidegate serve`'s
control plane, `tidegate kube`) implements this port and nothing of the rules: it says what it sees (the
jobs waiting, the jobs on some nodes, what the pools bill) and does what a controller decides (move a job to
another queue, evict or fail what runs on a node, cordon a node, add or remove a node, patch a queue).

The port is a few small protocols, one per controller (`PoolHost`, `SpotHost`, `LinkHost`, `BurstHost`,
`BudgetHost`), so each controller asks only for what it uses; `FleetPort` is all of them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple, Protocol

from tidegate.fleet.hpa_supply import NodeReadings
from tidegate.fleet.pool import Pool
from tidegate.model.objects import Node, Queue


class EventKind(StrEnum):
    """What a controller's event is about (hosts file or show them by kind)."""

    SCALING = "scaling"  # a pool resized, an HPA condition changed
    SPOT = "spot"  # a spot interruption notice, an instance taken back
    LINK = "link"  # a link cut or restored, or a job sent back home because every link is down
    LINK_AFFECTED = "link-affected"  # what a link cut did to one job running or waiting
    OVERFLOW = "overflow"  # a job moved to the burst queue
    BUDGET = "budget"  # a budget threshold crossed, a period restored


class WaitingJob(NamedTuple):
    """A job waiting for room, as its host sees it: what overflow and a link cut decide on."""

    key: str
    #: The queue it waits in now, and the one it was submitted to.
    queue: str
    home: str
    #: When its current wait began (its submission, or its restart).
    since: float
    namespace: str
    #: Pinned to the IDC (its pods' nodeSelector): it never goes to the cloud.
    pinned: bool
    #: Whether its pods exist yet (a PodGroup admitted before its job controller made them has none).
    has_pods: bool = True
    #: Part of its gang runs (evicted pods being replaced): it keeps its queue.
    part_running: bool = False


class RunningJob(NamedTuple):
    """A job with pods on some nodes."""

    key: str
    #: Still waiting for its data (a simulated prefetch): its work has not begun.
    fetching: bool = False


class Nodes(Protocol):
    """The scheduler's side of a node joining, leaving or being cordoned."""

    def add_nodes(self, nodes: Sequence[Node]) -> None: ...

    def remove_nodes(self, names: Iterable[str]) -> None: ...

    def set_schedulable(self, name: str, schedulable: bool) -> None: ...


class Events(Protocol):
    def record(self, text: str, kind: EventKind, job: str = "") -> None:
        """A controller's event (about job `job`, by key, when given)."""

    def want_cycle(self) -> None:
        """Something changed that a scheduling cycle should look at soon."""


class Cadence(Protocol):
    def active(self) -> bool:
        """Work remains: the periodic controllers (HPA syncs, budget checks) keep their timers while it does
        (a simulation stops once every job has ended; a live host always is)."""

    def failed(self, what: str, exc: Exception) -> None:
        """A controller's periodic step raised (a live host logs it and goes on; the simulator raises)."""


class PoolHost(Nodes, NodeReadings, Events, Cadence, Protocol):
    """What pool sizing (the HPAs) needs of its host."""

    def node_ready(self, pool: Pool, node: Node) -> None:
        """The node joined the pool (it is in `pool.nodes` and the scheduler has it)."""

    def evict_node(self, pool: Pool, node: str) -> None:
        """The node is leaving now: evict what runs there (its jobs follow their lifecycle policies); the
        fleet then takes it from the pool and the scheduler."""

    def billed(self, pool: Pool, change: int) -> None:
        """Billing starts (change > 0) or stops (change < 0) for that many of the pool's nodes, now."""

    def sized(self, pool: Pool) -> None:
        """The pool's node count changed."""

    def pending_seconds(self) -> Mapping[str, float]:
        """volcano_queue_pending_jobs_duration_seconds per queue (a parent's including its children's)."""


class SpotHost(PoolHost, Protocol):
    def interrupt(self, pool: Pool, node: str, notice_s: float) -> list[str]:
        """A spot notice for the node: the pods running there start their preStop (checkpoint) now, with
        `notice_s` seconds before the instance dies. Returns the keys of the jobs stopping."""


class BurstHost(Events, Protocol):
    def waiting(self, outside: str = "") -> Iterable[WaitingJob]:
        """The jobs waiting for room now, in the host's order (the order they are moved in). With `outside` a
        host may leave out jobs pinned to the IDC or in that queue: overflow, which asks every cycle, skips them
        anyway (a host that keeps them apart saves itself the walk)."""

    def reason(self, key: str) -> str:
        """Why the job waits after the last cycle (a `Refusal` when a plugin's vote stops it)."""

    def admits(self, queue: str, namespace: str) -> bool:
        """The queue exists and takes work from the namespace (as the scheduler judges it)."""

    def move(self, key: str, queue: str) -> None:
        """Resubmit a waiting job to another queue (its pods tolerate the cloud there, or no more)."""


class LinkHost(Nodes, BurstHost, Protocol):
    def running_on(self, nodes: Collection[str]) -> list[RunningJob]:
        """The jobs with pods on any of the nodes, in the host's order."""

    def fail(self, key: str, why: str) -> None:
        """The job's pods fail now (lost with the link): its lifecycle policies decide."""

    def link_changed(self, cluster: str, up: bool) -> None:
        """A cloud cluster's link went down or came back (transfers over it stall or resume)."""


class BudgetHost(Events, Cadence, Protocol):
    def spend(self, at: float) -> float:
        """What the cloud pools have billed from the start until `at` (now, or an instant since which nothing
        changed the bill)."""

    def set_queue(self, queue: Queue) -> Queue:
        """Replace the queue (a live edit, as `PATCH /queues/<name>`), returning it as the host keeps it."""


class FleetPort(SpotHost, LinkHost, BudgetHost, Protocol):
    """Everything a host does for the fleet: every controller's port."""
