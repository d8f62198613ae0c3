"""vcjobs into PodGroups and pods, PodGroup affinity onto pods, bare pods into one-pod groups."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tidegate.model.errors import ManifestErrors, Source
from tidegate.model.expand import (
    Workload,
    apply_group_affinity,
    bare_pod_group,
    expand_job,
    job_min_available,
    workload_from,
)
from tidegate.model.manifests import ManifestSet, load_manifests
from tidegate.model.objects import (
    Job,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PreferredSchedulingTerm,
    PriorityClass,
    TaskSpec,
)
from tidegate.model.resources import Resources

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"
GPU = "nvidia.com/gpu"
CLASSES = [PriorityClass("high", 1000), PriorityClass("low", 100)]


def load(tmp_path: Path, *documents: str) -> ManifestSet:
    path = tmp_path / "m.yaml"
    path.write_text("---\n".join(textwrap.dedent(doc).strip() + "\n" for doc in documents))
    ms = load_manifests([str(path)])
    assert ms.errors == [], ms.errors
    return ms


def task(
    name: str,
    replicas: int,
    requests: dict[str, int],
    min_available: int | None = None,
    *,
    priority_class_name: str = "",
    scheduler_name: str = "volcano",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> TaskSpec:
    """A task whose template is built directly, without a manifest."""
    template = Pod(
        name=f"t-{name}",
        requests=Resources(requests),
        priority_class_name=priority_class_name,
        scheduler_name=scheduler_name,
        labels=labels or {},
        annotations=annotations or {},
    )
    return TaskSpec(name, replicas, template, min_available=min_available)


def prefer(key: str, value: str, weight: int = 10) -> PreferredSchedulingTerm:
    return PreferredSchedulingTerm(weight, NodeSelectorTerm((NodeSelectorRequirement(key, "In", (value,)),)))


def require(key: str, value: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm((NodeSelectorRequirement(key, "In", (value,)),)),)


# --- expand_job -------------------------------------------------------------------------------------


def test_expand_job_group_follows_the_job() -> None:
    job = Job(
        "train",
        namespace="ml",
        queue="dev",
        min_available=3,
        priority_class_name="high",
        tasks=(task("ps", 1, {"cpu": 2000}), task("worker", 4, {"cpu": 1000, GPU: 1000}, min_available=2)),
        source=Source("job.yaml", 2),
        created=5.0,
    )
    group, pods = expand_job(job, CLASSES)
    assert (group.key, group.queue, group.min_member, group.priority_class_name, group.priority) == (
        "ml/train",
        "dev",
        3,
        "high",
        1000,
    )
    assert group.min_task_member == {"ps": 1, "worker": 2}
    # The first 3 pods in task order: ps-0, worker-0, worker-1.
    assert group.min_resources == Resources({"cpu": 4000, GPU: 2000})
    assert (group.phase, group.source, group.created) == (PodGroupPhase.PENDING, Source("job.yaml", 2), 5.0)
    assert group.raw["spec"]["minResources"] == {"cpu": "4", GPU: "2"}
    assert [p.name for p in pods] == [
        "train-ps-0",
        "train-worker-0",
        "train-worker-1",
        "train-worker-2",
        "train-worker-3",
    ]


def test_expand_job_pods_carry_volcano_labels_and_annotations() -> None:
    job = Job(
        "train",
        queue="dev",
        priority_class_name="high",
        tasks=(task("worker", 2, {GPU: 1000}, labels={"app": "x"}, annotations={"note": "n"}),),
        source=Source("job.yaml", 0),
    )
    _, pods = expand_job(job, CLASSES)
    pod = pods[1]
    assert (pod.group, pod.task, pod.priority, pod.priority_class_name) == ("train", "worker", 1000, "high")
    assert pod.annotations["volcano.sh/task-spec"] == "worker"
    assert pod.annotations["scheduling.k8s.io/group-name"] == "train"
    assert pod.annotations["volcano.sh/task-index"] == "1"
    assert pod.annotations["note"] == "n"
    assert pod.labels["app"] == "x" and pod.labels["volcano.sh/job-name"] == "train"
    assert pod.labels["volcano.sh/queue-name"] == "dev"
    assert (pod.requests, pod.phase, pod.node_name, pod.source) == (
        Resources({GPU: 1000}),
        PodPhase.PENDING,
        "",
        Source("job.yaml", 0),
    )
    assert pod.raw["kind"] == "Pod" and pod.raw["metadata"]["name"] == "train-worker-1"


@pytest.mark.parametrize(
    ("min_available", "task_mins", "expected"),
    [
        (None, (None, None), 6),  # total replicas
        (0, (None, None), 6),  # Volcano reads 0 as unset
        (None, (1, None), 5),  # the sum of the tasks' minAvailable, replicas where unset
        (4, (1, 1), 4),
    ],
)
def test_job_min_available_default(
    min_available: int | None, task_mins: tuple[int | None, int | None], expected: int
) -> None:
    job = Job("j", min_available=min_available, tasks=(task("a", 2, {}, task_mins[0]), task("b", 4, {}, task_mins[1])))
    assert job_min_available(job) == expected
    group, _ = expand_job(job, [])
    assert group.min_member == expected


def test_min_resources_takes_higher_priority_tasks_first() -> None:
    job = Job(
        "j",
        min_available=2,
        tasks=(
            task("low", 2, {"cpu": 1000}, priority_class_name="low"),
            task("high", 2, {"cpu": 5000}, priority_class_name="high"),
        ),
    )
    group, pods = expand_job(job, CLASSES)
    assert group.min_resources == Resources({"cpu": 10_000})
    assert [p.priority for p in pods] == [100, 100, 1000, 1000]


@pytest.mark.parametrize(
    ("min_available", "expected_cpu"),
    [
        # minAvailable 3 = the tasks' minAvailable summed: each task's minAvailable pods (Volcano's CalcPGMinResources),
        # not the first 3 pods by priority (3 x high = 15 cores)
        (3, 1 * 5000 + 2 * 1000),
        # 4, above the sum: those, then one more from the replicas beyond minAvailable, higher priority first
        (4, 2 * 5000 + 2 * 1000),
        (6, 4 * 5000 + 2 * 1000),
        # 2, below the sum: the first 2 pods by priority (CalcFirstCountResources)
        (2, 2 * 5000),
    ],
)
def test_min_resources_follow_volcanos_calc_pg_min_resources(min_available: int, expected_cpu: int) -> None:
    job = Job(
        "j",
        min_available=min_available,
        tasks=(
            task("low", 2, {"cpu": 1000}, min_available=2, priority_class_name="low"),
            task("high", 4, {"cpu": 5000}, min_available=1, priority_class_name="high"),
        ),
    )
    group, _ = expand_job(job, CLASSES)
    assert group.min_resources == Resources({"cpu": expected_cpu})


def test_min_resources_order_tasks_by_their_templates_own_class(tmp_path: Path) -> None:
    # The job's class is high; task a's template names none (its pods inherit high), task b's names low.
    # Volcano orders tasks by the class the template itself names: a counts 0, so b's pod comes first.
    ms = load(
        tmp_path,
        """
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: mixed}
        spec:
          queue: dev
          minAvailable: 1
          priorityClassName: high
          tasks:
            - name: a
              replicas: 1
              template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
            - name: b
              replicas: 1
              template:
                spec: {priorityClassName: low, containers: [{name: c, resources: {requests: {cpu: "3"}}}]}
        """,
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: dev}\n",
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 100\n",
    )
    group, pods = expand_job(ms.jobs[0], ms.priority_classes)
    assert [pod.priority for pod in pods] == [1000, 100]  # the pods keep their classes' priorities
    assert group.min_resources == Resources({"cpu": 3000})


def test_template_class_wins_over_the_jobs_and_scheduler_is_inherited() -> None:
    job = Job(
        "j",
        priority_class_name="low",
        scheduler_name="tidegate",
        tasks=(task("a", 1, {}, priority_class_name="high", scheduler_name=""), task("b", 1, {})),
    )
    _, (a, b) = expand_job(job, {pc.name: pc for pc in CLASSES})
    assert (a.priority, a.scheduler_name) == (1000, "tidegate")
    assert (b.priority, b.priority_class_name) == (100, "low")


def test_expand_job_with_an_undefined_class_raises_naming_the_field() -> None:
    job = Job("j", tasks=(task("a", 1, {}, priority_class_name="vip"),), source=Source("f.yaml", 3))
    with pytest.raises(ManifestErrors) as info:
        expand_job(job, CLASSES)
    (error,) = info.value.errors
    assert (error.source, error.kind, error.name, error.field) == (
        Source("f.yaml", 3),
        "Job",
        "j",
        "spec.tasks[0].template.spec.priorityClassName",
    )


def test_expand_job_uses_builtin_levels_for_undefined_high_medium_low() -> None:
    group, pods = expand_job(Job("j", priority_class_name="medium", tasks=(task("a", 1, {}),)), [])
    assert group.priority == pods[0].priority == 500


def test_expand_job_from_manifest(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        """
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: mpi}
        spec:
          queue: dev
          tasks:
            - name: master
              replicas: 1
              template: {spec: {containers: [{name: m, resources: {requests: {cpu: "1"}}}]}}
            - name: worker
              replicas: 2
              minAvailable: 1
              template: {spec: {containers: [{name: w, resources: {limits: {nvidia.com/gpu: "2"}}}]}}
        """,
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: dev}\n",
    )
    group, pods = expand_job(ms.jobs[0], ms.priority_classes)
    assert group.min_member == 2 and group.min_task_member == {"master": 1, "worker": 1}
    assert group.min_resources == Resources({"cpu": 1000, GPU: 2000})
    assert [p.name for p in pods] == ["mpi-master-0", "mpi-worker-0", "mpi-worker-1"]
    assert pods[0].raw["spec"]["containers"][0]["name"] == "m"


# --- PodGroup affinity and bare pods ----------------------------------------------------------------


def test_group_affinity_fills_in_required_and_appends_preferred() -> None:
    group_affinity = NodeAffinity(required=require("region", "idc"), preferred=(prefer("type", "idc"),))
    plain = apply_group_affinity(Pod("p"), group_affinity)
    assert plain.affinity == group_affinity
    own = Pod("q", affinity=NodeAffinity(required=require("region", "cloud"), preferred=(prefer("gpu", "a100"),)))
    merged = apply_group_affinity(own, group_affinity)
    assert merged.affinity is not None
    assert merged.affinity.required == require("region", "cloud")  # the pod's own required terms win
    assert merged.affinity.preferred == (prefer("gpu", "a100"), prefer("type", "idc"))
    assert own.affinity is not None and own.affinity.preferred == (prefer("gpu", "a100"),)  # not mutated
    assert apply_group_affinity(own, None) is own


def test_bare_pod_gets_a_one_pod_group() -> None:
    pod = Pod(
        "solo",
        namespace="ml",
        requests=Resources({"cpu": 500}),
        priority=1000,
        priority_class_name="high",
        annotations={"scheduling.volcano.sh/queue-name": "dev"},
        source=Source("p.yaml", 1),
    )
    group, member = bare_pod_group(pod)
    assert (group.key, group.queue, group.min_member, group.min_resources) == (
        "ml/podgroup-solo",
        "dev",
        1,
        pod.requests,
    )
    assert (group.priority, group.priority_class_name, group.phase, group.source) == (
        1000,
        "high",
        PodGroupPhase.PENDING,
        pod.source,
    )
    assert member.group == "podgroup-solo" and member.annotations["scheduling.k8s.io/group-name"] == "podgroup-solo"
    assert pod.group == ""  # the loaded pod is left as it was


@pytest.mark.parametrize(
    ("node", "phase", "group_phase"),
    [
        ("", PodPhase.PENDING, PodGroupPhase.PENDING),
        ("n1", PodPhase.RUNNING, PodGroupPhase.RUNNING),
        ("n1", PodPhase.PENDING, PodGroupPhase.RUNNING),
        ("n1", PodPhase.SUCCEEDED, PodGroupPhase.COMPLETED),
    ],
)
def test_bare_pod_group_phase(node: str, phase: PodPhase, group_phase: PodGroupPhase) -> None:
    assert bare_pod_group(Pod("p", node_name=node, phase=phase))[0].phase is group_phase


def test_bare_pod_group_defaults_to_the_default_queue() -> None:
    assert bare_pod_group(Pod("p"))[0].queue == "default"


# --- workload_from ----------------------------------------------------------------------------------


def test_seed_workload() -> None:
    ms = load_manifests([str(SEED)])
    workload = workload_from(ms)
    assert workload.errors == [] and workload.warnings == []
    assert [g.key for g in workload.groups] == ["default/llm-finetune", "default/eval-sweep"]
    job_group, eval_group = workload.groups
    assert (job_group.queue, job_group.min_member, job_group.priority) == ("dev", 4, 1000)
    assert job_group.min_resources == Resources({"cpu": 32_000, "memory": 256 * 2**30, GPU: 4000})
    assert [p.name for p in workload.pods_of(job_group)] == [f"llm-finetune-worker-{i}" for i in range(4)]
    eval_pods = workload.pods_of(eval_group)
    assert [p.name for p in eval_pods] == [f"eval-sweep-{i}" for i in range(4)]
    assert all(p.affinity == eval_group.affinity for p in eval_pods)  # the group's affinity reaches its pods
    assert all(p.requests["volcano.sh/gpu-memory"] == 4_096_000 and p.priority == 1000 for p in eval_pods)
    assert len(workload.pods) == 8
    assert ms.pods[0].affinity is None  # the loaded pods are not mutated


def test_workload_groups_bare_pods_and_reports_missing_groups(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bare}\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: lost, annotations: {scheduling.volcano.sh/group-name: ghost}}\n",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: empty}\n",
    )
    workload = workload_from(ms)
    assert [g.name for g in workload.groups] == ["empty", "podgroup-bare"]
    assert workload.pods_of(workload.groups[0]) == []
    (error,) = workload.errors
    assert (error.source.index, error.kind, error.name, error.field) == (
        1,
        "Pod",
        "lost",
        "metadata.annotations.scheduling.volcano.sh/group-name",
    )
    assert "PodGroup 'ghost' does not exist" in error.message
    with pytest.raises(ManifestErrors):
        workload.raise_for_errors()


def test_pods_join_groups_only_in_their_own_namespace(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: a}\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: b, annotations: {scheduling.k8s.io/group-name: g}}",
    )
    assert [e.name for e in workload_from(ms).errors] == ["p"]


def test_workload_reuses_a_jobs_existing_podgroup_and_pods(tmp_path: Path) -> None:
    # A dump of a live cluster: the vcjob, the PodGroup its controller made and one pod already running.
    ms = load(
        tmp_path,
        """
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: train}
        spec: {tasks: [{name: w, replicas: 3}]}
        """,
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: train}
        spec: {minMember: 3}
        status: {phase: Running}
        """,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: train-w-0, annotations: {scheduling.k8s.io/group-name: train}}
        spec: {nodeName: n1}
        status: {phase: Running}
        """,
    )
    workload = workload_from(ms)
    assert workload.errors == []
    (group,) = workload.groups
    assert group is ms.podgroups[0] and group.phase is PodGroupPhase.RUNNING
    pods = workload.pods_of(group)
    assert [(p.name, p.node_name) for p in pods] == [("train-w-0", "n1"), ("train-w-1", ""), ("train-w-2", "")]


def test_workload_collects_job_expansion_errors(tmp_path: Path) -> None:
    ms = ManifestSet(jobs=[Job("j", priority_class_name="vip", tasks=(task("a", 1, {}),))])
    workload = workload_from(ms)
    assert [e.field for e in workload.errors] == ["spec.priorityClassName"] and workload.groups == []


def test_workload_rejects_two_groups_with_one_key() -> None:
    workload = Workload()
    workload.add(PodGroup("g"), [])
    workload.add(PodGroup("g", source=Source("x.yaml", 4)), [])
    assert len(workload.groups) == 1
    assert [(e.source, e.field) for e in workload.errors] == [(Source("x.yaml", 4), "metadata.name")]
