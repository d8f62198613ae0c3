"""Cloud node pools sized by their HorizontalPodAutoscalers, on any clock.

The simulator and the live control plane run this same controller: every HPA sync the loop hands it the
queues' pending seconds, each pool's HPA reads its metrics (External and Object metrics from the queues,
Pods and Resource metrics from the pool's virtual nodes: see `hpa_supply.py`) and recommends a size (one
replica is one virtual node), new nodes join after the pool's provisioning delay, and scale-in is
drain-aware (nodes still provisioning go first, then idle nodes; a busy node is cordoned and leaves when
its last job ends). While a pool may not grow (its cluster cut off: `Links`) a scale-up is a failed scale
update (AbleToScale False, FailedUpdateScale). Each HPA's status (its conditions) is kept; a condition
turning False, changing reason while False, or turning True again is a scaling event. What a node joining
or leaving means for jobs, billing and logs is the host's (`PoolHost`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from tidegate.autoscale.hpa import (
    ABLE_TO_SCALE,
    AMBIGUOUS_SELECTOR,
    DESIRED_WITHIN_RANGE,
    SCALING_ACTIVE,
    HPAController,
    HPAResult,
    HPASpec,
    HPAState,
    HPAStatus,
    QueueSelection,
    queue_metric_selection,
    selected_values,
    status_document,
    status_from_document,
)
from tidegate.clock import Clock, Timer
from tidegate.fleet.hpa_supply import FLEET_HPA_CONFIG, Supply, pool_selector
from tidegate.fleet.pool import Arrival, Pool
from tidegate.fleet.port import EventKind, PoolHost
from tidegate.model.objects import Queue

#: How often an HPA syncs (the kube-controller-manager's --horizontal-pod-autoscaler-sync-period).
HPA_SYNC_SECONDS = 15.0


class Provisioner(Protocol):
    """Who brings a pool's new nodes up, and lets the fleet know (`CloudFleet.provisioned`) when one has
    joined: by default the pool's provisioning delay on the clock (the simulator, `tidegate serve`); a cloud
    member's NodeClaims for `tidegate kube` with a cloud cluster."""

    def provision(self, pool: Pool, arrival: Arrival) -> None:
        """Start bringing a node of the pool up."""

    def cancel(self, pool: Pool, arrival: Arrival) -> None:
        """The node is no longer wanted (the pool shrank before it joined)."""


class AfterDelay:
    """A node joins when it is due: the pool's provisioning delay after it was asked for."""

    def __init__(self, fleet: CloudFleet) -> None:
        self.fleet = fleet

    def provision(self, pool: Pool, arrival: Arrival) -> None:
        arrival.timer = self.fleet.clock.call_at(arrival.due, partial(self.fleet.provisioned, pool, arrival))

    def cancel(self, pool: Pool, arrival: Arrival) -> None:
        if arrival.timer is not None:
            arrival.timer.cancel()


class QueueTree:
    """The queue hierarchy, each queue after its children: a per-queue metric summed over subtrees (a
    parent's pending seconds are its own plus its children's, which is what an HPA selecting the parent
    reads)."""

    def __init__(self, queues: Iterable[Queue]) -> None:
        self.names = [queue.name for queue in queues]
        children: dict[str, list[str]] = {}
        for queue in queues:
            if queue.parent:
                children.setdefault(queue.parent, []).append(queue.name)
        order: dict[str, tuple[str, ...]] = {}

        def visit(name: str) -> None:
            if name not in order:
                below = tuple(children.get(name, ()))
                for child in below:
                    visit(child)
                order[name] = below

        for name in self.names:
            visit(name)
        self.order = list(order.items())

    def totals(self, own: Mapping[str, float]) -> dict[str, float]:
        """Every queue's own value plus its subtree's (0.0 for a queue with none)."""
        if not own:
            return dict.fromkeys(self.names, 0.0)
        totals: dict[str, float] = {}
        for name, children in self.order:  # each queue's children are summed before it, in order
            totals[name] = own.get(name, 0.0) + sum(map(totals.__getitem__, children))
        return {name: totals[name] for name in self.names}


