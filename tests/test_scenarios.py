"""Scenario tests in Volcano's table style: objects in -> binds / evictions / pipelines / statuses out.

Every case is small enough to check by hand; the comments show the arithmetic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
from scheduler_builders import (
    CAPACITY,
    PREFER_IDC,
    PROPORTION,
    TOLERATE_CLOUD,
    Cluster,
    bound,
    cloud_node,
    conf,
    count_by_prefix,
    evicted,
    idc_node,
    job,
    node,
    nodes,
    pending_reason,
    phase_of,
    pipelined,
    queue,
    req,
    required,
    resolve_priorities,
)

from tidegate.model.objects import (
    NodeAffinity,
    NodeSelectorTerm,
    PodGroupPhase,
    PodPhase,
    QueueState,
    SchedulerConfiguration,
    TaintEffect,
    Toleration,
)
from tidegate.model.resources import NVIDIA_GPU
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.plugins.capacity import CapacityPlugin
from tidegate.scheduler.plugins.proportion import ProportionPlugin
from tidegate.scheduler.session import Session

GPU = {NVIDIA_GPU: 1}
RUNNING = PodGroupPhase.RUNNING
INQUEUE = PodGroupPhase.INQUEUE

#: Only the filters, no quota plugin: reasons come from the nodes alone.
NODES_ONLY = conf("enqueue, allocate, backfill", "priority, gang", "predicates, nodeorder, gpushare")
PROPORTION_RECLAIM = conf(
    "enqueue, allocate, reclaim, backfill",
    "priority, gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
)
CAPACITY_RECLAIM = conf(
    "enqueue, allocate, reclaim, backfill",
    "priority, gang",
    "drf, predicates, capacity, nodeorder, binpack, gpushare",
)
PREEMPT = conf(
    "enqueue, allocate, preempt, backfill",
    "priority, gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
)


def gpus(ssn: Session, vector: np.ndarray) -> float:
    """The nvidia.com/gpu entry of a plugin's vector, in cards."""
    return float(vector[ssn.index.col[NVIDIA_GPU]]) / 1000


def session(cluster: Cluster, config: SchedulerConfiguration) -> Session:
    return Session(cluster.snapshot(), config, default_registry())


# -- gang ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GangCase:
    name: str
    free_gpus_on_n0: int  # n0 and n1 have 2 cards each; a running pod of another job holds the rest of n0
    config: SchedulerConfiguration
    binds: int
    reason: str


GANG_CASES = [
    GangCase(
        "room for 3 of 4: nothing binds",
        1,
        NODES_ONLY,
        0,
        "gang: 3/4 pods fit; 0/2 nodes: 2 insufficient nvidia.com/gpu",
    ),
    # With proportion the queue deserves the whole cluster (4 cards): 1 running + 3 placed = 4, the 4th is refused.
    GangCase(
        "room for 3 of 4 under proportion",
        1,
        PROPORTION,
        0,
        "gang: 3/4 pods fit; cluster full: nvidia.com/gpu 4/4 allocated to queue q",
    ),
    GangCase("room for 4 of 4: all bind", 2, NODES_ONLY, 4, ""),
    GangCase("room for 4 of 4 under proportion", 2, PROPORTION, 4, ""),
]


@pytest.mark.parametrize("case", GANG_CASES, ids=lambda c: c.name)
def test_gang_is_never_partially_bound(case: GangCase) -> None:
    busy = 2 - case.free_gpus_on_n0
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=2),
        queues=[queue("q")],
        jobs=[job("gang", "q", replicas=4, min_member=4, requests={**GPU, "cpu": 1})],
    )
    if busy:
        cluster.jobs.append(
            job("busy", "q", 1, {NVIDIA_GPU: busy}, running_on=["n0"], gpu_indices=[(0,)], phase=RUNNING)
        )
    decisions = cluster.schedule(case.config)
    assert len(decisions.binds) == case.binds
    assert set(bound(decisions)) == set(cluster.jobs[0].pod_keys()[: case.binds])
    if case.binds:
        assert phase_of(decisions, "default/gang") is RUNNING
        assert all(p.job != "default/gang" for p in decisions.pending)
    else:
        assert phase_of(decisions, "default/gang") is INQUEUE
        assert pending_reason(decisions, "default/gang") == case.reason


def test_gang_min_member_below_replicas_binds_what_fits() -> None:
    # minMember 2 of 4 replicas, room for 3: the gang is satisfied, 3 bind, one waits with the node reason.
    cluster = Cluster(nodes=[node("n0", gpus=3)], queues=[queue("q")], jobs=[job("j", "q", 4, GPU, min_member=2)])
    decisions = cluster.schedule(NODES_ONLY)
    assert sorted(bound(decisions)) == ["default/j-0", "default/j-1", "default/j-2"]
    assert pending_reason(decisions, "default/j") == "0/1 nodes: 1 insufficient nvidia.com/gpu"


# -- hierarchy (capacity) --------------------------------------------------------------------------------
@pytest.mark.parametrize("child_capability", [None, {NVIDIA_GPU: 16}], ids=["child-unset", "child-larger"])
def test_child_queue_is_capped_by_its_parent(child_capability: dict[str, int] | None) -> None:
    # 4 nodes x 4 cards = 16; org caps nvidia.com/gpu at 8, so its child team gets at most 8 of its 12 pods.
    cluster = Cluster(
        nodes=nodes("n", 4, gpus=4),
        queues=[queue("org", capability={NVIDIA_GPU: 8}), queue("team", parent="org", capability=child_capability)],
        jobs=[job("train", "team", replicas=12, min_member=1, requests=GPU)],
    )
    decisions = cluster.schedule(CAPACITY)
    assert len(decisions.binds) == 8
    # The child inherits the parent's cap (its real capability is min(own, parent's) = 8).
    assert pending_reason(decisions, "default/train") == "queue team at capability nvidia.com/gpu 8/8"
    ssn = session(cluster, CAPACITY)
    plugin = next(p for p in ssn.plugins if isinstance(p, CapacityPlugin))
    assert gpus(ssn, plugin.real_capability["team"]) == 8


def test_only_leaf_queues_take_jobs() -> None:
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=4),
        queues=[queue("org", capability={NVIDIA_GPU: 8}), queue("team", parent="org")],
        jobs=[job("in-parent", "org", 1, GPU), job("in-leaf", "team", 1, GPU)],
    )
    decisions = cluster.schedule(CAPACITY)
    assert bound(decisions) == {"default/in-leaf-0": "n0"}
    assert phase_of(decisions, "default/in-parent") is PodGroupPhase.PENDING
    assert pending_reason(decisions, "default/in-parent") == "queue org has child queues; only leaf queues take jobs"


