"""GPU placement policies (gpushare.policy) and the fragmentation model, on clusters small enough to check by hand."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from tidegate.model.objects import Node, PluginOption, Pod, PodGroup, Queue, SchedulerConfiguration, Tier
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_MILLI, GPU_NUMBER, MEMORY, NVIDIA_GPU, Resources
from tidegate.scheduler.actions.allocate import allocate_job
from tidegate.scheduler.fragmentation import CardShares, FragmentationModel, MixShape
from tidegate.scheduler.info import GpuRequest, TaskStatus
from tidegate.scheduler.plugins import default_registry, gpu_placement
from tidegate.scheduler.plugins.gpu_placement import POLICIES, FragAware
from tidegate.scheduler.plugins.gpushare import GpuSharePlugin
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot

GI = 2**30


def gpu_node(name: str, cards: int = 2, cpu: int = 16_000, memory_gi: int = 64, card_mib: int = 16_000) -> Node:
    return Node(
        name=name,
        allocatable=Resources(
            {
                CPU: cpu,
                MEMORY: memory_gi * GI,
                NVIDIA_GPU: cards * 1000,
                GPU_NUMBER: cards * 1000,
                GPU_MEMORY: cards * card_mib * 1000,
                GPU_MILLI: cards * 1000 * 1000,
            }
        ),
        gpu_memory_mib=(card_mib,) * cards,
    )


def pod(name: str, milli: int = 0, whole: int = 0, cpu: int = 1000, node: str = "", card: int | None = None) -> Pod:
    requests: dict[str, int] = {CPU: cpu, MEMORY: GI}
    if milli:
        requests[GPU_MILLI] = milli * 1000
    if whole:
        requests[NVIDIA_GPU] = whole * 1000
    return Pod(
        name=name,
        requests=Resources(requests),
        group=name,
        node_name=node,
        gpu_indices=(card,) if card is not None else (),
    )


def config(policy: str, **arguments: Any) -> SchedulerConfiguration:
    """The experiment's configuration: predicates and gpushare with the policy, nothing else scoring."""
    args = {"gpushare.policy": policy, **arguments}
    return SchedulerConfiguration(
        actions=("allocate",), tiers=(Tier((PluginOption("predicates"), PluginOption("gpushare", args))),)
    )


def session(nodes: list[Node], bound: list[Pod], policy: str, **arguments: Any) -> Session:
    groups = [PodGroup(name=p.name) for p in bound]
    return Session(
        Snapshot(nodes, [Queue(name="default")], groups, bound), config(policy, **arguments), default_registry()
    )


def place(ssn: Session, new: Pod) -> tuple[str, tuple[int, ...]] | None:
    job = ssn.add_group(PodGroup(name=new.name), [new])
    if not allocate_job(ssn, job):
        return None
    task = job.tasks[0]
    return ssn.table.names[task.node], task.cards


# -- the fragmentation model: a worked example ---------------------------------------------------------------------


def test_expected_fragmentation_worked_example() -> None:
    # One node: 2 cards, 8 CPUs. In use: 700 thousandths of card 0 and 6 CPUs (a pod bound there).
    ssn = session([gpu_node("n", cpu=8000)], [pod("used", milli=700, cpu=6000, node="n", card=0)], "first-fit")
    table = ssn.table
    model = FragmentationModel(table, ssn.index.col[CPU], ssn.index.col[MEMORY])
    # Mix: two 500-thousandths slices (1 CPU), one whole card (4 CPUs), one 200 slice (1 CPU); C = 4.
    model.set_mix(
        [
            MixShape(cpu=1000, memory=GI, cards=0, milli=500, count=2),
            MixShape(cpu=4000, memory=GI, cards=1, milli=0, count=1),
            MixShape(cpu=1000, memory=GI, cards=0, milli=200, count=1),
        ],
        np.ones((1, 1), dtype=bool),
    )
    # Free: card shares 300 and 1000 (1300 in all), 2 CPUs.
    # - 500 slice: fits; card 0 (300 < 500) is fragmented for it: 300.
    # - whole card: needs 4 CPUs, the node has 2: all 1300 fragmented.
    # - 200 slice: both cards can take it: 0.
    # Expected: (2 x 300 + 1 x 1300 + 1 x 0) / 4 = 1900 / 4 = 475 thousandths of a card.
    assert model.fragmented(np.array([0])).tolist() == [1900]
    assert model.expected().tolist() == [475.0]
    assert model.fragmented_row(0) == 1900
    # A 200 slice asking 0.5 CPU (1.5 CPUs left, still enough for the slices, not for the whole card):
    # - on card 0 (300 -> 100): 500 slices lose card 0's 100; the whole card 1100; 200 slices lose 100:
    #   (2 x 100 + 1100 + 100) = 1400, i.e. 350 per pod of the mix: fragmentation drops by 125;
    # - on card 1 (1000 -> 800): 500 slices lose card 0's 300; the whole card 1100; 200 slices none:
    #   (2 x 300 + 1100 + 0) = 1700, i.e. 425.
    slice_200 = GpuRequest(milli=200)
    assert model.after(np.array([0]), 500, GI, slice_200).tolist() == [[1400, 1700]]
    assert model.after_row(0, 500, GI, slice_200) == [1400, 1700]
    # A whole card (4 CPUs do not fit, but the model does not check CPU): card 1 goes, 300 left on card 0;
    # with -2 CPUs nothing of the mix fits: 4 x 300 = 1200.
    assert model.after(np.array([0]), 4000, GI, GpuRequest(whole=1)).tolist() == [[1200]]


