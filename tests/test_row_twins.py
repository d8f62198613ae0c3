"""The plugins' scalar twins (fit_row / score_row) give exactly what their numpy forms give for one node.

The session refreshes a few changed nodes with the twins and many with numpy; any difference, even in the
last bit of a score, would make placements depend on the refresh path.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from tidegate.model.objects import (
    DEFAULT_TIERS,
    Node,
    PluginOption,
    Pod,
    PodGroup,
    PodGroupPhase,
    Queue,
    SchedulerConfiguration,
    Taint,
    TaintEffect,
    Tier,
    Toleration,
)
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_MILLI, GPU_NUMBER, MEMORY, NVIDIA_GPU, PODS, Resources
from tidegate.scheduler import session as session_module
from tidegate.scheduler.actions.eviction import nominated_cards
from tidegate.scheduler.info import TaskInfo, TaskStatus
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot

GI = 2**30


def _snapshot(rng: random.Random) -> Snapshot:
    nodes = []
    for i in range(12):
        alloc = {CPU: rng.choice([0, 1000, 7000, 96000]), MEMORY: rng.choice([0, 3 * GI, 768 * GI])}
        cards: tuple[int, ...] = ()
        if rng.random() < 0.5:
            count = rng.choice([1, 2, 8])
            cards = (rng.choice([16384, 81920]),) * count
            alloc.update({NVIDIA_GPU: count * 1000, GPU_MEMORY: sum(cards) * 1000, GPU_NUMBER: count * 1000})
        if rng.random() < 0.3:
            alloc[PODS] = rng.randint(1, 4) * 1000
        nodes.append(Node(name=f"n{i}", allocatable=Resources(alloc), gpu_memory_mib=cards))
    requests = [
        Resources({CPU: rng.choice([0, 1, 500, 3000, 9000]), MEMORY: rng.choice([0, 1, GI, 5 * GI])})
        + Resources(
            rng.choice([{}, {NVIDIA_GPU: 1000}, {NVIDIA_GPU: 3000}, {GPU_MEMORY: 4096000}, {GPU_MILLI: 250000}])
        )
        for _ in range(6)
    ]
    groups = [PodGroup(name="g", queue="default", phase=PodGroupPhase.INQUEUE)]
    pods = [Pod(name=f"p{k}", requests=r, group="g") for k, r in enumerate(requests)]
    return Snapshot(nodes, [Queue(name="default")], groups, pods)


def _walk(ssn: Session, task: TaskInfo, rng: random.Random) -> None:
    """One step of a random walk over node states: place the task (now or pipelined, which promises
    whole cards or holds a slice's card), overcommitting a node at times, or take it back."""
    if task.status is TaskStatus.PENDING:
        row = rng.randrange(len(ssn.table))
        if rng.random() < 0.25:
            ssn.apply_pipeline(task, row, nominated_cards(ssn, task, row))
        else:
            ssn.apply_allocate(task, row, ssn.select_cards(task, row), TaskStatus.ALLOCATED)
    elif rng.random() < 0.3:
        if task.status is TaskStatus.PIPELINED:
            ssn.undo_pipeline(task, task.node, TaskStatus.PENDING)
        else:
            ssn.undo_allocate(task, task.node, task.cards, TaskStatus.PENDING)


CONFIGS = [
    SchedulerConfiguration(),
    SchedulerConfiguration(
        tiers=(
            DEFAULT_TIERS[0],
            Tier(
                (
                    PluginOption("predicates"),
                    PluginOption("nodeorder", {"mostrequested.weight": 2, "balancedresource.weight": 0.5}),
                    PluginOption("binpack", {"binpack.weight": 3, "binpack.resources": "nvidia.com/gpu, pods"}),
                    PluginOption("gpushare"),
                )
            ),
        )
    ),
]


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "weighted"])
def test_twins_match_the_vector_forms_bit_for_bit(seed: int, config: SchedulerConfiguration) -> None:
    rng = random.Random(seed)
    ssn = Session(_snapshot(rng), config, default_registry())
    ext = ssn.ext
    assert set(ext.row_filters) == set(ext.dynamic_filters)
    assert set(ext.row_scores) == set(ext.dynamic_scores)
    tasks = list(ssn.tasks.values())
    for _ in range(30):
        task = rng.choice(tasks)  # load a node, overcommitting it at times
        _walk(ssn, task, rng)
        table = ssn.table
        free = table.card_exists & ~table.card_whole & (table.card_used_mem == 0) & (table.card_used_milli == 0)
        assert (table.free_cards(slice(None)) == free.sum(axis=1)).all()
        assert table.card_free_bits == [sum(1 << int(c) for c in np.flatnonzero(row)) for row in free]
        for probe in tasks:
            for row in range(len(ssn.table)):
                rows = np.array([row])
                for dynamic_filter in ext.dynamic_filters:
                    assert ext.row_filters[dynamic_filter](probe, row) == bool(dynamic_filter.fit(probe, rows)[0])
                for dynamic_score in ext.dynamic_scores:
                    scalar = ext.row_scores[dynamic_score](probe, row)
                    vector = float(dynamic_score(probe, rows)[0])
                    assert scalar == vector and np.signbit(scalar) == np.signbit(vector), (scalar, vector)


