"""Hierarchical DRF (drf with enableHierarchy), as Volcano's: the queue tree from volcano.sh/hierarchy and
volcano.sh/hierarchy-weights (or tidegate's spec.parent), queue order by hierarchical dominant share, and its
reclaim victims; the annotations checked as Volcano's queue webhooks check them."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from scheduler_builders import Cluster, job, node, queue

from tidegate.model.manifests import load_text
from tidegate.model.objects import PluginOption, PodGroupPhase, Queue, SchedulerConfiguration, Tier
from tidegate.model.validation import validate
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.plugins.hdrf import PathKey
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Decisions, Snapshot


def annotated(name: str, path: str, weights: str, **kwargs: object) -> Queue:
    return dataclasses.replace(
        queue(name, **kwargs),  # type: ignore[arg-type]
        hierarchy=tuple(path.split("/")),
        hierarchy_weights=tuple(float(w) for w in weights.split("/")),
    )


def config(*plugins: str, hierarchy: bool = True, actions: tuple[str, ...] = ("allocate",)) -> SchedulerConfiguration:
    options = [PluginOption("drf", switches={"enableHierarchy": hierarchy}), *(PluginOption(name) for name in plugins)]
    return SchedulerConfiguration(actions=actions, tiers=(Tier((PluginOption("gang"),)), Tier(tuple(options))))


def placed(decisions: Decisions) -> Counter[str]:
    """Pods bound, by PodGroup name."""
    return Counter(bind.pod.split("/")[1].rsplit("-", 1)[0] for bind in decisions.binds)


def many(name: str, queue_name: str, count: int, cpu: object = 1, memory: object = 0) -> list[object]:
    """`count` one-pod jobs name-0, name-1, ... admitted (Inqueue)."""
    return [
        job(f"{name}-{i}", queue_name, 1, {"cpu": cpu, "memory": memory}, phase=PodGroupPhase.INQUEUE)
        for i in range(count)
    ]


def snapshot(nodes: list[object], queues: list[Queue], *groups: object) -> Snapshot:
    jobs = [j for group in groups for j in (group if isinstance(group, list) else [group])]
    return Snapshot(nodes, queues, [j.group for j in jobs], [p for j in jobs for p in j.pods])  # type: ignore[attr-defined,arg-type]


@pytest.mark.parametrize(
    ("queues", "jobs", "cluster", "expected"),
    [
        (  # Volcano's hdrf_test "rescaling test": sci and eng split the cluster, eng's dev and prod split eng's half
            [
                annotated("root-sci", "root/sci", "100/50"),
                annotated("root-eng-dev", "root/eng/dev", "100/50/50"),
                annotated("root-eng-prod", "root/eng/prod", "100/50/50"),
            ],
            [("pg1", "root-sci", "1", "1G"), ("pg21", "root-eng-dev", "1", "0"), ("pg22", "root-eng-prod", "0", "1G")],
            (10, "10G"),
            {"pg1": 5, "pg21": 5, "pg22": 5},
        ),
        (  # its "blocking nodes test": once the CPUs are gone, jobs asking memory only share what is left
            [
                annotated("root-pg1", "root/pg1", "100/25"),
                annotated("root-pg2", "root/pg2", "100/25"),
                annotated("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
                annotated("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
                annotated("root-pg4", "root/pg4", "100/25"),
            ],
            [
                ("pg1", "root-pg1", "1", "0"),
                ("pg2", "root-pg2", "1", "0"),
                ("pg31", "root-pg3-pg31", "1", "0"),
                ("pg32", "root-pg3-pg32", "0", "1G"),
                ("pg4", "root-pg4", "0", "1G"),
            ],
            (30, "30G"),
            {"pg1": 10, "pg2": 10, "pg31": 10, "pg32": 15, "pg4": 15},
        ),
    ],
    ids=["rescaling", "blocking-nodes"],
)
def test_volcano_s_hdrf_cases(
    queues: list[Queue], jobs: list[tuple[str, str, str, str]], cluster: tuple[int, str], expected: dict[str, int]
) -> None:
    pods = 30 if expected.get("pg32") else 10
    groups = [
        job(name, q, pods, {"cpu": cpu, "memory": memory}, min_member=0, phase=PodGroupPhase.INQUEUE)
        for name, q, cpu, memory in jobs
    ]
    cpu, memory = cluster
    # Volcano's test runs drf and proportion, both ordering queues (drf first)
    nodes = [node("n", cpu=cpu, memory=memory, pods=500)]
    decisions = schedule(snapshot(nodes, queues, *groups), config("predicates", "proportion"))
    assert placed(decisions) == expected


TREE = [annotated("a", "root/a", "1/1"), annotated("b1", "root/b/b1", "1/1/1"), annotated("b2", "root/b/b2", "1/1/1")]


def by_queue(decisions: Decisions) -> dict[str, int]:
    counts = placed(decisions)
    return {q: sum(n for name, n in counts.items() if name.rsplit("-", 1)[0] == q) for q in ("a", "b1")}


def running(name: str, queue_name: str, count: int) -> list[object]:
    return [
        job(f"{name}-{i}", queue_name, 1, {"cpu": 1}, phase=PodGroupPhase.RUNNING, running_on=["n"])
        for i in range(count)
    ]


def test_hdrf_orders_queues_by_their_parents_shares_where_flat_drf_does_not() -> None:
    """12 CPUs; b2 runs 4 and waits for nothing. root splits the cluster between a and b, so b1 gets what b2
    leaves of b's half: a 6, b1 2. Flat drf orders no queue (a, first by name, takes the 8 CPUs left), and
    with proportion each of the three queues deserves 4."""
    cluster = snapshot([node("n", cpu=12)], TREE, running("b2", "b2", 4), many("a", "a", 12), many("b1", "b1", 12))
    assert by_queue(schedule(cluster, config("predicates"))) == {"a": 6, "b1": 2}
    assert by_queue(schedule(cluster, config("predicates", hierarchy=False))) == {"a": 8, "b1": 0}
    assert by_queue(schedule(cluster, config("predicates", "proportion", hierarchy=False))) == {"a": 4, "b1": 4}


def test_each_level_s_weight_divides_its_share() -> None:
    tree = [annotated("a", "root/a", "1/1"), annotated("b1", "root/b/b1", "1/2/1")]
    cluster = snapshot([node("n", cpu=12)], tree, many("a", "a", 12), many("b1", "b1", 12))
    assert by_queue(schedule(cluster, config("predicates"))) == {"a": 4, "b1": 8}


def test_a_spec_parent_tree_is_hdrf_s_tree_weighted_by_each_queue_s_weight() -> None:
    """Without the annotations, a queue's spec.parent chain is its path (tidegate's hierarchical queues), each
    level weighted by its queue's spec.weight; the capacity plugin works on the same tree meanwhile."""
    tree = [queue("a"), queue("b", weight=3), queue("b1", parent="b"), queue("b2", parent="b")]
    cluster = snapshot([node("n", cpu=12)], tree, running("b2", "b2", 4), many("a", "a", 12), many("b1", "b1", 12))
    assert by_queue(schedule(cluster, config("predicates"))) == {"a": 3, "b1": 5}
    assert by_queue(schedule(cluster, config("predicates", "capacity"))) == {"a": 3, "b1": 5}