def test_a_node_the_mix_cannot_use_is_wholly_fragmented() -> None:
    # Shapes pinned away from the node (static mask False) find every free card fragmented.
    ssn = session([gpu_node("n")], [], "first-fit")
    model = FragmentationModel(ssn.table, ssn.index.col[CPU], ssn.index.col[MEMORY])
    model.set_mix([MixShape(cpu=0, memory=0, cards=1, milli=0, count=3)], np.zeros((1, 1), dtype=bool))
    assert model.expected().tolist() == [2000.0]


def test_mix_shapes_are_validated() -> None:
    with pytest.raises(ValueError, match="whole cards or a slice"):
        MixShape(cpu=0, memory=0, cards=1, milli=500, count=1)
    with pytest.raises(ValueError, match=r"1\.\.999"):
        MixShape(cpu=0, memory=0, cards=0, milli=1000, count=1)


# -- each policy's choice on hand-checkable clusters -------------------------------------------------------------

#: x: card 0 has 300 in use (700 free); y: card 0 has 400 in use (600 free); z: both cards full of 200 slices.
#: The mix the session has seen: ten 200 slices, a 300, a 400 and the 500 slice being placed.
CLUSTER = [gpu_node("x"), gpu_node("y"), gpu_node("z")]
BOUND = [
    pod("a300", milli=300, node="x", card=0),
    pod("b400", milli=400, node="y", card=0),
    *(pod(f"s{i}", milli=200, node="z", card=i // 5) for i in range(10)),
]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # Volcano: the lowest-index node that fits, its lowest-index card.
        ("first-fit", ("x", (0,))),
        # Least left: y keeps 1100 thousandths, x 1200 (CPU left is alike); the tightest card, y's card 0.
        ("best-fit", ("y", (0,))),
        # The smallest dot product: the tightest card the slice fits on is y's (600 vs 700 free).
        ("dot-product", ("y", (0,))),
        # A partly used card first, the tightest: y's card 0 (600 free).
        ("gpu-packing", ("y", (0,))),
        # y's card 0 would keep 100 free, which no pod of the mix can use (fragmentation +100 per pod of
        # the mix, 1300/13); x's card 0 would keep 200, which the 200 slices use (+46). An untouched card
        # fragments nothing (every card keeps room for every slice): x's or y's card 1; y is fuller.
        ("frag-aware", ("y", (1,))),
    ],
)
def test_each_policy_places_a_500_slice_where_expected(policy: str, expected: tuple[str, tuple[int, ...]]) -> None:
    assert place(session(CLUSTER, BOUND, policy), pod("new", milli=500)) == expected


def test_frag_aware_keeps_a_remnant_a_popular_slice_can_use() -> None:
    # Only partly used cards left: x's card 0 (700 free) and y's card 0 (600 free); the 500 slice goes
    # to x, leaving 200 for the popular 200 slices, where y would leave a useless 100.
    bound = [*BOUND, pod("x1", whole=1, node="x", card=1), pod("y1", whole=1, node="y", card=1)]
    assert place(session(CLUSTER, bound, "frag-aware"), pod("new", milli=500)) == ("x", (0,))
    assert place(session(CLUSTER, bound, "gpu-packing"), pod("new", milli=500)) == ("y", (0,))


def test_gpu_packing_prefers_nodes_in_use_then_small_idle_nodes() -> None:
    nodes = [gpu_node("big", cards=8), gpu_node("small", cards=2), gpu_node("used", cards=8)]
    bound = [pod("u", whole=1, node="used", card=0)]
    # A whole card: a node with GPUs in use first.
    assert place(session(nodes, bound, "gpu-packing"), pod("w", whole=1)) == ("used", (1,))
    # With no node in use, the idle node left fullest (relative to its cards): the small one.
    assert place(session(nodes, [], "gpu-packing"), pod("w", whole=1)) == ("small", (0,))


def test_best_fit_counts_cpu_too() -> None:
    # Equal GPUs; the node with less CPU left wins.
    nodes = [gpu_node("roomy", cpu=64_000), gpu_node("tight", cpu=8_000)]
    assert place(session(nodes, [], "best-fit"), pod("p", whole=1)) == ("tight", (0,))


