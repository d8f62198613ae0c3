"""A pod pipelined to a node keeps the GPU room its victims free: while they leave one by one, no GPU slice
starts on the untouched cards promised to a whole-card nominee, nor on the room held on the card of a
slice nominee (either would otherwise wait for cards that never free)."""

from __future__ import annotations

from scheduler_builders import (
    CAPACITY,
    PROPORTION,
    Cluster,
    bound,
    conf,
    evicted,
    job,
    node,
    pending_reason,
    pipelined,
    queue,
)

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.actions.eviction import _cards_fit
from tidegate.scheduler.info import TaskStatus
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.session import Session

SLICE = {"volcano.sh/gpu-memory": 10240}  # 10 GiB of one card


def cluster(nominee: dict[str, object], slice_on_card: tuple[int, ...] = ()) -> Cluster:
    # n1 has 4 cards of 80 GiB and 32 CPUs. One of the nominee's victims has left (cards 0 and 1 are
    # untouched), the other still runs on cards 2 and 3 with 24 CPUs; `slice` arrives after the nominee.
    jobs = [
        job("victim", queue="a", requests={"nvidia.com/gpu": 2, "cpu": 24}, running_on=["n1"], gpu_indices=[(2, 3)]),
        job("nominee", queue="b", requests=nominee, phase=PodGroupPhase.INQUEUE, created=1),
        job("slice", queue="a", requests=SLICE, phase=PodGroupPhase.INQUEUE, created=2),
    ]
    if slice_on_card:  # an earlier slice already shares a card
        jobs.append(job("shared", queue="a", requests=SLICE, running_on=["n1"], gpu_indices=[slice_on_card]))
    jobs[1].pods[0].nominated_node_name = "n1"
    return Cluster([node("n1", gpus=4, gpu_mem_mib=81920)], [queue("a"), queue("b")], jobs)


def test_a_slice_does_not_start_on_cards_promised_to_a_pipelined_pod() -> None:
    c = cluster({"nvidia.com/gpu": 4})
    first = c.schedule(PROPORTION)
    assert bound(first) == {} and pipelined(first) == {"default/nominee-0": "n1"}
    assert "untouched GPU cards are promised to pipelined pods" in pending_reason(first, "default/slice")
    c.apply(first)
    c.jobs = [j for j in c.jobs if j.key != "default/victim"]  # the last victim leaves
    assert bound(c.schedule(PROPORTION)) == {"default/nominee-0": "n1"}


def test_a_slice_may_start_on_an_untouched_card_beyond_the_promise_or_share_a_used_one() -> None:
    # The nominee waits for the victim's CPUs and is promised one card of the two untouched: a slice may
    # take the other.
    beyond = cluster({"nvidia.com/gpu": 1, "cpu": 16})
    decisions = beyond.schedule(PROPORTION)
    assert bound(decisions) == {"default/slice-0": "n1"}
    assert pipelined(decisions) == {"default/nominee-0": "n1"}
    shared = cluster({"nvidia.com/gpu": 4}, slice_on_card=(0,))  # card 0 already shared: a slice may join it
    decisions = shared.schedule(PROPORTION)
    assert bound(decisions) == {"default/slice-0": "n1"}
    assert pipelined(decisions) == {"default/nominee-0": "n1"}


def test_eviction_leaves_promised_cards_to_the_pod_pipelined_first() -> None:
    # Both of n1's cards are promised to `nominee`, whose victim is leaving: evicting more of n1 for a slice
    # would pipeline it onto a card the nominee needs, so no victim on n1 is worth it for the slice.
    jobs = [
        job("victim", queue="a", requests={"nvidia.com/gpu": 1}, running_on=["n1"], gpu_indices=[(1,)]),
        job("nominee", queue="b", requests={"nvidia.com/gpu": 2}, phase=PodGroupPhase.INQUEUE, created=1),
        job("slice", queue="a", requests=SLICE, phase=PodGroupPhase.INQUEUE, created=2),
        job("whole", queue="a", requests={"nvidia.com/gpu": 1}, phase=PodGroupPhase.INQUEUE, created=3),
    ]
    jobs[1].pods[0].nominated_node_name = "n1"
    c = Cluster([node("n1", gpus=2, gpu_mem_mib=81920)], [queue("a"), queue("b")], jobs)
    ssn = Session(c.snapshot(), PROPORTION, default_registry())
    assert ssn.table.promised == [2]
    victim = ssn.tasks["default/victim-0"]
    for name in ("slice", "whole"):
        assert not _cards_fit(ssn, ssn.tasks[f"default/{name}-0"], 0, [victim])
    ssn.undo_pipeline(ssn.tasks["default/nominee-0"], 0, TaskStatus.PENDING)
    assert ssn.table.promised == [0]
    assert all(_cards_fit(ssn, ssn.tasks[f"default/{name}-0"], 0, [victim]) for name in ("slice", "whole"))