@dataclass(slots=True)
class Autoscaler:
    """One HPA sizing one cloud pool; one replica is one node of the pool."""

    spec: HPASpec
    pool: Pool
    controller: HPAController
    #: The queues each of its metrics samples (the queues keep their names: worked out once, not every sync).
    selection: QueueSelection = ()
    #: What its other metrics read of the pool's nodes and the queues.
    supply: Supply = field(default_factory=Supply)
    #: Why its pod selector is unusable (another HPA scales the same pool): (reason, message), or None.
    selector_error: tuple[str, str] | None = None
    #: The last sync found the pool at 0 with nothing pending and changed nothing (see `sync`).
    steady: bool = False

    @property
    def idle_sync_changes_nothing(self) -> bool:
        """A sync with nothing pending and the pool at 0 evaluates as the last such sync did, now or later, so
        it can be left out: its recommendation of 0 matters only to a scale-up stabilization window (whose
        lowest recommendation is a floor), a minReplicas above 0 would scale up, and only External metrics
        come as values alone (the others read the pool's nodes or the queues' other figures)."""
        spec = self.spec
        up_window = spec.behavior.scale_up.stabilization_window_seconds if spec.behavior else 0
        return spec.min_replicas == 0 and not up_window and spec.external_only and self.selector_error is None

    def quiet(self, values: Mapping[str, Sequence[object]]) -> bool:
        """Every metric has samples, all 0."""
        return len(values) == len({m.key for m in self.spec.metrics}) and not any(
            v for samples in values.values() for v in samples
        )


def _steady(result: HPAResult) -> bool:
    return (
        result.current_replicas == result.desired_replicas == 0
        and result.reason == DESIRED_WITHIN_RANGE
        and not any(m.error for m in result.metrics)
    )