@pytest.mark.parametrize(
    "queues",
    [
        [queue("org"), queue("lost", parent="nope")],  # parent does not exist
        [queue("org"), queue("lost", parent="loop"), queue("loop", parent="lost")],  # a cycle
    ],
    ids=["missing-parent", "cycle"],
)
def test_queue_outside_the_tree_holds_only_its_own_jobs(queues: list) -> None:
    # A queue the hierarchy cannot reach from root must not take the whole cycle down: its jobs wait with a
    # reason, every other queue schedules as usual.
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[*queues, queue("team", parent="org")],
        jobs=[job("stuck", "lost", 1, GPU), job("fine", "team", 1, GPU)],
    )
    decisions = cluster.schedule(CAPACITY)
    assert list(bound(decisions)) == ["default/fine-0"]
    assert pending_reason(decisions, "default/stuck").startswith("queue lost is not in the queue tree")


@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_closed_queue_takes_no_pods_not_even_best_effort(config: SchedulerConfiguration) -> None:
    # The job was admitted before its queue was closed; neither allocate nor backfill may place its pods.
    closed = queue("q")
    closed.state = QueueState.CLOSED
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[closed],
        jobs=[job("gpu", "q", 1, GPU, phase=INQUEUE), job("be", "q", 1, {}, phase=INQUEUE)],
    )
    decisions = cluster.schedule(config)
    assert not decisions.binds
    assert pending_reason(decisions, "default/gpu") == "queue q is Closed"
    assert pending_reason(decisions, "default/be") == "queue q is Closed"


@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_a_queue_places_no_pod_of_a_namespace_it_does_not_take(config: SchedulerConfiguration) -> None:
    # team-b's jobs wait, whether pending, admitted before the queue was edited, or best-effort; team-a's run.
    team = dataclasses.replace(queue("q"), namespaces=("team-a",))
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[team],
        jobs=[
            job("new", "q", 1, GPU, namespace="team-b"),
            job("gpu", "q", 1, GPU, phase=INQUEUE, namespace="team-b"),
            job("be", "q", 1, {}, phase=INQUEUE, namespace="team-b"),
            job("mine", "q", 1, GPU, namespace="team-a"),
        ],
    )
    decisions = cluster.schedule(config)
    assert list(bound(decisions)) == ["team-a/mine-0"]
    for key in ("team-b/new", "team-b/gpu", "team-b/be"):
        assert pending_reason(decisions, key) == "queue q takes work from namespace(s) team-a only, not team-b"


def test_a_child_queue_places_no_pod_of_a_namespace_its_parent_does_not_take() -> None:
    org = dataclasses.replace(queue("org"), namespaces=("team-a",))
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[org, queue("team", parent="org")],
        jobs=[job("theirs", "team", 1, GPU, namespace="team-b"), job("mine", "team", 1, GPU, namespace="team-a")],
    )
    decisions = cluster.schedule(CAPACITY)
    assert list(bound(decisions)) == ["team-a/mine-0"]
    assert pending_reason(decisions, "team-b/theirs").startswith("queue org takes work from namespace(s) team-a")


def test_parent_queue_takes_no_best_effort_pods_either() -> None:
    # A job admitted while org was still a leaf; now org has a child, so it takes nothing.
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[queue("org"), queue("team", parent="org")],
        jobs=[job("be", "org", 1, {}, phase=INQUEUE)],
    )
    decisions = cluster.schedule(CAPACITY)
    assert not decisions.binds
    assert pending_reason(decisions, "default/be") == "queue org has child queues; only leaf queues take jobs"


def test_siblings_share_the_parent_cap() -> None:
    # org caps 8 cards; two children ask 6 each. Together they never exceed 8.
    cluster = Cluster(
        nodes=nodes("n", 4, gpus=4),
        queues=[
            queue("org", capability={NVIDIA_GPU: 8}),
            queue("a", parent="org", deserved={NVIDIA_GPU: 4}),
            queue("b", parent="org", deserved={NVIDIA_GPU: 4}),
        ],
        jobs=[job("ja", "a", 6, GPU, min_member=1), job("jb", "b", 6, GPU, min_member=1)],
    )
    decisions = cluster.schedule(CAPACITY)
    counts = count_by_prefix(bound(decisions), "default/ja-", "default/jb-")
    assert sum(counts.values()) == 8
    # Queues take turns by share of deserved, so the split is even.
    assert counts == {"default/ja-": 4, "default/jb-": 4}


# -- proportion: water-filling worked by hand --------------------------------------------------------------
@dataclass(frozen=True)
class WaterCase:
    name: str
    total_gpus: int  # on nodes of 2 cards each
    weights: tuple[int, int, int]
    requests: tuple[int, int, int]  # pods of one card each
    deserved: tuple[float, float, float]


WATER_CASES = [
    # 30 cards, weights 1/2/3 (sum 6), requests 20/20/3:
    #   round 1: 30 * 1/6 = 5, 30 * 2/6 = 10, 30 * 3/6 = 15 -> q3 capped at its request 3 (met).
    #            remaining = 30 - (5 + 10 + 3) = 12
    #   round 2: weights 1/2 (sum 3): q1 += 12 * 1/3 = 4 -> 9, q2 += 12 * 2/3 = 8 -> 18; remaining 0.
    WaterCase("1/2/3 of 30, q3 small", 30, (1, 2, 3), (20, 20, 3), (9, 18, 3)),
    # 40 cards, weights 2/1/1 (sum 4), requests 4/30/12:
    #   round 1: 20, 10, 10 -> q1 capped at 4 (met); remaining = 40 - 24 = 16
    #   round 2: weights 1/1: q2 += 8 -> 18, q3 += 8 -> 18 capped at 12 (met); remaining = 16 - 8 - 2 = 6
    #   round 3: q2 alone: += 6 -> 24; remaining 0.   4 + 24 + 12 = 40.
    WaterCase("2/1/1 of 40, three rounds", 40, (2, 1, 1), (4, 30, 12), (4, 24, 12)),
    # Everyone asks for more than the weights give: a plain split, 30 * 1/6, 2/6, 3/6.
    WaterCase("1/2/3 of 30, all hungry", 30, (1, 2, 3), (20, 20, 20), (5, 10, 15)),
    # Demand below supply: everyone gets what it asks and 2 cards stay idle.
    WaterCase("demand below supply", 20, (1, 1, 1), (2, 8, 8), (2, 8, 8)),
]


