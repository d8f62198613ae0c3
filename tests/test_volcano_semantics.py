"""Scheduling rules taken exactly from Volcano's vc-scheduler (pkg/scheduler), each through the entry points
users reach it by: a job's priority, victims that may not be evicted, pods that never preempt, the order
victims are taken in, what capacity reclaims, and the admission of a PodGroup whose pods do not exist yet."""

from __future__ import annotations

from scheduler_builders import Cluster, bound, conf, evicted, job, node, pending_reason, phase_of, pipelined, queue

from tidegate.cli.manifest_snapshot import prepare
from tidegate.model.manifests import load_text
from tidegate.model.objects import PodGroupPhase, PreemptionPolicy
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


# -- a job's priority is its PodGroup's ---------------------------------------------------------------
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


# -- victims in Volcano's order ------------------------------------------------------------------------
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


# -- capacity reclaims only what the reclaimer asks for ------------------------------------------------
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


# -- volcano.sh/preemptable ----------------------------------------------------------------------------
def _pod_doc(name: str, metadata: str = "", spec: str = "", gpus: int = 1) -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}{", " + metadata if metadata else ""}}}
spec:
  schedulerName: volcano
  {spec}
  containers: [{{name: main, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]
"""


def test_preemptable_is_read_as_volcano_reads_it() -> None:
    """The annotation first, then the label; unset means true; a value Go's ParseBool cannot read is false,
    with a warning naming the field. A PodGroup keeps None when it says nothing."""
    text = PRIORITY_CLASSES
    text += _pod_doc("plain")
    text += _pod_doc("annotated", 'annotations: {volcano.sh/preemptable: "false"}')
    text += _pod_doc("labelled", 'labels: {volcano.sh/preemptable: "F"}')
    text += _pod_doc("both", 'annotations: {volcano.sh/preemptable: "1"}, labels: {volcano.sh/preemptable: "false"}')
    text += _pod_doc("garbled", 'annotations: {volcano.sh/preemptable: "nope"}')
    text += """
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pinned, annotations: {volcano.sh/preemptable: "false"}}
spec: {minMember: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: quiet}
spec: {minMember: 1}
"""
    ms = load_text(text, "pods.yaml")
    assert ms.errors == []
    assert {pod.name: pod.preemptable for pod in ms.pods} == {
        "plain": True,
        "annotated": False,
        "labelled": False,
        "both": True,
        "garbled": False,
    }
    (warning,) = [w for w in ms.warnings if "ParseBool" in w.message]
    assert (warning.name, warning.field) == ("garbled", "metadata.annotations.volcano.sh/preemptable")
    assert {group.name: group.preemptable for group in ms.podgroups} == {"pinned": False, "quiet": None}


def test_a_vcjob_s_preemptable_reaches_its_pods_and_a_bare_pod_s_its_group() -> None:
    """Volcano's job controller copies the vcjob's annotation (and label) onto its pods; its PodGroup
    controller copies a bare pod's onto the pod's one-pod group."""
    text = PRIORITY_CLASSES + vcjob("keeper", "batch").replace(
        "metadata: {name: keeper,", 'metadata: {annotations: {volcano.sh/preemptable: "false"}, name: keeper,'
    )
    text += _pod_doc("solo", 'labels: {volcano.sh/preemptable: "false"}')
    prepared = prepare(load_text(text, "jobs.yaml"))
    assert prepared.errors == []
    pods = {pod.name: pod for pod in prepared.snapshot.pods}
    assert not pods["keeper-worker-0"].preemptable
    assert pods["keeper-worker-0"].annotations["volcano.sh/preemptable"] == "false"
    groups = {group.name: group for group in prepared.snapshot.groups}
    assert groups["keeper"].preemptable is None and groups["podgroup-solo"].preemptable is False


def _contended(victims: list[tuple[str, dict[str, bool | None]]], queue_name: str = "default") -> Cluster:
    """One 2-GPU node held by two one-pod jobs of `queue_name` (created in order), each set as given
    ({"pod": False} marks the pod, {"group": False} its PodGroup), and an urgent job waiting in default."""
    jobs = []
    for created, (name, marks) in enumerate(victims):
        made = job(name, queue_name, requests=GPU, running_on=["n0"], phase=RUNNING, created=created)
        made.pods[0].preemptable = marks.get("pod", True) is not False
        made.group.preemptable = marks.get("group")
        jobs.append(made)
    jobs.append(job("urgent", requests=GPU, priority=10, phase=INQUEUE, created=9))
    queues = [queue("default", deserved={"nvidia.com/gpu": 2})]
    if queue_name != "default":
        queues.append(queue(queue_name, deserved={"nvidia.com/gpu": 0}))
    return Cluster(nodes=[node("n0", gpus=2)], queues=queues, jobs=jobs)


def test_preempt_never_evicts_a_pod_or_podgroup_marked_not_preemptable() -> None:
    # The newest pod goes first; marked, it stays and the older one goes.
    assert evicted(_contended([("old", {}), ("new", {})]).schedule(PREEMPT)) == ["default/new-0"]
    assert evicted(_contended([("old", {}), ("new", {"pod": False})]).schedule(PREEMPT)) == ["default/old-0"]
    assert evicted(_contended([("old", {}), ("new", {"group": False})]).schedule(PREEMPT)) == ["default/old-0"]
    assert evicted(_contended([("old", {"group": True}), ("new", {"pod": False})]).schedule(PREEMPT)) == [
        "default/old-0"
    ]
    everyone_kept = _contended([("old", {"pod": False}), ("new", {"group": False})]).schedule(PREEMPT)
    assert evicted(everyone_kept) == [] and pipelined(everyone_kept) == {}


def test_reclaim_never_evicts_a_pod_marked_not_preemptable() -> None:
    assert evicted(_contended([("old", {}), ("new", {})], "lender").schedule(RECLAIM)) == ["default/new-0"]
    kept = _contended([("old", {}), ("new", {"pod": False})], "lender").schedule(RECLAIM)
    assert evicted(kept) == ["default/old-0"]
    none = _contended([("old", {"group": False}), ("new", {"pod": False})], "lender").schedule(RECLAIM)
    assert evicted(none) == [] and pipelined(none) == {}


# -- preemptionPolicy: Never ---------------------------------------------------------------------------
NEVER_CLASS = """
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent-waiting}
value: 1000
preemptionPolicy: Never
"""
RUNNING_LOW = """
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: low}
spec: {minMember: 1, priorityClassName: batch}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: low-0, annotations: {scheduling.k8s.io/group-name: low}}
spec:
  schedulerName: volcano
  priorityClassName: batch
  nodeName: n0
  containers: [{name: main, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]
status: {phase: Running}
"""
PREEMPT_CONF = """
---
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: preempting}
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _admitted(name: str, spec: str) -> str:
    """A one-pod PodGroup already Inqueue (enqueue refuses a job on a full cluster) and its pod."""
    group = f"""
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 1}}
status: {{phase: Inqueue}}
"""
    return group + _pod_doc(f"{name}-0", f"annotations: {{scheduling.k8s.io/group-name: {name}}}", spec)


