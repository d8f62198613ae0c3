"""`tidegate kube`'s side of the fleet: the cluster it schedules is the port of the fleet's controllers
(`tidegate.fleet.hybrid.HybridFleet`), as the simulator and `tidegate serve` are.

What the controllers decide is written to the API server, and what they hear is read from it:
- a served pool's nodes are virtual Nodes tidegate registers (as a virtual kubelet or KWOK registers its
  nodes): labelled, annotated and tainted as `tidegate.fleet.pool` makes them, Ready; scale-in cordons a
  busy node (`spec.unschedulable`) and deregisters it once its last pod is gone. The pools of a cloud run as a
  member (`tidegate.kube.cloud_member`) are its instances instead: a new node is a NodeClaim the cloud's
  provisioner fulfils, joining once its virtual node is Ready, and a node removed is an instance released;
- a spot interruption notice is a pool node tainted as AWS's node-termination-handler taints it when it sees
  the two-minute warning (`aws-node-termination-handler/spot-itn`), or as Karpenter marks a node it
  disrupts (`karpenter.sh/disrupted`): its pods are deleted with their own grace period (their preStop
  hook checkpoints), and when the notice runs out the node is deregistered;
- a cloud cluster's link is down while none of its pool nodes is Ready (its virtual kubelets stopped
  heartbeating), and back when one is; a member's is down while it cannot reach its cloud's API server;
- overflow moves a PodGroup (or a bare pod) by patching its queue, the pods first tolerating the cloud
  taint; the queue it came from is kept on it (`tidegate.io/home-queue`), so a link cut sends it home
  after a restart too;
- the budget's thresholds patch the Queue object (`spec.weight`, `spec.capability`) and each action is an
  Event on the Queue; the spend is the pools' billed node time at their prices, kept with the period's state
  on the Queue (annotation `tidegate.io/budget-state`) so a restarted `tidegate kube` goes on from it.

Time is a `SimClock` the scheduling loop moves to the wall clock's now before each cycle: the controllers'
timers (HPA syncs, notices running out, budget checks) run then, at their own times.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from tidegate.autoscale.hpa import HPASpec
from tidegate.clock import SimClock
from tidegate.fleet.bill import Bill
from tidegate.fleet.burst import Burst
from tidegate.fleet.hpa_supply import QueueFigures
from tidegate.fleet.hybrid import HybridFleet
from tidegate.fleet.links import KEEP_RUNNING, CloudPods
from tidegate.fleet.pool import CLOUD_TOLERATION, POOL_LABEL, Arrival, Pool, pinned_to_idc
from tidegate.fleet.port import EventKind, RunningJob, WaitingJob
from tidegate.fleet.spec import BudgetSpec
from tidegate.kube.api import VOLCANO_GROUP, VOLCANO_VERSION, FleetApi
from tidegate.kube.cloud_member import NOT_READ, CloudMember
from tidegate.kube.nodeclaims import InstanceState
from tidegate.model.manifests import load_objects
from tidegate.model.objects import Node, Pod, PodPhase, Queue
from tidegate.model.resources import Resources
from tidegate.scheduler.info import JobInfo, TaskStatus
from tidegate.scheduler.online import OnlineScheduler

_log = logging.getLogger(__name__)
#: Taints that say a node's instance is about to be taken back: AWS node-termination-handler's on a spot
#: interruption notice, and Karpenter's on a node it disrupts.
NOTICE_TAINTS = ("aws-node-termination-handler/spot-itn", "karpenter.sh/disrupted")
#: Priority of the fleet's periodic timers among those due at the same instant.
PRIORITY_FLEET = 1
#: Where the budget's period and the pools' bill are kept: an annotation on the budget's Queue.
BUDGET_ANNOTATION = "tidegate.io/budget-state"
#: Seconds between writes of that state while only the spend moves (a threshold or period is written at once).
BUDGET_WRITE_SECONDS = 60.0
_FINISHED = (PodPhase.SUCCEEDED, PodPhase.FAILED)


class Scheduling(Protocol):
    """What the fleet reads of the scheduling loop it runs beside (`ClusterScheduler`)."""

    @property
    def core(self) -> OnlineScheduler | None: ...

    def declared(self, key: str) -> bool: ...

    def movable(self, key: str) -> bool: ...

    def home_queue(self, key: str) -> str: ...

    def forget(self, key: str) -> None:
        """Leave the group out until the next read hands it over again (it was just moved)."""

    def pending_seconds(self, now: float) -> dict[str, float]: ...

    def wake(self) -> None: ...


def waiting_since(job: JobInfo) -> float:
    """When a waiting group's wait began: its creation, or the creation of its newest pod not placed (a job
    restarted by its controller waits anew from its new pods, as the simulator's from its restart)."""
    pending = [task.pod.created for task in job.tasks if task.status is TaskStatus.PENDING]
    return max(job.group.created, *pending) if pending else job.group.created


