"""Loading manifests like `kubectl apply -f`: files, folders, stdin, every kind, every error."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from tidegate.model.errors import FieldError, ManifestError, ManifestErrors, Source
from tidegate.model.expand import workload_from
from tidegate.model.manifests import (
    BUILTIN_PRIORITIES,
    ManifestSet,
    SkippedDocument,
    load_manifests,
    load_text,
    resolve_priority,
)
from tidegate.model.objects import (
    DEFAULT_ACTIONS,
    DEFAULT_TIERS,
    JobAction,
    JobEvent,
    NodeSelectorRequirement,
    PodGroupPhase,
    PodPhase,
    PriorityClass,
    QueueState,
    TaintEffect,
    Toleration,
)
from tidegate.model.resources import Resources

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"
GPU = "nvidia.com/gpu"


def write(tmp_path: Path, *parts: str, name: str = "m.yaml") -> str:
    """Write the parts, each dedented on its own, as one file under tmp_path."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(textwrap.dedent(part) for part in parts))
    return str(path)


def load(tmp_path: Path, *parts: str, name: str = "m.yaml") -> ManifestSet:
    return load_manifests([write(tmp_path, *parts, name=name)])


def only_error(ms: ManifestSet) -> ManifestError:
    assert len(ms.errors) == 1, ms.errors
    return ms.errors[0]


def fields(problems: list[ManifestError]) -> list[str]:
    return [problem.field for problem in problems]


# --- the seed example -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seed() -> ManifestSet:
    return load_manifests([str(SEED)])


def test_seed_loads_without_errors(seed: ManifestSet) -> None:
    assert seed.errors == []
    assert len(seed.nodes) == 8
    assert [q.name for q in seed.queues] == ["root", "dev", "prod", "burst-cloud"]
    assert [pc.name for pc in seed.priority_classes] == ["high", "low"]
    assert len(seed.jobs) == 1 and len(seed.podgroups) == 1 and len(seed.pods) == 4
    assert len(seed.configurations) == 1


def test_seed_queues(seed: ManifestSet) -> None:
    dev = next(q for q in seed.queues if q.name == "dev")
    assert dev.weight == 100
    assert dev.capability is not None and dev.deserved is not None
    assert dev.capability[GPU] == 128_000
    assert dev.capability["cpu"] == 2_048_000
    assert dev.capability["memory"] == 4096 * 2**30
    assert dev.deserved[GPU] == 256_000
    assert dev.reclaimable is True
    assert dev.parent == "root"
    assert dev.state is QueueState.OPEN
    prod = next(q for q in seed.queues if q.name == "prod")
    assert prod.guarantee == Resources({GPU: 32_000})


def test_seed_nodes(seed: ManifestSet) -> None:
    idc = next(n for n in seed.nodes if n.name == "idc-a100-0")
    assert idc.labels["topology.kubernetes.io/region"] == "cn-shanghai-idc"
    assert idc.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert idc.gpu_memory_mib == (81920,) * 8
    assert idc.allocatable["cpu"] == 126_000 and idc.capacity["cpu"] == 128_000
    assert idc.ready and not idc.is_cloud and idc.taints == ()
    cloud = next(n for n in seed.nodes if n.name == "cloud-spot-0")
    assert cloud.labels["volcano.sh/node-type"] == "cloud-spot"
    assert cloud.labels["topology.kubernetes.io/region"] == "cn-hangzhou"
    assert cloud.annotations["latency.ms.local-idc"] == "35"
    assert [str(t) for t in cloud.taints] == ["cloud.provider=aliyun:NoSchedule"]
    assert cloud.is_cloud
    assert cloud.allocatable == cloud.capacity  # allocatable left out defaults to capacity
    assert cloud.gpu_memory_mib == (24576,) * 8


def test_seed_podgroup_and_pods(seed: ManifestSet) -> None:
    group = seed.podgroups[0]
    assert (group.name, group.queue, group.min_member) == ("eval-sweep", "prod", 4)
    assert group.min_resources == Resources({GPU: 4000})
    assert group.priority == 1000
    assert group.affinity is not None and group.affinity.required is None
    (term,) = group.affinity.preferred
    assert term.weight == 80
    assert term.preference.match_expressions == (
        NodeSelectorRequirement("volcano.sh/node-type", "NotIn", ("cloud-spot",)),
    )
    warning = next(w for w in seed.warnings if w.kind == "PodGroup")
    assert (warning.name, warning.field) == ("eval-sweep", "spec.affinity")
    assert "Volcano ignores affinity" in warning.message
    assert warning.source == Source(str(SEED / "podgroup.yaml"), 0)
    pod = seed.pods[0]
    assert pod.group == "eval-sweep"
    assert pod.requests["volcano.sh/gpu-memory"] == 4_096_000  # from the annotation
    assert pod.requests["cpu"] == 2000
    assert (pod.priority_class_name, pod.priority) == ("high", 1000)
    assert pod.source == Source(str(SEED / "podgroup.yaml"), 1)