class CloudFleet:
    """The pools of a run, the HPAs sizing the cloud ones, and the nodes joining and leaving."""

    def __init__(
        self,
        pools: Sequence[Pool],
        hpas: Sequence[HPASpec],
        queues: Mapping[str, Queue],
        host: PoolHost,
        clock: Clock,
    ) -> None:
        """Each HPA drives the pool whose `scaleTargetRef` names its target; an HPA with no such pool is
        left out (loaders report it); HPAs sharing a pool all report AmbiguousSelector and none scales it."""
        self.pools = {p.name: p for p in pools}
        self.nodes = self.host = host
        self.clock = clock
        #: Whether a node goes whatever the autoscaler wants (a spot notice), and whether a pool may grow now
        #: (not while its cluster is cut off): the spot and link controllers' word (`HybridFleet`).
        self.leaving: Callable[[str], bool] = lambda node: False
        self.may_grow: Callable[[Pool], bool] = lambda pool: True
        #: Told of each node that joins (the link controller cordons it while its cloud is cut off).
        self.joined: Callable[[Pool, str], None] = lambda pool, node: None
        self._timer: Timer | None = None
        #: Nodes being removed now (their pods evicted): they leave once, whatever their eviction releases.
        self._removing: set[str] = set()
        #: Who brings each pool's new nodes up (by pool name; the pool's delay on the clock for the others).
        self.provisioners: dict[str, Provisioner] = {}
        self._after_delay = AfterDelay(self)
        #: When each node of a pool joined (its virtual-kubelet pod's start and readiness).
        self.joined_at: dict[str, float] = {}
        self.autoscalers: list[Autoscaler] = []
        for spec in hpas:
            pool = next((p for p in pools if p.target_name and p.target_name == spec.target_name), None)
            if pool is not None:
                selection = queue_metric_selection(spec, queues)
                controller = HPAController(spec, FLEET_HPA_CONFIG)
                self.autoscalers.append(Autoscaler(spec, pool, controller, selection, Supply.of(spec)))
        for scaler in self.autoscalers:
            sharing = [s.spec for s in self.autoscalers if s.pool is scaler.pool]
            if len(sharing) > 1:
                names = " ".join(f"{s.namespace}/{s.name}" for s in sharing)
                selector = pool_selector(scaler.pool.name)
                message = f"pods by selector {selector} are controlled by multiple HPAs: [{names}]"
                scaler.selector_error = (AMBIGUOUS_SELECTOR, message)
        #: Each HPA as declared, for a cap to be lifted (`cap`).
        self.declared = {scaler.spec.name: scaler.spec for scaler in self.autoscalers}

    def resume_statuses(self, kept: Mapping[str, Mapping[str, Any]]) -> None:
        """Each HPA's status as it was kept (`status_document`), as an HPA object keeps its status across a
        controller restart; its memory (recommendations, scale events) starts afresh, as Kubernetes' does."""
        for scaler in self.autoscalers:
            doc = kept.get(scaler.spec.name)
            if doc is not None:
                status = status_from_document(doc, scaler.spec.metrics)
                scaler.controller = HPAController(scaler.spec, FLEET_HPA_CONFIG, HPAState(status=status))

    def statuses(self) -> dict[str, dict[str, Any]]:
        """Each HPA's status, to keep (`resume_statuses`)."""
        return {scaler.spec.name: status_document(scaler.controller.status) for scaler in self.autoscalers}

    def start(self, pools: Iterable[Pool]) -> None:
        """The pools' initial nodes (`spec.count`), ready (and a cloud pool's billed) at once."""
        for pool in pools:
            for _ in range(pool.spec.count):
                self.node_ready(pool)
                if pool.is_cloud:
                    self.host.billed(pool, 1)
            self.host.sized(pool)

    def restore(
        self, pool: Pool, nodes: Sequence[str], draining: Sequence[str], created: int, arriving: Sequence[float] = ()
    ) -> None:
        """The pool as it was kept (instead of `start`): these nodes, ready (a cloud pool's billed), the
        `draining` ones cordoned, nodes still on the way joining at their `arriving` times (billed from now),
        and new nodes numbered on from `created`."""
        pool.created = max(created, pool.created)
        for name in nodes:
            node = pool.node(name)
            pool.nodes.append(name)
            self.joined_at[name] = self.clock.now()
            self.nodes.add_nodes([node])
            self.host.node_ready(pool, node)
            self.joined(pool, name)
            if pool.is_cloud:
                self.host.billed(pool, 1)
        for name in draining:
            if name in pool.nodes and name not in pool.draining:
                pool.draining.append(name)
                self.nodes.set_schedulable(name, False)
        for due in arriving:
            self._ask(pool, max(due, self.clock.now()))
        self.host.sized(pool)

    def run(self, priority: int, at: float | None = None) -> None:
        """Sync every HPA_SYNC_SECONDS from `at` (now), while the host is active or a pool has nodes."""
        if self.autoscalers:
            when = self.clock.now() if at is None else at
            self._timer = self.clock.call_at(when, partial(self._tick, priority), priority)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self, priority: int) -> None:
        host = self.host
        try:
            self.sync(host.pending_seconds())
        except Exception as exc:  # the host says whether a failed sync stops everything
            host.failed("autoscaler sync", exc)
        if host.active() or self.scaled:
            self._timer = self.clock.call_later(HPA_SYNC_SECONDS, partial(self._tick, priority), priority)
        else:
            self._timer = None

    def sync(self, pending_seconds: Mapping[str, float]) -> None:
        """One HPA sync: each pool's HPA reads the queues' pending seconds (and whatever else its metrics
        read) and the pool is resized to its recommendation (a scale-up fails while the host says no)."""
        now = self.clock.now()
        for scaler in self.autoscalers:
            pool = scaler.pool
            values = selected_values(scaler.selection, pending_seconds)
            if scaler.steady and pool.size == 0 and scaler.quiet(values):
                continue  # nothing pending, nothing to scale in: as the last sync (draining nodes leave on their own)
            observed = scaler.supply.observe(pool, self.joined_at, self.host, pending_seconds, now)
            before = scaler.controller.status
            result = scaler.controller.step(
                now,
                pool.size,
                values,
                status_replicas=pool.size,
                ready_replicas=len(pool.nodes),
                selector_error=scaler.selector_error,
                update_scale=partial(self._refused, pool),
                **observed,
            )
            self._report_conditions(scaler, before, scaler.controller.status)
            scaler.steady = scaler.idle_sync_changes_nothing and _steady(result)
            if result.rescale:
                text = f"{pool.name}: {pool.size} -> {result.desired_replicas} nodes ({result.reason})"
                self.host.record(text, EventKind.SCALING)
                self.resize(pool, result.desired_replicas)

    def _refused(self, pool: Pool, current: int, desired: int) -> str | None:
        """Why setting the pool's replicas fails now (the host refuses new nodes), or None."""
        if desired > current and not self.may_grow(pool):
            return f"NodePool {pool.name} may not grow now: its cluster {pool.cluster_name} is cut off"
        return None

    def _report_conditions(self, scaler: Autoscaler, before: HPAStatus, after: HPAStatus) -> None:
        """A scaling event for each AbleToScale or ScalingActive condition that turned False, changed reason
        while False, or turned True again (as `kubectl describe hpa` would show it changing)."""
        if before.conditions is after.conditions:
            return
        for type_ in (ABLE_TO_SCALE, SCALING_ACTIVE):
            old, new = before.condition(type_), after.condition(type_)
            if new is None or (old is None and new.status) or (old is not None and old.status and new.status):
                continue
            if old is not None and (old.status, old.reason) == (new.status, new.reason):
                continue
            state = "True" if new.status else "False"
            text = f"{scaler.pool.name}: HPA {scaler.spec.name} {type_} {state} {new.reason}: {new.message}"
            self.host.record(text, EventKind.SCALING)

    @property
    def scaled(self) -> bool:
        """Some HPA-driven pool has nodes or nodes on the way."""
        return any(s.pool.size for s in self.autoscalers)

    def resize(self, pool: Pool, desired: int) -> None:
        """Scale a pool to `desired` nodes. Scale-in is drain-aware: nodes still provisioning go first,
        then idle nodes; a busy node is cordoned and leaves when its last job ends (as VK pods with a low
        pod-deletion-cost and a draining preStop hook would), so scale-in never kills running work."""
        host = self.host
        while pool.size < desired and (kept := [n for n in pool.draining if not self.leaving(n)]):
            node = kept[-1]  # a node under a spot notice is leaving whatever the autoscaler wants
            pool.draining.remove(node)
            self.nodes.set_schedulable(node, True)
        while pool.size < desired:
            self._ask(pool, self.clock.now() + pool.spec.provisioning_delay_seconds)
        if pool.size > desired:
            surplus = pool.size - desired
            cancel = min(surplus, pool.provisioning)
            first = len(pool.arriving) - cancel  # the nodes asked for last are cancelled first
            provisioner = self._provisioner(pool)
            for arrival in pool.arriving[first:]:
                provisioner.cancel(pool, arrival)
            del pool.arriving[first:]
            host.billed(pool, -cancel)
            surplus -= cancel
            active = [n for n in reversed(pool.nodes) if n not in pool.draining]
            active.sort(key=host.busy)
            for node in active[:surplus]:
                if host.busy(node):
                    pool.draining.append(node)
                    self.nodes.set_schedulable(node, False)
                else:
                    self.remove_node(pool, node)
        host.sized(pool)

    def _provisioner(self, pool: Pool) -> Provisioner:
        return self.provisioners.get(pool.name, self._after_delay)

    def _ask(self, pool: Pool, due: float) -> None:
        """A new node for the pool, billed from now, due at `due`."""
        arrival = Arrival(due)
        self._provisioner(pool).provision(pool, arrival)
        pool.arriving.append(arrival)
        self.host.billed(pool, 1)

    def provisioned(self, pool: Pool, arrival: Arrival) -> None:
        """The provider's word that a node asked for has joined (named `arrival.name`, if it named it)."""
        pool.arriving.remove(arrival)
        self.node_ready(pool, arrival.name)
        self.host.sized(pool)
        self.host.want_cycle()

    def node_ready(self, pool: Pool, name: str = "") -> None:
        """A new node of the pool joins now (named `name`, or the pool's next `<pool>-<n>`)."""
        node = pool.node(name) if name else pool.new_node()
        pool.nodes.append(node.name)
        self.joined_at[node.name] = self.clock.now()
        self.nodes.add_nodes([node])
        self.host.node_ready(pool, node)
        self.joined(pool, node.name)

    def emptied(self, pool: Pool, node: str) -> None:
        """The host's word that the node's last job has left: a node cordoned for scale-in leaves now (one
        under a spot notice waits for its provider; one being removed is not removed twice)."""
        if node in pool.draining and node in pool.nodes and node not in self._removing and not self.leaving(node):
            self.remove_node(pool, node)
            self.host.sized(pool)

    def remove_node(self, pool: Pool, node: str) -> None:
        """The node leaves now: what runs there is evicted, its billing stops."""
        self._removing.add(node)
        try:
            self.host.evict_node(pool, node)
        finally:
            self._removing.discard(node)
        pool.nodes.remove(node)
        self.joined_at.pop(node, None)
        if node in pool.draining:
            pool.draining.remove(node)
        self.nodes.remove_nodes([node])
        self.host.billed(pool, -1)

    def cap(self, max_replicas: int | None, queues: Mapping[str, Queue]) -> str:
        """Edit every HPA's `spec.maxReplicas` (None restores each HPA's own); it applies from its next sync."""
        changes = []
        for scaler in self.autoscalers:
            original = self.declared[scaler.spec.name]
            limit = original.max_replicas if max_replicas is None else min(max_replicas, original.max_replicas)
            limit = max(limit, original.min_replicas)
            changes.append(f"HPA {original.name} maxReplicas {scaler.spec.max_replicas} -> {limit}")
            scaler.spec = dataclasses.replace(original, max_replicas=limit)
            scaler.controller.spec = scaler.spec
            scaler.selection = queue_metric_selection(scaler.spec, queues)
            scaler.steady = False
        return "; ".join(changes) or "no HPA to cap"
