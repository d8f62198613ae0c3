"""deploy/kube/cloud-rbac.yaml: the rights a cloud member needs in its cloud cluster allow everything it does
there (ask for an instance, see its Node, run a pod bound to its virtual node, delete it, give the instance
up), on a cloud kube-apiserver authorizing by RBAC, and little else."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_cluster import FakeCloud
from kube_apiserver import (
    SCHEDULER_TOKEN,
    eventually,
    install_nodeclaim_crd,
    kube_apiserver,
    restartable_kube_apiserver,
    user_kubeconfig,
)
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from tidegate.fleet.spec import ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube.api import timed
from tidegate.kube.cloud_member import CloudMember
from tidegate.kube.nodeclaims import InstanceState

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kube"
NAMESPACE = "train"
POOL = NodePoolSpec(
    cluster="aws",
    gpu=GpuSpec(product="NVIDIA-A100-SXM4-40GB", count=8, memory_mib=40960),
    cpu="96",
    memory="1152Gi",
    pricing=PricingSpec(model="spot", per_hour=10.81),
    labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """The IDC's API server, and an RBAC-authorizing cloud one: its administrator's and the member's kubeconfigs."""
    idc_tmp, cloud_tmp = tmp_path_factory.mktemp("idc"), tmp_path_factory.mktemp("cloud-rbac")
    with kube_apiserver(idc_tmp) as idc, restartable_kube_apiserver(cloud_tmp, rbac=True) as (cloud, _):
        install_nodeclaim_crd(cloud)
        yield idc, cloud, user_kubeconfig(cloud, SCHEDULER_TOKEN, cloud_tmp / "member.kubeconfig")


def _member(idc: Path, cloud: Path) -> CloudMember:
    return CloudMember(
        "aws",
        ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=2),
        {"p4d-spot": POOL},
        timed(config.new_client_from_config(config_file=str(idc)), 5.0),
        timed(config.new_client_from_config(config_file=str(cloud)), 5.0),
        watch=False,
        request_timeout=5.0,
    )


def _forbidden(call: Any) -> bool:
    try:
        call()
    except ApiException as exc:
        return exc.status == 403
    return False


def test_the_member_runs_a_pod_in_the_cloud_under_its_rbac_rules_and_may_do_little_else(
    clusters: tuple[Path, Path, Path],
) -> None:
    idc, cloud_admin, as_member = clusters
    member = _member(idc, as_member)
    member.sync(time.time())
    assert (not member.reachable and "403" in member.link_error) or "forbidden" in member.link_error.lower()
    admin = config.new_client_from_config(config_file=str(cloud_admin))
    utils.create_from_yaml(admin, str(DEPLOY / "cloud-rbac.yaml"))

    def reaches() -> bool:
        member.sync(time.time())
        return member.reachable

    assert eventually(reaches)  # the binding is in force: it lists claims, Nodes and pods
    instance = member.provision("p4d-spot")
    fake = FakeCloud(cloud_admin, "aws", NAMESPACE)
    assert eventually(lambda: bool(fake.claims()))
    fake.provision()

    def ready() -> bool:
        member.sync(time.time())
        return member.instances()[instance].state is InstanceState.READY

    assert eventually(ready)
    idc_core = client.CoreV1Api(config.new_client_from_config(config_file=str(idc)))
    idc_core.create_namespace({"metadata": {"name": NAMESPACE}})
    container = {"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    tolerate = [{"key": "cloud.provider", "operator": "Exists", "effect": "NoSchedule"}]
    pod = {"metadata": {"name": "burst"}, "spec": {"tolerations": tolerate, "containers": [container]}}
    idc_core.create_namespaced_pod(NAMESPACE, pod)
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="burst", namespace=NAMESPACE),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=instance),
    )
    idc_core.create_namespaced_pod_binding("burst", NAMESPACE, binding, _preload_content=False)

    def carried() -> bool:
        member.sync(time.time())
        return any(p["metadata"]["name"] == "burst" for p in fake.all_pods())

    assert eventually(carried)  # it made the namespace and the pod in the cloud
    idc_core.delete_namespaced_pod("burst", NAMESPACE, grace_period_seconds=30)

    def deleted() -> bool:
        member.sync(time.time())
        fake.terminate()
        return not fake.all_pods()

    assert eventually(deleted)
    member.release(instance)
    assert eventually(lambda: (member.sync(time.time()), not fake.claims())[1])
    member.close()
    as_cloud = client.CoreV1Api(config.new_client_from_config(config_file=str(as_member)))
    (node,) = fake.nodes()  # the provisioner's Node: the member may read it, not change or delete it
    assert _forbidden(lambda: as_cloud.delete_node(node["metadata"]["name"]))
    assert _forbidden(lambda: as_cloud.patch_node(node["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}}))
    assert _forbidden(lambda: as_cloud.list_secret_for_all_namespaces())
