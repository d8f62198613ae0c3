"""Session.add_group: a PodGroup arriving after the session opened is registered like the snapshot's."""

from __future__ import annotations

import pytest

from tidegate.model.objects import (
    Node,
    PluginOption,
    Pod,
    PodGroup,
    PodGroupPhase,
    Queue,
    SchedulerConfiguration,
    Tier,
)
from tidegate.model.resources import CPU, MEMORY, NVIDIA_GPU, Resources
from tidegate.scheduler.actions.allocate import allocate_job
from tidegate.scheduler.info import TaskStatus
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot

GI = 2**30
#: proportion computes deserved shares when the session opens, so jobs added later would find their queue
#: "overused"; a stream of arrivals is scheduled without it.
STREAM_CONFIG = SchedulerConfiguration(
    tiers=(
        Tier((PluginOption("priority"), PluginOption("gang"))),
        Tier((PluginOption("predicates"), PluginOption("nodeorder"), PluginOption("gpushare"))),
    )
)


def _session(pods: list[Pod] | None = None, groups: list[PodGroup] | None = None) -> Session:
    nodes = [
        Node(name=f"n{i}", allocatable=Resources({CPU: 4000, MEMORY: 8 * GI, NVIDIA_GPU: 2000}), gpu_memory_mib=(1, 1))
        for i in range(2)
    ]
    snapshot = Snapshot(nodes, [Queue(name="default")], groups or [], pods or [])
    return Session(snapshot, STREAM_CONFIG, default_registry())


def _pod(name: str, cpu: int = 1000, gpus: int = 0, node: str = "") -> Pod:
    requests = {CPU: cpu, MEMORY: GI} | ({NVIDIA_GPU: gpus * 1000} if gpus else {})
    return Pod(name=name, requests=Resources(requests), group=name, node_name=node)


def test_an_added_group_is_registered_like_a_snapshot_group() -> None:
    built = _session([_pod("a")], [PodGroup(name="a", phase=PodGroupPhase.INQUEUE)])
    added = _session()
    job = added.add_group(PodGroup(name="a", phase=PodGroupPhase.INQUEUE), [_pod("a")])
    reference = built.jobs[0]
    assert added.jobs == [job] and list(added.queues["default"].jobs.values()) == [job]
    assert added.tasks["default/a"] is job.tasks[0]
    assert job.counts == reference.counts and job.priority == reference.priority
    assert (job.tasks[0].request == reference.tasks[0].request).all()
    assert (added.queues["default"].request == built.queues["default"].request).all()


def test_added_jobs_are_placed_by_the_allocate_routine_on_one_long_lived_session() -> None:
    ssn = _session()
    placed = []
    for i in range(5):  # two nodes with two GPUs each: four one-GPU pods fit, the fifth does not
        job = ssn.add_group(PodGroup(name=f"p{i}"), [_pod(f"p{i}", gpus=1)])
        placed.append(allocate_job(ssn, job))
    assert placed == [True, True, True, True, False]
    assert ssn.jobs[4].tasks[0].status is TaskStatus.PENDING
    assert "insufficient" in ssn.jobs[4].reason
    assert sorted(t.node for j in ssn.jobs[:4] for t in j.tasks) == [0, 0, 1, 1]


def test_a_bound_pod_added_later_takes_its_node_resources() -> None:
    ssn = _session()
    ssn.add_group(PodGroup(name="r"), [_pod("r", cpu=4000, node="n0")])
    job = ssn.add_group(PodGroup(name="p"), [_pod("p", cpu=1000)])
    assert allocate_job(ssn, job)
    assert job.tasks[0].node == 1


@pytest.mark.parametrize(
    ("group", "pod", "message"),
    [
        (PodGroup(name="a", queue="missing"), _pod("a"), "queue missing does not exist"),
        (PodGroup(name="b"), _pod("a"), "names PodGroup 'a'"),
        (PodGroup(name="a"), Pod(name="a", group="a", requests=Resources({"example.com/fpga": 1000})), "no column"),
    ],
)
def test_add_group_refuses_what_it_cannot_register(group: PodGroup, pod: Pod, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _session().add_group(group, [pod])


def test_add_group_refuses_a_pod_the_session_already_has() -> None:
    ssn = _session()
    ssn.add_group(PodGroup(name="a"), [_pod("a")])
    with pytest.raises(ValueError, match="already in the session"):
        ssn.add_group(PodGroup(name="a"), [_pod("a")])


def test_the_session_counts_its_best_effort_pods_as_they_come_and_go() -> None:
    """Backfill skips its pass while the count is 0, so it must follow every added and removed pod."""
    best_effort = Pod(name="b", requests=Resources({}), group="b")
    ssn = _session([best_effort, _pod("a")], [PodGroup(name="b"), PodGroup(name="a")])
    assert ssn.best_effort_tasks == 1
    added = ssn.add_group(PodGroup(name="c"), [Pod(name="c", requests=Resources({}), group="c")])
    ssn.add_group(PodGroup(name="d"), [_pod("d")])
    assert ssn.best_effort_tasks == 2
    ssn.remove_job(added)
    ssn.remove_job(ssn.jobs[0])
    assert ssn.best_effort_tasks == 0
    assert [task.best_effort for job in ssn.jobs for task in job.tasks] == [False, False]