def node_document(node: Node) -> dict[str, Any]:
    """A Node as a virtual kubelet registers it: labels, annotations, taints, what it offers, Ready."""
    offered = node.allocatable.to_dict()
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect.value} for t in node.taints]
    if node.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels), "annotations": dict(node.annotations)},
        "spec": spec,
        "status": {
            "capacity": dict(offered),
            "allocatable": dict(offered),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


class KubeFleet:
    """The fleet's controllers hosted by one `ClusterScheduler`."""

    def __init__(
        self,
        scheduler: Scheduling,
        api: FleetApi,
        clock: SimClock,
        pools: Sequence[Pool] = (),
        hpas: Sequence[HPASpec] = (),
        burst: Burst | None = None,
        budget: BudgetSpec | None = None,
        queues: Mapping[str, Queue] | None = None,
        members: Sequence[CloudMember] = (),
        cloud_pods: CloudPods = KEEP_RUNNING,
    ) -> None:
        """With pools or a budget, `api` must also write nodes, queues and events (`FleetApi`); `queues` are the
        queues the budget starts from (the folder's, until the cluster's are read); the pools of the `members`'
        clouds are their instances."""
        self.scheduler = scheduler
        self.api = api
        self.clock = clock
        self.queues: dict[str, Queue] = dict(queues or {})
        self.bill = Bill(pools, clock.now())
        #: The fleet's events, as logged (the latest thousand).
        self.events: list[tuple[float, str]] = []
        #: Groups moved to another queue since the last read, where to and from which home queue: not moved
        #: again until the move shows.
        self.moving: dict[str, tuple[str, str]] = {}
        #: The last read's bound, unfinished pods, by node.
        self._on_node: dict[str, list[Pod]] = {}
        self._started = False
        #: The budget state last written to its Queue, and when.
        self._kept: tuple[dict[str, Any], float] | None = None
        self.fleet = HybridFleet(self, clock, pools, hpas, self.queues, burst, budget, cloud_pods)
        self.members = {member.name: member for member in members}
        #: Each node the fleet has had, and its pool (a node removed is no longer among its pool's nodes).
        self._node_pool: dict[str, Pool] = {}
        #: Instances asked of a member and not yet joined (by `_Instances`).
        self.awaiting: dict[str, tuple[Pool, Arrival]] = {}
        for pool in self.fleet.pools.values():
            member = self.members.get(pool.cluster_name)
            if member is not None:
                self.fleet.sizing.provisioners[pool.name] = _Instances(self, member)

    # -- what the scheduling loop does ----------------------------------------------------------------
    def sync_members(self, now: float) -> None:
        """Each member reads both its sides and makes them agree (before the scheduler reads the IDC)."""
        for member in self.members.values():
            member.sync(now)

    def observe(self, nodes: Sequence[Node], pods: Iterable[Pod], queues: Mapping[str, Queue]) -> None:
        """What the last read shows: pods on nodes, the queues, the served pools' nodes (registered at the
        first read, or adopted: nodes of a pool found registered stay its nodes), their notices and links."""
        self._on_node = {}
        for pod in pods:
            if pod.node_name and pod.phase not in _FINISHED:
                self._on_node.setdefault(pod.node_name, []).append(pod)
        self.queues.clear()
        self.queues.update(queues)
        by_pool: dict[str, list[Node]] = {}
        for node in nodes:
            if node.labels.get(POOL_LABEL) in self.fleet.pools:
                by_pool.setdefault(node.labels[POOL_LABEL], []).append(node)
        if not self._started:
            self._start(by_pool)
        self._notices(by_pool)
        self._links(by_pool)
        for member in self.members.values():
            self._follow(member)
        for pool in self.fleet.pools.values():  # a node cordoned for scale-in leaves once its last pod has gone
            for name in [n for n in pool.draining if n not in self._on_node]:
                self.fleet.sizing.emptied(pool, name)

    def _notices(self, by_pool: Mapping[str, list[Node]]) -> None:
        """A pool node with an interruption taint is under a spot notice."""
        for name, pool in self.fleet.pools.items():
            for node in by_pool.get(name, ()):
                if node.name in pool.nodes and any(t.key in NOTICE_TAINTS for t in node.taints):
                    self.fleet.spot.notice(pool, node.name)

    def _links(self, by_pool: Mapping[str, list[Node]]) -> None:
        """A member's cloud is up while the member reaches its API server; another while one of its pools'
        nodes is Ready (none there: as it was)."""
        links = self.fleet.links
        for cloud in links.clouds:
            member = self.members.get(cloud)
            if member is not None:
                if member.link_error != NOT_READ:
                    links.set_link(cloud, member.reachable, member.link_error)
                continue
            present = [n for p in self.fleet.pools.values() if p.cluster_name == cloud for n in by_pool.get(p.name, ())]
            if present and not any(node.ready for node in present):
                links.set_link(cloud, False, "no node of its pools is Ready")
            elif any(node.ready for node in present):
                links.set_link(cloud, True)

    def _follow(self, member: CloudMember) -> None:
        """What a member's instances did: asked-for ones joined (or never came), nodes gone (the cloud took the
        instance back), notices."""
        sizing = self.fleet.sizing
        instances = member.instances()
        for name, (pool, arrival) in list(self.awaiting.items()):
            instance = instances.get(name)
            if instance is None or instance.state is InstanceState.PROVISIONING:
                continue
            del self.awaiting[name]
            if instance.state is InstanceState.READY:
                sizing.provisioned(pool, arrival)
            else:  # the provisioner could not fulfil it: billing stops, the HPA asks again
                pool.arriving.remove(arrival)
                self.billed(pool, -1)
        for pool in [p for p in self.fleet.pools.values() if p.cluster_name == member.name]:
            for name in list(pool.nodes):
                instance = instances.get(name)
                if instance is not None and instance.state is InstanceState.GONE:
                    sizing.remove_node(pool, name)  # taken back: what ran there is lost
                    self.sized(pool)
        for name in member.notices():
            noticed = self._node_pool.get(name)
            if noticed is not None:
                self.fleet.spot.notice(noticed, name)

    def _start(self, by_pool: Mapping[str, list[Node]]) -> None:
        self._started = True
        sizing = self.fleet.sizing
        fresh = []
        for name, pool in self.fleet.pools.items():
            member = self.members.get(pool.cluster_name)
            if member is not None:
                self._adopt(member, pool)
                continue
            found = by_pool.get(name)
            if not found:
                fresh.append(pool)
                continue
            names = sorted(node.name for node in found)
            draining = [node.name for node in found if node.unschedulable]
            created = max((int(n.rsplit("-", 1)[1]) + 1 for n in names if n.rsplit("-", 1)[-1].isdigit()), default=0)
            sizing.restore(pool, names, draining, created)
        sizing.start(fresh)
        self._resume_budget()
        self.fleet.start(PRIORITY_FLEET)

    def _resume_budget(self) -> None:
        """Go on from the budget's state kept on its Queue by an earlier process (the pools' nodes are billed
        again by now: those that ran through the downtime are billed for it)."""
        budget = self.fleet.budget
        queue = self.queues.get(budget.spec.queue) if budget is not None else None
        if budget is None or queue is None:
            return
        text = ((queue.raw.get("metadata") or {}).get("annotations") or {}).get(BUDGET_ANNOTATION)
        if not text:  # the first process: the period starts from the queue as the cluster has it
            budget.original = budget.current = queue
            return
        try:
            kept = json.loads(text)
            original = load_objects([kept["original"]], f"Queue {queue.name} {BUDGET_ANNOTATION}").queues
            now = self.clock.now()
            for name, state in kept["bill"].items():
                self.bill.resume(name, state, now)
            budget.restore(dict(kept["budget"]), queue, original[0] if original else queue, now)
        except (ValueError, KeyError, TypeError) as exc:
            _log.warning("Queue %s: %s unreadable (%s): the budget starts afresh", queue.name, BUDGET_ANNOTATION, exc)

    def keep_budget(self) -> None:
        """Write the budget's period and the bill to its Queue when a threshold or period moved, and every
        BUDGET_WRITE_SECONDS while only the spend does."""
        budget = self.fleet.budget
        if budget is None or not self._started:
            return
        state = budget.state()
        now = self.clock.now()
        if self._kept is not None:
            last, at = self._kept
            if state == last and now - at < BUDGET_WRITE_SECONDS:
                return
        own = budget.original
        spec = own.raw.get("spec")
        kept = {
            "budget": state,
            "bill": {pool: self.bill.state(pool) for pool in self.fleet.pools},
            "original": {  # the queue's own spec, which each period starts from
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": own.name},
                "spec": spec if isinstance(spec, dict) else {"weight": own.weight},
            },
        }
        try:
            self.api.patch_queue(
                budget.spec.queue, {"metadata": {"annotations": {BUDGET_ANNOTATION: json.dumps(kept)}}}
            )
        except Exception as exc:  # kept at the next write
            _log.warning("keeping the budget's state on Queue %s failed: %s", budget.spec.queue, exc)
            return
        self._kept = (state, now)

    def _adopt(self, member: CloudMember, pool: Pool) -> None:
        """A member's pool as its instances are: the ready ones its nodes (cordoned ones draining), those being
        provisioned on their way; a pool with none gets its `spec.count`, asked for."""
        sizing = self.fleet.sizing
        mine = [i for i in member.instances().values() if i.pool == pool.name and i.state is not InstanceState.GONE]
        ready = sorted(i.name for i in mine if i.state is InstanceState.READY)
        draining = [i.name for i in mine if i.state is InstanceState.READY and (i.cordoned or i.releasing)]
        sizing.restore(pool, ready, draining, 0)
        for instance in mine:
            if instance.state is InstanceState.PROVISIONING:
                arrival = Arrival(self.clock.now(), name=instance.name)
                pool.arriving.append(arrival)
                self.billed(pool, 1)
                self.awaiting[instance.name] = (pool, arrival)
        if not mine and pool.spec.count:
            sizing.resize(pool, pool.spec.count)

    def after_cycle(self, now: float) -> float:
        """Overflow after a cycle; when a waiting group will next have waited long enough (inf: none). A group
        waiting in the burst queue whose pods were made again without the cloud toleration gets it back."""
        overflow, core = self.fleet.overflow, self.scheduler.core
        if overflow is not None and core is not None and not self.fleet.links.blocks_burst:
            for job in self.waiting():
                if job.queue == overflow.burst.queue != job.home:
                    for task in core.jobs[job.key].tasks:
                        if not task.pod.node_name and CLOUD_TOLERATION not in task.pod.tolerations:
                            self.api.tolerate_cloud(task.pod.namespace, task.pod.name)
        return self.fleet.after_cycle(now)

    def read(self, groups: Mapping[str, str]) -> None:
        """The last read shows each group in its queue: a move that shows is done."""
        self.moving = {key: move for key, move in self.moving.items() if key in groups and groups[key] != move[0]}

    # -- the fleet's port (tidegate/fleet/port.py) ----------------------------------------------------
    def _member_of(self, node: str) -> CloudMember | None:
        pool = self._node_pool.get(node)
        return self.members.get(pool.cluster_name) if pool is not None else None

    def add_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            pool = self.fleet.pools.get(node.labels.get(POOL_LABEL, ""))
            if pool is None or pool.cluster_name not in self.members:  # a member registers its instances
                self.api.create_node(node_document(node))

    def remove_nodes(self, names: Iterable[str]) -> None:
        for name in names:
            member = self._member_of(name)
            if member is not None:
                member.release(name)
            else:
                self.api.delete_node(name)

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        member = self._member_of(name)
        if member is not None:
            member.cordon(name, not schedulable)
        else:
            self.api.cordon(name, not schedulable)

    def node_ready(self, pool: Pool, node: Node) -> None:
        self._node_pool[node.name] = pool  # registered: the next read hands it to the scheduler

    def evict_node(self, pool: Pool, node: str) -> None:
        for pod in self._on_node.pop(node, []):
            self.api.delete_pod(pod.namespace, pod.name, 0)

    def busy(self, node: str) -> int:
        return len({pod.group or pod.key for pod in self._on_node.get(node, ())})

    def node_requests(self, node: str) -> Resources:
        total = Resources()
        for pod in self._on_node.get(node, ()):
            total = total + pod.requests
        return total

    def pods_on(self, node: str) -> int:
        return len(self._on_node.get(node, ()))

    def queue_figures(self) -> dict[str, QueueFigures]:
        core = self.scheduler.core
        waiting = dict.fromkeys(self.queues, 0)
        running = dict.fromkeys(self.queues, 0)
        held = {name: Resources() for name in self.queues}
        for key, job in core.jobs.items() if core is not None else ():
            queue = job.group.queue
            if queue not in held:
                continue
            if key in core.waiting:  # type: ignore[union-attr]
                waiting[queue] += 1
            else:
                running[queue] += 1
            for task in job.tasks:
                if task.status is TaskStatus.RUNNING:
                    held[queue] = held[queue] + task.pod.requests
        return {
            name: QueueFigures(waiting[name], running[name], held[name], q.weight) for name, q in self.queues.items()
        }

    def billed(self, pool: Pool, change: int) -> None:
        self.bill.change(pool.name, change, self.clock.now())

    def sized(self, pool: Pool) -> None:
        pass  # the pool's nodes are the API server's: a restart reads them back

    def pending_seconds(self) -> Mapping[str, float]:
        return self.scheduler.pending_seconds(self.clock.now())

    def interrupt(self, pool: Pool, node: str, notice_s: float) -> list[str]:
        """The node's pods are deleted with their own grace period: the kubelet runs their preStop hook
        (the checkpoint), and their job controller decides what follows (RestartJob, maxRetry)."""
        pods = self._on_node.get(node, [])
        for pod in pods:
            self.api.delete_pod(pod.namespace, pod.name)
        return sorted({self._group(pod) for pod in pods})

    def waiting(self, outside: str = "") -> list[WaitingJob]:
        core = self.scheduler.core
        out: list[WaitingJob] = []
        for key, job in core.waiting.items() if core is not None else ():
            if key in self.moving or not self.scheduler.movable(key) or job.group.queue == outside:
                continue
            pods = [task.pod for task in job.tasks]
            home = self.scheduler.home_queue(key) or job.group.queue
            out.append(
                WaitingJob(
                    key,
                    job.group.queue,
                    home,
                    waiting_since(job),
                    job.group.namespace,
                    any(pinned_to_idc(pod) for pod in pods),
                    bool(pods),
                    any(pod.node_name for pod in pods),
                )
            )
        return out

    def reason(self, key: str) -> str:
        core = self.scheduler.core
        return core.pending_reason(key) if core is not None else ""

    def admits(self, queue: str, namespace: str) -> bool:
        core = self.scheduler.core
        return core is not None and core.has_queue(queue) and core.namespace_refusal(queue, namespace) is None

    def move(self, key: str, queue: str) -> None:
        core = self.scheduler.core
        assert core is not None
        job = core.jobs[key]
        home = self.scheduler.home_queue(key) or job.group.queue
        to_burst = queue != home
        namespace, name = _split(key)
        pods = [task.pod for task in job.tasks]
        if self.scheduler.declared(key):
            # admitted (Inqueue) by its old queue, it waits for the new one's admission, as a job resubmitted
            self.api.set_group_status(namespace, name, "Pending", f"moved to queue {queue}")
            self.api.overflow(namespace, name, queue, [pod.name for pod in pods], home if to_burst else "")
        else:  # a bare pod: its annotation names its group's queue
            self.api.overflow_pod(namespace, pods[0].name, queue, home if to_burst else "")
        self.moving[key] = (queue, home)
        self.scheduler.forget(key)  # this cycle's decisions about it are its old queue's

    def running_on(self, nodes: Collection[str]) -> list[RunningJob]:
        keys = {self._group(pod) for node in nodes for pod in self._on_node.get(node, ())}
        return [RunningJob(key) for key in sorted(keys)]

    def fail(self, key: str, why: str) -> None:
        core = self.scheduler.core
        job = core.jobs.get(key) if core is not None else None
        for task in job.tasks if job is not None else ():
            if task.pod.node_name:
                self.api.delete_pod(task.pod.namespace, task.pod.name, 0)

    def link_changed(self, cluster: str, up: bool) -> None:
        pass  # the pods' own transfers are theirs

    def spend(self, at: float) -> float:
        return self.bill.spent(at)

    def set_queue(self, queue: Queue) -> Queue:
        """A budget threshold's patch (or a period's restore) of the Queue object; the next read sees it."""
        capability = queue.capability.to_dict() if queue.capability is not None else None
        spec: dict[str, Any] = {"weight": queue.weight, "capability": capability}
        self.api.patch_queue(queue.name, {"spec": spec})
        if queue.state.value != self.queues.get(queue.name, queue).state.value:
            self.api.patch_queue(queue.name, {"status": {"state": queue.state.value}})
        self.queues[queue.name] = queue
        return queue

    def record(self, text: str, kind: EventKind, job: str = "") -> None:
        now = self.clock.now()
        _log.info("%s%s", f"{job}: " if job else "", text)
        self.events.append((now, f"{job}: {text}" if job else text))
        del self.events[:-1000]
        involved = self._involved(kind, job, text)
        if involved is not None:
            try:
                self.api.record_event(involved, _REASONS[kind], text)
            except Exception as exc:  # an event is worth a line, not the decision it reports
                _log.warning("recording the event %r failed: %s", text, exc)

    def _involved(self, kind: EventKind, job: str, text: str) -> dict[str, str] | None:
        """What an event is about: a job's PodGroup, the budget's Queue; None for the rest (logged only)."""
        api_version = f"{VOLCANO_GROUP}/{VOLCANO_VERSION}"
        if job and self.scheduler.declared(job):
            namespace, name = _split(job)
            return {"apiVersion": api_version, "kind": "PodGroup", "namespace": namespace, "name": name}
        budget = self.fleet.budget
        if kind is EventKind.BUDGET and budget is not None:
            return {"apiVersion": api_version, "kind": "Queue", "name": budget.spec.queue}
        return None

    def want_cycle(self) -> None:
        self.scheduler.wake()

    def active(self) -> bool:
        return True

    def failed(self, what: str, exc: Exception) -> None:
        _log.error("%s failed", what, exc_info=exc)

    def _group(self, pod: Pod) -> str:
        core = self.scheduler.core
        return (core.group_of(pod.key) if core is not None else "") or pod.key


class _Instances:
    """A member's pool's new nodes are instances asked of its cloud (NodeClaims), joining once Ready."""

    def __init__(self, fleet: KubeFleet, member: CloudMember) -> None:
        self.fleet, self.member = fleet, member

    def provision(self, pool: Pool, arrival: Arrival) -> None:
        arrival.name = self.member.provision(pool.name)
        self.fleet.awaiting[arrival.name] = (pool, arrival)

    def cancel(self, pool: Pool, arrival: Arrival) -> None:
        self.fleet.awaiting.pop(arrival.name, None)
        self.member.release(arrival.name)


_REASONS = {
    EventKind.SCALING: "Rescaled",
    EventKind.SPOT: "SpotInterruption",
    EventKind.LINK: "LinkChanged",
    EventKind.LINK_AFFECTED: "LinkCut",
    EventKind.OVERFLOW: "Overflowed",
    EventKind.BUDGET: "BudgetThreshold",
}
