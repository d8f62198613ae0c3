"""Properties of one scheduling cycle over random clusters and workloads (hypothesis).

Each example draws nodes (GPU cards with memory, labels, taints, some unschedulable), queues (weights,
capability, deserved, guarantee, optionally a hierarchy) and jobs (gangs, priorities, nodeSelectors,
affinities, tolerations, whole GPUs and GPU slices, some pods already running), runs every action, applies
the Decisions to a copy of the state and checks what must always hold:

- no node over-committed on any resource, no GPU card over-committed, no card both whole and shared;
- no queue above its capability (nor any ancestor's) on a resource newly bound pods ask for; only leaf
  queues take new pods;
- gangs all-or-nothing: a job with new binds, and a job that lost pods, has at least minMember pods;
- nodeSelector, required node affinity and NoSchedule/NoExecute taints hold for every bound pod;
- reclaim never takes a queue below its guarantee; preempt stays inside a queue and below the preemptor's
  (PodGroup's) priority; reclaim only takes from other, reclaimable queues; neither evicts a pod marked
  volcano.sh/preemptable: false (or of a PodGroup so marked), nor evicts or pipelines for a pod whose
  preemptionPolicy is Never;
- a pipelined pod really fits its node once its victims leave (resources and a GPU card);
- the same snapshot gives the same Decisions.

The main properties run 1,000 examples each; one more steers hypothesis (target) towards many evictions,
and one plays three cycles in a row, applying each cycle's Decisions as an adapter would.
"""

from __future__ import annotations

import copy
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st
from scheduler_builders import CLOUD_TAINT, PREFER_IDC, TOLERATE_CLOUD, Cluster, Job, conf, req, required, taint

from tidegate.model.objects import (
    NODE_TYPE_LABEL,
    Node,
    NodeAffinity,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PreemptionPolicy,
    Queue,
    SchedulerConfiguration,
    TaintEffect,
    Toleration,
)
from tidegate.model.resources import GPU_MEMORY, GPU_MILLI, NVIDIA_GPU, PODS, Resources
from tidegate.scheduler.node_table import card_count
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Decisions, Snapshot

ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"
BLOCKING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
PREFER_TAINT = taint("maintenance=soon:PreferNoSchedule")
EXECUTE_TAINT = taint("gpu=faulty:NoExecute")


def config_for(quota: str, drf: bool, binpack: bool) -> SchedulerConfiguration:
    tier2 = ("drf, " if drf else "") + f"predicates, {quota}, nodeorder, gpushare" + (", binpack" if binpack else "")
    return conf(ACTIONS, "priority, gang", tier2)


# -- strategies ---------------------------------------------------------------------------------------------
@st.composite
def node_specs(draw: st.DrawFn, name: str, plain: bool = False) -> Node:
    cloud = draw(st.booleans())
    gpus = draw(st.sampled_from([0, 0, 1, 2, 4, 8]))
    card_mib = draw(st.sampled_from([0, 16384, 24576])) if gpus else 0
    labels = {NODE_TYPE_LABEL: "cloud-spot" if cloud else "idc", "gen": str(draw(st.integers(1, 9)))}
    zone = draw(st.sampled_from([None, "a", "b"]))
    if zone:
        labels["zone"] = zone
    taints = []
    if cloud and draw(st.integers(0, 3)):
        taints.append(CLOUD_TAINT)
    if draw(st.integers(0, 5)) == 0:
        taints.append(PREFER_TAINT)
    if not plain and draw(st.integers(0, 9)) == 0:
        taints.append(EXECUTE_TAINT)
    spec: dict[str, object] = {
        "cpu": draw(st.sampled_from([4, 8, 16, 32])),
        "memory": f"{draw(st.sampled_from([16, 64, 128]))}Gi",
    }
    if gpus:
        spec[NVIDIA_GPU] = gpus
        if card_mib:
            spec[GPU_MEMORY] = gpus * card_mib
    pods = draw(st.sampled_from([None, None, None, 2, 6]))
    if pods is not None:
        spec[PODS] = pods
    return Node(
        name=name,
        allocatable=Resources.parse(spec, name),
        labels=labels,
        taints=tuple(taints),
        unschedulable=not plain and draw(st.integers(0, 11)) == 0,
        gpu_memory_mib=(card_mib,) * gpus if card_mib else (),
    )