# -- GPU slices: the nominee holds the card its victims free -----------------------------------------------
CARD_MIB = 81920  # one 80 GiB card
GPU_MEM = "volcano.sh/gpu-memory"
# Without drf, whose victim filter would spare the victims: the nominee's share after (a third of the
# memory) exceeds each victim's.
PREEMPT = conf(
    "enqueue, allocate, preempt, backfill", "priority, gang", "predicates, proportion, nodeorder, binpack, gpushare"
)


def sliced(held: tuple[int, ...]) -> Cluster:
    # n1 has three 80 GiB cards, each half used: card 0 by the last of the nominee's victims, cards 1 and
    # 2 by `others`. The nominee (a slice as large as a card) waits for card 0; `slice` (half a card)
    # arrives after it, and the node's memory counts still leave it room (240 GiB - 120 used - 80 held).
    half = {GPU_MEM: CARD_MIB // 2}
    jobs = [
        job("victim", queue="a", requests=half, running_on=["n1"], gpu_indices=[(0,)]),
        job("others", queue="a", replicas=2, requests=half, running_on=["n1", "n1"], gpu_indices=[(1,), (2,)]),
        job("nominee", queue="b", requests={GPU_MEM: CARD_MIB}, phase=PodGroupPhase.INQUEUE, created=1),
        job("slice", queue="a", requests=half, phase=PodGroupPhase.INQUEUE, created=2),
    ]
    jobs[2].pods[0].nominated_node_name = "n1"
    jobs[2].pods[0].gpu_indices = held
    queues = [queue(name, deserved={GPU_MEM: 3 * CARD_MIB}) for name in ("a", "b")]
    return Cluster([node("n1", gpus=3, gpu_mem_mib=CARD_MIB)], queues, jobs)


def test_a_slice_does_not_take_the_room_held_for_a_pipelined_slice() -> None:
    c = sliced(held=(0,))
    first = c.schedule(CAPACITY)
    assert [(p.pod, p.node, p.gpu_indices) for p in first.pipelined] == [("default/nominee-0", "n1", (0,))]
    assert [b.pod for b in first.binds] == ["default/slice-0"] and first.binds[0].gpu_indices != (0,)
    c.apply(first)
    c.jobs = [j for j in c.jobs if j.key != "default/victim"]  # the last victim leaves
    second = c.schedule(CAPACITY)
    assert [(b.pod, b.gpu_indices) for b in second.binds] == [("default/nominee-0", (0,))]


def test_a_nominated_slice_holding_no_card_is_overtaken() -> None:
    # What the hold prevents (and what a nomination without a gpu-index still does): the slice takes the
    # half of card 0 the first victims freed, and once the last leaves no card has room for the nominee.
    c = sliced(held=())
    first = c.schedule(CAPACITY)
    assert [(b.pod, b.gpu_indices) for b in first.binds] == [("default/slice-0", (0,))]
    c.apply(first)
    c.jobs = [j for j in c.jobs if j.key != "default/victim"]
    assert bound(c.schedule(CAPACITY)) == {}


def test_preempt_holds_the_card_its_victims_free_until_the_last_one_leaves() -> None:
    # Through a long-lived scheduler. Three 80 GiB cards, each half used: v1 and v2 share card 0. The
    # nominee (priority 10) asks a whole card's memory, which the node's counts have but no card: preempt
    # evicts the newest pod, v2, then v1, until card 0 is free, and holds it. The victims leave one at a
    # time while a later slice takes room on another card; then the nominee binds on card 0.
    half = {GPU_MEM: CARD_MIB // 2}
    online = OnlineScheduler([node("n1", gpus=3, gpu_mem_mib=CARD_MIB)], [queue("default")], PREEMPT)
    running = PodGroupPhase.RUNNING
    for j in (
        job("others", replicas=2, requests=half, running_on=["n1"] * 2, gpu_indices=[(1,), (2,)], phase=running),
        job("v1", requests=half, running_on=["n1"], gpu_indices=[(0,)], phase=running, created=1),
        job("v2", requests=half, running_on=["n1"], gpu_indices=[(0,)], phase=running, created=2),
        job("nominee", requests={GPU_MEM: CARD_MIB}, priority=10, created=3),
    ):
        online.add_group(j.group, j.pods)
    first = online.cycle(1.0)
    assert evicted(first) == ["default/v1-0", "default/v2-0"]
    assert [(p.pod, p.gpu_indices) for p in first.pipelined] == [("default/nominee-0", (0,))]
    online.remove_group("default/v2")
    late = job("slice", requests=half, created=4)
    online.add_group(late.group, late.pods)
    second = online.cycle(2.0)
    assert pipelined(second) == {"default/nominee-0": "n1"}
    assert [b.pod for b in second.binds] == ["default/slice-0"] and second.binds[0].gpu_indices != (0,)
    online.remove_group("default/v1")
    third = online.cycle(3.0)
    assert [(b.pod, b.gpu_indices) for b in third.binds] == [("default/nominee-0", (0,))]
