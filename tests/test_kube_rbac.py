"""deploy/kube/: the RBAC rules `tidegate kube` runs under allow everything it does (reading the cluster
through watches, binding, PodGroup status, overflow of a PodGroup and of a bare pod, eviction, its Lease),
on a real kube-apiserver authorizing by RBAC, and little else; its Deployment is one the API server accepts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from kube_apiserver import SCHEDULER_ACCOUNT, SCHEDULER_TOKEN, eventually, kube_apiserver, user_kubeconfig
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from tidegate.cli.main import app
from tidegate.fleet.burst import Burst
from tidegate.kube.api import KubeApi
from tidegate.kube.lease import Lease
from tidegate.kube.scheduler import ClusterScheduler

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kube"
SERVE = DEPLOY.parent / "serve"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
NAMESPACE = "jobs"


@pytest.fixture(scope="module")
def kubeconfigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """An RBAC-authorizing API server: the administrator's kubeconfig, and the scheduler's service account's."""
    tmp = tmp_path_factory.mktemp("kube-rbac")
    with kube_apiserver(tmp, rbac=True) as admin:
        yield admin, user_kubeconfig(admin, SCHEDULER_TOKEN, tmp / "scheduler.kubeconfig")


def _forbidden(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ApiException as exc:
        return exc.status == 403
    return False


def _cluster(admin: client.ApiClient) -> None:
    """An IDC node and a tainted cloud node (4 GPUs each), the queues, a namespace for the jobs."""
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    gpus = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4", "pods": "110"}
    cloud_taint = {"key": "cloud.provider", "value": "aliyun", "effect": "NoSchedule"}
    for name, kind, taints in (("idc-0", "idc", []), ("cloud-0", "cloud-spot", [cloud_taint])):
        status = {"capacity": gpus, "allocatable": gpus, "conditions": [{"type": "Ready", "status": "True"}]}
        core.create_node({"metadata": {"name": name, "labels": {"volcano.sh/node-type": kind}}, "status": status})
        core.patch_node(name, {"spec": {"taints": taints}})  # no node controller here to lift not-ready
    for queue in ("default", "burst-cloud"):
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}}
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", body)


def _pod(core: client.CoreV1Api, name: str, gpus: int, group: str = "") -> None:
    requests = {"cpu": "1", "nvidia.com/gpu": str(gpus)}
    meta: dict[str, Any] = {"name": name}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    container = {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
    core.create_namespaced_pod(
        NAMESPACE, {"metadata": meta, "spec": {"schedulerName": "volcano", "containers": [container]}}
    )


def _node_of(core: client.CoreV1Api, pod: str) -> str:
    return str(core.read_namespaced_pod(pod, NAMESPACE).spec.node_name or "")


def test_tidegate_kube_schedules_under_its_rbac_rules_and_may_do_little_else(kubeconfigs: tuple[Path, Path]) -> None:
    admin_config, scheduler_config = kubeconfigs
    admin = config.new_client_from_config(config_file=str(admin_config))
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    assert _forbidden(KubeApi(str(scheduler_config), watch=False).list_objects)  # RBAC is on: nothing granted yet
    utils.create_from_yaml(admin, str(DEPLOY / "rbac.yaml"))
    _cluster(admin)

    api = KubeApi(str(scheduler_config), watch=True)
    lease = Lease(client.CoordinationV1Api(api.client), "kube-system", "tidegate-scheduler", "replica-a")
    try:
        assert eventually(lease.hold)  # create, then get and update as it renews
        scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=3))
        group = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": "train"}}
        custom.create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, "podgroups", {**group, "spec": {"minMember": 2, "queue": "default"}}
        )
        for i in range(2):
            _pod(core, f"train-{i}", 2, group="train")

        def placed(*pods: str) -> Callable[[], bool]:
            def check() -> bool:
                scheduler.step(time.time())
                return all(_node_of(core, pod) for pod in pods)

            return check

        assert eventually(placed("train-0", "train-1")), scheduler.problems
        assert {_node_of(core, pod) for pod in ("train-0", "train-1")} == {"idc-0"}  # bound, with their cards
        annotations = core.read_namespaced_pod("train-0", NAMESPACE).metadata.annotations
        assert annotations["volcano.sh/gpu-index"] in ("0,1", "2,3")
        status = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "podgroups", "train")["status"]
        assert status["phase"] == "Running"  # podgroups/status
        _pod(core, "solo", 2)  # a bare pod: no room left in the IDC, it overflows after 3 s
        assert eventually(placed("solo"))
        assert _node_of(core, "solo") == "cloud-0" and scheduler.overflowed == {f"{NAMESPACE}/podgroup-solo": "default"}

        custom.create_namespaced_custom_object(  # a PodGroup overflows too: patch on podgroups
            GROUP,
            VERSION,
            NAMESPACE,
            "podgroups",
            {**{**group, "metadata": {"name": "late"}}, "spec": {"minMember": 1}},
        )
        _pod(core, "late-0", 4, group="late")

        def moved() -> bool:
            scheduler.step(time.time())
            return f"{NAMESPACE}/late" in scheduler.overflowed

        assert eventually(moved)
        late = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "podgroups", "late")
        assert late["spec"]["queue"] == "burst-cloud"
        # the cloud node has no room for it either: the pod says why it waits (pods/status, events)
        conditions = core.read_namespaced_pod("late-0", NAMESPACE).status.conditions or []
        assert [(c.type, c.status, c.reason) for c in conditions] == [("PodScheduled", "False", "Unschedulable")]
        events = core.list_namespaced_event(NAMESPACE, field_selector="involvedObject.name=late-0").items
        assert events and {e.reason for e in events} == {"FailedScheduling"}

        api.evict(NAMESPACE, "solo")  # what preempt and reclaim do: delete the pod (its kubelet would stop it)
        assert core.read_namespaced_pod("solo", NAMESPACE).metadata.deletion_timestamp is not None
        assert scheduler.failed_cycles == 0 and scheduler.problems == []
    finally:
        lease.release()
        api.close()

    scheduler_client = config.new_client_from_config(config_file=str(scheduler_config))
    as_scheduler = client.CoreV1Api(scheduler_client)
    pod = {"metadata": {"name": "sneaky"}, "spec": {"containers": [{"name": "m", "image": "busybox"}]}}
    assert _forbidden(lambda: as_scheduler.create_namespaced_pod(NAMESPACE, pod))
    assert _forbidden(lambda: as_scheduler.delete_node("idc-0"))
    assert _forbidden(lambda: as_scheduler.list_secret_for_all_namespaces())
    assert _forbidden(lambda: as_scheduler.patch_node("idc-0", {"metadata": {"labels": {"x": "y"}}}))
    coordination = client.CoordinationV1Api(scheduler_client)  # its own Lease only (creating cannot be named)
    assert _forbidden(lambda: coordination.read_namespaced_lease("kube-scheduler", "kube-system"))