@pytest.mark.parametrize("case", WATER_CASES, ids=lambda c: c.name)
def test_proportion_water_filling(case: WaterCase) -> None:
    names = ("q1", "q2", "q3")
    cluster = Cluster(
        nodes=nodes("n", case.total_gpus // 2, gpus=2),
        queues=[queue(n, weight=w) for n, w in zip(names, case.weights, strict=True)],
        jobs=[
            job(f"j{n}", n, replicas=r, min_member=1, requests=GPU) for n, r in zip(names, case.requests, strict=True)
        ],
    )
    ssn = session(cluster, PROPORTION)
    plugin = next(p for p in ssn.plugins if isinstance(p, ProportionPlugin))
    deserved = tuple(gpus(ssn, plugin.deserved_of(ssn.queues[n])) for n in names)
    assert deserved == pytest.approx(case.deserved)
    # Requests have no cpu or memory, so nothing is deserved there.
    for n in names:
        vector = plugin.deserved_of(ssn.queues[n])
        assert vector[ssn.index.col["cpu"]] == 0 and vector[ssn.index.col["memory"]] == 0

    decisions = cluster.schedule(PROPORTION)
    counts = count_by_prefix(bound(decisions), *(f"default/j{n}-" for n in names))
    assert tuple(counts.values()) == tuple(int(d) for d in case.deserved)


def test_finished_pods_ask_for_nothing() -> None:
    # Weights 3:1 on 4 cards. q1 has 10 Succeeded pods and 2 pending, q2 has 4 pending. As in Volcano, a
    # queue's request is its allocated plus pending pods: q1 asks 2, so round 1 gives q1 min(3, 2) = 2 (met)
    # and q2 1; round 2 gives q2 the remaining 1 -> 2. Counting finished pods would leave q1 deserving 3 it
    # cannot use and q2 only 1, with a card idle.
    done = job("done", "q1", 10, GPU, min_member=1, phase=RUNNING)
    for pod in done.pods:
        pod.phase = PodPhase.SUCCEEDED
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=2),
        queues=[queue("q1", weight=3), queue("q2", weight=1)],
        jobs=[done, job("a", "q1", 2, GPU, min_member=1), job("b", "q2", 4, GPU, min_member=1)],
    )
    ssn = session(cluster, PROPORTION)
    plugin = next(p for p in ssn.plugins if isinstance(p, ProportionPlugin))
    assert [gpus(ssn, plugin.deserved_of(ssn.queues[n])) for n in ("q1", "q2")] == [2, 2]
    decisions = cluster.schedule(PROPORTION)
    assert count_by_prefix(bound(decisions), "default/a-", "default/b-") == {"default/a-": 2, "default/b-": 2}


def test_proportion_reason_when_at_deserved_share() -> None:
    # Two queues of weight 1 on 4 cards, both hungry: each deserves 2; q1's third pod waits.
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=2),
        queues=[queue("q1"), queue("q2")],
        jobs=[job("a", "q1", 3, GPU, min_member=1), job("b", "q2", 3, GPU, min_member=1)],
    )
    decisions = cluster.schedule(PROPORTION)
    assert count_by_prefix(bound(decisions), "default/a-", "default/b-") == {"default/a-": 2, "default/b-": 2}
    assert pending_reason(decisions, "default/a") == "queue q1 overused: allocated reached its deserved share"


# -- idle quota borrowed, then reclaimed ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("queues", "config"),
    [
        ([queue("a", deserved={NVIDIA_GPU: 4}), queue("b", deserved={NVIDIA_GPU: 4})], CAPACITY_RECLAIM),
        ([queue("a"), queue("b")], PROPORTION_RECLAIM),
    ],
    ids=["capacity", "proportion"],
)
def test_idle_quota_is_borrowed_then_reclaimed(queues: list, config: SchedulerConfiguration) -> None:
    # 2 nodes x 4 cards. Queue a deserves half (capacity: deserved 4; proportion: equal weights) but is idle.
    cluster = Cluster(nodes=nodes("n", 2, gpus=4), queues=queues, jobs=[job("b", "b", 8, GPU, min_member=1, created=0)])
    # Cycle 1: b borrows a's idle half and fills the cluster.
    first = cluster.schedule(config)
    assert len(first.binds) == 8 and not first.evictions
    cluster.apply(first)

    # Cycle 2: a's gang of 4 arrives. allocate finds no room; reclaim takes back a's 4 cards from b.
    cluster.jobs.append(job("a", "a", 4, GPU, min_member=4, created=1))
    second = cluster.schedule(config)
    assert not second.binds
    victims = evicted(second)
    assert len(victims) == 4 and all(v.startswith("default/b-") for v in victims)
    assert all(e.reason == "reclaimed by queue a for default/a" for e in second.evictions)
    waiting = pipelined(second)
    assert sorted(waiting) == cluster.jobs[1].pod_keys()
    # Each pipelined pod waits on the node its victims leave.
    victim_nodes = sorted(e.node for e in second.evictions)
    assert sorted(waiting.values()) == victim_nodes
    cluster.apply(second)

    # Cycle 3: the evicted pods are gone (their controller recreated them Pending); a binds where they were,
    # and b, back at its deserved 4, reclaims nothing.
    third = cluster.schedule(config)
    assert sorted(bound(third)) == cluster.jobs[1].pod_keys()
    assert not third.evictions and not third.pipelined
    assert phase_of(third, "default/a") is RUNNING


def test_reclaim_stops_at_the_reclaimers_deserved_share() -> None:
    # 3 nodes x 4 cards, three queues of weight 1. b runs 12 pods; c deserves 4 but its pods fit nowhere
    # (nodeSelector), a has 8 single-pod jobs. Water-filling: a 4, b 4, c 4.
    # a may reclaim only up to its deserved 4 (Volcano's PreemptiveFn: allocated + request <= deserved),
    # even though b is 8 over its own share.
    cluster = Cluster(
        nodes=nodes("n", 3, gpus=4),
        queues=[queue("a"), queue("b"), queue("c")],
        jobs=[
            job(
                "b",
                "b",
                12,
                GPU,
                min_member=1,
                running_on=["n0"] * 4 + ["n1"] * 4 + ["n2"] * 4,
                gpu_indices=[(i,) for i in range(4)] * 3,
                phase=RUNNING,
            ),
            job("c", "c", 4, GPU, min_member=1, node_selector={"pool": "none"}),
            *(job(f"a{i}", "a", 1, GPU) for i in range(8)),
        ],
    )
    decisions = cluster.schedule(PROPORTION_RECLAIM)
    assert len(decisions.evictions) == 4
    assert len(decisions.pipelined) == 4
    assert all(p.startswith("default/a") for p in pipelined(decisions))


