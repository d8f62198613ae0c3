"""Reclaim remembers a job its queue's votes refused by what those votes read (the job, the node table, the
quotas and the queue's allocation): it skips the job while they hold, and looks at it again as soon as one
of them moves, whatever else happened in the cluster."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from unittest.mock import patch

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scheduler_builders import conf, evicted, job, node, pipelined, queue, res

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.actions.reclaim import Reclaim
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.plugins.capacity import CapacityPlugin
from tidegate.scheduler.plugins.gang import GangPlugin
from tidegate.scheduler.session import Session

RECLAIMING = conf(
    "enqueue, allocate, reclaim, backfill",
    "priority, gang",
    "drf, predicates, capacity, nodeorder, binpack, gpushare",
)


def cluster() -> OnlineScheduler:
    """Queue a deserves 4 of the 8 GPUs and holds 2 (a1 on n1); b deserves none and holds the other 6 (b1 on
    n1, b2 on n2). a2 asks 4 GPUs: no node has them free, and a may not reclaim them (2 + 4 is beyond its
    deserved 4)."""
    s = OnlineScheduler(
        [node("n1", cpu=64, gpus=4), node("n2", cpu=64, gpus=4)],
        [
            queue("a", capability={"nvidia.com/gpu": 8}, deserved={"nvidia.com/gpu": 4}),
            queue("b", capability={"nvidia.com/gpu": 8}),
        ],
        RECLAIMING,
        report_waiting=False,
    )
    running = [
        job("a1", queue="a", requests={"nvidia.com/gpu": 2}, running_on=["n1"], gpu_indices=[(0, 1)]),
        job("b1", queue="b", requests={"nvidia.com/gpu": 2}, running_on=["n1"], gpu_indices=[(2, 3)]),
        job("b2", queue="b", requests={"nvidia.com/gpu": 4}, running_on=["n2"], gpu_indices=[(0, 1, 2, 3)]),
    ]
    for j in running:
        j.group.phase = PodGroupPhase.RUNNING
        s.add_group(j.group, j.pods)
    a2 = job("a2", queue="a", requests={"nvidia.com/gpu": 4})
    s.add_group(a2.group, a2.pods)
    decisions = s.cycle(1.0)
    assert decisions.binds == [] and evicted(decisions) == []
    assert "insufficient" in s.pending_reason(a2.key) or "free GPU cards" in s.pending_reason(a2.key)
    return s


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs reclaim asks its queue's votes about, one entry a task asked."""
    calls: list[str] = []
    may_try = Reclaim.may_try

    def counting(self: Reclaim, ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
        calls.append(task.job.key)
        return may_try(self, ssn, queue, task)

    monkeypatch.setattr(Reclaim, "may_try", counting)
    return calls


def test_a_job_its_queue_refused_is_not_asked_again_while_the_queue_holds_as_much(asked: list[str]) -> None:
    s = cluster()
    assert asked == ["default/a2"]
    for t in range(2, 6):  # capacity comes and goes in b: each cycle is another state for the nodes
        extra = job(f"b-extra{t}", queue="b", requests={"cpu": 1})
        s.add_group(extra.group, extra.pods)
        s.cycle(float(t))
        s.remove_group(extra.key)
    assert asked == ["default/a2"]


def test_a_job_its_queue_refused_reclaims_once_the_queue_holds_less(asked: list[str]) -> None:
    s = cluster()
    s.remove_group("default/a1")  # a holds nothing now: 0 + 4 is within its deserved share
    decisions = s.cycle(2.0)
    assert evicted(decisions) == ["default/b1-0"]  # n1's 2 free GPUs and b1's make a2's 4
    assert asked == ["default/a2", "default/a2"]


def test_a_job_its_queue_refused_reclaims_once_the_quota_grows(asked: list[str]) -> None:
    s = cluster()
    a = queue("a", capability={"nvidia.com/gpu": 8}, deserved={"nvidia.com/gpu": 4})
    s.set_queue(dataclasses.replace(a, deserved=res({"nvidia.com/gpu": 8})))
    decisions = s.cycle(2.0)
    assert evicted(decisions) == ["default/b2-0"]  # 2 + 4 is within 8 now: b2's node frees 4
    assert asked == ["default/a2", "default/a2"]


# -- a victim filter's job-wide twin ------------------------------------------------------------------------
@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(0, 8)), min_size=1, max_size=4),
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
)
def test_gang_s_job_twin_refuses_exactly_the_jobs_whose_pods_it_never_takes(
    gangs: list[tuple[int, int]], picks: list[int]
) -> None:
    """An eviction search passes over a node when some filter's job-wide twin refuses every candidate's job
    (`ExtensionPoints.victim_job_refusals`): gang's twin must refuse a job only when gang takes none of its
    pods whatever candidates come with them, and it must take one lone pod of any other job."""
    jobs = [SimpleNamespace(min_available=need, ready_num=ready) for need, ready in gangs]
    candidates = [SimpleNamespace(job=jobs[i % len(jobs)]) for i in picks]
    taken = {id(victim.job) for victim in GangPlugin._victims(None, candidates)}  # type: ignore[arg-type]
    for one in jobs:
        refused = GangPlugin._keeps_every_pod(one)  # type: ignore[arg-type]
        if refused:
            assert id(one) not in taken
        alone = GangPlugin._victims(None, [SimpleNamespace(job=one)])  # type: ignore[arg-type]
        assert bool(alone) is not refused