REQUESTS = {
    kind: [Resources.parse(spec, kind) for spec in specs]
    for kind, specs in {
        "cpu": [{"cpu": "500m", "memory": "1Gi"}, {"cpu": 2, "memory": "4Gi"}, {"cpu": 4, "memory": "16Gi"}],
        "gpu": [{NVIDIA_GPU: 1, "cpu": 1}, {NVIDIA_GPU: 2, "cpu": 2, "memory": "8Gi"}, {NVIDIA_GPU: 4}],
        "slice": [{GPU_MEMORY: 2048}, {GPU_MEMORY: 8192, "cpu": 1}, {GPU_MEMORY: 12288}],
        "milli": [{GPU_MILLI: 250}, {GPU_MILLI: 500, "cpu": 1}],
        "best-effort": [{}],
    }.items()
}
AFFINITIES: list[NodeAffinity | None] = [
    None,
    None,
    PREFER_IDC,
    required([req("zone", "In", "a", "b")]),
    required([req("zone", "NotIn", "b")], [req("gen", "Gt", "6")]),
    required([req("zone", "DoesNotExist")]),
    required([req("gen", "Lt", "4"), req("zone", "Exists")]),
]
TOLERATIONS: list[tuple[Toleration, ...]] = [
    (),
    (),
    (TOLERATE_CLOUD,),
    (Toleration(operator="Exists"),),
    (Toleration(key="gpu", operator="Exists", effect=TaintEffect.NO_EXECUTE), TOLERATE_CLOUD),
]


class Scenario:
    def __init__(self, snapshot: Snapshot, config: SchedulerConfiguration, hierarchical: bool) -> None:
        self.snapshot, self.config, self.hierarchical = snapshot, config, hierarchical

    def __repr__(self) -> str:
        """A compact listing, so a failing example can be read (and rebuilt) at a glance."""
        lines = [f"config: {[o.name for t in self.config.tiers for o in t.plugins]}"]
        for n in self.snapshot.nodes:
            taints = ",".join(str(t) for t in n.taints)
            lines.append(
                f"node {n.name} {n.allocatable!r} cards={n.gpu_memory_mib or card_count(n)} labels={n.labels} "
                f"taints=[{taints}] unschedulable={n.unschedulable}"
            )
        for q in self.snapshot.queues:
            lines.append(
                f"queue {q.name} w={q.weight} cap={q.capability!r} deserved={q.deserved!r} "
                f"guarantee={q.guarantee!r} parent={q.parent!r} reclaimable={q.reclaimable} priority={q.priority}"
            )
        for g in self.snapshot.groups:
            lines.append(
                f"group {g.name} queue={g.queue} min={g.min_member} minres={g.min_resources!r} prio={g.priority} "
                f"preemptable={g.preemptable} {g.phase.value}"
            )
        for p in self.snapshot.pods:
            where = f"on {p.node_name} cards={p.gpu_indices}" if p.node_name else p.phase.value
            lines.append(
                f"  pod {p.name} {p.requests!r} prio={p.priority} preemptable={p.preemptable} "
                f"policy={p.preemption_policy.value} sel={p.node_selector} aff={p.affinity} "
                f"tol={[(t.key, t.operator, t.value, t.effect) for t in p.tolerations]} {where}"
            )
        return "\n".join(lines)


