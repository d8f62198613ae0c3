"""A job no node could ever take costs nothing per cycle, and gets its turn again when nodes change."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from scheduler_builders import (
    CAPACITY,
    NODE_TYPE_LABEL,
    PREFER_IDC,
    PROPORTION,
    TOLERATE_CLOUD,
    cloud_node,
    conf,
    idc_node,
    job,
    node,
    queue,
    req,
    required,
    res,
)

from bench.simulation import replay_input
from tidegate.model.objects import NodeAffinity, PodGroupPhase
from tidegate.scheduler import node_table, session
from tidegate.scheduler.framework import PluginRegistry
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.plugins.proportion import ProportionPlugin
from tidegate.scheduler.snapshot import Decisions
from tidegate.sim.loader import SimulationInput
from tidegate.sim.run import run_simulation
from tidegate.sim.workload import prefer_idc_and

#: No quota vote: only nodes stop a job's pods.
NO_QUOTA = conf("allocate", "gang", "predicates")


def online(*names: str) -> OnlineScheduler:
    return OnlineScheduler([node(n, cpu=32) for n in names], [queue("default")], PROPORTION, report_waiting=False)


def test_a_job_asking_more_than_any_node_has_leaves_the_scheduler_idle_until_nodes_change() -> None:
    s = online("n1", "n2")
    big = job("big", requests={"cpu": 64})
    s.add_group(big.group, big.pods)
    assert not s.idle()
    assert s.cycle(1.0).binds == []
    assert "insufficient cpu" in s.pending_reason(big.key)
    assert s.idle()  # freeing capacity cannot help: only a new node list can
    small = job("small", requests={"cpu": 4})
    s.add_group(small.group, small.pods)
    assert not s.idle()
    assert [b.pod for b in s.cycle(2.0).binds] == ["default/small-0"]
    s.remove_group(small.key)  # capacity freed: still nothing for `big`
    assert s.idle()
    s.add_nodes([node("huge", cpu=128)])
    assert not s.idle()
    assert [(b.pod, b.node) for b in s.cycle(3.0).binds] == [("default/big-0", "huge")]


def test_a_group_bound_to_a_node_added_since_the_last_cycle_holds_its_room() -> None:
    # as a restarted control plane or `tidegate kube` starts: nodes added, then groups already running there
    s = OnlineScheduler([], [queue("default")], PROPORTION, report_waiting=False)
    s.add_nodes([node("n1", cpu=32)])
    running = job("running", requests={"cpu": 32}, running_on=["n1"], phase=PodGroupPhase.RUNNING)
    s.add_group(running.group, running.pods)
    waiting = job("waiting", requests={"cpu": 32})
    s.add_group(waiting.group, waiting.pods)
    assert s.cycle(1.0).binds == []  # n1 is full: nothing lands on it twice
    assert s.ssn.warnings == []
    s.remove_group(running.key)
    assert [(b.pod, b.node) for b in s.cycle(2.0).binds] == [("default/waiting-0", "n1")]


def test_a_job_no_node_covers_on_every_resource_at_once_is_hopeless() -> None:
    # n1 has the cpus, n2 the memory: neither has both, so no capacity freed can help it
    nodes = [node("n1", cpu=32, memory="8Gi"), node("n2", cpu=8, memory="256Gi")]
    s = OnlineScheduler(nodes, [queue("default")], PROPORTION, report_waiting=False)
    both = job("both", requests={"cpu": 16, "memory": "64Gi"})
    s.add_group(both.group, both.pods)
    assert s.cycle(1.0).binds == []
    assert s.idle()
    s.add_nodes([node("n3", cpu=16, memory="64Gi")])  # just what it asks
    assert [(b.pod, b.node) for b in s.cycle(2.0).binds] == [("default/both-0", "n3")]
    again = job("again", requests={"cpu": 16, "memory": "64Gi"})
    s.add_group(again.group, again.pods)
    assert s.cycle(3.0).binds == []
    assert not s.idle()  # n3 could take it once `both` is gone
    s.remove_group(both.key)
    assert [(b.pod, b.node) for b in s.cycle(4.0).binds] == [("default/again-0", "n3")]


def test_without_node_explanations_a_job_is_told_only_that_no_node_takes_it_and_stays_hopeless() -> None:
    """`explain_nodes=False` (the simulator's core): the reason names no filter, and a job no node could take is
    found hopeless again with each new node table (allocate keeps a reason while its text is the very object
    it wrote: one text object for every node table would leave the job hopeless for the old table only)."""
    s = OnlineScheduler([node("n1", cpu=32)], [queue("default")], NO_QUOTA, report_waiting=False, explain_nodes=False)
    big = job("big", requests={"cpu": 64})
    s.add_group(big.group, big.pods)
    assert s.cycle(1.0).binds == []
    assert s.pending_reason(big.key) == "none of 1 nodes takes it"
    assert s.idle()
    for i, when in enumerate((2.0, 3.0), start=2):
        s.add_nodes([node(f"n{i}", cpu=16)])  # a new node table, on which it fits nowhere either
        assert not s.idle()
        assert s.cycle(when).binds == []
        assert s.idle()
        assert s.pending_reason(big.key) == f"none of {i} nodes takes it"


def test_a_job_that_fits_an_empty_node_is_not_hopeless_while_the_cluster_is_full() -> None:
    s = online("n1")
    first, second = job("first", requests={"cpu": 32}), job("second", requests={"cpu": 32})
    for j in (first, second):
        s.add_group(j.group, j.pods)
    assert [b.pod for b in s.cycle(1.0).binds] == ["default/first-0"]
    assert not s.idle()  # `second` waits for room, not for a node
    s.remove_group(first.key)
    assert [b.pod for b in s.cycle(2.0).binds] == ["default/second-0"]


def backlog(hog_gpus: int) -> tuple[OnlineScheduler, list[str]]:
    """Queue `team` may use 8 GPUs and `hog` holds `hog_gpus` of them; 30 jobs wait, in order: ten asking
    4 GPUs, one asking 1 (j10), then nineteen asking 4 again."""
    nodes = [node(f"n{i}", cpu=64, gpus=8) for i in range(4)]
    s = OnlineScheduler(nodes, [queue("team", capability={"nvidia.com/gpu": 8})], CAPACITY, report_waiting=False)
    hog = job("hog", queue="team", requests={"nvidia.com/gpu": hog_gpus})
    s.add_group(hog.group, hog.pods)
    s.cycle(0.0)
    keys = []
    for i in range(30):
        gpus = 1 if i == 10 else 4
        j = job(f"j{i:02}", queue="team", requests={"nvidia.com/gpu": gpus, "cpu": 1 + i % 3}, created=float(1 + i))
        s.add_group(j.group, j.pods)
        keys.append(j.key)
    return s, keys


def placed(s: OnlineScheduler, now: float) -> list[str]:
    return sorted(b.pod.removesuffix("-0") for b in s.cycle(now).binds)


def test_a_refused_backlog_is_admitted_in_job_order_as_room_appears() -> None:
    s, keys = backlog(hog_gpus=8)
    for now in (1.0, 2.0, 3.0):
        assert placed(s, now) == []
    assert all("at capability" in s.pending_reason(k) for k in keys)
    s.remove_group("default/hog")  # 8 GPUs back: j00 and j01 take them; nothing else fits, not even j10
    assert placed(s, 4.0) == ["default/j00", "default/j01"]
    assert all("at capability" in s.pending_reason(k) for k in keys[2:])
    s.remove_group("default/j00")
    assert placed(s, 5.0) == ["default/j02"]


def test_a_small_job_behind_refused_big_ones_is_admitted_when_it_fits() -> None:
    s, keys = backlog(hog_gpus=5)  # 3 GPUs of room: no 4-GPU job fits, j10 does
    assert placed(s, 1.0) == ["default/j10"]
    assert all("at capability" in s.pending_reason(k) for k in keys if k != "default/j10")
    assert placed(s, 2.0) == []
    s.remove_group("default/j10")
    s.remove_group("default/hog")
    assert placed(s, 3.0) == ["default/j00", "default/j01"]


class Fresh(ProportionPlugin):
    """Proportion as a plugin that does not reopen in place: every cycle registers everything afresh."""

    reopens_in_place = False


def test_plugins_reopened_in_place_decide_as_plugins_registered_afresh() -> None:
    def scheduler(registry: PluginRegistry) -> OnlineScheduler:
        nodes = [node(f"n{i}", cpu=16, gpus=4) for i in range(3)]
        queues = [queue("a", weight=2), queue("b", weight=1)]
        return OnlineScheduler(nodes, queues, PROPORTION, registry=registry, report_waiting=True)

    fresh = default_registry()
    fresh.register("proportion", Fresh)
    kept, renewed = scheduler(default_registry()), scheduler(fresh)
    first = kept.ssn.ext, renewed.ssn.ext
    for step in range(12):
        for s in (kept, renewed):
            j = job(f"j{step}", queue="ab"[step % 2], replicas=1 + step % 3, requests={"nvidia.com/gpu": 1 + step % 2})
            s.add_group(j.group, j.pods)
            if step >= 4 and step % 3 == 1:
                s.remove_group(f"default/j{step - 4}")
        assert kept.cycle(float(step)) == renewed.cycle(float(step))
    assert kept.ssn.ext is first[0] and renewed.ssn.ext is not first[1]


def _replay_binds(
    inp: SimulationInput, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[float, str, str, tuple[int, ...]]]:
    """Every bind of a replay, with its time, node and GPU cards."""
    binds: list[tuple[float, str, str, tuple[int, ...]]] = []
    cycle = OnlineScheduler.cycle

    def recording(self: OnlineScheduler, now: float) -> Decisions:
        decisions = cycle(self, now)
        binds.extend((now, b.pod, b.node, b.gpu_indices) for b in decisions.binds)
        return decisions

    with monkeypatch.context() as patch:
        patch.setattr(OnlineScheduler, "cycle", recording)
        run_simulation(inp, workers=1)
    return binds


@pytest.mark.parametrize(
    "bounds",
    [{"MAX_STATES": 3}, {"MAX_STATE_RESULTS": 2, "MAX_STALE_ROWS": 2}, {"MAX_IDENT_ENTRIES": 1}],
    ids=["states", "results", "pod-entries"],
)
def test_forgetting_node_states_changes_no_placement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bounds: dict[str, int]
) -> None:
    """The node-state memo is bounded; once it forgets (states numbered anew, results dropped, arrays
    caught up early, pod entries found by identity dropped) the replay places every pod where it did with
    room to spare."""
    inp = replay_input(tmp_path / "replay", 300)
    roomy = _replay_binds(inp, monkeypatch)
    for name, value in bounds.items():
        monkeypatch.setattr(node_table if name == "MAX_STATES" else session, name, value)
    assert _replay_binds(inp, monkeypatch) == roomy
    assert len(roomy) == 300


def test_a_gang_no_node_takes_keeps_the_reason_of_its_last_shape_until_a_node_takes_one() -> None:
    """Allocate remembers a turn that placed nothing because no node took any of the gang's pod shapes
    (`JobInfo.no_node_memo`): later turns ask those shapes again only, give the reason a full turn gives (the
    last shape's), and place the gang once nodes take its shapes."""
    s = online("n1", "n2")  # 32 cpu, 256Gi each
    filler = job("filler", replicas=2, requests={"cpu": 24, "memory": "200Gi"})
    s.add_group(filler.group, filler.pods)
    assert len(s.cycle(1.0).binds) == 2
    gang = job("gang", replicas=2, requests={"cpu": 16}, created=1.0)  # gang-0: 16 cpu; gang-1: 100Gi
    pods = [gang.pods[0], dataclasses.replace(gang.pods[1], requests=res({"cpu": 1, "memory": "100Gi"}))]
    s.add_group(gang.group, pods)
    s.cycle(2.0)
    first = s.pending_reason(gang.key)
    assert first.startswith("gang: 0/2 pods fit;") and "insufficient memory" in first, first
    small = job("small", requests={"cpu": 1})
    s.add_group(small.group, small.pods)
    s.cycle(3.0)
    s.remove_group(small.key)  # capacity given back: the gang gets a turn again, and no node takes it
    assert s.cycle(4.0).binds == [] and s.pending_reason(gang.key) == first
    s.add_nodes([node("n3", cpu=16, memory="64Gi")])  # gang-0 fits there, gang-1 still nowhere
    assert s.cycle(5.0).binds == []
    assert s.pending_reason(gang.key).startswith("gang: 1/2 pods fit;")
    s.add_nodes([node("n4", cpu=4, memory="128Gi")])
    assert sorted(b.pod for b in s.cycle(6.0).binds) == ["default/gang-0", "default/gang-1"]


def test_a_remembered_turn_writes_its_reason_again_over_what_another_check_wrote() -> None:
    """A remembered no-node turn that would write what it wrote last leaves the reason alone
    (`JobInfo.no_node_said`), unless something else wrote over it meanwhile: here the queue stopped taking the
    job's namespace for a cycle."""
    s = OnlineScheduler([node("n1", cpu=32)], [queue("default"), queue("other")], PROPORTION, report_waiting=False)
    filler = job("filler", queue="other", requests={"cpu": 32})  # n1 full, default within its share
    s.add_group(filler.group, filler.pods)
    s.cycle(1.0)
    waiting = job("waiting", requests={"cpu": 16}, created=1.0)
    s.add_group(waiting.group, waiting.pods)
    s.cycle(2.0)
    no_node = s.pending_reason(waiting.key)
    assert "insufficient cpu" in no_node
    during, after = _reasons_while_namespaces_edited(s, "default", waiting.key, 3.0)
    assert "namespace(s) elsewhere only" in during
    assert after == no_node


def test_a_parent_queue_edited_to_take_other_namespaces_stops_its_children_s_work() -> None:
    """Whether a queue's chain takes every namespace is remembered (`QueueInfo.every_namespace`) until a
    queue's spec is edited: a parent's namespaces bound its children's work from the next cycle, and lifting
    them lets the work in again."""
    queues = [queue("root"), queue("leaf", parent="root"), queue("other")]
    s = OnlineScheduler([node("n1", cpu=32)], queues, NO_QUOTA, report_waiting=False)
    filler = job("filler", queue="other", requests={"cpu": 32})  # n1 full
    s.add_group(filler.group, filler.pods)
    s.cycle(0.0)
    waiting = job("waiting", queue="leaf", requests={"cpu": 16}, created=1.0)
    s.add_group(waiting.group, waiting.pods)
    s.cycle(1.0)
    assert "namespace" not in s.pending_reason(waiting.key)
    during, after = _reasons_while_namespaces_edited(s, "root", waiting.key, 2.0)
    assert "queue root takes work from namespace(s) elsewhere only" in during
    assert "namespace" not in after


def _reasons_while_namespaces_edited(s: OnlineScheduler, name: str, key: str, now: float) -> tuple[str, str]:
    """The group's reason after a cycle in which queue `name` takes work from namespace `elsewhere` only, and
    after the next, with the queue's spec as it was."""
    spec = s.ssn.queues[name].queue
    s.set_queue(dataclasses.replace(spec, namespaces=("elsewhere",)))
    s.cycle(now)
    during = s.pending_reason(key)
    s.set_queue(spec)
    s.cycle(now + 1)
    return during, s.pending_reason(key)


def test_a_remembered_turn_writes_its_reason_again_when_the_gang_lost_a_pod() -> None:
    """The same explanation, but the job changed (one of its running pods failed): the gang's reason says so."""
    s = OnlineScheduler([node("n1", cpu=32)], [queue("default")], NO_QUOTA, report_waiting=False)
    gang = job("gang", replicas=3, min_member=2, requests={"cpu": 16})
    big = dataclasses.replace(gang.pods[2], requests=res({"cpu": 24}))  # never beside a 16-cpu pod
    s.add_group(gang.group, [*gang.pods[:2], big])
    assert len(s.cycle(1.0).binds) == 2
    alone = s.pending_reason(gang.key)
    assert alone.startswith("0/1 nodes:")  # ready with two pods: the third's explanation alone
    s.finish_pod("default/gang-0", succeeded=False)
    s.cycle(2.0)
    assert s.pending_reason(gang.key) == f"gang: 1/2 pods fit; {alone}"


def test_a_remembered_turn_writes_its_reason_again_when_the_explanation_changed() -> None:
    """The same job, the same shapes fitting nowhere, but the nodes now fail it for another reason."""
    s = OnlineScheduler([node("n1", cpu=32), node("n2", cpu=32)], [queue("default")], NO_QUOTA, report_waiting=False)
    cpu_hog = job("cpu-hog", requests={"cpu": 32}, running_on=["n1"], phase=PodGroupPhase.RUNNING)
    memory_hog = job(
        "memory-hog", requests={"cpu": 1, "memory": "200Gi"}, running_on=["n2"], phase=PodGroupPhase.RUNNING
    )
    for hog in (cpu_hog, memory_hog):
        s.add_group(hog.group, hog.pods)
    waiting = job("waiting", requests={"cpu": 24, "memory": "100Gi"}, created=1.0)
    s.add_group(waiting.group, waiting.pods)
    s.cycle(1.0)
    assert s.pending_reason(waiting.key) == "0/2 nodes: 1 insufficient cpu, 1 insufficient memory"
    s.remove_group(memory_hog.key)
    half = job("half", requests={"cpu": 16}, running_on=["n2"], phase=PodGroupPhase.RUNNING)
    s.add_group(half.group, half.pods)
    assert s.cycle(2.0).binds == []
    assert s.pending_reason(waiting.key) == "0/2 nodes: 2 insufficient cpu"


def test_pod_shapes_asking_alike_share_static_results_only_with_the_same_placement_terms() -> None:
    """Shapes share the static filters' results when their node selector, required node affinity and
    tolerations are the same, and the static scores' when their node affinity and tolerations are
    (`Session._static_parts`); whatever was asked before, each job here would land on the other node with
    the tolerant job's."""
    s = OnlineScheduler(
        [idc_node("idc0", cpu=20), cloud_node("cloud0", cpu=64)],
        [queue("default")],
        conf("allocate", "gang", "predicates, nodeorder"),
        report_waiting=False,
    )
    asks = {"cpu": 4}
    cases = [
        (job("tolerant", requests=asks, tolerations=[TOLERATE_CLOUD]), "cloud0"),  # least requested: the big node
        (job("preferring", requests=asks, tolerations=[TOLERATE_CLOUD], affinity=PREFER_IDC), "idc0"),
        (job("selected", requests=asks, tolerations=[TOLERATE_CLOUD], node_selector={NODE_TYPE_LABEL: "idc"}), "idc0"),
        (
            job(
                "affine",
                requests=asks,
                tolerations=[TOLERATE_CLOUD],
                affinity=required([req(NODE_TYPE_LABEL, "In", "idc")]),
            ),
            "idc0",
        ),
        (job("intolerant", requests=asks), "idc0"),
        (job("tolerant-2", requests={"cpu": 2}, tolerations=[TOLERATE_CLOUD]), "cloud0"),
    ]
    for now, (case, where) in enumerate(cases, start=1):
        s.add_group(case.group, case.pods)
        assert [(b.pod, b.node) for b in s.cycle(float(now)).binds] == [(case.pods[0].key, where)]


def test_a_shape_no_node_took_says_nothing_of_shapes_with_other_tolerations_or_required_affinity() -> None:
    """`Session.fit_key`: what found no node is remembered for the shapes whose filters read the same terms
    (only preferred node affinity may differ); a shape that tolerates more, or requires other nodes, is asked."""
    s = OnlineScheduler(
        [idc_node("idc0", cpu=4), cloud_node("cloud0", cpu=64)],
        [queue("default")],
        conf("allocate", "gang", "predicates, nodeorder"),
        report_waiting=False,
    )
    filler = job("filler", requests={"cpu": 4})
    s.add_group(filler.group, filler.pods)
    assert [b.node for b in s.cycle(1.0).binds] == ["idc0"]
    asks, tolerate = {"cpu": 4}, [TOLERATE_CLOUD]
    waiting = [
        job("intolerant", requests=asks, created=1.0),  # nowhere: idc0 is full, cloud0 tainted
        job("tolerant", requests=asks, tolerations=tolerate, created=2.0),
        job(
            "pinned",
            requests=asks,
            tolerations=tolerate,
            affinity=required([req(NODE_TYPE_LABEL, "In", "idc")]),
            created=3.0,
        ),  # nowhere: idc0 is full
        job("tolerant-again", requests=asks, tolerations=tolerate, created=4.0),
    ]
    for case in waiting:
        s.add_group(case.group, case.pods)
    binds = {b.pod: b.node for b in s.cycle(2.0).binds}
    assert binds == {"default/tolerant-0": "cloud0", "default/tolerant-again-0": "cloud0"}


def test_a_long_lived_session_keeps_only_the_pod_shapes_its_tasks_have(monkeypatch: pytest.MonkeyPatch) -> None:
    """Data gravity gives most burst jobs a pod shape of their own (a preference for the nodes holding their
    dataset). A session living for months must not keep a number, a placement cache and a static score sum
    for every shape it ever saw: they go some shapes after the shape's last task (the last few unused ones
    stay, for shapes that come and go with their jobs), and a pod of a forgotten shape is placed as it was the
    first time."""
    monkeypatch.setattr(session, "KEEP_UNUSED_SHAPES", 3)
    preferring = conf("allocate", "gang", "predicates, nodeorder")  # the preference alone picks the node
    nodes = [node(f"n{i}", cpu=8, labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(4)]
    s = OnlineScheduler(nodes, [queue("default")], preferring, report_waiting=False)
    preferences = [prefer_idc_and((f"n{i % 4}",), 50 + i) for i in range(40)]  # forty shapes

    def place(name: str, preference: NodeAffinity, now: float) -> int:
        arriving = job(name, requests={"cpu": 1}, affinity=preference, created=now)
        s.add_group(arriving.group, arriving.pods)
        (bind,) = s.cycle(now).binds
        assert bind.node == f"n{preferences.index(preference) % 4}"
        return s.ssn.tasks[bind.pod].shape_id

    numbers = []
    for i, preference in enumerate(preferences):
        numbers.append(place(f"j{i}", preference, float(i)))
        if i >= 2:
            s.remove_group(f"default/j{i - 2}")
    ssn = s.ssn
    live = {task.shape_id for task in ssn.tasks.values()}
    assert live == set(numbers[-2:])
    kept = set(numbers[-5:])  # and the three left last
    assert set(ssn._shape_users) == kept
    assert len(ssn._shape_ids) == 5
    assert set(ssn._shapes) <= kept
    assert len(ssn._scores) <= 6  # the five shapes' preferences, none of the 35 forgotten
    assert place("back", preferences[36], 100.0) == numbers[36]  # kept: the same number and cache
    again = place("again", preferences[5], 101.0)  # forgotten: numbered, cached and scored afresh
    assert again not in numbers
    for name in ("j38", "j39", "again"):  # three more unused: the oldest unused ones go, not one in use
        s.remove_group(f"default/{name}")
    assert set(ssn._shape_users) == {numbers[36], numbers[38], numbers[39], again}