@pytest.mark.parametrize(
    "slice_request",
    [{"volcano.sh/gpu-memory": 2048}, {"tidegate.io/gpu-milli": 500}],
    ids=["gpu-memory", "gpu-milli"],
)
def test_reclaim_frees_a_card_for_a_gpu_slice(slice_request: dict[str, int]) -> None:
    # n0 has 2 cards of 16384 MiB, both held whole by b's pod (b deserves 1 card, so it is 1 over).
    # a's slice fits the node's volcano.sh/gpu-memory total, but no card: reclaim must evict b's pod
    # before pipelining the slice there, not pipeline it onto cards that can never take it.
    resource = next(iter(slice_request))
    cluster = Cluster(
        nodes=[node("n0", gpus=2, gpu_mem_mib=16384)],
        queues=[queue("a", deserved={resource: 16384}), queue("b", deserved={NVIDIA_GPU: 1})],
        jobs=[
            job("b", "b", 1, {NVIDIA_GPU: 2}, running_on=["n0"], gpu_indices=[(0, 1)], phase=RUNNING),
            job("a", "a", 1, slice_request),
        ],
    )
    decisions = cluster.schedule(CAPACITY_RECLAIM)
    assert evicted(decisions) == ["default/b-0"]
    assert pipelined(decisions) == {"default/a-0": "n0"}


# -- guarantee ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [PROPORTION_RECLAIM, CAPACITY_RECLAIM], ids=["proportion", "capacity"])
def test_guarantee_is_never_reclaimed(config: SchedulerConfiguration) -> None:
    # 2 nodes x 4 cards. b (guarantee 4) runs two 3-card pods = 6 cards, borrowed while a was idle.
    # a has three single-pod jobs of 2 cards. Proportion: real capability of a = 8 - 4 (b's guarantee) = 4,
    # so a deserves 4 and b deserves max(4, guarantee 4) = 4 (capacity: both deserve 4 as written), so b is
    # 2 over its share. But evicting one 3-card pod leaves b with 3 < guarantee 4: nothing may go, a waits.
    b_queue = queue("b", guarantee={NVIDIA_GPU: 4}, deserved={NVIDIA_GPU: 4})
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=4),
        queues=[queue("a", deserved={NVIDIA_GPU: 4}), b_queue],
        jobs=[
            job(
                "b",
                "b",
                2,
                {NVIDIA_GPU: 3},
                min_member=1,
                running_on=["n0", "n1"],
                gpu_indices=[(0, 1, 2), (0, 1, 2)],
                phase=RUNNING,
            ),
            *(job(f"a{i}", "a", 1, {NVIDIA_GPU: 2}, created=i) for i in range(3)),
        ],
    )
    decisions = cluster.schedule(config)
    assert not decisions.evictions
    assert not decisions.pipelined
    assert not decisions.binds

    # With three 2-card pods in b instead (n0 full, n1 half full): a0 binds on n1's free cards, a1 reclaims
    # one of b's pods (6 -> 4 = guarantee, never less), a2 would take a above its deserved 4 and b below its
    # guarantee, so it waits.
    cluster.jobs[0] = job(
        "b",
        "b",
        3,
        {NVIDIA_GPU: 2},
        min_member=1,
        running_on=["n0", "n0", "n1"],
        gpu_indices=[(0, 1), (2, 3), (0, 1)],
        phase=RUNNING,
    )
    decisions = cluster.schedule(config)
    assert bound(decisions) == {"default/a0-0": "n1"}
    assert len(decisions.evictions) == 1
    assert list(pipelined(decisions)) == ["default/a1-0"]
    assert [p.job for p in decisions.pending] == ["default/a1", "default/a2"]


# -- a running gang is never broken below minMember ---------------------------------------------------------
@pytest.mark.parametrize(("replicas", "max_victims"), [(4, 0), (6, 2)])
@pytest.mark.parametrize(
    "config", [PROPORTION_RECLAIM, CAPACITY_RECLAIM], ids=["reclaim-proportion", "reclaim-capacity"]
)
def test_running_gang_is_not_broken_by_reclaim(replicas: int, max_victims: int, config: SchedulerConfiguration) -> None:
    # b's gang (minMember 4) holds every card; a deserves half and has 4 single-card jobs waiting.
    # Only pods above minMember may go.
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=replicas // 2),
        queues=[queue("a", deserved={NVIDIA_GPU: 4}), queue("b", deserved={NVIDIA_GPU: 4})],
        jobs=[
            job(
                "b",
                "b",
                replicas,
                GPU,
                min_member=4,
                running_on=[f"n{i % 2}" for i in range(replicas)],
                gpu_indices=[(i // 2,) for i in range(replicas)],
                phase=RUNNING,
            ),
            *(job(f"a{i}", "a", 1, GPU) for i in range(4)),
        ],
    )
    decisions = cluster.schedule(config)
    assert len(decisions.evictions) == max_victims
    assert len(decisions.pipelined) == max_victims


@pytest.mark.parametrize(("replicas", "max_victims"), [(4, 0), (6, 2)])
def test_running_gang_is_not_broken_by_preempt(replicas: int, max_victims: int) -> None:
    classes = {"high": 1000, "low": 10}
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=replicas // 2),
        queues=[queue("q")],
        jobs=[
            job(
                "low",
                "q",
                replicas,
                GPU,
                min_member=4,
                priority_class="low",
                running_on=[f"n{i % 2}" for i in range(replicas)],
                gpu_indices=[(i // 2,) for i in range(replicas)],
                phase=RUNNING,
            ),
            *(job(f"high{i}", "q", 1, GPU, priority_class="high") for i in range(4)),
        ],
    )
    resolve_priorities(cluster.jobs, classes)
    decisions = cluster.schedule(PREEMPT)
    assert len(decisions.evictions) == max_victims
    assert all(e.pod.startswith("default/low-") for e in decisions.evictions)


# -- preempt by priority, within a queue ---------------------------------------------------------------------
def test_preempt_within_queue_by_priority() -> None:
    classes = {"high": 1000, "low": 10}
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=2),
        queues=[queue("q")],
        jobs=[
            job(
                "low",
                "q",
                4,
                GPU,
                min_member=1,
                priority_class="low",
                running_on=["n0", "n0", "n1", "n1"],
                gpu_indices=[(0,), (1,), (0,), (1,)],
                phase=RUNNING,
            ),
            job("high", "q", 2, GPU, min_member=2, priority_class="high"),
        ],
    )
    resolve_priorities(cluster.jobs, classes)
    decisions = cluster.schedule(PREEMPT)
    assert len(decisions.evictions) == 2
    assert all(e.pod.startswith("default/low-") for e in decisions.evictions)
    assert all(e.reason == "preempted by default/high (higher priority in queue q)" for e in decisions.evictions)
    assert sorted(pipelined(decisions)) == ["default/high-0", "default/high-1"]
    for pod, host in pipelined(decisions).items():
        assert host in {e.node for e in decisions.evictions}, pod