@st.composite
def queue_specs(draw: st.DrawFn, hierarchical: bool) -> list[Queue]:
    count = draw(st.integers(1, 4))
    queues = []
    # Capabilities of 0 too: nvidia.com/gpu 0 is a cap of no GPUs, cpu 0 is no cap (zeros kept, as the loader does).
    if hierarchical:
        org_gpu = draw(st.sampled_from([0, 2, 4, 8]))
        org_namespaces = draw(st.sampled_from([(), (), ("default", "team-a"), ("team-a",)]))
        org_capability = Resources.parse({NVIDIA_GPU: org_gpu}, "org", keep_zeros=True)
        queues.append(Queue("org", capability=org_capability, namespaces=org_namespaces))
    for i in range(count):
        cap_gpu = draw(st.sampled_from([None, None, 0, 1, 2, 4, 8, 16]))
        cap_cpu = draw(st.sampled_from([None, None, None, 0, 8, 32]))
        capability = {k: v for k, v in ((NVIDIA_GPU, cap_gpu), ("cpu", cap_cpu)) if v is not None}
        guarantee_gpu = draw(st.sampled_from([0, 0, 0, 1, 2, 4]))
        if cap_gpu is not None:
            guarantee_gpu = min(guarantee_gpu, cap_gpu)
        guarantee_cpu = draw(st.sampled_from([0, 0, 2]))
        if cap_cpu:  # a cpu capability of 0 is no cap
            guarantee_cpu = min(guarantee_cpu, cap_cpu)
        deserved = draw(st.sampled_from([None, None, 1, 2, 4, 8]))
        queues.append(
            Queue(
                name=f"q{i}",
                weight=draw(st.integers(1, 4)),
                capability=Resources.parse(capability, "cap", keep_zeros=True) if capability else None,
                deserved=None if deserved is None else Resources.parse({NVIDIA_GPU: deserved}, "deserved"),
                guarantee=Resources.parse({NVIDIA_GPU: guarantee_gpu, "cpu": guarantee_cpu}, "guarantee"),
                reclaimable=draw(st.integers(0, 5)) > 0,
                # Now and then a parent that does not exist: that queue takes nothing, the others go on.
                parent=draw(st.sampled_from(["org", "", "org", "org", "", "nope"])) if hierarchical else "",
                priority=draw(st.sampled_from([0, 0, 0, 1])),
                # Now and then a queue that takes one namespace's work only (tidegate.io/namespaces).
                namespaces=draw(st.sampled_from([(), (), (), ("team-a",), ("default",)])),
            )
        )
    return queues


class Placer:
    """First-fit placement of the pods that are already running, so the initial state is consistent."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.used: list[Counter[str]] = [Counter() for _ in nodes]
        self.cards = [
            [
                {"whole": False, "mem": 0, "milli": 0, "size": (n.gpu_memory_mib or (0,) * card_count(n))[c]}
                for c in range(card_count(n))
            ]
            for n in nodes
        ]

    def place(self, pod: Pod, start: int) -> bool:
        for offset in range(len(self.nodes)):
            row = (start + offset) % len(self.nodes)
            cards = self._cards(pod, row)
            if cards is None or not self._fits(pod, row):
                continue
            self.used[row].update({**pod.requests, PODS: 1})
            whole, mem, milli = gpu_ask(pod)
            for c in cards:
                card = self.cards[row][c]
                if whole:
                    card["whole"] = True
                else:
                    card["mem"] += mem
                    card["milli"] += milli
            pod.node_name, pod.phase, pod.gpu_indices = self.nodes[row].name, PodPhase.RUNNING, cards
            return True
        return False

    def _fits(self, pod: Pod, row: int) -> bool:
        node = self.nodes[row]
        want = Counter({**pod.requests, PODS: 1})
        return all(self.used[row][name] + amount <= allocatable(node, name) for name, amount in want.items())

    def _cards(self, pod: Pod, row: int) -> tuple[int, ...] | None:
        whole, mem, milli = gpu_ask(pod)
        cards = self.cards[row]
        if whole:
            free = [i for i, c in enumerate(cards) if not c["whole"] and not c["mem"] and not c["milli"]]
            return tuple(free[:whole]) if len(free) >= whole else None
        if mem or milli:
            for i, c in enumerate(cards):
                if not c["whole"] and c["mem"] + mem <= c["size"] and c["milli"] + milli <= 1000:
                    return (i,)
            return None
        return ()


def allocatable(node: Node, resource: str) -> int:
    """What the node offers; unlimited pods and whole cards' worth of gpu-milli when it does not say."""
    if resource not in node.allocatable:
        if resource == PODS:
            return 10**9
        if resource == GPU_MILLI:
            return card_count(node) * 1000 * 1000
    return node.allocatable[resource]


