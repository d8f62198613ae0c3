"""Nodes joining and leaving a long-lived session change the node table's rows in place (`NodeTable.add_rows`,
`remove_rows`, `Session.change_nodes`): after any history of joins, departures (pods on them or not), resizes,
cordons, Ready flips, placements, evictions and departures of jobs, the table holds exactly what one rebuilt over
the node list holds (`Session.replace_nodes`), every task is on the same node, the dynamic caches carried across
say what fresh ones say, and the two decide alike."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scheduler_builders import CLOUD_TAINT, TOLERATE_CLOUD, conf, job, node, queue, taint

from tidegate.model.objects import PodGroupPhase
from tidegate.model.resources import Resources
from tidegate.scheduler.node_table import NodeTable
from tidegate.scheduler.online import OnlineScheduler
from tidegate.sim.run import WORKLOAD_RESOURCES

CONFIG = conf(
    "enqueue, allocate, reclaim, preempt, backfill",
    "priority, gang",
    "drf, predicates, proportion, nodeorder, binpack, gpushare",
)
ARRAYS = (
    "alloc",
    "card_exists",
    "card_mem",
    "used",
    "releasing",
    "pipelined",
    "card_used_mem",
    "card_used_milli",
    "card_whole",
    "card_free",
    "schedulable",
)
LISTS = ("names", "labels", "taints", "card_free_bits", "promised", "alloc_rows", "schedulable_rows", "nodes")
ZONES = ("z0", "z1", "z2")
#: Every fourth node also carries a taint the gangs leave untolerated (pods keep away when they can).
SOFT_TAINT = taint("spot=true:PreferNoSchedule")


class Rebuilding(OnlineScheduler):
    """The reference: every change of the node list (resizes too) rebuilds the table."""

    def _sync_nodes(self) -> None:
        self._nodes_changed = self._nodes_changed or self._listed or bool(self._resized)
        super()._sync_nodes()


def same_tables(a: NodeTable, b: NodeTable) -> None:
    for name in ARRAYS:
        left, right = getattr(a, name), getattr(b, name)
        assert left.shape == right.shape and left.dtype == right.dtype and np.array_equal(left, right), name
    for name in LISTS:
        assert getattr(a, name) == getattr(b, name), name
    assert a.row == b.row and a.promised_total == b.promised_total
    for row in range(len(a)):  # what scalar code reads (kept apart, refreshed when a row changes)
        assert a.used_row(row) == b.used_row(row) and a.card_row(row) == b.card_row(row)


join = st.tuples(st.just("join"), st.sampled_from([0, 2, 4, 8]), st.booleans())
leave = st.tuples(st.just("leave"), st.integers(0, 30))
gang = st.tuples(
    st.just("gang"),
    st.sampled_from(["a", "b"]),
    st.integers(1, 3),
    st.sampled_from([0, 1, 2, 4, 8]),
    st.sampled_from([0, 10]),
)
running = st.tuples(st.just("running"), st.integers(0, 30), st.sampled_from(["a", "b"]))
#: A one-pod job that asks for a zone (`nodeSelector`): the label index's columns are read.
zoned = st.tuples(st.just("zoned"), st.sampled_from(["a", "b"]), st.sampled_from([0, 1, 8]), st.sampled_from(ZONES))
cycle = st.tuples(st.just("cycle"))
op = st.one_of(  # nodes come and go with pods on them
    join,
    join,
    leave,
    leave,
    gang,
    gang,
    running,
    running,
    zoned,
    cycle,
    cycle,
    cycle,
    st.tuples(st.just("squeeze"), st.integers(0, 30), st.sampled_from([16, 64])),
    st.tuples(st.just("cordon"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("ready"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 50)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60))
@example([("join", 8, False), ("join", 8, False), ("join", 2, False), ("running", 2, "a"), ("leave", 0), ("cycle",)])
@example(  # the running rows were listed in order, then a node before a running pod's leaves: the list moves up too
    [("join", 8, False), ("join", 8, False), ("running", 1, "a"), ("cycle",), ("leave", 0), ("cycle",)]
)
@example(  # a whole-card gang preempting another on a node (its cards promised to it), which then leaves
    [
        ("join", 8, False),
        ("join", 2, False),
        ("gang", "a", 1, 8, 0),
        ("cycle",),
        ("gang", "a", 1, 8, 10),
        ("cycle",),
        ("leave", 0),
        ("cycle",),
    ]
)
@example(  # a node that fits turns not Ready: its carried dynamic results say it fits no more
    [("join", 8, False), ("join", 8, False), ("gang", "a", 1, 1, 0), ("cycle",), ("ready", 0, False), ("cycle",)]
)
@example(  # a zone asked for, then the first node leaves: the carried zone column moves up with the rows
    [
        ("join", 0, False),
        ("join", 0, True),
        ("join", 0, False),
        ("zoned", "a", 0, "z1"),
        ("cycle",),
        ("leave", 0),
        ("join", 0, False),
        ("join", 0, False),
        ("cycle",),
    ]
)
def test_rows_changed_in_place_hold_what_a_rebuilt_table_holds(operations: list[tuple[Any, ...]]) -> None:
    queues = [queue("a", weight=1), queue("b", weight=2)]
    resources = WORKLOAD_RESOURCES
    both = [
        OnlineScheduler([], queues, CONFIG, resources=resources),
        Rebuilding([], queues, CONFIG, resources=resources),
    ]
    names: list[str] = []
    groups: list[str] = []
    now = 0.0
    for made, operation in enumerate(operations):
        kind = operation[0]
        if kind == "join":
            name = f"n{made}"
            names.append(name)
            taints = [CLOUD_TAINT] if operation[2] else []
            if made % 4 == 3:
                taints.append(SOFT_TAINT)
            labels = {"zone": ZONES[made % len(ZONES)]}
            made_node = node(name, cpu=32, gpus=operation[1], taints=taints, labels=labels)
            for s in both:
                s.add_nodes([made_node])
        elif kind == "leave" and names:
            name = names.pop(operation[1] % len(names))
            for s in both:
                s.remove_nodes([name])  # its pods go back to pending
        elif kind == "squeeze" and names:
            name = names[operation[1] % len(names)]
            current = both[0].nodes[name]
            allocatable = Resources({**current.allocatable, "cpu": operation[2] * 1000})
            for s in both:
                s.add_nodes([dataclasses.replace(current, allocatable=allocatable)])
        elif kind == "ready" and names:  # the node's Ready condition flips: a resize of its row
            current = both[0].nodes[names[operation[1] % len(names)]]
            for s in both:
                s.add_nodes([dataclasses.replace(current, ready=operation[2])])
        elif kind == "cordon" and names:
            for s in both:
                s.set_schedulable(names[operation[1] % len(names)], operation[2])
        elif kind == "gang":
            ask = {"cpu": 1, "nvidia.com/gpu": operation[3]}
            gang = job(f"g{made}", operation[1], operation[2], ask, priority=operation[4], created=now)
            gang.pods[0].tolerations = (TOLERATE_CLOUD,)
            for s in both:
                s.add_group(gang.group, gang.pods)
            groups.append(gang.key)
        elif kind == "zoned":
            ask = {"cpu": 1, "nvidia.com/gpu": operation[2]}
            gang = job(f"z{made}", operation[1], 1, ask, node_selector={"zone": operation[3]}, created=now)
            for s in both:
                s.add_group(gang.group, gang.pods)
            groups.append(gang.key)
        elif kind == "running" and names:
            where = names[operation[1] % len(names)]
            gang = job(f"r{made}", operation[2], 1, {"cpu": 1}, running_on=[where], phase=PodGroupPhase.RUNNING)
            for s in both:
                s.add_group(gang.group, gang.pods)
            groups.append(gang.key)
        elif kind == "finish" and groups:
            key = groups.pop(operation[1] % len(groups))
            for s in both:
                s.remove_group(key)
        elif kind == "cycle":
            now += 1.0
            decided = [s.cycle(now) for s in both]
            assert decided[0] == decided[1]
            same_tables(both[0].ssn.table, both[1].ssn.table)
            tasks = [{key: (t.node, t.cards, t.status) for key, t in s.ssn.tasks.items()} for s in both]
            assert tasks[0] == tasks[1]
            indexed = []
            for s in both:
                running = s.ssn.running
                assert running is not None
                assert running.sorted_rows() == sorted(running.rows)  # kept, not sorted each time
                # each row's count of pods by queue, kept as they come and go
                assert running.queues == {
                    row: Counter(id(t.job.queue) for t in on.values()) for row, on in running.rows.items()
                }
                rows = {row: sorted(t.key for t in on.values()) for row, on in running.rows.items()}
                releasing = {row: sorted(t.key for t in on.values()) for row, on in running.releasing.items()}
                indexed.append((rows, releasing, {t.key: running.where.get(id(t)) for t in s.ssn.tasks.values()}))
            assert indexed[0] == indexed[1]
            same_dynamic_results(both[0], both[1])
            same_label_and_taint_indexes(both[0], both[1])
            for s in both:
                held_keys_are_fresh(s)


def held_keys_are_fresh(scheduler: OnlineScheduler) -> None:
    """Every job's key as the session holds it (across node tables for a job whose pods are all pending) is
    the key its plugins give now: drf's share, which reads the cluster's total, among them."""
    ssn = scheduler.ssn
    for info in ssn.jobs:
        fresh = (*[key(info) for key in ssn.ext.job_order], info.group.created, info.key)
        assert ssn.job_key(info) == fresh


def same_label_and_taint_indexes(in_place: OnlineScheduler, rebuilt: OnlineScheduler) -> None:
    """The taint index carried across joins and departures is the one a rebuilt table gets (its sets numbered
    in the same order, which is the order reasons are charged in); each label column carried says of every
    node what the rebuilt one says (the codes may differ: a value no node has any more keeps its code)."""
    mine, theirs = in_place.ssn.taint_index, rebuilt.ssn.taint_index
    assert mine.sets == theirs.sets and np.array_equal(mine.set_of_node, theirs.set_of_node)
    for key in list(in_place.ssn.label_index._columns):
        decoded = []
        for index in (in_place.ssn.label_index, rebuilt.ssn.label_index):
            codes, vocab = index.column(key)
            value_of = {code: value for value, code in vocab.items()}
            decoded.append([value_of.get(code) for code in codes.tolist()])
        assert decoded[0] == decoded[1]


def same_dynamic_results(in_place: OnlineScheduler, rebuilt: OnlineScheduler) -> None:
    """The dynamic caches carried across joins and departures (`Session.change_nodes`) give, once brought up
    to date, what caches built afresh over the rebuilt table give: the same fit, the same scores where it fits."""
    asking = {task.pod.requests: task for task in in_place.ssn.tasks.values()}
    for request, task in asking.items():
        if request not in in_place.ssn._dynamic:
            continue
        caches = [s.ssn._dynamic_cache(s.ssn.tasks[task.key]) for s in (in_place, rebuilt)]
        for cache in caches:
            cache.sync_arrays()
        fit = caches[0].fit
        assert np.array_equal(fit, caches[1].fit)
        assert fit.tolist() == caches[0].fit_list
        for mine, theirs in zip(caches[0].scores, caches[1].scores, strict=True):
            assert np.array_equal(mine[fit], theirs[fit])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 7)), max_size=40))
def test_the_running_rows_stay_in_order_and_a_lent_list_stays_as_lent(steps: list[tuple[bool, int]]) -> None:
    s = OnlineScheduler([node(f"n{i}", cpu=32) for i in range(8)], [queue("a"), queue("b")], CONFIG)
    running = s.ssn.running
    assert running is not None
    live: list[str] = []
    lent: list[int] | None = None
    for made, (arrive, where) in enumerate(steps):
        before = None if lent is None else list(lent)
        if arrive or not live:
            name = "ab"[made % 2]
            gang = job(f"r{made}", name, 1, {"cpu": 1}, running_on=[f"n{where}"], phase=PodGroupPhase.RUNNING)
            s.add_group(gang.group, gang.pods)
            live.append(gang.key)
        else:
            s.remove_group(live.pop(where % len(live)))
        assert lent == before  # what a caller holds does not change under it
        lent = running.sorted_rows()
        assert lent == sorted(running.rows)
        # and each row's count of pods by queue, as they come and go
        assert running.queues == {
            row: Counter(id(t.job.queue) for t in on.values()) for row, on in running.rows.items()
        }