def test_preempt_never_crosses_queues_nor_takes_equal_priority() -> None:
    classes = {"high": 1000, "low": 10}
    cluster = Cluster(
        nodes=nodes("n", 1, gpus=4),
        queues=[queue("q1"), queue("q2")],
        jobs=[
            job(
                "low-elsewhere",
                "q1",
                2,
                GPU,
                min_member=1,
                priority_class="low",
                running_on=["n0", "n0"],
                gpu_indices=[(0,), (1,)],
                phase=RUNNING,
            ),
            job(
                "peer",
                "q2",
                2,
                GPU,
                min_member=1,
                priority_class="high",
                running_on=["n0", "n0"],
                gpu_indices=[(2,), (3,)],
                phase=RUNNING,
            ),
            job("high", "q2", 1, GPU, priority_class="high"),
        ],
    )
    resolve_priorities(cluster.jobs, classes)
    decisions = cluster.schedule(PREEMPT)
    assert not decisions.evictions
    assert not decisions.pipelined
    assert pending_reason(decisions, "default/high")


def test_preempt_evicts_only_where_the_preemptor_then_fits_its_queue() -> None:
    # q is capped at 4 cards and uses all 4: mid (3 cards) on nA, low (1 card) on nB, next to 2 cards of
    # another queue. high (2 cards) outranks both. Evicting low frees room on nB, but q would then hold
    # 3 + 2 = 5 > 4: high could not bind there, so low must not be evicted for nothing (Volcano's
    # preemptorFitsOnNode includes the queue's Allocatable). Evicting mid on nA works: 1 + 2 = 3 <= 4.
    config = conf("enqueue, allocate, preempt, backfill", "priority, gang", "predicates, capacity, nodeorder, gpushare")
    cluster = Cluster(
        nodes=[node("nB", gpus=4), node("nA", gpus=4)],
        queues=[queue("q", capability={NVIDIA_GPU: 4}), queue("r")],
        jobs=[
            job("mid", "q", 1, {NVIDIA_GPU: 3}, priority=50, running_on=["nA"], gpu_indices=[(0, 1, 2)], phase=RUNNING),
            job("low", "q", 1, GPU, priority=10, running_on=["nB"], gpu_indices=[(0,)], phase=RUNNING),
            job("other", "r", 2, GPU, running_on=["nB", "nB"], gpu_indices=[(1,), (2,)], phase=RUNNING),
            job("high", "q", 1, {NVIDIA_GPU: 2}, priority=100),
        ],
    )
    decisions = cluster.schedule(config)
    assert evicted(decisions) == ["default/mid-0"]
    assert pipelined(decisions) == {"default/high-0": "nA"}


def test_best_effort_pod_does_not_preempt_a_pod_with_requests() -> None:
    # Volcano: "BestEffort pod is not supported to preempt unBestEffort pod". The best-effort pod needs no
    # room at all; it must be bound by backfill, not pipelined behind a lower-priority pod of its queue
    # (which would repeat every cycle, so it would never start).
    cluster = Cluster(
        nodes=[node("n0", cpu=4)],
        queues=[queue("q")],
        jobs=[
            job("low", "q", 1, {"cpu": 1}, running_on=["n0"], phase=RUNNING),
            job("be", "q", 1, {}, priority=100),
        ],
    )
    decisions = cluster.schedule(PREEMPT)
    assert not decisions.evictions and not decisions.pipelined
    assert bound(decisions) == {"default/be-0": "n0"}


# -- taints and tolerations ---------------------------------------------------------------------------------
def test_taint_blocks_pods_without_the_toleration() -> None:
    cluster = Cluster(
        nodes=[cloud_node("c0", gpus=4), cloud_node("c1", gpus=4)],
        queues=[queue("q")],
        jobs=[job("plain", "q", 1, GPU), job("tolerant", "q", 1, GPU, tolerations=[TOLERATE_CLOUD])],
    )
    decisions = cluster.schedule(PROPORTION)
    assert list(bound(decisions)) == ["default/tolerant-0"]
    assert (
        pending_reason(decisions, "default/plain") == "0/2 nodes: 2 untolerated taint cloud.provider=aliyun:NoSchedule"
    )


@pytest.mark.parametrize(
    ("toleration", "binds"),
    [
        (Toleration(key="cloud.provider", operator="Exists"), True),
        (Toleration(operator="Exists"), True),  # empty key + Exists tolerates everything
        (Toleration(key="cloud.provider", value="aws", effect=None), False),
        (Toleration(key="cloud.provider", value="aliyun", effect=None), True),
        (Toleration(key="cloud.provider", operator="Exists", effect=TaintEffect.PREFER_NO_SCHEDULE), False),
        (Toleration(key="cloud.provider", operator="Exists", effect=TaintEffect.NO_SCHEDULE), True),
    ],
)
def test_toleration_matching(toleration: Toleration, binds: bool) -> None:
    cluster = Cluster(
        nodes=[cloud_node("c0", gpus=1)], queues=[queue("q")], jobs=[job("j", "q", 1, GPU, tolerations=[toleration])]
    )
    assert bool(cluster.schedule(PROPORTION).binds) is binds


def test_no_execute_taint_also_blocks() -> None:
    cluster = Cluster(
        nodes=[node("n0", taints=["maintenance=true:NoExecute"])],
        queues=[queue("q")],
        jobs=[job("j", "q", 1, {"cpu": 1})],
    )
    decisions = cluster.schedule(PROPORTION)
    assert not decisions.binds
    assert pending_reason(decisions, "default/j") == "0/1 nodes: 1 untolerated taint maintenance=true:NoExecute"