def test_a_pod_of_a_never_class_waits_instead_of_preempting() -> None:
    """Kubernetes gives a pod its PriorityClass's preemptionPolicy; Volcano's preempt skips a Never pod."""
    base = PRIORITY_CLASSES + NEVER_CLASS + RUNNING_LOW + PREEMPT_CONF
    urgent = base + _admitted("urgent", "priorityClassName: urgent").replace(
        "minMember: 1}", "minMember: 1, priorityClassName: urgent}"
    )
    preempting = prepare(load_text(urgent, "pods.yaml"))
    assert preempting.errors == []
    assert evicted(schedule(preempting.snapshot, preempting.config)) == ["default/low-0"]
    polite = base + _admitted("polite", "priorityClassName: urgent-waiting").replace(
        "minMember: 1}", "minMember: 1, priorityClassName: urgent-waiting}"
    )
    prepared = prepare(load_text(polite, "pods.yaml"))
    assert prepared.errors == []
    pods = {pod.name: pod for pod in prepared.snapshot.pods}
    assert pods["polite-0"].preemption_policy is PreemptionPolicy.NEVER
    decisions = schedule(prepared.snapshot, prepared.config)
    assert evicted(decisions) == [] and pipelined(decisions) == {}


def test_a_pod_s_own_never_counts_without_a_class_and_a_conflicting_one_is_refused() -> None:
    """Without a PriorityClass the pod spec's preemptionPolicy stands; against its class's, Kubernetes'
    admission refuses the pod, and so does tidegate, naming the field."""
    alone = PRIORITY_CLASSES + NEVER_CLASS + RUNNING_LOW + PREEMPT_CONF
    own = prepare(load_text(alone + _admitted("own", "preemptionPolicy: Never"), "pods.yaml"))
    assert own.errors == []
    assert {pod.name: pod.preemption_policy for pod in own.snapshot.pods}["own-0"] is PreemptionPolicy.NEVER
    clash = _pod_doc("clash", spec="priorityClassName: urgent-waiting\n  preemptionPolicy: PreemptLowerPriority")
    (error,) = load_text(PRIORITY_CLASSES + NEVER_CLASS + clash, "pods.yaml").errors
    assert (error.kind, error.name, error.field) == ("Pod", "clash", "spec.preemptionPolicy")
    assert "PriorityClass urgent-waiting gives Never" in error.message
    (bad,) = load_text(_pod_doc("odd", spec="preemptionPolicy: Sometimes"), "pods.yaml").errors
    assert (bad.name, bad.field) == ("odd", "spec.preemptionPolicy")