# -- a reclaim vote's queue-wide twin ------------------------------------------------------------------------
def test_a_queue_at_its_deserved_share_is_passed_over_without_asking_for_its_jobs(asked: list[str]) -> None:
    """a holds its whole deserved 4 GPUs: one more GPU takes it past its share, so capacity refuses every task
    it could ask for, and reclaim passes over the queue without asking the votes about a3
    (`ExtensionPoints.queue_reclaim_refusals`). Once a holds less, a3 is asked, and reclaims."""
    s = cluster()
    a3 = job("a3", queue="a", requests={"nvidia.com/gpu": 2})
    s.remove_group("default/a2")
    grow = job("a-more", queue="a", requests={"nvidia.com/gpu": 2}, running_on=["n2"], gpu_indices=[(0, 1)])
    grow.group.phase = PodGroupPhase.RUNNING
    s.remove_group("default/b2")  # n2 frees its 4 GPUs: a's second pod takes 2 of them
    s.add_group(grow.group, grow.pods)
    blocker = job("b3", queue="b", requests={"nvidia.com/gpu": 2}, running_on=["n2"], gpu_indices=[(2, 3)])
    blocker.group.phase = PodGroupPhase.RUNNING
    s.add_group(blocker.group, blocker.pods)  # every GPU is taken again: a holds 4, b holds 4
    s.add_group(a3.group, a3.pods)
    asked.clear()
    assert evicted(s.cycle(2.0)) == [] and asked == []
    s.remove_group("default/a-more")  # a holds 2 now: 2 + 2 is within its deserved 4 ...
    b4 = job("b4", queue="b", requests={"nvidia.com/gpu": 2}, running_on=["n2"], gpu_indices=[(0, 1)])
    b4.group.phase = PodGroupPhase.RUNNING
    s.add_group(b4.group, b4.pods)  # ... and b takes the 2 GPUs a gave back
    decisions = s.cycle(3.0)
    assert asked == ["default/a3"]
    assert evicted(decisions)


@given(
    st.integers(0, 8),
    st.integers(0, 64),
    st.integers(0, 10),
    st.integers(0, 80),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 8)).filter(any), min_size=1, max_size=6),
)
@example(0, 4, 0, 3, [(0, 1)])  # one more millicore reaches the deserved 4m exactly: not refused
def test_capacity_s_queue_twin_refuses_a_queue_only_when_its_vote_refuses_every_task(
    deserved_gpus: int, deserved_cpus: int, held_gpus: int, held_cpus: int, asks: list[tuple[int, int]]
) -> None:
    """The twin may say a queue reclaims nothing only if capacity's vote refuses each task it could ask for
    (GPUs in cards, CPU in millicores: a task asks at least one unit of the quota's finest grain)."""
    deserved = _gpus_and_millicores(deserved_gpus, deserved_cpus)
    s = OnlineScheduler(
        [node("n1", cpu=64, gpus=8)],
        [queue("a", capability={"nvidia.com/gpu": 16, "cpu": 128}, deserved=deserved or None)],
        RECLAIMING,
        report_waiting=False,
    )
    for i, (gpus, cpus) in enumerate(asks):
        asking = job(f"a{i}", queue="a", requests=_gpus_and_millicores(gpus, cpus))
        s.add_group(asking.group, asking.pods)
    ssn = s.ssn
    capacity = next(p for p in ssn.plugins if isinstance(p, CapacityPlugin))
    info = ssn.queues["a"]
    info.allocated = ssn.vector(res(_gpus_and_millicores(held_gpus, held_cpus)))
    refused_all = capacity._reclaims_nothing(info)
    votes = [capacity._may_reclaim(info, task) for task in ssn.tasks.values()]
    if refused_all:
        assert all(votes)
    assert ssn.queue_reclaims_nothing(info) is refused_all


