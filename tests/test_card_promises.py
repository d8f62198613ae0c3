"""A pod pipelined to a node for whole GPU cards keeps them: while its victims leave one by one, no GPU
slice starts on the untouched cards it was promised (it would otherwise wait for cards that never free)."""

from __future__ import annotations

from scheduler_builders import PROPORTION, Cluster, bound, job, node, pending_reason, pipelined, queue

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.actions.eviction import _cards_fit
from tidegate.scheduler.info import TaskStatus
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
