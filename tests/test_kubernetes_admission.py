"""Manifests refused as Kubernetes' (and Volcano's) admission refuses them, at every entry point: kinds and
apiVersions that do not exist, extended resources that are not whole or differ from their limit, no object
at all, annotations and labels Kubernetes would not store."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sim_builders import write_elastic_sim
from test_live import CLUSTER, vcjob
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.model.errors import ManifestError
from tidegate.model.manifests import ManifestSet, load_objects, load_text
from tidegate.model.names import MAX_ANNOTATIONS_BYTES, is_extended_resource
from tidegate.model.resources import GPU_MEMORY, GPU_MILLI, GPU_NUMBER, NVIDIA_GPU
from tidegate.server.app import create_app
from tidegate.server.status import read_status

runner = CliRunner()


def only_error(ms: ManifestSet) -> ManifestError:
    assert len(ms.errors) == 1, ms.errors
    return ms.errors[0]


def pod(resources: str = '{requests: {cpu: "1"}}', metadata: str = "", spec: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{', ' + metadata if metadata else ''}}}\n"
        f"spec: {{{spec + ', ' if spec else ''}containers: [{{name: c, resources: {resources}}}]}}\n"
    )


# --- kinds and apiVersions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "kind", "meant"),
    [
        ("batch.volcano.sh/v1alpha1", "Jobb", "Job"),
        ("scheduling.volcano.sh/v1beta1", "Queu", "Queue"),
        ("scheduling.volcano.sh/v1beta1", "Podgroup", "PodGroup"),
        ("tidegate.io/v1alpha1", "SchedulerConfig", "SchedulerConfiguration"),
        ("tidegate.io/v1alpha1", "NodePol", "NodePool"),
        ("v1", "Nod", "Node"),
        ("scheduling.k8s.io/v1", "PriorityClas", "PriorityClass"),
        ("autoscaling/v2", "HorizontalPodAutoscalr", "HorizontalPodAutoscaler"),
    ],
)
def test_a_kind_a_known_group_does_not_have_is_an_error_not_skipped(api_version: str, kind: str, meant: str) -> None:
    ms = load_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n", "typo.yaml")
    error = only_error(ms)
    assert (error.kind, error.name, error.field) == (kind, "x", "kind")
    assert error.message.startswith(f'no matches for kind "{kind}" in version "{api_version}"')
    assert error.message.endswith(f"did you mean {meant}?")
    assert ms.skipped == [] and ms.other_documents == []


def test_kinds_tidegate_does_not_read_and_groups_it_does_not_know_stay_skipped() -> None:
    text = "---\n".join(
        f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: {name}}}\n"
        for api_version, kind, name in (
            ("v1", "ConfigMap", "cm"),
            ("batch.volcano.sh/v1alpha1", "CronJob", "nightly"),
            ("apps/v1", "Deploymnt", "web"),  # a typo, but apps is not a group tidegate reads
            ("example.com/v1", "Widget", "w"),
            ("tidegate.io/v1alpha1", "Cluster", "idc"),
        )
    )
    ms = load_text(text, "other.yaml")
    assert ms.errors == []
    assert [(s.kind, s.name) for s in ms.skipped] == [
        ("ConfigMap", "cm"),
        ("CronJob", "nightly"),
        ("Deploymnt", "web"),
        ("Widget", "w"),
        ("Cluster", "idc"),
    ]


@pytest.mark.parametrize(
    ("api_version", "kind", "served"),
    [
        ("scheduling.volcano.sh/v2", "Queue", "scheduling.volcano.sh serves v1beta1"),
        ("scheduling.volcano.sh/v1alpha1", "PodGroup", "scheduling.volcano.sh serves v1beta1"),
        ("batch.volcano.sh/v1", "Job", "batch.volcano.sh serves v1alpha1"),
        ("v2", "Pod", "the core API group serves v1"),
        ("tidegate.io/v9", "Cluster", "tidegate.io serves v1alpha1"),
        ("tidegate.io/v1", "SchedulerConfiguration", "tidegate.io serves v1alpha1"),
        ("scheduling.k8s.io/v1beta1", "PriorityClass", "scheduling.k8s.io serves v1"),
    ],
)
def test_an_api_version_a_known_group_does_not_serve_is_an_error_naming_those_it_does(
    api_version: str, kind: str, served: str
) -> None:
    error = only_error(load_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n", "v.yaml"))
    assert (error.kind, error.field) == (kind, "apiVersion")
    assert error.message == f'no matches for kind "{kind}" in version "{api_version}": {served}'


def test_validate_and_schedule_refuse_a_kind_typo(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(vcjob("j").replace("kind: Job", "kind: Jobb"))
    for command in ("validate", "schedule"):
        result = runner.invoke(app, [command, "-f", str(path)])
        assert result.exit_code == 1, result.output
        assert 'Jobb/j field kind: no matches for kind "Jobb" in version "batch.volcano.sh/v1alpha1"' in result.output
        assert "skipped Jobb" not in result.output


def test_simulate_refuses_a_version_of_a_simulation_kind_that_does_not_exist(tmp_path: Path) -> None:
    folder = write_elastic_sim(tmp_path / "sim")
    (folder / "extra.yaml").write_text(
        "apiVersion: tidegate.io/v9\nkind: NodePool\nmetadata: {name: more}\n"
        "spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8}}\n"
    )
    result = runner.invoke(app, ["simulate", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert 'NodePool/more field apiVersion: no matches for kind "NodePool" in version "tidegate.io/v9"' in result.output


def test_kube_refuses_a_configuration_of_a_kind_that_does_not_exist(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("apiVersion: tidegate.io/v1alpha1\nkind: SchedulerConfiguratoin\nmetadata: {name: s}\n")
    result = runner.invoke(app, ["kube", "--kubeconfig", str(tmp_path / "none"), "--config", str(config)])
    assert result.exit_code == 1
    assert "did you mean SchedulerConfiguration?" in result.output


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())))


def test_post_jobs_refuses_a_kind_typo_and_a_version_that_does_not_exist(client: TestClient) -> None:
    for text, field in (
        (vcjob("j").replace("kind: Job", "kind: Jobb"), "kind"),
        (vcjob("j").replace("/v1alpha1", "/v1"), "apiVersion"),
    ):
        response = client.post("/jobs", content=text)
        assert response.status_code == 422
        (error,) = read_status(response.json(), 422).details.causes
        assert (error.name, error.field) == ("j", field)
        assert error.message.startswith("no matches for kind")


# --- extended resources -----------------------------------------------------------------------------


def test_tidegate_gpu_resources_are_extended_resources_and_kubernetes_own_are_not() -> None:
    assert all(is_extended_resource(name) for name in (NVIDIA_GPU, GPU_MEMORY, GPU_NUMBER, GPU_MILLI))
    assert not any(is_extended_resource(name) for name in ("cpu", "memory", "pods", "kubernetes.io/batch"))


@pytest.mark.parametrize(
    ("resource", "quantity", "message"),
    [
        (NVIDIA_GPU, "4Gi", "counted in whole units, not bytes"),
        (NVIDIA_GPU, "0.5", "must be an integer"),
        (NVIDIA_GPU, "500m", "must be an integer"),
        (GPU_MEMORY, "16Gi", "volcano.sh/gpu-memory is counted in MiB, not bytes"),
        (GPU_MEMORY, "1024.5", "must be an integer"),
        (GPU_MILLI, "1.5", "must be an integer"),
    ],
)
@pytest.mark.parametrize("key", ["requests", "limits"])
def test_an_extended_resource_of_a_container_is_a_whole_number(
    resource: str, quantity: str, message: str, key: str
) -> None:
    other = "limits" if key == "requests" else "requests"
    error = only_error(load_text(pod(f'{{{key}: {{{resource}: "{quantity}"}}, {other}: {{}}}}'), "p.yaml"))
    assert (error.kind, error.field) == ("Pod", f"spec.containers[0].resources.{key}[{resource}]")
    assert message in error.message


def test_an_extended_request_must_equal_its_limit_and_cpu_must_not_exceed_it() -> None:
    unequal = only_error(load_text(pod('{requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "2"}}'), "p"))
    assert unequal.field == "spec.containers[0].resources.requests[nvidia.com/gpu]"
    assert unequal.message == "must be equal to nvidia.com/gpu limit of 2"
    over = only_error(load_text(pod('{requests: {cpu: "4"}, limits: {cpu: "2"}}'), "p"))
    assert (over.field, over.message) == (
        "spec.containers[0].resources.requests[cpu]",
        "must be less than or equal to cpu limit of 2",
    )
    (below,) = load_text(pod('{requests: {cpu: "1"}, limits: {cpu: "2", nvidia.com/gpu: "2"}}'), "p").pods
    assert below.requests["cpu"] == 1000 and below.requests[NVIDIA_GPU] == 2000  # a limit alone is the request


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ("gpu", "must be a standard resource for containers"),
        ("pods", "must be a standard resource for containers"),
        ("Nvidia.com/gpu", "prefix part 'Nvidia.com' must be a DNS-1123 subdomain"),
    ],
)
def test_a_container_asks_only_resources_it_may(resource: str, message: str) -> None:
    error = only_error(load_text(pod(f'{{requests: {{{resource}: "1"}}}}'), "p"))
    assert error.field == f"spec.containers[0].resources.requests[{resource}]" and message in error.message


def test_a_vcjob_template_s_extended_resources_are_whole_numbers() -> None:
    error = only_error(load_text(vcjob("j").replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "0.5"'), "j.yaml"))
    assert (error.kind, error.field) == (
        "Job",
        "spec.tasks[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
    )


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ('{capacity: {nvidia.com/gpu: "0.5"}}', "status.capacity[nvidia.com/gpu]"),
        ('{allocatable: {cpu: "8", pods: "110.5"}}', "status.allocatable[pods]"),
        (
            '{allocatable: {volcano.sh/gpu-number: "4", volcano.sh/gpu-memory: 160Gi}}',
            "status.allocatable[volcano.sh/gpu-memory]",
        ),
    ],
)
def test_a_node_s_integer_resources_are_whole_numbers(status: str, field: str) -> None:
    error = only_error(load_text(f"apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus: {status}\n", "n"))
    assert (error.kind, error.field) == ("Node", field)


def test_a_queue_s_extended_resources_are_whole_numbers_as_volcano_s_webhook_checks_them() -> None:
    for key, field in (
        ("capability", "spec.capability"),
        ("deserved", "spec.deserved"),
        ("guarantee", "spec.guarantee.resource"),
    ):
        body = '{nvidia.com/gpu: "0.5"}'
        spec = f"{{guarantee: {{resource: {body}}}}}" if key == "guarantee" else f"{{{key}: {body}}}"
        text = f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: q}}\nspec: {spec}\n"
        error = only_error(load_text(text, "q"))
        assert (error.field, error.message) == (
            f"{field}[nvidia.com/gpu]",
            "'0.5': must be an integer (nvidia.com/gpu is counted in whole units)",
        )
    queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    fine = load_text(queue + 'spec: {capability: {cpu: "0.5"}}\n', "q")
    assert fine.errors == []


def test_a_podgroup_s_min_resources_may_be_fractions_as_volcano_takes_them_but_not_bytes_of_gpus() -> None:
    text = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minResources: "
    (group,) = load_text(text + '{nvidia.com/gpu: "0.5"}}\n', "g").podgroups
    assert group.min_resources[NVIDIA_GPU] == 500
    assert only_error(load_text(text + "{nvidia.com/gpu: 4Gi}}\n", "g")).field == "spec.minResources[nvidia.com/gpu]"


def test_validate_prints_a_resource_field_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(pod("{requests: {nvidia.com/gpu: 500m}}"))
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert (
        "Pod/p field spec.containers[0].resources.requests[nvidia.com/gpu]: '500m': must be an integer" in result.output
    )


def test_post_jobs_refuses_half_a_gpu(client: TestClient) -> None:
    response = client.post("/jobs", content=vcjob("j").replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "0.5"'))
    assert read_status(response.json(), 422).details.causes[0].field.endswith("resources.requests[nvidia.com/gpu]")


# --- no object --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "\n\n", "# only a comment\n", "---\n---\n# c\n", "apiVersion: v1\nkind: List\nitems: []\n"]
)
def test_an_input_without_any_object_is_an_error(text: str) -> None:
    error = only_error(load_text(text, "empty.yaml"))
    assert error.source.file == "empty.yaml" and error.message.startswith("no objects passed")


def test_an_api_server_listing_of_no_object_is_no_error() -> None:
    assert load_objects([], "kube").errors == []


def test_validate_schedule_serve_and_simulate_refuse_no_object(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n# nothing yet\n")
    for command in (["validate", "-f", str(empty)], ["schedule", "-f", str(empty)], ["validate", "-f", "-"]):
        result = runner.invoke(app, command, input="")
        assert result.exit_code == 1 and "no objects passed" in result.output, command
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.yaml").write_text("# to do\n")
    serve = runner.invoke(app, ["serve", str(folder), "--store", "memory", "--port", "0"])
    assert serve.exit_code == 1 and "no objects passed" in serve.output
    simulate = runner.invoke(app, ["simulate", str(folder), "--out", str(tmp_path / "out")])
    assert simulate.exit_code == 1 and "no objects passed" in simulate.output


def test_post_jobs_of_no_object_answers_422(client: TestClient) -> None:
    response = client.post("/jobs", content="---\n# nothing\n")
    assert read_status(response.json(), 422).details.causes[0].message.startswith("no objects passed")


# --- annotations and labels -------------------------------------------------------------------------


def test_annotations_over_256_kib_in_all_are_an_error_counting_keys_and_values() -> None:
    value = "x" * (MAX_ANNOTATIONS_BYTES - len("a") - len("b") - 1)
    fits = load_text(pod(metadata=f'annotations: {{a: "{value}", b: "y"}}'), "p")
    assert fits.errors == []
    over = only_error(load_text(pod(metadata=f'annotations: {{a: "{value}x", b: "y"}}'), "p"))
    assert (over.kind, over.field) == ("Pod", "metadata.annotations")
    assert over.message == "262,145 bytes: annotations may hold at most 262,144 (256 KiB, keys and values)"
    wide = only_error(load_text(pod(metadata=f'annotations: {{a: "{"é" * (MAX_ANNOTATIONS_BYTES // 2)}"}}'), "p"))
    assert wide.field == "metadata.annotations"  # bytes, as Kubernetes counts them, not characters


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("has space", "name part must consist of alphanumeric characters"),
        ("a/b/c", "at most one '/'"),
        ("example.com/", "name part must be non-empty"),
        ("/name", "prefix part must be non-empty"),
        ("Example.com/x", "prefix part 'Example.com' must be a DNS-1123 subdomain"),
        ("x" * 64, "name part must be no more than 63 characters"),
    ],
)
@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_annotation_and_label_keys_are_qualified_names(key: str, message: str, where: str) -> None:
    error = only_error(load_text(pod(metadata=f'{where}: {{"{key}": v}}'), "p"))
    assert error.field == f"metadata.{where}" and message in error.message and repr(key[:80]) in error.message


@pytest.mark.parametrize("value", ["x" * 64, "has space", "-leading", "trailing."])
def test_label_values_are_label_values(value: str) -> None:
    error = only_error(load_text(pod(metadata=f'labels: {{team: "{value}"}}'), "p"))
    assert error.field == "metadata.labels" and "'team'" in error.message
    assert load_text(pod(metadata='labels: {team: "", a.b/c_d: "A-1.b_2"}'), "p").errors == []


def test_template_labels_and_a_node_selector_are_checked_as_labels() -> None:
    job = vcjob("j").replace("      spec:\n", "      metadata: {labels: {team: 'a b'}}\n      spec:\n", 1)
    assert only_error(load_text(job, "j")).field == "spec.tasks[0].template.metadata.labels"
    selector = only_error(load_text(pod(spec='nodeSelector: {"bad key": x}'), "p"))
    assert selector.field == "spec.nodeSelector"


def test_post_jobs_refuses_a_bad_label(client: TestClient) -> None:
    response = client.post(
        "/jobs", content=vcjob("j").replace("metadata: {name: j}", "metadata: {name: j, labels: {a: 'b c'}}")
    )
    assert read_status(response.json(), 422).details.causes[0].field == "metadata.labels"


def test_a_budget_threshold_s_capability_is_read_as_a_queue_s(tmp_path: Path) -> None:
    folder = write_elastic_sim(tmp_path / "sim")
    (folder / "budget.yaml").write_text(
        "apiVersion: tidegate.io/v1alpha1\nkind: Scenario\nmetadata: {name: capped}\nspec:\n  quotas: elastic\n"
        "  budget: {perPeriod: 10, queue: dev, thresholds: [{spentFraction: 1, capability: {nvidia.com/gpu: '0.5'}}]}\n"
    )
    result = runner.invoke(app, ["simulate", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "Scenario/capped field spec.budget.thresholds[0].capability[nvidia.com/gpu]: '0.5': must be an integer" in (
        result.output
    )