def _node_state(ssn: Session, row: int) -> tuple[object, ...]:
    t = ssn.table
    arrays = (t.alloc, t.used, t.card_exists, t.card_whole, t.card_mem, t.card_used_mem, t.card_used_milli)
    return (*(tuple(a[row].tolist()) for a in arrays), t.promised[row])


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "weighted"])
def test_twins_said_to_read_only_node_state_agree_on_nodes_in_one_state(
    seed: int, config: SchedulerConfiguration
) -> None:
    """The session shares these twins' results between nodes with the same `state_id`: nodes get the
    same number exactly when their resource state is equal, and such twins answer the same on them."""
    rng = random.Random(seed)
    snapshot = _snapshot(rng)
    snapshot.nodes.extend(dataclasses.replace(node, name=f"{node.name}-twin") for node in list(snapshot.nodes))
    ssn = Session(snapshot, config, default_registry())
    ext = ssn.ext
    assert ssn._twins_by_state
    pure = [t for t in (*ext.row_filters.values(), *ext.row_scores.values()) if t in ext.node_state_only]
    tasks = list(ssn.tasks.values())
    numbers: dict[tuple[object, ...], int] = {}
    for _ in range(30):
        task = rng.choice(tasks)
        _walk(ssn, task, rng)
        by_number: dict[int, int] = {}
        for row in range(len(ssn.table)):
            number = ssn.table.state_id(row)
            assert numbers.setdefault(_node_state(ssn, row), number) == number  # a state keeps its number
            first = by_number.setdefault(number, row)
            assert _node_state(ssn, first) == _node_state(ssn, row)
            for probe in tasks:
                assert [twin(probe, row) for twin in pure] == [twin(probe, first) for twin in pure]


def _explained_snapshot(rng: random.Random) -> Snapshot:
    """`_snapshot`'s nodes with labels, taints and a cordon here and there, and pods that select or tolerate
    some of them: every kind of reason an explanation charges."""
    snapshot = _snapshot(rng)
    taint = Taint(key="gpu", value="cloud", effect=TaintEffect.NO_SCHEDULE)
    nodes = []
    for node in snapshot.nodes:
        labels = {"zone": rng.choice(["a", "b"])}
        taints = (taint,) if rng.random() < 0.3 else ()
        nodes.append(dataclasses.replace(node, labels=labels, taints=taints, unschedulable=rng.random() < 0.15))
    tolerate = (Toleration(key="gpu", operator="Exists"),)
    pods = []
    for pod in snapshot.pods:
        selector = {"zone": "a"} if rng.random() < 0.3 else {}
        pods.append(
            dataclasses.replace(pod, node_selector=selector, tolerations=tolerate if rng.random() < 0.5 else ())
        )
    return Snapshot(nodes, snapshot.queues, snapshot.groups, pods)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "weighted"])
def test_explain_twins_charge_each_node_as_the_vector_forms(seed: int, config: SchedulerConfiguration) -> None:
    """A dynamic filter's row explanation names the first of its reasons whose mask leaves the node out."""
    rng = random.Random(seed)
    ssn = Session(_explained_snapshot(rng), config, default_registry())
    ext = ssn.ext
    assert set(ext.row_explains) == set(ext.dynamic_filters)
    tasks = list(ssn.tasks.values())
    for _ in range(30):
        _walk(ssn, rng.choice(tasks), rng)
        for probe in tasks:
            for dynamic_filter in ext.dynamic_filters:
                masks = [passing for _, passing in dynamic_filter.explain(probe)]
                for row in range(len(ssn.table)):
                    expected = next((i for i, passing in enumerate(masks) if not passing[row]), -1)
                    assert ext.row_explains[dynamic_filter](probe, row) == expected


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "weighted"])
@pytest.mark.parametrize("patched", [session_module.SCALAR_EXPLAIN_ROWS, 3])
def test_patched_explanations_say_what_counting_every_node_says(
    seed: int, config: SchedulerConfiguration, patched: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shape's explanation, patched for the nodes that changed since it was last asked (or counted again
    past SCALAR_EXPLAIN_ROWS of them), is the text counting every node gives, after every step of a walk."""
    monkeypatch.setattr(session_module, "SCALAR_EXPLAIN_ROWS", patched)
    rng = random.Random(seed)
    ssn = Session(_explained_snapshot(rng), config, default_registry())
    assert ssn._explain_twins is not None
    tasks = list(ssn.tasks.values())
    for _ in range(40):
        for _ in range(rng.choice([1, 1, 2, 5])):
            _walk(ssn, rng.choice(tasks), rng)
        for probe in rng.sample(tasks, 3):  # shapes asked at different times: each patches its own changes
            assert ssn.explain(probe) == ssn._explain(probe)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "weighted"])
def test_a_shape_s_patched_totals_are_what_summing_every_node_gives(seed: int, config: SchedulerConfiguration) -> None:
    """A shape's totals, patched for the nodes that changed since it was last asked (or summed again past
    SCALAR_TOTAL_ROWS of them), are bit for bit the sums over every node, and best_node takes their argmax
    (None where all are -inf)."""
    rng = random.Random(seed)
    ssn = Session(_explained_snapshot(rng), config, default_registry())
    tasks = list(ssn.tasks.values())
    for _ in range(40):
        for _ in range(rng.choice([1, 1, 2, 5])):
            _walk(ssn, rng.choice(tasks), rng)
        for probe in rng.sample(tasks, 3):
            row = ssn.best_node(probe)
            cache = ssn._shape_cache(probe)
            fresh = ssn._totals(cache.mask.array, cache.score.array, cache.dynamic)
            assert np.array_equal(cache.total, fresh)
            best = int(fresh.argmax())
            assert row == (None if fresh[best] == float("-inf") else best)