def test_prefer_no_schedule_lowers_the_score_but_does_not_block() -> None:
    # Two identical nodes with room for one pod each; n0 carries a PreferNoSchedule taint.
    cluster = Cluster(
        nodes=[node("n0", cpu=4, taints=["spot=true:PreferNoSchedule"]), node("n1", cpu=4)],
        queues=[queue("q")],
        jobs=[job("first", "q", 1, {"cpu": 4}, created=0)],
    )
    assert bound(cluster.schedule(PROPORTION)) == {"default/first-0": "n1"}
    # Both pods of a two-pod job: n1 first, then n0 once n1 is full.
    cluster.jobs = [job("pair", "q", 2, {"cpu": 4})]
    assert bound(cluster.schedule(PROPORTION)) == {"default/pair-0": "n1", "default/pair-1": "n0"}


# -- preferred IDC, overflow to cloud ------------------------------------------------------------------------
@pytest.mark.parametrize(("replicas", "on_idc", "on_cloud"), [(6, 6, 0), (8, 8, 0), (12, 8, 4), (17, 8, 8)])
def test_preferred_local_stays_on_idc_until_full(replicas: int, on_idc: int, on_cloud: int) -> None:
    # 2 IDC nodes and 2 cloud nodes, 4 cards and 32 cpus each; pods ask 1 card and 4 cpus, prefer
    # volcano.sh/node-type NotIn [cloud-spot] and tolerate the cloud taint.
    cluster = Cluster(
        nodes=[
            idc_node("idc0", gpus=4),
            idc_node("idc1", gpus=4),
            cloud_node("cloud0", gpus=4),
            cloud_node("cloud1", gpus=4),
        ],
        queues=[queue("q")],
        jobs=[
            job(
                "j",
                "q",
                replicas,
                {**GPU, "cpu": 4, "memory": "16Gi"},
                min_member=1,
                affinity=PREFER_IDC,
                tolerations=[TOLERATE_CLOUD],
            )
        ],
    )
    decisions = cluster.schedule(PROPORTION)
    hosts = list(bound(decisions).values())
    assert sum(h.startswith("idc") for h in hosts) == on_idc
    assert sum(h.startswith("cloud") for h in hosts) == on_cloud
    # Order matters too: no pod went to the cloud while an IDC card was free.
    first_cloud = next((i for i, b in enumerate(decisions.binds) if b.node.startswith("cloud")), len(hosts))
    assert first_cloud == on_idc


# -- nodeSelector -------------------------------------------------------------------------------------------
def test_node_selector_pins_pods() -> None:
    a100 = {"nvidia.com/gpu.product": "A100"}
    cluster = Cluster(
        nodes=[node("n0", gpus=4), node("n1", gpus=4, labels=a100), node("n2", gpus=4, labels=a100)],
        queues=[queue("q")],
        jobs=[
            job("pinned", "q", 6, GPU, min_member=1, node_selector=a100),
            job("nowhere", "q", 1, GPU, node_selector={"nvidia.com/gpu.product": "H100"}),
        ],
    )
    decisions = cluster.schedule(PROPORTION)
    placed = bound(decisions)
    assert len(placed) == 6
    assert set(placed.values()) == {"n1", "n2"}
    assert pending_reason(decisions, "default/nowhere") == "0/3 nodes: 3 nodeSelector mismatch"


# -- GPU sharing --------------------------------------------------------------------------------------------
GPU_MEM = "volcano.sh/gpu-memory"


def test_gpu_memory_slices_pack_onto_cards_without_exceeding_them() -> None:
    # One node, 2 cards of 16384 MiB. Slices of 10240 MiB: one per card (6144 MiB left on each is too small),
    # so the third waits although the node still has 12288 MiB of volcano.sh/gpu-memory in total.
    cluster = Cluster(
        nodes=[node("n0", gpus=2, gpu_mem_mib=16384)],
        queues=[queue("q")],
        jobs=[job("big", "q", 3, {GPU_MEM: 10240}, min_member=1)],
    )
    first = cluster.schedule(NODES_ONLY)
    assert {b.pod: b.gpu_indices for b in first.binds} == {"default/big-0": (0,), "default/big-1": (1,)}
    assert pending_reason(first, "default/big") == "0/1 nodes: 1 no GPU card with enough free memory"
    cluster.apply(first)

    # Next cycle: 6144 MiB slices fill exactly the two leftovers; then the node is full.
    cluster.jobs.append(job("small", "q", 3, {GPU_MEM: 6144}, min_member=1))
    second = cluster.schedule(NODES_ONLY)
    assert {b.pod: b.gpu_indices for b in second.binds} == {"default/small-0": (0,), "default/small-1": (1,)}
    assert pending_reason(second, "default/small") == "0/1 nodes: 1 insufficient volcano.sh/gpu-memory"


def test_slices_first_fit_onto_the_lowest_card() -> None:
    # 4096 MiB slices on 2 x 16384 MiB: four fill card 0 before card 1 is used (Volcano's first fit).
    cluster = Cluster(
        nodes=[node("n0", gpus=2, gpu_mem_mib=16384)],
        queues=[queue("q")],
        jobs=[job("s", "q", 6, {GPU_MEM: 4096}, min_member=1)],
    )
    decisions = cluster.schedule(NODES_ONLY)
    assert [b.gpu_indices for b in decisions.binds] == [(0,)] * 4 + [(1,)] * 2


def test_slice_never_shares_a_card_taken_whole() -> None:
    # Card 0 is held whole by a running pod; slices only go to card 1 (4 x 4096 MiB), the fifth waits
    # although volcano.sh/gpu-memory on the node (32768 MiB) would still allow it.
    cluster = Cluster(
        nodes=[node("n0", gpus=2, gpu_mem_mib=16384)],
        queues=[queue("q")],
        jobs=[
            job("whole", "q", 1, GPU, running_on=["n0"], gpu_indices=[(0,)], phase=RUNNING),
            job("slices", "q", 5, {GPU_MEM: 4096}, min_member=1),
        ],
    )
    decisions = cluster.schedule(NODES_ONLY)
    assert [b.gpu_indices for b in decisions.binds] == [(1,)] * 4
    assert pending_reason(decisions, "default/slices") == "0/1 nodes: 1 no GPU card with enough free memory"


def test_whole_card_never_taken_from_a_shared_card() -> None:
    # A running slice sits on card 1 of 2: a whole-card pod gets card 0, a second whole-card pod waits.
    cluster = Cluster(
        nodes=[node("n0", gpus=2, gpu_mem_mib=16384)],
        queues=[queue("q")],
        jobs=[
            job("slice", "q", 1, {GPU_MEM: 1024}, running_on=["n0"], gpu_indices=[(1,)], phase=RUNNING),
            job("whole", "q", 2, GPU, min_member=1),
        ],
    )
    decisions = cluster.schedule(NODES_ONLY)
    assert [(b.pod, b.gpu_indices) for b in decisions.binds] == [("default/whole-0", (0,))]
    assert pending_reason(decisions, "default/whole") == "0/1 nodes: 1 insufficient free GPU cards"