def test_seed_job(seed: ManifestSet) -> None:
    job = seed.jobs[0]
    assert (job.name, job.queue, job.min_available, job.max_retry) == ("llm-finetune", "dev", 4, 3)
    assert job.policies[0].events == (JobEvent.TASK_FAILED,) and job.policies[0].action is JobAction.RESTART_JOB
    (task,) = job.tasks
    assert (task.name, task.replicas) == ("worker", 4)
    assert task.template.requests[GPU] == 1000
    assert task.template.tolerations == (Toleration("cloud.provider", "Equal", "aliyun", TaintEffect.NO_SCHEDULE),)
    assert task.template.priority == 1000  # inherited from the job's priorityClassName
    assert job.plugins == {"env": [], "svc": []}


def test_seed_configuration_and_skipped(seed: ManifestSet) -> None:
    conf = seed.configurations[0]
    assert conf.actions == ("enqueue", "allocate", "backfill", "preempt", "reclaim")
    assert [[p.name for p in tier.plugins] for tier in conf.tiers] == [
        ["priority", "gang"],
        ["drf", "predicates", "capacity", "nodeorder", "binpack", "gpushare"],
    ]
    binpack = conf.plugin("binpack")
    assert binpack is not None and binpack.arguments["binpack.weight"] == 10
    assert seed.skipped == [(Source(str(SEED / "deployment.yaml"), 0), "Deployment", "metrics-dashboard")]


# --- sources: files, folders, stdin -----------------------------------------------------------------

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: {name}
"""


def test_folder_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path, QUEUE.format(name="b"), name="b.yaml")
    write(tmp_path, QUEUE.format(name="c"), name="a/c.yml")
    (tmp_path / "a" / "d.json").write_text(
        json.dumps({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "d"}})
    )
    write(tmp_path, "not: [valid", name="a/notes.txt")  # not a manifest ending: ignored in folders
    ms = load_manifests([str(tmp_path)])
    assert ms.errors == []
    assert [q.name for q in ms.queues] == ["c", "d", "b"]
    assert [q.source.file for q in ms.queues] == [
        str(tmp_path / "a" / "c.yml"),
        str(tmp_path / "a" / "d.json"),
        str(tmp_path / "b.yaml"),
    ]


def test_multi_document_file_counts_empty_documents(tmp_path: Path) -> None:
    # A leading "---" starts the first document; "---" twice in a row makes an empty one.
    ms = load(tmp_path, "---\n" + QUEUE.format(name="a") + "---\n---\n" + QUEUE.format(name="b") + "---\n")
    assert ms.errors == []
    assert [(q.name, q.source.index) for q in ms.queues] == [("a", 0), ("b", 2)]


def test_stdin_dash(tmp_path: Path) -> None:
    stdin = io.StringIO(QUEUE.format(name="piped") + "---" + QUEUE.format(name="second"))
    ms = load_manifests(["-", write(tmp_path, QUEUE.format(name="file"))], stdin=stdin)
    assert [(q.name, q.source) for q in ms.queues][:2] == [("piped", Source("-", 0)), ("second", Source("-", 1))]
    assert ms.queues[2].name == "file"


def test_load_text_and_v1_list() -> None:
    ms = load_text(
        """
        apiVersion: v1
        kind: List
        items:
          - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {capacity: {cpu: "4"}}}
          - {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}
        """.replace("\n        ", "\n"),
        "dump.yaml",
    )
    assert ms.errors == []
    assert [n.name for n in ms.nodes] == ["n1"]
    assert ms.skipped == [(Source("dump.yaml", 0), "ConfigMap", "cm")]


def test_json_text_with_escapes_yaml_refuses_is_read_as_json() -> None:
    """json.dumps writes an emoji as a surrogate pair escape, which YAML's parser refuses."""
    doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {"owner": "team \U0001f680"}}}
    ms = load_text(json.dumps(doc), "POST /jobs")
    assert ms.errors == [] and ms.nodes[0].annotations["owner"] == "team \U0001f680"
    flow = load_text("{apiVersion: v1, kind: Node, metadata: {name: n2}}", "flow.yaml")  # YAML, not JSON
    assert ms.errors == [] and [n.name for n in flow.nodes] == ["n2"]


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    ms = load_manifests([str(tmp_path / "nope.yaml")])
    assert only_error(ms).source.file == str(tmp_path / "nope.yaml")
    assert "no such file" in ms.errors[0].message


def test_an_empty_folder_warns_and_with_nothing_else_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    ms = load_manifests([str(tmp_path / "empty"), write(tmp_path, QUEUE.format(name="q"))])
    assert ms.errors == [] and len(ms.warnings) == 1
    alone = load_manifests([str(tmp_path / "empty")])
    assert len(alone.warnings) == 1 and "no objects passed" in only_error(alone).message


# --- bad documents ----------------------------------------------------------------------------------


def test_bad_yaml_names_file_document_and_line_and_keeps_earlier_documents(tmp_path: Path) -> None:
    path = write(tmp_path, QUEUE.format(name="ok") + "---\nkind: Queue\nmetadata: {name: [broken\n")
    ms = load_manifests([path])
    assert [q.name for q in ms.queues] == ["ok"]
    error = only_error(ms)
    assert error.source == Source(path, 1)
    assert "invalid YAML at line" in error.message
    assert str(error).startswith(f"{path}: document 1: ")