def _gpus_and_millicores(gpus: int, millicores: int) -> dict[str, object]:
    """A resource map with the nonzero ones of the two."""
    return {k: v for k, v in (("nvidia.com/gpu", gpus), ("cpu", f"{millicores}m")) if v and v != "0m"}


def test_reclaim_s_victim_queues_are_the_queues_whose_pods_it_finds_eligible() -> None:
    """The search reads candidates by queue (`EvictionAction.victim_queues`) instead of asking `eligible` of each
    pod: both must say the same of every running pod, for every reclaiming queue."""
    s = OnlineScheduler(
        [node("n1", cpu=64, gpus=4)],
        [queue("a"), queue("b"), queue("c", reclaimable=False)],
        RECLAIMING,
        report_waiting=False,
    )
    for name in ("a", "b", "c"):
        running = job(f"{name}1", queue=name, requests={"cpu": 1}, running_on=["n1"])
        running.group.phase = PodGroupPhase.RUNNING
        s.add_group(running.group, running.pods)
    ssn, reclaim = s.ssn, Reclaim()
    tasks = list(ssn.tasks.values())
    for info in ssn.queues.values():
        givers = reclaim.victim_queues(ssn, info)
        for victim in tasks:
            assert (id(victim.job.queue) in givers) is reclaim.eligible(info, tasks[0], victim)
        assert id(info) not in givers and id(ssn.queues["c"]) not in givers


# -- a search that starts where an equal one found its node --------------------------------------------------
def _reclaim_decisions(b_pods: list[int], a_asks: list[int], b_gangs: bool, resume: bool) -> tuple[object, ...]:
    """One cycle of a cluster where queue b borrowed every GPU (`b_pods[i]` one-GPU pods on node i, the rest
    held by a pod of queue c that may not be reclaimed) and queue a, deserving all of them, asks for
    `a_asks` GPUs per job (two jobs per ask): what reclaim evicts and where it nominates a's pods."""
    nodes = [node(f"n{i}", cpu=64, gpus=4) for i in range(len(b_pods))]
    s = OnlineScheduler(
        nodes,
        [
            queue("a", capability={"nvidia.com/gpu": 64}, deserved={"nvidia.com/gpu": 64}),
            queue("b", capability={"nvidia.com/gpu": 64}),
            queue("c", capability={"nvidia.com/gpu": 64}, reclaimable=False),
        ],
        RECLAIMING,
        report_waiting=False,
    )
    for i, count in enumerate(b_pods):
        placed = [(f"b{i}", "b", count, tuple(range(count))), (f"c{i}", "c", 4 - count, tuple(range(count, 4)))]
        for name, in_queue, pods, cards in placed:
            if not pods:
                continue
            running = job(
                name,
                queue=in_queue,
                replicas=pods,
                min_member=pods if b_gangs and in_queue == "b" else 1,
                requests={"nvidia.com/gpu": 1},
                running_on=[f"n{i}"] * pods,
                gpu_indices=[(card,) for card in cards],
            )
            running.group.phase = PodGroupPhase.RUNNING
            s.add_group(running.group, running.pods)
    for i, gpus in enumerate(a_asks * 2):
        asking = job(f"a{i}", queue="a", requests={"nvidia.com/gpu": gpus}, created=float(i))
        s.add_group(asking.group, asking.pods)
    with patch.object(Reclaim, "resumes_searches", lambda self, ssn: resume):
        decisions = s.cycle(1.0)
    return evicted(decisions), sorted(pipelined(decisions).items())


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=6),
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.booleans(),
)
@example([0, 4, 4], [1], False)  # the second a job with the first's key finds room on the first's node
def test_reclaim_starting_where_an_equal_search_found_its_node_decides_as_searching_every_node(
    b_pods: list[int], a_asks: list[int], b_gangs: bool
) -> None:
    """`EvictionAction.resumes_searches`: the nodes before the one an equal attempt took stay unsuitable, so
    starting there evicts and nominates exactly what a search from the first node does."""
    resumed = _reclaim_decisions(b_pods, a_asks, b_gangs, resume=True)
    assert resumed == _reclaim_decisions(b_pods, a_asks, b_gangs, resume=False)