def test_random_is_deterministic_by_seed_and_does_vary() -> None:
    nodes = [gpu_node(f"n{i}") for i in range(8)]
    picks = {
        seed: place(session(nodes, [], "random", **{"gpushare.seed": seed}), pod("p", milli=100)) for seed in range(6)
    }
    again = {
        seed: place(session(nodes, [], "random", **{"gpushare.seed": seed}), pod("p", milli=100)) for seed in range(6)
    }
    assert picks == again
    assert len({pick[0] for pick in picks.values() if pick}) > 1


def test_a_pod_that_fits_nowhere_fails_under_every_policy() -> None:
    for policy in POLICIES:
        assert place(session([gpu_node("n", cards=2)], [], policy), pod("big", whole=4)) is None


# -- configuration ----------------------------------------------------------------------------------------------


def test_volcano_defaults_stay_first_fit_without_a_node_score() -> None:
    ssn = Session(Snapshot([gpu_node("n")], [], [], []), SchedulerConfiguration(), default_registry())
    gpushare = next(p for p in ssn.plugins if isinstance(p, GpuSharePlugin))
    assert gpushare.score not in ssn.ext.dynamic_scores
    assert place(session(CLUSTER, BOUND, "first-fit"), pod("new", milli=100)) == ("x", (0,))


def test_an_explicit_card_policy_overrides_the_policys_card() -> None:
    ssn = session(CLUSTER, BOUND, "frag-aware", **{"gpushare.cardPolicy": "best-fit"})
    assert place(ssn, pod("new", milli=500)) == ("y", (0,))


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"argument gpushare\.policy: 'tightest': use one of first-fit"):
        session(CLUSTER, [], "tightest")


def test_frag_aware_counts_the_shapes_the_session_has_seen() -> None:
    ssn = session(CLUSTER, BOUND, "frag-aware", **{"gpushare.mixRefresh": 0})
    gpushare = next(p for p in ssn.plugins if isinstance(p, GpuSharePlugin))
    assert isinstance(gpushare.policy, FragAware)
    placed = [place(ssn, pod(f"w{i}", whole=1)) for i in range(3)]
    assert placed == [("y", (1,)), ("x", (1,)), None]  # two untouched cards only
    # 12 bound slices and 2 placed whole-card pods; the one that failed is taken in at the next placement.
    assert gpushare.policy.model.total == 14
    assert place(ssn, pod("s", milli=100)) is not None
    assert gpushare.policy.model.total == 16


# -- scalar twins: bit for bit the vector forms ------------------------------------------------------------------


def _random_session(rng: random.Random, policy: str) -> Session:
    nodes = []
    for i in range(10):
        cards = rng.choice([0, 1, 2, 4, 8])
        node = gpu_node(f"n{i}", cards=cards, cpu=rng.choice([4000, 32_000]), card_mib=rng.choice([16_000, 32_000]))
        if not cards:
            node = Node(name=f"n{i}", allocatable=Resources({CPU: 8000, MEMORY: 16 * GI}))
        if rng.random() < 0.3:
            node.labels["zone"] = "a"
        nodes.append(node)
    pods = []
    for k in range(8):
        new = pod(
            f"p{k}",
            cpu=rng.choice([0, 500, 3000]),
            **rng.choice([{}, {"milli": 250}, {"milli": 810}, {"whole": 1}, {"whole": 2}]),
        )
        if rng.random() < 0.2:
            new = Pod(name=new.name, group=new.group, requests=new.requests + Resources({GPU_MEMORY: 4_096_000}))
        if rng.random() < 0.3:
            new.node_selector["zone"] = "a"
        pods.append(new)
    groups = [PodGroup(name=p.name) for p in pods]
    snapshot = Snapshot(nodes, [Queue(name="default")], groups, pods)
    return Session(snapshot, config(policy, **{"gpushare.mixRefresh": 0}), default_registry())


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("policy", POLICIES)
def test_twins_match_the_vector_scores_bit_for_bit(policy: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_placement, "SCALAR_ROWS", 0)  # frag-aware: the numpy form even on ten nodes
    rng = random.Random(seed)
    ssn = _random_session(rng, policy)
    gpushare = next(p for p in ssn.plugins if isinstance(p, GpuSharePlugin))
    tasks = list(ssn.tasks.values())
    for _ in range(12):
        task = rng.choice(tasks)
        if task.status is TaskStatus.PENDING:
            row = ssn.best_node(task)
            if row is not None:
                ssn.statement().allocate(task, row)
        rows = np.arange(len(ssn.table))
        for probe in tasks:
            vector = gpushare.score(probe, rows).tolist()
            scalar = [gpushare.score_row(probe, row) for row in rows.tolist()]
            assert scalar == vector
            assert [np.signbit(v) for v in scalar] == [np.signbit(v) for v in vector]


def test_card_shares_follow_the_table() -> None:
    ssn = session(CLUSTER, BOUND, "first-fit")
    shares = CardShares(ssn.table)
    assert shares.share.tolist() == [[700, 1000], [600, 1000], [0, 0]]
    place(ssn, pod("w", whole=1))
    assert shares.sync() and shares.rows_changed == [0]
    assert shares.row(0) == [700, 0]