def test_a_key_named_twice_is_an_error_at_its_line_not_a_silent_merge(tmp_path: Path) -> None:
    # a missing `---`: PyYAML alone would keep the second queue and drop the first without a word
    path = write(tmp_path, QUEUE.format(name="first") + QUEUE.format(name="second"))
    error = only_error(load_manifests([path]))
    assert error.source == Source(path, 0)
    assert "found duplicate key 'apiVersion'" in error.message
    assert "at line 7, column 1" in error.message  # the second apiVersion


def test_bad_json_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, '{"kind": ', name="bad.json")
    assert "invalid JSON" in only_error(load_manifests([path])).message


def test_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, QUEUE.format(name="a") + "---\n- just\n- a list\n")
    error = only_error(load_manifests([path]))
    assert error.source == Source(path, 1)
    assert "expected an object" in error.message


def test_missing_kind_and_api_version(tmp_path: Path) -> None:
    ms = load(tmp_path, "metadata: {name: x}\n---\napiVersion: v1\nmetadata: {name: y}\n")
    assert [(e.source.index, e.name, e.field) for e in ms.errors] == [
        (0, "x", "apiVersion"),
        (0, "x", "kind"),
        (1, "y", "kind"),
    ]


def test_other_kinds_are_skipped_not_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: svc}
        ---
        apiVersion: batch/v1
        kind: Job
        metadata: {name: k8s-job}
        """,
    )
    ms = load_manifests([path])
    assert ms.errors == [] and ms.jobs == []
    assert ms.skipped == [
        SkippedDocument(Source(path, 0), "Deployment", "web"),
        SkippedDocument(Source(path, 1), "Service", "svc"),
        SkippedDocument(Source(path, 2), "Job", "k8s-job"),
    ]


def test_all_errors_are_collected_with_file_document_kind_name_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: q}
        spec:
          weight: heavy
          capability: {nvidia.com/gpu: lots}
          reclaimable: "yes please"
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: n}
        status: {capacity: {cpu: "-4"}}
        """,
    )
    ms = load_manifests([path])
    assert [(e.source.index, e.kind, e.name, e.field) for e in ms.errors] == [
        (0, "Queue", "q", "spec.weight"),
        (0, "Queue", "q", "spec.capability[nvidia.com/gpu]"),
        (0, "Queue", "q", "spec.reclaimable"),
        (1, "Node", "n", "status.capacity[cpu]"),
    ]
    assert str(ms.errors[1]) == (
        f"{path}: document 0: Queue/q field spec.capability[nvidia.com/gpu]: 'lots' is not a valid quantity "
        "(e.g. 500m, 2, 1.5, 10Gi, 1e3)"
    )
    with pytest.raises(ManifestErrors) as info:
        ms.raise_for_errors()
    assert info.value.errors == ms.errors


def test_missing_name_is_an_error_and_the_object_is_dropped(tmp_path: Path) -> None:
    ms = load(tmp_path, "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nspec: {weight: 2}\n")
    assert only_error(ms).field == "metadata.name"
    assert ms.queues == []


def test_unknown_fields_are_kept_in_raw(tmp_path: Path) -> None:
    ms = load(tmp_path, QUEUE.format(name="q") + "spec:\n  futureField: 7\nextra: {a: 1}\n")
    assert ms.queues[0].raw["spec"]["futureField"] == 7
    assert ms.queues[0].raw["extra"] == {"a": 1}


# --- Queue ------------------------------------------------------------------------------------------


def test_queue_defaults(tmp_path: Path) -> None:
    queue = load(tmp_path, QUEUE.format(name="q")).queues[0]
    assert (queue.weight, queue.capability, queue.deserved, queue.guarantee) == (1, None, None, Resources())
    assert queue.reclaimable is True and queue.parent == "" and queue.state is QueueState.OPEN


def test_queue_fields_and_state_precedence(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: a}
        spec:
          weight: 7
          reclaimable: null
          priority: 3
          parent: root
          state: Closing
          guarantee: {resource: {cpu: 500m}}
          capability: {}
        status: {state: Closed}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: b}
        spec: {state: Closing, reclaimable: false}
        """,
    )
    a, b = ms.queues
    assert (a.weight, a.priority, a.parent, a.reclaimable) == (7, 3, "root", True)  # reclaimable nil means true
    assert a.guarantee == Resources({"cpu": 500})
    assert a.capability is None  # an empty list is no limit
    assert a.state is QueueState.CLOSED  # status.state wins over spec.state
    assert (b.state, b.reclaimable) == (QueueState.CLOSING, False)


def test_a_zero_capability_is_kept(tmp_path: Path) -> None:
    # nvidia.com/gpu "0" caps the queue at no GPUs, so the zero is kept (other lists drop zeros);
    # cpu "0" is kept too but is no cap, as in Volcano's proportion and capacity plugins.
    spec = '{capability: {nvidia.com/gpu: "0", cpu: "0", memory: 8Gi}, deserved: {nvidia.com/gpu: "0"}}'
    queue = load(tmp_path, QUEUE.format(name="q") + f"spec: {spec}\n").queues[0]
    assert queue.capability == Resources({GPU: 0, "cpu": 0, "memory": 8 * 2**30}, keep_zeros=True)
    assert GPU in queue.capability
    assert queue.capability_limits() == {GPU: 0, "memory": 8 * 2**30}
    assert queue.deserved is not None and GPU not in queue.deserved


def test_bad_queue_state(tmp_path: Path) -> None:
    error = only_error(load(tmp_path, QUEUE.format(name="q") + "spec: {state: Sleeping}\n"))
    assert error.field == "spec.state" and "Open, Closing, Closed" in error.message


# --- PodGroup ---------------------------------------------------------------------------------------

PODGROUP = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg, namespace: team}
"""


