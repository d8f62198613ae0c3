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