def test_multi_card_pod_gets_distinct_free_cards() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=4, gpu_mem_mib=16384)],
        queues=[queue("q")],
        jobs=[
            job("slice", "q", 1, {GPU_MEM: 1024}, running_on=["n0"], gpu_indices=[(1,)], phase=RUNNING),
            job("pair", "q", 1, {NVIDIA_GPU: 2}),
        ],
    )
    decisions = cluster.schedule(NODES_ONLY)
    assert [b.gpu_indices for b in decisions.binds] == [(0, 2)]


# -- required node affinity ---------------------------------------------------------------------------------
AFFINITY_NODES = [
    node("na", cpu=4, labels={"zone": "a", "gen": "3"}),
    node("nb", cpu=4, labels={"zone": "b", "gen": "5"}),
    node("nc", cpu=4, labels={"gen": "7"}),
    node("nd", cpu=4, labels={"zone": "a", "gen": "x"}),
]


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (required([req("zone", "In", "a")]), {"na", "nd"}),
        (required([req("zone", "In", "a", "b")]), {"na", "nb", "nd"}),
        (required([req("zone", "NotIn", "a")]), {"nb", "nc"}),  # a missing label is "not in"
        (required([req("zone", "Exists")]), {"na", "nb", "nd"}),
        (required([req("zone", "DoesNotExist")]), {"nc"}),
        (required([req("gen", "Gt", "4")]), {"nb", "nc"}),  # "x" is not an integer: no match
        (required([req("gen", "Lt", "5")]), {"na"}),
        (required([req("missing", "Gt", "0")]), set()),
        (required([req("zone", "In", "a"), req("gen", "Gt", "2")]), {"na"}),  # ANDed inside a term
        (required([req("zone", "In", "b")], [req("gen", "Gt", "6")]), {"nb", "nc"}),  # terms ORed
        (required([req("zone", "In", "z")]), set()),
        # Kubernetes: "A null or empty node selector term matches no objects."
        (NodeAffinity(required=(NodeSelectorTerm(()),)), set()),
        (NodeAffinity(required=(NodeSelectorTerm(()), NodeSelectorTerm((req("zone", "In", "b"),)))), {"nb"}),
    ],
)
def test_required_node_affinity(affinity: NodeAffinity, expected: set[str]) -> None:
    # Each pod takes a whole node (4 cpus), so the nodes the 4 pods land on are exactly the feasible ones.
    cluster = Cluster(
        nodes=list(AFFINITY_NODES),
        queues=[queue("q")],
        jobs=[job("j", "q", 4, {"cpu": 4}, min_member=1, affinity=affinity)],
    )
    decisions = cluster.schedule(PROPORTION)
    assert set(bound(decisions).values()) == expected
    assert {n.name for n in AFFINITY_NODES if affinity.required_matches(n.labels)} == expected  # the model agrees
    if len(expected) < 4:
        reason = pending_reason(decisions, "default/j")
        mismatched = 4 - len(expected)
        assert f"{mismatched} node affinity mismatch" in reason


# -- enqueue gating -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_enqueue_gates_jobs_above_queue_capability(config: SchedulerConfiguration) -> None:
    cluster = Cluster(
        nodes=nodes("n", 4, gpus=4),
        queues=[queue("q", capability={NVIDIA_GPU: 8})],
        jobs=[job("huge", "q", 12, GPU, min_resources={NVIDIA_GPU: 12})],
    )
    decisions = cluster.schedule(config)
    assert not decisions.binds
    assert phase_of(decisions, "default/huge") is PodGroupPhase.PENDING
    assert pending_reason(decisions, "default/huge") == "queue q at capability nvidia.com/gpu 0/8"

    # 6 cards already in use: a job needing 4 more does not fit under 8 either; one needing 2 does.
    cluster.jobs = [
        job(
            "used",
            "q",
            6,
            GPU,
            running_on=["n0"] * 4 + ["n1"] * 2,
            gpu_indices=[(i,) for i in range(4)] + [(0,), (1,)],
            phase=RUNNING,
        ),
        job("four", "q", 4, GPU, min_resources={NVIDIA_GPU: 4}, created=0),
        job("two", "q", 2, GPU, min_resources={NVIDIA_GPU: 2}, created=1),
    ]
    decisions = cluster.schedule(config)
    assert pending_reason(decisions, "default/four") == "queue q at capability nvidia.com/gpu 6/8"
    assert phase_of(decisions, "default/four") is PodGroupPhase.PENDING
    assert sorted(bound(decisions)) == ["default/two-0", "default/two-1"]


@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_inqueue_job_keeps_its_reservation(config: SchedulerConfiguration) -> None:
    # Job a was admitted last cycle (Inqueue, minResources 8 of the queue's 8) and has not started yet.
    # As in Volcano, its minResources still count against the queue, so b is not admitted over it.
    cluster = Cluster(
        nodes=nodes("n", 4, gpus=4),
        queues=[queue("q", capability={NVIDIA_GPU: 8})],
        jobs=[
            job("a", "q", 8, GPU, min_resources={NVIDIA_GPU: 8}, phase=INQUEUE, node_selector={"pool": "later"}),
            job("b", "q", 8, GPU, min_resources={NVIDIA_GPU: 8}),
        ],
    )
    decisions = cluster.schedule(config)
    assert not decisions.binds
    assert phase_of(decisions, "default/b") is PodGroupPhase.PENDING
    assert pending_reason(decisions, "default/b") == "queue q at capability nvidia.com/gpu 8/8"