def test_the_deployment_manifest_is_one_the_api_server_accepts(kubeconfigs: tuple[Path, Path]) -> None:
    admin = config.new_client_from_config(config_file=str(kubeconfigs[0]))
    (created,) = utils.create_from_yaml(admin, str(DEPLOY / "deployment.yaml"))[0]
    deployment = client.AppsV1Api(admin).read_namespaced_deployment("tidegate-scheduler", "kube-system")
    spec = deployment.spec.template.spec
    assert created.metadata.name == "tidegate-scheduler"
    assert f"system:serviceaccount:kube-system:{spec.service_account_name}" == SCHEDULER_ACCOUNT
    args = spec.containers[0].args
    assert args[0] == "kube" and "--leader-elect" in args and "--metrics-port=8080" in args


def test_the_serve_manifests_are_ones_the_api_server_accepts(kubeconfigs: tuple[Path, Path]) -> None:
    admin = config.new_client_from_config(config_file=str(kubeconfigs[0]))
    created = [obj for objects in utils.create_from_yaml(admin, str(SERVE / "serve.yaml")) for obj in objects]
    assert [obj.kind for obj in created] == ["Namespace", "Deployment", "Service"]
    spec = client.AppsV1Api(admin).read_namespaced_deployment("tidegate-serve", "tidegate").spec.template.spec
    (container,) = spec.containers
    assert container.args[:2] == ["serve", "/etc/tidegate/cluster"] and "--standby" in container.args
    assert container.readiness_probe.http_get.path == "/readyz"
    assert container.liveness_probe.http_get.path == "/healthz"
    assert [env.name for env in container.env] == ["TIDEGATE_STORE"]
    service = client.CoreV1Api(admin).read_namespaced_service("tidegate", "tidegate")
    assert service.spec.selector == {"app.kubernetes.io/name": "tidegate-serve"}
    # the arguments are ones `tidegate serve` takes (parsed by the command itself, not run)
    group = typer.main.get_command(app)
    serve = group.get_command(group.make_context("tidegate", ["serve"]), "serve")
    parsed = serve.make_context("serve", container.args[1:]).params
    assert parsed["standby"] and parsed["host"] == "0.0.0.0" and str(parsed["token_file"]).endswith("tokens.csv")


def test_the_fleet_writes_what_its_own_rules_allow(kubeconfigs: tuple[Path, Path]) -> None:
    """With --fleet, tidegate also registers, cordons and deregisters virtual nodes and patches the budget's
    Queue: deploy/kube/fleet-rbac.yaml grants that, and rbac.yaml alone does not."""
    admin_config, scheduler_config = kubeconfigs
    admin = config.new_client_from_config(config_file=str(admin_config))
    api = KubeApi(str(scheduler_config), watch=False)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "cloud-a100-7", "labels": {"tidegate.io/pool": "cloud-a100"}},
        "spec": {"taints": [{"key": "cloud.provider", "value": "aws", "effect": "NoSchedule"}]},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert _forbidden(lambda: api.create_node(node))
    utils.create_from_yaml(admin, str(DEPLOY / "fleet-rbac.yaml"))

    def registered() -> bool:
        try:
            api.create_node(node)
        except ApiException:
            return False  # the binding is not in force yet
        return True

    assert eventually(registered)
    api.cordon("cloud-a100-7", True)
    assert client.CoreV1Api(admin).read_node("cloud-a100-7").spec.unschedulable
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "budgeted"}, "spec": {}}
    client.CustomObjectsApi(admin).create_cluster_custom_object(GROUP, VERSION, "queues", queue)
    api.patch_queue("budgeted", {"spec": {"weight": 3}})
    api.record_event({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "name": "budgeted"}, "BudgetThreshold", "x")
    api.delete_node("cloud-a100-7")
    api.close()
