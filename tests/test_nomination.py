"""Pipelined pods keep the node they were nominated to (status.nominatedNodeName) across cycles."""

from __future__ import annotations

from scheduler_builders import Cluster, bound, job, node, pending_reason, pipelined, queue

from tidegate.model.objects import PodGroupPhase


def cluster(victim_still_running: bool) -> Cluster:
    # n1 was reclaimed for queue b's `nominee`; queue a's `other` sorts first (a holds nothing, b holds n2).
    nodes = [node("n1", gpus=8), node("n2", gpus=8)]
    jobs = [
        job("held", queue="b", requests={"nvidia.com/gpu": 8}, running_on=["n2"], phase=PodGroupPhase.RUNNING),
        job("other", queue="a", requests={"nvidia.com/gpu": 8}, phase=PodGroupPhase.INQUEUE, created=0),
        job("nominee", queue="b", requests={"nvidia.com/gpu": 8}, phase=PodGroupPhase.INQUEUE, created=1),
    ]
    if victim_still_running:
        jobs.append(job("victim", queue="a", requests={"nvidia.com/gpu": 8}, running_on=["n1"]))
    jobs[2].pods[0].nominated_node_name = "n1"
    return Cluster(nodes, [queue("a"), queue("b")], jobs)


def test_a_nominated_pod_binds_to_its_node_before_jobs_that_sort_first() -> None:
    decisions = cluster(victim_still_running=False).schedule()
    assert bound(decisions) == {"default/nominee-0": "n1"}
    assert "insufficient nvidia.com/gpu" in pending_reason(decisions, "default/other")


def test_a_nominated_pod_waits_for_its_victims_and_nobody_takes_its_room() -> None:
    decisions = cluster(victim_still_running=True).schedule()
    assert bound(decisions) == {}
    assert pipelined(decisions) == {"default/nominee-0": "n1"}


def test_without_the_nomination_the_job_that_sorts_first_takes_the_node() -> None:
    c = cluster(victim_still_running=False)
    c.jobs[2].pods[0].nominated_node_name = ""
    assert bound(c.schedule()) == {"default/other-0": "n1"}