def gpu_ask(pod: Pod) -> tuple[int, int, int]:
    """(whole cards, MiB of one card, thousandths of one card), as the scheduler reads a pod."""
    mem, milli = pod.requests[GPU_MEMORY] // 1000, pod.requests[GPU_MILLI] // 1000
    whole = 0 if (mem or milli) else -(-pod.requests[NVIDIA_GPU] // 1000)
    return whole, mem, milli


@st.composite
def scenarios(draw: st.DrawFn, quota: str | None = None, pressure: bool = False) -> Scenario:
    """A random cluster and workload; with pressure, always contended and new jobs are single-pod gangs."""
    quota = quota or draw(st.sampled_from(["proportion", "capacity"]))
    hierarchical = quota == "capacity" and draw(st.booleans())
    # Half the examples are contended: few plain nodes, mostly filled by running jobs, with new jobs that
    # have few placement constraints, so preempt and reclaim have victims to choose from.
    contended = pressure or draw(st.booleans())
    node_count = draw(st.integers(1, 3) if contended else st.integers(1, 8))
    nodes = [draw(node_specs(f"n{i}", plain=contended)) for i in range(node_count)]
    queues = draw(queue_specs(hierarchical))
    leaves = [q.name for q in queues if q.name != "org"]
    placer = Placer(nodes)
    groups, pods = [], []
    # Jobs come in two waves: the first is mostly running already (at low priority), the second arrives now,
    # so preempt and reclaim find work to do.
    count = draw(st.integers(4, 12) if contended else st.integers(1, 12))
    first_wave = draw(st.integers(count // 2, count - 1) if contended else st.integers(0, count))
    for j in range(count):
        old = j < first_wave
        name = f"j{j}"
        kind = draw(st.sampled_from(list(REQUESTS)))
        requests = draw(st.sampled_from(REQUESTS[kind]))
        replicas = draw(st.integers(1, 4))
        min_member = 1 if pressure and not old else draw(st.integers(1, replicas))
        queue = draw(st.sampled_from([*leaves, *leaves, "default", *(["org"] if hierarchical else [])]))
        priority = draw(st.sampled_from([0, 10] if old else [0, 10, 100, 100]))
        # The pods' own priority (their task's) is mostly the job's; now and then another, which must not
        # change the job's (Volcano's job priority is its PodGroup's).
        pod_priority = draw(st.sampled_from([priority, priority, priority, 0, 1000]))
        # Now and then pods that may never be evicted (volcano.sh/preemptable: false on them or their
        # PodGroup) and pods that never preempt (preemptionPolicy: Never).
        pods_preemptable = draw(st.sampled_from([True, True, True, False]))
        group_preemptable = draw(st.sampled_from([None, None, None, True, False]))
        policy = draw(st.sampled_from([PreemptionPolicy.PREEMPT_LOWER_PRIORITY] * 3 + [PreemptionPolicy.NEVER]))
        min_resources = draw(st.sampled_from([Resources(), Resources(), requests.scaled(min_member)]))
        selector = {} if contended else draw(st.sampled_from([{}, {}, {}, {"zone": "a"}]))
        affinity = draw(st.sampled_from(AFFINITIES[:3] if contended else AFFINITIES))
        tolerations = draw(st.sampled_from(TOLERATIONS[2:] if contended else TOLERATIONS))
        namespace = draw(st.sampled_from(["default", "default", "team-a"]))
        runs = [replicas] if contended else [replicas, replicas, min_member, replicas - 1, 0]
        running = draw(st.sampled_from(runs)) if old else 0
        job_pods = [
            Pod(
                name=f"{name}-{i}",
                namespace=namespace,
                requests=requests,
                node_selector=dict(selector),
                affinity=affinity,
                tolerations=tolerations,
                priority=pod_priority,
                preemptable=pods_preemptable,
                preemption_policy=policy,
                group=name,
                created=float(j),
            )
            for i in range(replicas)
        ]
        placed = sum(placer.place(p, draw(st.integers(0, len(nodes) - 1))) for p in job_pods[:running])
        if placed and placed < replicas and draw(st.integers(0, 4)) == 0:
            job_pods[-1].phase = PodPhase.SUCCEEDED
        if placed >= min_member:
            phase = PodGroupPhase.RUNNING
        else:
            phase = PodGroupPhase.INQUEUE if placed or draw(st.integers(0, 3)) == 0 else PodGroupPhase.PENDING
        groups.append(
            PodGroup(
                name=name,
                namespace=namespace,
                queue=queue,
                min_member=min_member,
                min_resources=min_resources,
                priority=priority,
                phase=phase,
                preemptable=group_preemptable,
                created=float(j),
            )
        )
        pods.extend(job_pods)
    snapshot = Snapshot(nodes=nodes, queues=queues, groups=groups, pods=pods)
    return Scenario(snapshot, config_for(quota, draw(st.booleans()), draw(st.booleans())), hierarchical)


# -- the invariants ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """A snapshot and its Decisions, with the look-ups the checks need."""

    snapshot: Snapshot
    decisions: Decisions

    def __post_init__(self) -> None:
        self.pods = {p.key: p for p in self.snapshot.pods}
        self.nodes = {n.name: n for n in self.snapshot.nodes}
        self.groups = {g.key: g for g in self.snapshot.groups}
        self.queues = {q.name: q for q in self.snapshot.queues}
        self.queues.setdefault("default", Queue("default"))  # the session adds it when missing
        self.bound = {b.pod: b for b in self.decisions.binds}
        self.evicted = {e.pod: e for e in self.decisions.evictions}
        self.pipelined = {p.pod: p for p in self.decisions.pipelined}

    def group_of(self, pod: Pod) -> PodGroup:
        return self.groups[f"{pod.namespace}/{pod.group}"]

    def queue_of(self, pod: Pod) -> str:
        return self.group_of(pod).queue

    def running(self) -> list[Pod]:
        return [p for p in self.snapshot.pods if p.node_name and p.phase is PodPhase.RUNNING]

    def chain(self, name: str) -> list[str]:
        """The queue and its ancestors (hierarchy by `parent`, root excluded)."""
        out, seen = [], set()
        while name and name in self.queues and name not in seen:
            out.append(name)
            seen.add(name)
            name = self.queues[name].parent
        return out


def check_decisions_are_well_formed(o: Outcome) -> None:
    assert len(o.bound) == len(o.decisions.binds), "a pod is bound twice"
    assert len(o.evicted) == len(o.decisions.evictions), "a pod is evicted twice"
    for key in o.bound:
        pod = o.pods[key]
        assert not pod.node_name and pod.phase is PodPhase.PENDING, f"{key} was not pending"
        assert key not in o.pipelined, f"{key} both bound and pipelined"
    for key, evict in o.evicted.items():
        pod = o.pods[key]
        assert pod.phase is PodPhase.RUNNING and pod.node_name == evict.node, f"{key} was not running on {evict.node}"
    for key in o.pipelined:
        pod = o.pods[key]
        assert not pod.node_name and pod.phase is PodPhase.PENDING, f"pipelined {key} was not pending"
    assert all(p.reason for p in o.decisions.pending), "a pending job without a reason"


def check_nodes_and_cards(o: Outcome) -> None:
    """Running pods (evicted ones still hold their resources until they leave) plus new binds fit every node
    and every card."""
    used: dict[str, Counter[str]] = defaultdict(Counter)
    cards: dict[tuple[str, int], list[tuple[str, int, int, bool]]] = defaultdict(list)
    holders: list[tuple[Pod, str, tuple[int, ...]]] = [(p, p.node_name, p.gpu_indices) for p in o.running()]
    holders += [(o.pods[k], b.node, b.gpu_indices) for k, b in o.bound.items()]
    for pod, node_name, indices in holders:
        used[node_name].update({**pod.requests, PODS: 1})
        whole, mem, milli = gpu_ask(pod)
        for c in indices:
            cards[(node_name, c)].append((pod.key, mem, milli, bool(whole)))
    for name, amounts in used.items():
        node = o.nodes[name]
        for resource, amount in amounts.items():
            assert amount <= allocatable(node, resource), f"{name} over-committed on {resource}"
    for key, bind in o.bound.items():
        whole, mem, milli = gpu_ask(o.pods[key])
        node = o.nodes[bind.node]
        assert all(0 <= c < card_count(node) for c in bind.gpu_indices), f"{key}: no such card {bind.gpu_indices}"
        assert len(set(bind.gpu_indices)) == len(bind.gpu_indices), f"{key}: a card twice"
        expected = whole if whole else (1 if (mem or milli) else 0)
        assert len(bind.gpu_indices) == expected, f"{key} asked {expected} card(s), got {bind.gpu_indices}"
    for (name, c), users in cards.items():
        node = o.nodes[name]
        size = (node.gpu_memory_mib or (0,) * card_count(node))[c]
        wholes = [u for u in users if u[3]]
        if wholes:
            assert len(users) == 1, f"card {c} of {name} taken whole and shared: {users}"
        else:
            assert sum(u[1] for u in users) <= size, f"card {c} of {name} over-committed on memory: {users}"
            assert sum(u[2] for u in users) <= 1000, f"card {c} of {name} over-committed on milli: {users}"


def check_queue_capability(o: Outcome) -> None:
    """A queue (and each ancestor) stays within its capability on every resource new binds asked for.
    As in Volcano, a declared 0 is a cap of 0 (nvidia.com/gpu 0: no new GPU pods), except for cpu and
    memory, where 0 is no cap."""
    usage: dict[str, Counter[str]] = defaultdict(Counter)
    asked: dict[str, set[str]] = defaultdict(set)
    for pod in o.running():
        for level in o.chain(o.queue_of(pod)):
            usage[level].update(pod.requests)
    for key in o.bound:
        pod = o.pods[key]
        for level in o.chain(o.queue_of(pod)):
            usage[level].update(pod.requests)
            asked[level].update(r for r, v in pod.requests.items() if v)
    parents = {q.parent for q in o.queues.values()}
    for key in o.bound:
        assert o.queue_of(o.pods[key]) not in parents, f"{key} bound in a queue with child queues"
    for name, resources in asked.items():
        capability = o.queues[name].capability
        if capability is None:
            continue
        for resource in resources:
            if resource in ("cpu", "memory") and capability[resource] == 0:
                continue
            if resource in capability:
                assert usage[name][resource] <= capability[resource], f"queue {name} above capability of {resource}"


def check_gangs(o: Outcome) -> None:
    """A job that got new binds or lost pods has at least minMember pods running or done afterwards."""
    touched = {o.pods[k].group for k in o.bound} | {o.pods[k].group for k in o.evicted}
    members: Counter[str] = Counter()
    for pod in o.snapshot.pods:
        if (
            pod.key in o.bound
            or pod.phase is PodPhase.SUCCEEDED
            or (pod.node_name and pod.phase is PodPhase.RUNNING and pod.key not in o.evicted)
        ):
            members[pod.group] += 1
    for name in touched:
        (group,) = [g for g in o.groups.values() if g.name == name]  # job names are unique across namespaces
        lost = any(o.pods[k].group == name for k in o.evicted)
        if lost and group.min_member <= 1 and not any(o.pods[k].group == name for k in o.bound):
            continue  # a one-pod gang may go as a whole (gang plugin: min_available <= 1)
        assert members[name] >= group.min_member, f"gang {name}: {members[name]}/{group.min_member}"


def tolerated(tolerations: Iterable[Toleration], node: Node) -> bool:
    return all(any(t.tolerates(taint) for t in tolerations) for taint in node.taints if taint.effect in BLOCKING)


def affinity_matches(affinity: NodeAffinity | None, labels: dict[str, str]) -> bool:
    if affinity is None or affinity.required is None:
        return True
    return any(term.matches(labels) for term in affinity.required)


def check_queue_namespaces(o: Outcome) -> None:
    """No pod is bound or pipelined in a queue that, or whose ancestor, does not take its namespace."""
    for key in [*o.bound, *o.pipelined]:
        pod = o.pods[key]
        for name in o.chain(o.queue_of(pod)):
            allowed = o.queues[name].namespaces
            assert not allowed or pod.namespace in allowed, f"{key} placed in {name}, which takes {allowed}"


def check_placement_constraints(o: Outcome) -> None:
    """Bound and pipelined pods sit on schedulable nodes that match their nodeSelector and required affinity
    and whose NoSchedule/NoExecute taints they tolerate."""
    placed = [(k, b.node) for k, b in o.bound.items()] + [(k, p.node) for k, p in o.pipelined.items()]
    for key, name in placed:
        pod, node = o.pods[key], o.nodes[name]
        assert node.ready and not node.unschedulable, f"{key} placed on unschedulable {name}"
        assert all(node.labels.get(k) == v for k, v in pod.node_selector.items()), f"{key}: nodeSelector on {name}"
        assert affinity_matches(pod.affinity, node.labels), f"{key}: required affinity on {name}"
        assert tolerated(pod.tolerations, node), f"{key}: untolerated taint on {name}"


def check_pipelined_fit(o: Outcome) -> None:
    """A pipelined pod waits for room that the evictions really free: on its node, what stays (running minus
    evicted), new binds and the pipelined pods fit (Volcano's FutureIdle), and some cards could take it."""
    for name in {p.node for p in o.decisions.pipelined}:
        node = o.nodes[name]
        staying = [p for p in o.running() if p.node_name == name and p.key not in o.evicted]
        arriving = [o.pods[k] for k, b in o.bound.items() if b.node == name]
        waiting = [o.pods[k] for k, p in o.pipelined.items() if p.node == name]
        used: Counter[str] = Counter()
        for pod in staying + arriving + waiting:
            used.update({**pod.requests, PODS: 1})
        for resource, amount in used.items():
            assert amount <= allocatable(node, resource), f"pipelined pods overflow {name} on {resource}"
        cards = [
            {"whole": False, "mem": 0, "milli": 0, "size": size}
            for size in (node.gpu_memory_mib or (0,) * card_count(node))
        ]
        holders = [(p, p.gpu_indices) for p in staying]
        holders += [(o.pods[k], b.gpu_indices) for k, b in o.bound.items() if b.node == name]
        for pod, indices in holders:
            whole, mem, milli = gpu_ask(pod)
            for c in indices:
                cards[c]["whole"] |= bool(whole)
                cards[c]["mem"] += mem
                cards[c]["milli"] += milli
        for pod in waiting:
            whole, mem, milli = gpu_ask(pod)
            if whole:
                free = [c for c in cards if not c["whole"] and not c["mem"] and not c["milli"]]
                assert len(free) >= whole, f"pipelined {pod.key} needs {whole} free card(s) on {name}"
            elif mem or milli:
                assert any(
                    not c["whole"] and c["mem"] + mem <= c["size"] and c["milli"] + milli <= 1000 for c in cards
                ), f"pipelined {pod.key}: no card on {name} can take its slice"


NEVER = PreemptionPolicy.NEVER
PREEMPTED = re.compile(r"preempted by (?P<job>\S+) \(higher priority in queue (?P<queue>\S+)\)")
RECLAIMED = re.compile(r"reclaimed by queue (?P<queue>\S+) for (?P<job>\S+)")


def check_evictions(o: Outcome) -> None:
    """Preempt stays in the queue and takes only lower-priority jobs (by their PodGroups' priority, whatever
    their pods' own); reclaim takes only from other, reclaimable queues and never below their guarantee."""
    job_priority = {group.name: group.priority for group in o.snapshot.groups}
    reclaimed_queues = set()
    for key, evict in o.evicted.items():
        victim = o.pods[key]
        assert victim.preemptable, f"{key} is marked volcano.sh/preemptable: false, yet evicted"
        assert o.group_of(victim).preemptable is not False, f"{key}'s PodGroup is marked not preemptable"
        if m := PREEMPTED.fullmatch(evict.reason):
            preemptor = o.groups[m["job"]]
            assert o.queue_of(victim) == preemptor.queue == m["queue"], f"{key} preempted across queues"
            assert job_priority[victim.group] < job_priority[preemptor.name], f"{key} preempted by a peer"
        elif m := RECLAIMED.fullmatch(evict.reason):
            assert o.queue_of(victim) != m["queue"], f"{key} reclaimed by its own queue"
            assert o.queues[o.queue_of(victim)].reclaimable, f"{key} reclaimed from a non-reclaimable queue"
            reclaimed_queues.add(o.queue_of(victim))
        else:
            raise AssertionError(f"unexplained eviction {evict}")
        evictor = m["job"].rpartition("/")[2]
        waiting = [p for p in o.snapshot.pods if p.group == evictor and not p.node_name and p.phase is PodPhase.PENDING]
        assert any(p.preemption_policy is not NEVER for p in waiting), (
            f"{key} evicted for {evictor}, whose pods never preempt"
        )
    for key in o.pipelined:  # only preempt and reclaim pipeline a pod, for the room they free
        assert o.pods[key].preemption_policy is not NEVER, f"{key} never preempts, yet was pipelined"
    # Allocation after the cycle: running minus evicted, plus new binds and pipelined pods.
    final: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in o.snapshot.pods:
        counted = (pod.node_name and pod.phase is PodPhase.RUNNING and pod.key not in o.evicted) or (
            pod.key in o.bound or pod.key in o.pipelined
        )
        if counted:
            final[o.queue_of(pod)].update(pod.requests)
    for name in reclaimed_queues:
        for resource, amount in o.queues[name].guarantee.items():
            assert final[name][resource] >= amount, f"queue {name} reclaimed below its guarantee of {resource}"


def record(o: Outcome) -> None:
    """Hypothesis statistics (pytest --hypothesis-show-statistics): what the examples exercised."""
    kinds = {"preempted" if e.reason.startswith("preempted") else "reclaimed" for e in o.decisions.evictions}
    for kind in sorted(kinds):
        event(f"evictions: {kind}")
    if o.decisions.binds:
        event("binds")
    if o.decisions.pipelined:
        event("pipelined")
    if any(gpu_ask(o.pods[k])[0] for k in o.bound):
        event("binds: whole GPUs")
    if any(gpu_ask(o.pods[k])[1] or gpu_ask(o.pods[k])[2] for k in o.bound):
        event("binds: GPU slices")
    if any(g.reason.startswith("gang:") for g in o.decisions.pending):
        event("pending: gang")
    if any("capability" in g.reason for g in o.decisions.pending):
        event("pending: capability")
    if any("takes work from namespace" in g.reason for g in o.decisions.pending):
        event("pending: namespace")


def check_all(snapshot: Snapshot, decisions: Decisions) -> None:
    outcome = Outcome(snapshot, decisions)
    record(outcome)
    check_decisions_are_well_formed(outcome)
    check_nodes_and_cards(outcome)
    check_queue_capability(outcome)
    check_gangs(outcome)
    check_placement_constraints(outcome)
    check_queue_namespaces(outcome)
    check_evictions(outcome)
    check_pipelined_fit(outcome)


def run(scenario: Scenario) -> Decisions:
    return schedule(scenario.snapshot, scenario.config)


def run_twice(scenario: Scenario) -> Decisions:
    """Schedule the snapshot twice: the same Decisions both times, and the snapshot left exactly as it was
    (schedule is a pure function of its input)."""
    before = copy.deepcopy(scenario.snapshot)
    decisions = run(scenario)
    assert run(scenario) == decisions, "the same snapshot gave different decisions"
    assert scenario.snapshot == before, "schedule() changed its input snapshot"
    return decisions


# -- properties ---------------------------------------------------------------------------------------------
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios("proportion"))
def test_invariants_hold_under_proportion(scenario: Scenario) -> None:
    check_all(scenario.snapshot, run_twice(scenario))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios("capacity"))
def test_invariants_hold_under_capacity(scenario: Scenario) -> None:
    check_all(scenario.snapshot, run_twice(scenario))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(pressure=True))
def test_invariants_hold_while_evicting(scenario: Scenario) -> None:
    """The same checks, with hypothesis steering towards examples where preempt and reclaim evict many pods."""
    decisions = run(scenario)
    target(float(len(decisions.evictions)), label="evictions")
    check_all(scenario.snapshot, decisions)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_cycle_after_cycle(scenario: Scenario) -> None:
    """Three cycles, each applied like an adapter would (binds start, evicted pods go back to Pending)."""
    snapshot = copy.deepcopy(scenario.snapshot)
    cluster = Cluster(nodes=snapshot.nodes, queues=snapshot.queues)
    pods_by_group: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.pods:
        pods_by_group[pod.group].append(pod)
    cluster.jobs = [Job(g, pods_by_group[g.name]) for g in snapshot.groups]
    for _ in range(3):
        current = cluster.snapshot()
        decisions = schedule(current, scenario.config)
        check_all(current, decisions)
        cluster.apply(decisions)