def test_a_never_pod_neither_preempts_nor_reclaims() -> None:
    for victims_queue, config in (("default", PREEMPT), ("lender", RECLAIM)):
        cluster = _contended([("old", {}), ("new", {})], victims_queue)
        assert evicted(cluster.schedule(config)) == ["default/new-0"]
        cluster.jobs[-1].pods[0].preemption_policy = PreemptionPolicy.NEVER
        decisions = cluster.schedule(config)
        assert evicted(decisions) == [] and pipelined(decisions) == {}


def test_a_vcjob_s_pods_take_their_class_s_preemption_policy() -> None:
    prepared = prepare(load_text(PRIORITY_CLASSES + NEVER_CLASS + vcjob("polite", "urgent-waiting"), "jobs.yaml"))
    assert prepared.errors == []
    (pod,) = prepared.snapshot.pods
    assert pod.preemption_policy is PreemptionPolicy.NEVER


def test_a_vcjob_template_clashing_with_its_class_is_one_error_naming_the_template_field() -> None:
    clash = vcjob("clash", "batch", "urgent-waiting").replace(
        "        containers:", "        preemptionPolicy: PreemptLowerPriority\n        containers:"
    )
    (error,) = prepare(load_text(PRIORITY_CLASSES + NEVER_CLASS + clash, "jobs.yaml")).errors
    assert (error.kind, error.name) == ("Job", "clash")
    assert error.field == "spec.tasks[0].template.spec.preemptionPolicy"


# -- a PodGroup is admitted before its pods exist ------------------------------------------------------
def test_a_podgroup_with_no_pods_yet_is_admitted_on_its_min_resources() -> None:
    """Volcano's enqueue never asks JobValid: a PodGroup whose pods do not exist yet goes Inqueue when its
    queue has room for its minResources (the job controller then creates the pods), and its minResources
    hold that room against later PodGroups."""
    cluster = Cluster(
        nodes=[node("n0", gpus=2)],
        queues=[queue("team", capability={"nvidia.com/gpu": 2})],
        jobs=[
            job("first", "team", replicas=0, min_member=2, min_resources={"nvidia.com/gpu": 2}, created=1),
            job("second", "team", replicas=0, min_member=1, min_resources={"nvidia.com/gpu": 1}, created=2),
        ],
    )
    decisions = cluster.schedule(conf("enqueue, allocate", "priority, gang", "predicates, capacity"))
    assert phase_of(decisions, "default/first") is INQUEUE
    assert pending_reason(decisions, "default/first") == "gang: 0/2 pods exist (minMember 2)"
    assert phase_of(decisions, "default/second") is PodGroupPhase.PENDING
    assert "capability" in pending_reason(decisions, "default/second")