def test_podgroup_defaults(tmp_path: Path) -> None:
    ms = load(tmp_path, PODGROUP)
    group = ms.podgroups[0]
    assert (group.queue, group.min_member, group.min_resources, group.phase) == (
        "default",
        1,
        Resources(),
        PodGroupPhase.PENDING,
    )
    assert group.key == "team/pg" and group.affinity is None and ms.warnings == []


def test_podgroup_fields(tmp_path: Path) -> None:
    group = load(
        tmp_path,
        PODGROUP,
        """
        spec:
          queue: dev
          minMember: 3
          minTaskMember: {ps: 1, worker: 2}
          minResources: {cpu: "3", memory: 3Gi}
          priorityClassName: low
        status: {phase: Inqueue}
        """,
    ).podgroups[0]
    assert (group.queue, group.min_member, group.min_task_member) == ("dev", 3, {"ps": 1, "worker": 2})
    assert group.min_resources == Resources({"cpu": 3000, "memory": 3 * 2**30})
    assert group.phase is PodGroupPhase.INQUEUE
    assert group.priority == BUILTIN_PRIORITIES["low"]


def test_podgroup_required_affinity_and_warning(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        PODGROUP,
        """
        spec:
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions:
                      - {key: topology.kubernetes.io/region, operator: In, values: [cn-hangzhou]}
        """,
    )
    affinity = ms.podgroups[0].affinity
    assert affinity is not None and affinity.required is not None
    assert affinity.required_matches({"topology.kubernetes.io/region": "cn-hangzhou"})
    assert not affinity.required_matches({"topology.kubernetes.io/region": "idc"})
    assert fields(ms.warnings) == ["spec.affinity"] and ms.errors == []


# --- Node -------------------------------------------------------------------------------------------

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n}
"""


def test_node_allocatable_defaults_to_capacity_and_conditions(tmp_path: Path) -> None:
    node = load(
        tmp_path,
        NODE,
        """
        spec:
          unschedulable: true
          taints:
            - {key: gpu, effect: PreferNoSchedule}
        status:
          capacity: {cpu: "8", memory: 32Gi}
          conditions:
            - {type: MemoryPressure, status: "False"}
            - {type: Ready, status: "False"}
        """,
    ).nodes[0]
    assert node.allocatable == node.capacity == Resources({"cpu": 8000, "memory": 32 * 2**30})
    assert node.unschedulable and not node.ready
    assert [str(t) for t in node.taints] == ["gpu:PreferNoSchedule"]


@pytest.mark.parametrize(
    ("allocatable", "cards"),
    [
        ({"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "2"}, (16384, 16384)),
        ({"volcano.sh/gpu-memory": "98304", GPU: "4"}, (24576,) * 4),  # nvidia.com/gpu as the count
        ({GPU: "2"}, (0, 0)),  # whole cards only
        ({"cpu": "4"}, ()),
    ],
)
def test_node_gpu_cards(tmp_path: Path, allocatable: dict[str, str], cards: tuple[int, ...]) -> None:
    ms = load(tmp_path, NODE + "status:\n  allocatable: " + json.dumps(allocatable) + "\n")
    assert ms.errors == [] and ms.warnings == []
    assert ms.nodes[0].gpu_memory_mib == cards


def test_node_gpu_memory_is_stored_in_milli_units(tmp_path: Path) -> None:
    node = load(
        tmp_path, NODE + 'status: {allocatable: {volcano.sh/gpu-memory: "4096", volcano.sh/gpu-number: "1"}}\n'
    ).nodes[0]
    assert node.allocatable["volcano.sh/gpu-memory"] == 4_096_000
    assert node.gpu_memory_mib == (4096,)


def test_node_gpu_memory_without_card_count_warns(tmp_path: Path) -> None:
    ms = load(tmp_path, NODE + 'status: {allocatable: {volcano.sh/gpu-memory: "4096"}}\n')
    assert ms.nodes[0].gpu_memory_mib == () and fields(ms.warnings) == ["status.allocatable[volcano.sh/gpu-memory]"]


def test_node_fractional_card_count_is_an_error(tmp_path: Path) -> None:
    ms = load(tmp_path, NODE + 'status: {allocatable: {nvidia.com/gpu: "1.5"}}\n')
    assert only_error(ms).field == "status.allocatable[nvidia.com/gpu]"


@pytest.mark.parametrize("resource", [GPU, "volcano.sh/gpu-number"])
def test_a_node_with_more_cards_than_can_be_tracked_is_an_error(tmp_path: Path, resource: str) -> None:
    """Each card has its own columns: a count like 2**40 (a typo, or a hostile submission) would exhaust memory."""
    ms = load(tmp_path, NODE + f'status: {{allocatable: {{{resource}: "1099511627776", cpu: "8"}}}}\n')
    error = only_error(ms)
    assert error.field == f"status.allocatable[{resource}]" and "at most 256" in error.message


def test_node_bad_taint(tmp_path: Path) -> None:
    error = only_error(load(tmp_path, NODE + "spec: {taints: [{key: a, effect: Sometimes}]}\n"))
    assert error.field == "spec.taints[0].effect" and (error.kind, error.name) == ("Node", "n")


# --- Pod --------------------------------------------------------------------------------------------

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: p
"""


