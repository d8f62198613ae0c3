"""The long-lived `OnlineScheduler` decides exactly as a fresh `schedule(snapshot)` of the same state, cycle
after cycle, under random histories (hypothesis): nodes joining (some tainted as cloud nodes), leaving,
cordoned and squeezed (another scheduler's pods taking CPU, as `tidegate kube` sees them); gangs arriving
pending or already running on a node (as a restarted control plane hands them over; whole GPUs or GPU
slices, tolerating the cloud or pinned to a rack, now and then never to be evicted or never preempting);
gangs finishing; queues re-weighted and capped; in any order between cycles; with plain configurations and
one whose tier entries switch some plugins' extension points off. `SnapshotCore` is the reference: the
pure scheduler over a snapshot rebuilt from scratch every cycle.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings, target
from hypothesis import strategies as st
from scheduler_builders import CLOUD_TAINT, PROPORTION, TOLERATE_CLOUD, conf, job, node, queue, res

from tidegate.model.objects import (
    LabelSelector,
    PodAffinity,
    PodAffinityTerm,
    PodGroup,
    PodGroupPhase,
    PreemptionPolicy,
    SchedulerConfiguration,
    Tier,
)
from tidegate.model.resources import Resources
from tidegate.scheduler.online import OnlineScheduler
from tidegate.sim.core import SnapshotCore
from tidegate.sim.run import WORKLOAD_RESOURCES

CARDS = 8
CARD_MIB = 40_960
#: Reclaim between queues and preemption by priority too: evicted gangs restart pending, as an engine does.
RECLAIMING = conf(
    "enqueue, allocate, reclaim, preempt, backfill",
    "priority, gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
)

#: Queue a fills two nodes, then b's gang reclaims one, then a high-priority gang of a comes (pipelined).
FILL_THEN_RECLAIM = [
    ("node", True, False),
    ("gang", "a", 1, 8, 0, ""),
    ("cycle",),
    ("gang", "a", 1, 8, 0, ""),
    ("node", True, False),
    ("cycle",),
    ("gang", "b", 1, 8, 0, ""),
    ("cycle",),
    ("cycle",),
    ("gang", "a", 1, 8, 10, ""),
    ("cycle",),
    ("cycle",),
]
SWITCHES = {
    "priority": {"enableTaskOrder": False},
    "drf": {"enableJobOrder": False, "enablePreemptable": False},
    "binpack": {"enableNodeOrder": False},
}
#: Queues a and b under a parent capped at 24 GPUs, shared by the capacity plugin, reclaiming.
HIERARCHY = conf(
    "enqueue, allocate, reclaim, backfill",
    "priority, gang",
    "drf, predicates, capacity, nodeorder, binpack, gpushare",
)
#: RECLAIMING with some plugins' extension points switched off in their tier entries (enableJobOrder ...).
SWITCHED = dataclasses.replace(
    RECLAIMING,
    tiers=tuple(
        Tier(tuple(dataclasses.replace(option, switches=SWITCHES.get(option.name, {})) for option in tier.plugins))
        for tier in RECLAIMING.tiers
    ),
)
#: sla before gang, every job given 2 s: past it a job is admitted over proportion's refusal, and a gang that
#: got part of its pods pipelined keeps its victims' room (the Permit ends the vote before gang's tier).
SLA = conf(
    "enqueue, allocate, reclaim, preempt, backfill",
    "priority, sla",
    "gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
    sla={"sla-waiting-time": "2s"},
)
#: drf with enableHierarchy over the p > a, b tree (hdrf from spec.parent, levels weighted by spec.weight), reclaiming.
HDRF = dataclasses.replace(
    RECLAIMING,
    tiers=(
        RECLAIMING.tiers[0],
        Tier(
            tuple(
                dataclasses.replace(option, switches={"enableHierarchy": True} if option.name == "drf" else {})
                for option in RECLAIMING.tiers[1].plugins
            )
        ),
    ),
)
gang = st.tuples(
    st.just("gang"),
    st.sampled_from(["a", "b"]),
    st.integers(1, 3),
    st.sampled_from([1, 2, 4, 8, "slice"]),
    st.sampled_from([0, 10]),
    st.sampled_from(["", "tolerates-cloud", "rack-r1", "spread", "apart", "near-apart"]),
    # now and then pods never evicted (volcano.sh/preemptable: false) or never preempting (Never)
    st.sampled_from(["", "", "", "not-preemptable", "never"]),
)
cycle = st.tuples(st.just("cycle"))
operation = st.one_of(  # gangs and cycles three times as often as the rest: clusters fill up, queues compete
    gang,
    gang,
    gang,
    cycle,
    cycle,
    cycle,
    st.tuples(st.just("node"), st.booleans(), st.booleans()),
    st.tuples(st.just("capability"), st.sampled_from(["a", "b"]), st.sampled_from([None, 4, 8, 16])),
    st.tuples(st.just("squeeze"), st.integers(0, 20), st.sampled_from([16, 64])),
    st.tuples(st.just("remove"), st.integers(0, 20)),
    st.tuples(st.just("cordon"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("running"), st.sampled_from(["a", "b"]), st.integers(0, 20), st.sampled_from([1, 2, 4])),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("weight"), st.sampled_from(["a", "b"]), st.integers(1, 5)),
)


HOST = "kubernetes.io/hostname"


def selects(key: str, value: str) -> LabelSelector:
    return LabelSelector(((key, value),))


#: Gangs kept a rack apart from each other's pods, and gangs that want to be on a rack with one of them.
PLACEMENT_AFFINITY = {
    "apart": ({"tier": "apart"}, PodAffinity(anti_affinity=(PodAffinityTerm(selects("tier", "apart"), "rack"),))),
    "near-apart": ({}, PodAffinity(affinity=(PodAffinityTerm(selects("tier", "apart"), "rack"),))),
}


class Twins:
    """The same history applied to both cores; `cycle` compares what they decide."""

    def __init__(self, config: SchedulerConfiguration, tree: bool = False) -> None:
        parent = [queue("p", capability={"nvidia.com/gpu": 24})] if tree else []
        queues = [*parent, queue("a", parent="p" if tree else ""), queue("b", parent="p" if tree else "")]
        self.online = OnlineScheduler([], queues, config, resources=WORKLOAD_RESOURCES)
        self.reference = SnapshotCore(queues, config)
        #: Each pending gang as it arrived (an evicted one comes back so).
        self.arrived: dict[str, tuple[PodGroup, list[Any]]] = {}
        self.queues = {q.name: q for q in queues}
        self.nodes: list[str] = []
        self.cards: dict[str, set[int]] = {}  # node -> cards held by running pods
        self.groups: dict[str, list[tuple[str, tuple[int, ...]]]] = {}  # group key -> its pods' (node, cards)
        self.made = 0
        self.now = 0.0
        self.evicted = 0

    def both(self, method: str, *args: Any) -> None:
        getattr(self.online, method)(*args)
        getattr(self.reference, method)(*args)

    def do(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "node":
            self.made += 1
            name = f"n{self.made}"
            self.nodes.append(name)
            self.cards[name] = set()
            labels = {"rack": "r1" if op[1] else "r2", HOST: name}
            taints = [CLOUD_TAINT] if op[2] else []
            made = node(name, cpu=64, gpus=CARDS, gpu_mem_mib=CARD_MIB, labels=labels, taints=taints)
            self.both("add_nodes", [made])
        elif kind == "remove" and self.nodes:
            name = self.nodes.pop(op[1] % len(self.nodes))
            for key in [k for k, pods in self.groups.items() if any(n == name for n, _ in pods)]:
                self._finish(key)  # as a control plane would first: its jobs end (or restart elsewhere)
            self.both("remove_nodes", [name])
            del self.cards[name]
        elif kind == "squeeze" and self.nodes:  # another scheduler's pods take CPU (or give it back)
            name = self.nodes[op[1] % len(self.nodes)]
            current = self.reference.nodes[name]
            allocatable = Resources({**current.allocatable, **Resources.parse({"cpu": op[2]}, "test")})
            self.both("add_nodes", [dataclasses.replace(current, allocatable=allocatable)])
        elif kind == "cordon" and self.nodes:
            self.both("set_schedulable", self.nodes[op[1] % len(self.nodes)], op[2])
        elif kind == "gang":
            _, queue_name, replicas, gpus, priority, placement, *marks = op
            self.made += 1
            ask = {"cpu": 1, "volcano.sh/gpu-memory": 10_240} if gpus == "slice" else {"cpu": 1, "nvidia.com/gpu": gpus}
            gang = job(
                f"g{self.made}",
                queue_name,
                replicas,
                ask,
                min_resources={name: amount * replicas for name, amount in ask.items()},  # enqueue judges them
                priority=priority,
                created=self.now,
                tolerations=[TOLERATE_CLOUD] if placement == "tolerates-cloud" else [],
                node_selector={"rack": "r1"} if placement == "rack-r1" else None,
            )
            for pod in gang.pods:
                pod.preemptable = "not-preemptable" not in marks
                pod.preemption_policy = PreemptionPolicy.NEVER if "never" in marks else pod.preemption_policy
                pod.labels, pod.pod_affinity = PLACEMENT_AFFINITY.get(placement, ({}, None))
                if placement == "spread":  # its pods on distinct nodes
                    pod.labels = {"app": gang.group.name}
                    pod.pod_affinity = PodAffinity(
                        anti_affinity=(PodAffinityTerm(selects("app", pod.labels["app"]), HOST),)
                    )
            self.both("add_group", gang.group, gang.pods)
            self.groups[gang.group.key] = []
            self.arrived[gang.group.key] = (gang.group, gang.pods)
        elif kind == "running" and self.nodes:
            _, queue_name, index, gpus = op
            name = self.nodes[index % len(self.nodes)]
            free = [c for c in range(CARDS) if c not in self.cards[name]]
            if len(free) < gpus:
                return
            cards = tuple(free[:gpus])
            self.made += 1
            gang = job(
                f"r{self.made}",
                queue_name,
                1,
                {"cpu": 1, "nvidia.com/gpu": gpus},
                phase=PodGroupPhase.RUNNING,
                running_on=[name],
                gpu_indices=[cards],
                created=self.now,
            )
            self.both("add_group", gang.group, gang.pods)
            self.cards[name].update(cards)
            self.groups[gang.group.key] = [(name, cards)]
            pending = job(f"r{self.made}", queue_name, 1, {"cpu": 1, "nvidia.com/gpu": gpus}, created=self.now)
            self.arrived[gang.group.key] = (pending.group, pending.pods)
        elif kind == "finish" and self.groups:
            self._finish(sorted(self.groups)[op[1] % len(self.groups)])
        elif kind == "capability":
            cap = None if op[2] is None else res({"nvidia.com/gpu": op[2]})
            self.queues[op[1]] = dataclasses.replace(self.queues[op[1]], capability=cap)
            self.both("set_queue", self.queues[op[1]])
        elif kind == "weight":
            self.queues[op[1]] = dataclasses.replace(self.queues[op[1]], weight=op[2])
            self.both("set_queue", self.queues[op[1]])
        elif kind == "cycle":
            self.cycle()

    def _finish(self, key: str) -> None:
        for name, cards in self.groups.pop(key):
            self.cards[name].difference_update(cards)
        self.both("remove_group", key)

    def cycle(self) -> None:
        self.now += 1.0
        online, reference = self.online.cycle(self.now), self.reference.cycle(self.now)
        assert sorted(map(repr, online.binds)) == sorted(map(repr, reference.binds))
        assert sorted(map(repr, online.evictions)) == sorted(map(repr, reference.evictions))
        assert sorted(map(repr, online.pipelined)) == sorted(map(repr, reference.pipelined))
        for bind in reference.binds:
            self.groups[bind.pod.rsplit("-", 1)[0]].append((bind.node, bind.gpu_indices))
            self.cards[bind.node].update(bind.gpu_indices)
        if reference.evictions:
            event("evicted")
            self.evicted += len(reference.evictions)
        for key in sorted({eviction.pod.rsplit("-", 1)[0] for eviction in reference.evictions}):
            self._finish(key)  # the evicted gang restarts: pending again, as it arrived
            group, pods = self.arrived[key]
            self.both("add_group", group, pods)
            self.groups[key] = []


@pytest.mark.parametrize(
    ("config", "tree"),
    [(PROPORTION, False), (RECLAIMING, False), (HIERARCHY, True), (SWITCHED, False), (SLA, False), (HDRF, True)],
    ids=["allocate", "reclaim-preempt", "capacity-hierarchy", "switched", "sla", "hdrf"],
)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=40))
@example(FILL_THEN_RECLAIM)
def test_the_online_scheduler_decides_as_a_fresh_snapshot_under_any_history(
    config: SchedulerConfiguration, tree: bool, operations: list[tuple[Any, ...]]
) -> None:
    twins = Twins(config, tree)
    for op in operations:
        twins.do(op)
    twins.cycle()
    target(float(twins.evicted))  # steer towards histories that reclaim and preempt