# -- a capability of 0 ---------------------------------------------------------------------------------------
# Volcano reads capability with api.NewResource, raises cpu and memory <= 0 to MaxFloat64 and keeps every
# other quantity: nvidia.com/gpu "0" caps the queue at no GPUs, cpu "0" is no cap at all.
@pytest.mark.parametrize(
    ("config", "reason"),
    [
        # proportion: deserved = min(water-filled share, real capability 0) = 0 cards.
        (PROPORTION, "queue q at deserved share nvidia.com/gpu 0/0"),
        (CAPACITY, "queue q at capability nvidia.com/gpu 0/0"),
    ],
    ids=["proportion", "capacity"],
)
def test_a_zero_gpu_capability_means_no_gpus(config: SchedulerConfiguration, reason: str) -> None:
    # 4 free cards, but q declares nvidia.com/gpu: 0: the GPU pod waits, the CPU-only pod runs.
    cluster = Cluster(
        nodes=[node("n0", gpus=4)],
        queues=[queue("q", capability={NVIDIA_GPU: 0})],
        jobs=[job("train", "q", 1, {"cpu": 1, NVIDIA_GPU: 1}), job("prep", "q", 1, {"cpu": 1})],
    )
    decisions = cluster.schedule(config)
    assert bound(decisions) == {"default/prep-0": "n0"}
    assert pending_reason(decisions, "default/train") == reason
    ssn = session(cluster, config)
    plugin = next(p for p in ssn.plugins if isinstance(p, (ProportionPlugin, CapacityPlugin)))
    assert gpus(ssn, plugin.real_capability["q"]) == 0


@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_a_zero_gpu_capability_gates_enqueue(config: SchedulerConfiguration) -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=4)],
        queues=[queue("q", capability={NVIDIA_GPU: 0})],
        jobs=[job("train", "q", 1, GPU, min_resources={NVIDIA_GPU: 1})],
    )
    decisions = cluster.schedule(config)
    assert phase_of(decisions, "default/train") is PodGroupPhase.PENDING
    assert pending_reason(decisions, "default/train") == "queue q at capability nvidia.com/gpu 0/0"


@pytest.mark.parametrize("config", [PROPORTION, CAPACITY], ids=["proportion", "capacity"])
def test_a_zero_cpu_capability_is_no_cap(config: SchedulerConfiguration) -> None:
    # Volcano's quirk: cpu 0 is raised to MaxFloat64, so 4 pods of 8 CPUs fill the 32-CPU node.
    cluster = Cluster(
        nodes=[node("n0", cpu=32)],
        queues=[queue("q", capability={"cpu": 0})],
        jobs=[job("j", "q", 4, {"cpu": 8}, min_resources={"cpu": 32})],
    )
    decisions = cluster.schedule(config)
    assert sorted(bound(decisions)) == [f"default/j-{i}" for i in range(4)]


def test_a_parent_with_a_zero_gpu_capability_caps_its_children() -> None:
    # The child sets no capability: it inherits org's 0 cards (real capability min(unlimited, 0)).
    cluster = Cluster(
        nodes=nodes("n", 2, gpus=4),
        queues=[queue("org", capability={NVIDIA_GPU: 0}), queue("team", parent="org")],
        jobs=[job("train", "team", 1, GPU), job("prep", "team", 1, {"cpu": 1})],
    )
    decisions = cluster.schedule(CAPACITY)
    assert bound(decisions) == {"default/prep-0": "n0"}
    assert pending_reason(decisions, "default/train") == "queue team at capability nvidia.com/gpu 0/0"


# -- bookkeeping --------------------------------------------------------------------------------------------
def test_a_pod_is_bound_at_most_once() -> None:
    # mix has minMember 2: a best-effort pod, a GPU pod the queue cannot take (capability 0.5 card) and a
    # second best-effort pod. allocate places the first, fails the GPU pod and discards; backfill then
    # places both best-effort pods. Each pod must appear in exactly one Bind.
    mix = job("mix", "q", 3, {}, min_member=2)
    mix.pods[1].requests = mix.pods[1].requests + {NVIDIA_GPU: 1000}
    for i, pod in enumerate(mix.pods):
        pod.created = float(i)
    cluster = Cluster(nodes=[node("n0", gpus=1)], queues=[queue("q", capability={NVIDIA_GPU: "500m"})], jobs=[mix])
    decisions = cluster.schedule(CAPACITY)
    assert sorted(b.pod for b in decisions.binds) == ["default/mix-0", "default/mix-2"]


# -- determinism --------------------------------------------------------------------------------------------
def test_same_snapshot_gives_identical_decisions() -> None:
    classes = {"high": 1000, "low": 10}
    cluster = Cluster(
        nodes=[
            idc_node("idc0", gpus=4, gpu_mem_mib=24576),
            idc_node("idc1", gpus=4),
            cloud_node("cloud0", gpus=8, gpu_mem_mib=81920),
            node("cpu0", cpu=64),
        ],
        queues=[queue("a", weight=2), queue("b"), queue("c", capability={NVIDIA_GPU: 4})],
        jobs=[
            job(
                "run",
                "b",
                4,
                GPU,
                min_member=2,
                priority_class="low",
                running_on=["idc1"] * 4,
                gpu_indices=[(i,) for i in range(4)],
                phase=RUNNING,
            ),
            job(
                "gang",
                "a",
                5,
                GPU,
                min_member=5,
                priority_class="high",
                affinity=PREFER_IDC,
                tolerations=[TOLERATE_CLOUD],
            ),
            job("share", "c", 6, {GPU_MEM: 8192}, min_member=1, tolerations=[TOLERATE_CLOUD]),
            job("cpu", "b", 3, {"cpu": 8, "memory": "32Gi"}, min_member=3),
            job("be", "a", 2, {}, min_member=1),
        ],
    )
    resolve_priorities(cluster.jobs, classes)
    config = conf(
        "enqueue, allocate, preempt, reclaim, backfill",
        "priority, gang",
        "drf, predicates, proportion, nodeorder, binpack, gpushare",
    )
    first, second = cluster.schedule(config), cluster.schedule(config)
    assert first == second
    assert first.binds  # something happened, so the comparison means something


def test_a_node_takes_no_more_pods_than_its_pod_slots() -> None:
    # A node with room for 100 best-effort pods by every resource but only 3 pod slots takes 3.
    small = node("n0", gpus=0)
    small.allocatable = small.allocatable + {"pods": 3000}  # canonical milli-units: 3 pods
    cluster = Cluster(nodes=[small], queues=[queue("q")], jobs=[job(f"j{i}", "q", 1, {}) for i in range(5)])
    decisions = cluster.schedule(CAPACITY)
    assert len(decisions.binds) == 3


def test_a_cluster_without_nodes_leaves_jobs_pending_with_a_reason() -> None:
    # A fleet can be empty (a cloud pool scaled to zero, a live control plane started before its nodes).
    cluster = Cluster(nodes=[], queues=[queue("q")], jobs=[job("j", "q", 2, {"cpu": 1})])
    assert pending_reason(cluster.schedule(NODES_ONLY), "default/j") == "gang: 0/2 pods fit; 0/0 nodes available"