def test_pod_requests_fall_back_to_limits_per_resource(tmp_path: Path) -> None:
    pod = load(
        tmp_path,
        POD,
        """
        spec:
          containers:
            - name: a
              resources:
                requests: {cpu: "1", memory: "0"}
                limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
            - name: b
              resources: {limits: {cpu: 500m}}
        """,
    ).pods[0]
    # cpu: 1 requested + 500m from b's limit; memory explicitly requested 0; the GPU from the limit.
    assert pod.requests == Resources({"cpu": 1500, GPU: 1000})


def test_pod_requests_take_the_init_container_peak(tmp_path: Path) -> None:
    pod = load(
        tmp_path,
        POD,
        """
        spec:
          initContainers:
            - {name: fetch, resources: {requests: {cpu: "4", memory: 1Gi}}}
          containers:
            - {name: a, resources: {requests: {cpu: "1", memory: 2Gi}}}
            - {name: b, resources: {requests: {cpu: "1", memory: 2Gi}}}
        """,
    ).pods[0]
    assert pod.requests == Resources({"cpu": 4000, "memory": 4 * 2**30})


def test_pod_sidecar_init_containers_add_to_the_sum(tmp_path: Path) -> None:
    pod = load(
        tmp_path,
        POD,
        """
        spec:
          initContainers:
            - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 500m}}}
            - {name: setup, resources: {requests: {cpu: "2"}}}
          containers:
            - {name: app, resources: {requests: {cpu: "1"}}}
        """,
    ).pods[0]
    assert pod.requests == Resources({"cpu": 2500})  # max(1 + 0.5, 2 + 0.5)


def test_pod_gpu_memory_annotation_counts_only_without_a_container_request(tmp_path: Path) -> None:
    annotated = POD + '  annotations: {volcano.sh/gpu-memory: "4096"}\n'
    pod = load(tmp_path, annotated + "spec: {containers: [{name: a}]}\n").pods[0]
    assert pod.requests == Resources({"volcano.sh/gpu-memory": 4_096_000})
    spec = 'spec: {containers: [{name: a, resources: {requests: {volcano.sh/gpu-memory: "1024"}}}]}\n'
    pod = load(tmp_path, annotated + spec, name="b.yaml").pods[0]
    assert pod.requests == Resources({"volcano.sh/gpu-memory": 1_024_000})


def test_pod_bad_gpu_memory_annotation_names_the_annotation(tmp_path: Path) -> None:
    ms = load(tmp_path, POD + '  annotations: {volcano.sh/gpu-memory: "much"}\n')
    assert only_error(ms).field == "metadata.annotations.volcano.sh/gpu-memory"


@pytest.mark.parametrize("annotation", ["scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name"])
def test_pod_group_from_either_annotation(tmp_path: Path, annotation: str) -> None:
    pod = load(tmp_path, POD + f"  annotations: {{{annotation}: g1}}\n").pods[0]
    assert pod.group == "g1"