def test_queues_without_a_place_in_the_tree_tie_and_the_next_key_decides() -> None:
    assert PathKey(()) == PathKey(((False, 0.5),))
    assert PathKey(((False, 0.5),)) == PathKey(((False, 0.5), (True, 0.1)))  # equal down to the shorter path
    assert PathKey(((False, 0.9),)) < PathKey(((True, 0.1),))  # unsaturated first
    assert PathKey(((False, 0.1), (False, 0.9))) < PathKey(((False, 0.2), (False, 0.0)))
    assert (0, PathKey(((False, 0.1),)), "z") < (0, PathKey(((False, 0.1), (False, 0.5))), "zz")


def test_hdrf_reclaim_stops_where_the_reclaimer_s_queue_would_no_longer_come_first() -> None:
    """a holds all 12 CPUs; b1 reclaims a CPU whenever, with its job holding one more and the victim's one less,
    b would still come first: up to 7 and 5 (at 6 and 6 the comparison ties). Flat drf judges no reclaim victim,
    so b1 takes everything its jobs ask."""
    for hierarchy, expected in ((True, (7, 5)), (False, (0, 12))):
        cluster = Cluster([node("n", cpu=12)], TREE, [*running("a", "a", 12), *many("b1", "b1", 12)])  # type: ignore[list-item]
        conf = config("predicates", hierarchy=hierarchy, actions=("allocate", "reclaim"))
        for _ in range(6):
            decisions = cluster.schedule(conf)
            cluster.apply(decisions)
            gone = {evict.pod for evict in decisions.evictions}
            cluster.jobs = [j for j in cluster.jobs if not any(p.key in gone for p in j.pods)]  # evicted jobs end
        on_node = Counter(p.group.rsplit("-", 1)[0] for j in cluster.jobs for p in j.pods if p.node_name)
        assert (on_node["a"], on_node["b1"]) == expected


QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: {name}
  annotations: {{{annotations}}}
"""


@pytest.mark.parametrize(
    ("annotations", "field", "message"),
    [
        ('volcano.sh/hierarchy: root/a, volcano.sh/hierarchy-weights: "1"', "hierarchy", "has 2 level(s)"),
        ("volcano.sh/hierarchy: root/a", "hierarchy", "has 2 level(s)"),
        ("volcano.sh/hierarchy-weights: 1/2", "hierarchy-weights", "has 1 level(s)"),
        ("volcano.sh/hierarchy: root/a, volcano.sh/hierarchy-weights: 1/x", "hierarchy-weights", "'x' in '1/x'"),
        ("volcano.sh/hierarchy: root/a, volcano.sh/hierarchy-weights: 1/0", "hierarchy-weights", "above 0"),
        ("volcano.sh/hierarchy: root//a, volcano.sh/hierarchy-weights: 1/1/1", "hierarchy", "a level has no name"),
    ],
)
def test_bad_hierarchy_annotations_are_errors_naming_the_annotation(annotations: str, field: str, message: str) -> None:
    ms = load_text(QUEUE.format(name="q", annotations=annotations), "queues.yaml")
    assert [(e.name, e.field) for e in ms.errors] == [("q", f"metadata.annotations.volcano.sh/{field}")]
    assert message in ms.errors[0].message


def test_a_path_without_root_is_put_under_it_as_volcano_s_mutating_webhook_does() -> None:
    annotations = "volcano.sh/hierarchy: eng/dev, volcano.sh/hierarchy-weights: 2/8"
    ms = load_text(QUEUE.format(name="q", annotations=annotations), "q")
    assert (ms.queues[0].hierarchy, ms.queues[0].hierarchy_weights) == (("root", "eng", "dev"), (1.0, 2.0, 8.0))


def test_a_queue_above_another_queue_s_place_is_refused() -> None:
    text = QUEUE.format(name="sci", annotations="volcano.sh/hierarchy: root/sci, volcano.sh/hierarchy-weights: 1/1")
    text += "---" + QUEUE.format(
        name="dev", annotations="volcano.sh/hierarchy: root/sci/dev, volcano.sh/hierarchy-weights: 1/1/1"
    )
    text += "---" + QUEUE.format(
        name="scidev", annotations="volcano.sh/hierarchy: root/scidev, volcano.sh/hierarchy-weights: 1/1"
    )
    errors = validate(load_text(text, "queues.yaml"))
    assert [(e.name, e.field) for e in errors] == [("sci", "metadata.annotations.volcano.sh/hierarchy")]
    assert "leads to queue 'dev'" in errors[0].message


def test_enable_hierarchy_is_read_next_to_the_plugin_s_name() -> None:
    conf = """
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {{name: c}}
tiers:
- plugins:
  - {{name: drf, enableHierarchy: {value}}}
"""
    ms = load_text(conf.format(value="true"), "c.yaml")
    option = ms.configurations[0].plugin("drf")
    assert option is not None and option.enabled("enableHierarchy")
    ms = load_text(conf.format(value='"yes"'), "c.yaml")
    assert [e.field for e in ms.errors] == ["tiers[0].plugins[0].enableHierarchy"]


def test_a_long_lived_scheduler_orders_by_the_weights_as_edited_as_a_fresh_session_does() -> None:
    tree = [queue("p"), queue("a", parent="p"), queue("b1", parent="p")]
    conf = config("predicates")
    online = OnlineScheduler([node("n", cpu=12)], tree, conf)
    jobs = [*many("a", "a", 12), *many("b1", "b1", 12)]
    for made in jobs:
        online.add_group(made.group, made.pods)  # type: ignore[attr-defined]
    heavier = dataclasses.replace(tree[2], weight=2)
    online.set_queue(heavier)
    fresh = schedule(snapshot([node("n", cpu=12)], [tree[0], tree[1], heavier], jobs), conf)
    assert by_queue(online.cycle(1.0)) == by_queue(fresh) == {"a": 4, "b1": 8}
