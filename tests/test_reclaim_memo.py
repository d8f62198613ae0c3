"""Reclaim remembers a job its queue's votes refused by what those votes read (the job, the node table, the
quotas and the queue's allocation): it skips the job while they hold, and looks at it again as soon as one
of them moves, whatever else happened in the cluster."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scheduler_builders import conf, evicted, job, node, queue, res

from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.actions.reclaim import Reclaim
from tidegate.scheduler.info import QueueInfo, TaskInfo
from tidegate.scheduler.online import OnlineScheduler
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