def test_pod_scheduling_fields(tmp_path: Path) -> None:
    pod = load(
        tmp_path,
        POD,
        """
          namespace: ml
          labels: {app: x}
          annotations: {volcano.sh/gpu-index: "1,3", volcano.sh/task-spec: worker}
          creationTimestamp: "2024-01-01T00:00:10Z"
        spec:
          nodeName: idc-a100-0
          schedulerName: tidegate
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
          tolerations:
            - {operator: Exists}
            - {key: cloud.provider, operator: Equal, value: aliyun, effect: NoSchedule}
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions: [{key: rank, operator: Gt, values: ["3"]}]
                  - matchExpressions: [{key: spot, operator: DoesNotExist}]
              preferredDuringSchedulingIgnoredDuringExecution:
                - {weight: 10, preference: {matchExpressions: [{key: zone, operator: In, values: [a, b]}]}}
                - {weight: 5, preference: {}}
        status: {phase: Running}
        """,
    ).pods[0]
    assert (pod.key, pod.node_name, pod.scheduler_name, pod.phase) == (
        "ml/p",
        "idc-a100-0",
        "tidegate",
        PodPhase.RUNNING,
    )
    assert pod.labels == {"app": "x"} and pod.task == "worker" and pod.gpu_indices == (1, 3)
    assert pod.created == 1704067210.0
    assert pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pod.tolerations[0] == Toleration(operator="Exists")
    assert pod.tolerations[1].effect is TaintEffect.NO_SCHEDULE
    affinity = pod.affinity
    assert affinity is not None and affinity.required is not None and len(affinity.required) == 2
    assert affinity.required_matches({"rank": "4", "spot": "yes"})
    assert affinity.required_matches({"rank": "1"})
    assert not affinity.required_matches({"rank": "1", "spot": "yes"})
    assert [t.weight for t in affinity.preferred] == [10]  # the empty preference is a no-op, dropped


def test_pod_defaults(tmp_path: Path) -> None:
    pod = load(tmp_path, POD).pods[0]
    assert (pod.namespace, pod.requests, pod.scheduler_name, pod.phase, pod.group) == (
        "default",
        Resources(),
        "volcano",
        PodPhase.PENDING,
        "",
    )
    assert pod.affinity is None and pod.priority == 0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("tolerations: [{key: a, operator: Exists, value: b}]", "spec.tolerations[0].value"),
        ("tolerations: [{value: b}]", "spec.tolerations[0].operator"),
        ("tolerations: [{key: a, operator: Maybe}]", "spec.tolerations[0].operator"),
        ("nodeSelector: {gpu: 1}", "spec.nodeSelector.gpu"),
        ("containers: [{name: a, resources: {requests: {cpu: lots}}}]", "spec.containers[0].resources.requests[cpu]"),
        (
            "initContainers: [{name: a, resources: {limits: {memory: 1Gb}}}]",
            "spec.initContainers[0].resources.limits[memory]",
        ),
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        ),
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{}]}}}",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions",
        ),
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: a, operator: Near, values: [b]}]}]}}}",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].operator",
        ),
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchFields: [{key: metadata.name, operator: In, values: [n]}]}]}}}",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields",
        ),
        (
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 0, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 1, preference: {matchExpressions: [{key: a, operator: In}]}}]}}",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
            ".matchExpressions[0].values",
        ),
        (
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 1, preference: {matchExpressions: [{key: a, operator: Gt, values: [x]}]}}]}}",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
            ".matchExpressions[0].values",
        ),
        (
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 1, preference: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}}]}}",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
            ".matchExpressions[0].values",
        ),
    ],
)
def test_pod_field_errors(tmp_path: Path, spec: str, field: str) -> None:
    error = only_error(load(tmp_path, POD + "spec: {" + spec + "}\n"))
    assert (error.kind, error.name, error.field) == ("Pod", "p", field)


def test_pod_anti_affinity_is_read_and_a_term_without_topology_key_is_an_error(tmp_path: Path) -> None:
    ms = load(
        tmp_path, POD + "spec: {affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{}]}}}\n"
    )
    assert fields(ms.errors) == [
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"
    ]


# --- priority ---------------------------------------------------------------------------------------

CLASSES = [PriorityClass("urgent", 5000), PriorityClass("normal", 50, global_default=True)]


def test_resolve_priority_defined_default_and_builtin() -> None:
    warnings: list[str] = []
    assert resolve_priority("urgent", CLASSES, warnings.append) == 5000
    assert resolve_priority("", CLASSES, warnings.append) == 50  # the globalDefault class
    assert resolve_priority("", [], warnings.append) == 0
    assert warnings == []
    assert resolve_priority("high", CLASSES, warnings.append) == 1000
    assert resolve_priority("medium", {}, warnings.append) == 500
    assert resolve_priority("low", {pc.name: pc for pc in CLASSES}, warnings.append) == 100
    assert len(warnings) == 3 and "'high' is not defined" in warnings[0]
    assert resolve_priority("high", [PriorityClass("high", 7)]) == 7  # a defined class wins over the built-in


def test_resolve_priority_unknown_class_is_a_field_error() -> None:
    with pytest.raises(FieldError) as info:
        resolve_priority("vip", CLASSES)
    assert info.value.field == "priorityClassName" and "'vip' is not defined" in info.value.message


def test_pod_priority_from_annotation_class_and_global_default(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: by-annotation, annotations: {volcano.sh/priority: urgent}}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: by-spec, annotations: {volcano.sh/priority: urgent}}
        spec: {priorityClassName: normal}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: by-default}
        ---
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: urgent}
        value: 5000
        ---
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: normal}
        value: 50
        globalDefault: true
        """,
    )
    assert ms.errors == [] and ms.warnings == []
    assert [(p.name, p.priority_class_name, p.priority) for p in ms.pods] == [
        ("by-annotation", "urgent", 5000),
        ("by-spec", "normal", 50),
        ("by-default", "", 50),
    ]


def test_pod_priority_builtin_fallback_warns_and_unknown_errors(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: a, annotations: {volcano.sh/priority: medium}}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: b}
        spec: {priorityClassName: vip}
        """,
    )
    assert ms.pods[0].priority == 500
    assert [(w.name, w.field) for w in ms.warnings] == [("a", "metadata.annotations.volcano.sh/priority")]
    error = only_error(ms)
    assert (error.source.index, error.kind, error.name, error.field) == (1, "Pod", "b", "spec.priorityClassName")


