"""Scheduling rules taken exactly from Volcano's vc-scheduler (pkg/scheduler), each through the entry points
users reach it by: a job's priority, victims that may not be evicted, pods that never preempt, the order
victims are taken in, what capacity reclaims, and the admission of a PodGroup whose pods do not exist yet."""

from __future__ import annotations

from scheduler_builders import Cluster, bound, conf, evicted, job, node, pipelined, queue

from tidegate.cli.manifest_snapshot import prepare
from tidegate.model.manifests import load_text
from tidegate.model.objects import PodGroupPhase
from tidegate.scheduler.scheduler import schedule

RUNNING, INQUEUE = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE
PREEMPT = conf("enqueue, allocate, preempt", "priority, gang", "predicates, proportion, nodeorder")

PRIORITY_CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch}
value: 10
---
apiVersion: v1
kind: Node
metadata: {name: n0}
status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1", pods: "110"}}
"""


def vcjob(name: str, job_class: str, task_class: str = "", created: str = "2026-01-01T00:00:00Z") -> str:
    template_class = f"priorityClassName: {task_class}" if task_class else ""
    return f"""
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, creationTimestamp: "{created}"}}
spec:
  priorityClassName: {job_class}
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        {template_class}
        containers: [{{name: main, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}}}]
"""


# -- 3. a job's priority is its PodGroup's ---------------------------------------------------------------
def test_a_job_s_priority_is_its_podgroup_s_class_not_its_pods_highest() -> None:
    """Volcano's job priority is the PodGroup's priorityClassName (the vcjob's), whatever its pods ask: a
    batch job whose task template names the urgent class still waits behind an urgent job."""
    text = PRIORITY_CLASSES + vcjob("sneaky", "batch", "urgent", "2026-01-01T00:00:00Z")
    text += vcjob("important", "urgent", created="2026-01-02T00:00:00Z")
    prepared = prepare(load_text(text, "jobs.yaml"))
    assert prepared.errors == []
    decisions = schedule(prepared.snapshot, prepared.config)
    assert bound(decisions) == {"default/important-worker-0": "n0"}


def test_a_job_does_not_preempt_with_its_pods_priority() -> None:
    """Preemption compares the jobs' (PodGroups') priorities: pods of a higher class in a job of a lower one
    preempt nothing."""
    running = job("running", requests={"nvidia.com/gpu": 1}, priority=50, running_on=["n0"], phase=RUNNING)
    climber = job("climber", requests={"nvidia.com/gpu": 1}, priority=10, phase=INQUEUE)
    for pod in climber.pods:
        pod.priority = 1000
    cluster = Cluster(nodes=[node("n0", gpus=1)], queues=[queue("default")], jobs=[running, climber])
    assert evicted(cluster.schedule(PREEMPT)) == []
    climber.group.priority = 100
    decisions = cluster.schedule(PREEMPT)
    assert evicted(decisions) == ["default/running-0"] and pipelined(decisions) == {"default/climber-0": "n0"}


# -- 4. victims in Volcano's order ------------------------------------------------------------------------
GPU = {"nvidia.com/gpu": 1}
PREEMPT_DRF = conf("enqueue, allocate, preempt", "priority, gang", "drf, predicates, proportion, nodeorder")
RECLAIM = conf("enqueue, allocate, reclaim", "priority, gang", "predicates, capacity, nodeorder")


def test_a_job_s_victims_go_in_task_order_reversed() -> None:
    """Of one job's pods the last in task order goes first (Volcano pops !TaskOrderFn): before, pods went
    by name, so the first one went."""
    cluster = Cluster(
        nodes=[node("n0", gpus=3)],
        queues=[queue("default")],
        jobs=[
            job("wide", replicas=3, min_member=1, requests=GPU, running_on=["n0"] * 3, phase=RUNNING),
            job("urgent", requests=GPU, priority=10, phase=INQUEUE),
        ],
    )
    assert evicted(cluster.schedule(PREEMPT)) == ["default/wide-2"]


def test_victims_of_one_queue_go_in_job_order_reversed() -> None:
    """Jobs of one priority: drf's job order puts the job with the larger share last, so it gives first
    (before: the newest job's pod went)."""
    cluster = Cluster(
        nodes=[node("n0", gpus=4)],
        queues=[queue("default")],
        jobs=[
            job("big", replicas=3, min_member=1, requests=GPU, running_on=["n0"] * 3, phase=RUNNING, created=1),
            job("small", requests=GPU, running_on=["n0"], phase=RUNNING, created=2),
            job("urgent", requests=GPU, priority=10, phase=INQUEUE, created=3),
        ],
    )
    assert evicted(cluster.schedule(PREEMPT_DRF)) == ["default/big-2"]
    # Without drf no job key tells them apart: task order reversed decides, and the newest pod goes.
    assert evicted(cluster.schedule(PREEMPT)) == ["default/small-0"]


def test_victims_of_other_queues_go_in_queue_order_reversed() -> None:
    """Reclaim takes first from the queue that queue order serves last (the largest share of its deserved),
    whatever its pods' age; within it, from the job last in job order."""
    cluster = Cluster(
        nodes=[node("n0", gpus=5)],
        queues=[
            queue("a", deserved={"nvidia.com/gpu": 1}),
            queue("b", deserved={"nvidia.com/gpu": 1}),
            queue("c", deserved={"nvidia.com/gpu": 3}),
        ],
        jobs=[
            *[job(f"a{i}", "a", requests=GPU, running_on=["n0"], phase=RUNNING, created=1) for i in range(3)],
            *[job(f"b{i}", "b", requests=GPU, running_on=["n0"], phase=RUNNING, created=2) for i in range(2)],
            job("owner", "c", requests=GPU, phase=INQUEUE, created=3),
        ],
    )
    decisions = cluster.schedule(RECLAIM)
    assert evicted(decisions) == ["default/a2-0"] and pipelined(decisions) == {"default/owner-0": "n0"}


def test_hierarchical_capacity_takes_victims_from_the_nearest_queues_first() -> None:
    """capacity's victim queue order (hierarchy): a queue sharing more ancestors with the reclaimer's gives
    before one that shares only the root, even when queue order reversed would take the other first."""
    cluster = Cluster(
        nodes=[node("n0", gpus=4)],
        queues=[
            queue("p", deserved={"nvidia.com/gpu": 2}),
            queue("q", deserved={"nvidia.com/gpu": 2}),
            queue("x", parent="p", deserved={"nvidia.com/gpu": 1}),
            queue("y", parent="p", deserved={"nvidia.com/gpu": 0}),
            queue("z", parent="q", deserved={"nvidia.com/gpu": 0}),
        ],
        jobs=[
            job("ys", "y", replicas=2, min_member=1, requests=GPU, running_on=["n0"] * 2, phase=RUNNING, created=1),
            job("zs", "z", replicas=2, min_member=1, requests=GPU, running_on=["n0"] * 2, phase=RUNNING, created=2),
            job("owner", "x", requests=GPU, phase=INQUEUE, created=3),
        ],
    )
    decisions = cluster.schedule(RECLAIM)
    assert evicted(decisions) == ["default/ys-1"] and pipelined(decisions) == {"default/owner-0": "n0"}


# -- 2. capacity reclaims only what the reclaimer asks for ------------------------------------------------
def test_capacity_reclaim_leaves_victims_that_hold_nothing_the_reclaimer_asks_for() -> None:
    """Volcano's capacity skips a reclaimee with no resource in common with the reclaimer (pod slots aside):
    a CPU-only pod frees no GPU, so it stays, even though it comes first in victim order (the newest)."""
    config = conf("enqueue, allocate, reclaim", "priority, gang", "predicates, capacity, nodeorder")
    cluster = Cluster(
        nodes=[node("n0", cpu=8, gpus=1)],
        queues=[queue("lender", deserved={"cpu": 1}), queue("owner", deserved={"nvidia.com/gpu": 1})],
        jobs=[
            job("trainer", "lender", requests=GPU, running_on=["n0"], phase=RUNNING, created=1),
            job("cruncher", "lender", requests={"cpu": 4}, running_on=["n0"], phase=RUNNING, created=2),
            job("owner", "owner", requests=GPU, phase=INQUEUE, created=3),
        ],
    )
    decisions = cluster.schedule(config)
    assert evicted(decisions) == ["default/trainer-0"] and pipelined(decisions) == {"default/owner-0": "n0"}