def test_priority_class_value_is_required(tmp_path: Path) -> None:
    ms = load(tmp_path, "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: x}\n")
    assert only_error(ms).field == "value"


# --- vcjob ------------------------------------------------------------------------------------------

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
"""


@pytest.mark.parametrize(
    ("tasks", "field"),
    [
        ("[{name: w, replicas: 1000000000000000000000000000000}]", "spec.tasks[0].replicas"),
        ("[{name: a, replicas: 6000}, {name: b, replicas: 6000}]", "spec.tasks"),
    ],
)
def test_a_job_of_more_pods_than_can_be_built_is_an_error_and_expands_to_none(
    tmp_path: Path, tasks: str, field: str
) -> None:
    """Each replica is built and tracked: 10**30 of them (a typo, or a hostile submission) hung the server."""
    ms = load(tmp_path, JOB, f"spec: {{tasks: {tasks}}}\n")
    error = only_error(ms)
    assert (error.kind, error.name, error.field) == ("Job", "j", field) and "at most 10,000 pods" in error.message
    workload = workload_from(ms)
    assert [(group.key, workload.pods_of(group)) for group in workload.groups] in ([], [("default/j", [])])


def test_job_defaults_and_inheritance(tmp_path: Path) -> None:
    ms = load(
        tmp_path,
        JOB,
        """
        spec:
          schedulerName: tidegate
          priorityClassName: high
          tasks:
            - replicas: 2
              template:
                metadata: {labels: {role: w}, annotations: {note: n}}
                spec:
                  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
            - name: ps
              replicas: 1
              template:
                spec:
                  schedulerName: volcano
                  priorityClassName: low
        """,
    )
    job = ms.jobs[0]
    assert (job.queue, job.max_retry, job.min_available, job.total_replicas) == ("default", 3, None, 3)
    first, second = job.tasks
    assert first.name == "default0"  # Volcano's webhook names unnamed tasks so
    assert first.template.labels == {"role": "w"} and first.template.annotations == {"note": "n"}
    assert (first.template.scheduler_name, first.template.priority_class_name, first.template.priority) == (
        "tidegate",
        "high",
        1000,
    )
    assert (second.template.scheduler_name, second.template.priority) == ("volcano", 100)
    assert first.template.requests == Resources({"cpu": 1000})
    # high and low are not defined here: both fall back to the built-in levels, with a warning each.
    assert sorted(fields(ms.warnings)) == ["spec.priorityClassName", "spec.tasks[1].template.spec.priorityClassName"]


def test_job_policies_plugins_and_task_fields(tmp_path: Path) -> None:
    job = load(
        tmp_path,
        JOB,
        """
        spec:
          queue: dev
          minAvailable: 2
          maxRetry: 5
          plugins: {ssh: [], env: ["--a"]}
          policies:
            - {event: PodEvicted, events: [PodFailed, PodEvicted], action: RestartJob, timeout: 1h30m}
            - {exitCode: 137, action: AbortJob}
            - {events: ["*"], action: CompleteJob, timeout: 250ms}
          tasks:
            - name: w
              replicas: 3
              minAvailable: 2
              policies: [{event: TaskCompleted, action: CompleteJob}]
        """,
    ).jobs[0]
    assert (job.queue, job.min_available, job.max_retry) == ("dev", 2, 5)
    assert job.plugins == {"ssh": [], "env": ["--a"]}
    first, second, third = job.policies
    assert first.events == (JobEvent.POD_EVICTED, JobEvent.POD_FAILED)  # duplicates inside one policy merged
    assert first.action is JobAction.RESTART_JOB and first.timeout_s == 5400.0
    assert (second.exit_code, second.events, second.action) == (137, (), JobAction.ABORT_JOB)
    assert third.events == (JobEvent.ANY,) and third.timeout_s == pytest.approx(0.25)
    (task,) = job.tasks
    assert (task.replicas, task.min_available) == (3, 2)
    assert task.policies[0].events == (JobEvent.TASK_COMPLETED,)


def test_retry_limit_is_an_alias_of_max_retry_with_a_warning(tmp_path: Path) -> None:
    ms = load(tmp_path, JOB + "spec: {retryLimit: 7, tasks: [{name: a, replicas: 1}]}\n")
    assert ms.jobs[0].max_retry == 7
    warning = ms.warnings[0]
    assert (warning.kind, warning.name, warning.field) == ("Job", "j", "spec.retryLimit")
    assert "maxRetry" in warning.message


def test_max_retry_zero_means_default_with_a_warning(tmp_path: Path) -> None:
    ms = load(tmp_path, JOB + "spec: {maxRetry: 0, tasks: [{name: a, replicas: 1}]}\n")
    assert ms.jobs[0].max_retry == 3 and fields(ms.warnings) == ["spec.maxRetry"]


def test_task_without_replicas_warns(tmp_path: Path) -> None:
    ms = load(tmp_path, JOB + "spec: {tasks: [{name: a}]}\n")
    assert ms.jobs[0].tasks[0].replicas == 0 and fields(ms.warnings) == ["spec.tasks[0].replicas"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("tasks: [{name: a, replicas: 1}, {name: 7, replicas: 1}]", "spec.tasks[1].name"),
        ("tasks: [{name: a, replicas: two}]", "spec.tasks[0].replicas"),
        ("tasks: [{name: a, replicas: 1, minAvailable: 1.5}]", "spec.tasks[0].minAvailable"),
        (
            "tasks: [{name: a, replicas: 1, policies: [{event: Explode, action: RestartJob}]}]",
            "spec.tasks[0].policies[0].event",
        ),
        (
            "tasks: [{name: a, replicas: 1}], policies: [{events: [PodFailed], action: Panic}]",
            "spec.policies[0].action",
        ),
        ("tasks: [{name: a, replicas: 1}], policies: [{event: PodFailed}]", "spec.policies[0].action"),
        (
            "tasks: [{name: a, replicas: 1}], policies: [{event: PodFailed, action: RestartJob, timeout: soon}]",
            "spec.policies[0].timeout",
        ),
        (
            "tasks: [{name: a, replicas: 1}], policies: [{exitCode: one, action: RestartJob}]",
            "spec.policies[0].exitCode",
        ),
        ("tasks: [{name: a, replicas: 1}], plugins: {ssh: a}", "spec.plugins.ssh"),
        ("tasks: [{name: a, replicas: 1}], minAvailable: many", "spec.minAvailable"),
        (
            "tasks: [{name: a, replicas: 1, template: {spec: "
            "{containers: [{name: c, resources: {requests: {nvidia.com/gpu: x}}}]}}}]",
            "spec.tasks[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        ),
        (
            "tasks: [{name: a, replicas: 1, template: {metadata: {annotations: {volcano.sh/gpu-memory: big}}}}]",
            "spec.tasks[0].template.metadata.annotations.volcano.sh/gpu-memory",
        ),
        (
            "tasks: [{name: a, replicas: 1, template: {spec: {priorityClassName: vip}}}]",
            "spec.tasks[0].template.spec.priorityClassName",
        ),
        ("tasks: [{name: a, replicas: 1}], priorityClassName: vip", "spec.priorityClassName"),
    ],
)
def test_job_field_errors(tmp_path: Path, spec: str, field: str) -> None:
    error = only_error(load(tmp_path, JOB + "spec: {" + spec + "}\n"))
    assert (error.source.index, error.kind, error.name, error.field) == (0, "Job", "j", field)


# --- SchedulerConfiguration -------------------------------------------------------------------------

CONF_HEAD = "apiVersion: tidegate.io/v1alpha1\nkind: SchedulerConfiguration\nmetadata: {name: c}\n"
VOLCANO_CONF = """actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: proportion
    arguments: {a: 1}
"""


@pytest.mark.parametrize(
    "body",
    [
        VOLCANO_CONF,
        "spec:\n" + textwrap.indent(VOLCANO_CONF, "  "),
        "conf: |\n" + textwrap.indent(VOLCANO_CONF, "  "),
        "spec:\n  conf: |\n" + textwrap.indent(VOLCANO_CONF, "    "),
    ],
    ids=["top-level", "spec", "conf", "spec.conf"],
)
def test_scheduler_configuration_forms(tmp_path: Path, body: str) -> None:
    ms = load(tmp_path, CONF_HEAD + body)
    assert ms.errors == []
    conf = ms.configurations[0]
    assert conf.name == "c"
    assert conf.actions == ("enqueue", "allocate")
    assert [[p.name for p in tier.plugins] for tier in conf.tiers] == [["gang", "proportion"]]
    assert conf.tiers[0].plugins[1].arguments == {"a": 1}


def test_scheduler_configuration_defaults(tmp_path: Path) -> None:
    conf = load(tmp_path, "apiVersion: tidegate.io/v1alpha1\nkind: SchedulerConfiguration\n").configurations[0]
    assert (conf.name, conf.actions, conf.tiers) == ("default", DEFAULT_ACTIONS, DEFAULT_TIERS)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("conf: 'actions: [unclosed'", "conf"),
        ("spec: {conf: 42}", "spec.conf"),
        ("tiers: [{plugins: [{arguments: {}}]}]", "tiers[0].plugins[0].name"),
        ("spec: {actions: 12}", "spec.actions"),
    ],
)
def test_scheduler_configuration_errors(tmp_path: Path, body: str, field: str) -> None:
    error = only_error(load(tmp_path, CONF_HEAD + body + "\n"))
    assert (error.kind, error.name, error.field) == ("SchedulerConfiguration", "c", field)
