"""A cloud cluster as a member of the IDC cluster (`tidegate.kube.cloud_member`), against two real
kube-apiservers on loopback: the IDC's and the cloud's (with Karpenter's NodeClaim CRD). The tests play the
cloud's provisioner and kubelets (tests/cloud_cluster.py) and the IDC's scheduler (they bind pods to the
virtual nodes); the member does the rest. Requests time out after 2 s, so a stopped API server fails a sync
at once."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cloud_cluster import FakeCloud
from kube_apiserver import ApiServer, install_nodeclaim_crd, restartable_kube_apiserver
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tidegate.fleet.spec import ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube.api import timed
from tidegate.kube.cloud_member import CloudMember
from tidegate.kube.lease import Lease
from tidegate.kube.nodeclaims import InstanceState

TIMEOUT = 2.0
CLUSTER = ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=2)
A100 = GpuSpec(product="NVIDIA-A100-SXM4-40GB", count=8, memory_mib=40960)


def pools(cluster: str) -> dict[str, NodePoolSpec]:
    return {
        "p4d-spot": NodePoolSpec(
            cluster=cluster,
            gpu=A100,
            cpu="96",
            memory="1152Gi",
            pricing=PricingSpec(model="spot", per_hour=10.81),
            labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
        ),
        "p4d-ondemand": NodePoolSpec(
            cluster=cluster, gpu=A100, cpu="96", memory="1152Gi", pricing=PricingSpec(model="on-demand")
        ),
    }


@dataclass
class Clusters:
    idc: Path
    idc_server: ApiServer
    cloud: Path
    cloud_server: ApiServer


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    with (
        restartable_kube_apiserver(tmp_path_factory.mktemp("idc")) as (idc, idc_server),
        restartable_kube_apiserver(tmp_path_factory.mktemp("cloud")) as (cloud, cloud_server),
    ):
        install_nodeclaim_crd(cloud)
        yield Clusters(idc, idc_server, cloud, cloud_server)


@dataclass
class World:
    """One test's cloud member(s), its namespace, and the clusters seen as a test sees them."""

    clusters: Clusters
    name: str
    namespace: str
    cloud: FakeCloud
    idc: client.CoreV1Api
    members: list[CloudMember] = field(default_factory=list)

    def member(self, watch: bool = True, lease: Lease | None = None) -> CloudMember:
        made = CloudMember(
            self.name,
            CLUSTER,
            pools(self.name),
            _client(self.clusters.idc),
            _client(self.clusters.cloud),
            watch=watch,
            request_timeout=TIMEOUT,
            lease=lease,
        )
        self.members.append(made)
        return made

    def ready_instance(self, member: CloudMember, pool: str = "p4d-spot") -> str:
        """Provision one instance and bring it up: its virtual node is registered."""
        name = member.provision(pool)
        assert settle(member, lambda: bool(self.cloud.claims()))
        self.cloud.provision()
        assert settle(
            member, lambda: member.instances()[name].state is InstanceState.READY and self.vnode(name) is not None
        )
        return name

    def vnode(self, name: str) -> dict[str, Any] | None:
        try:
            return _doc(self.idc.read_node(name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def bind(self, name: str, node: str, grace: int = 30) -> dict[str, Any]:
        """A pod of the IDC's, bound to the node as a scheduler binds it."""
        self.idc.create_namespaced_pod(
            self.namespace,
            {
                "metadata": {
                    "name": name,
                    "labels": {"app": "train"},
                    "annotations": {"scheduling.k8s.io/group-name": "g"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "terminationGracePeriodSeconds": grace,
                    "nodeSelector": {"volcano.sh/node-type": "cloud-spot"},
                    "tolerations": [{"key": "cloud.provider", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "pytorch/pytorch:2.1.0",
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                            "lifecycle": {"preStop": {"exec": {"command": ["/bin/checkpoint"]}}},
                        }
                    ],
                },
            },
        )
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=self.namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        self.idc.create_namespaced_pod_binding(name, self.namespace, binding, _preload_content=False)
        found = self.idc_pod(name)
        assert found is not None
        return found

    def idc_pod(self, name: str) -> dict[str, Any] | None:
        try:
            return _doc(self.idc.read_namespaced_pod(name, self.namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def cloud_pods(self) -> dict[str, dict[str, Any]]:
        return {pod["metadata"]["name"]: pod for pod in self.cloud.all_pods()}


def _client(kubeconfig: Path) -> client.ApiClient:
    return timed(config.new_client_from_config(config_file=str(kubeconfig)), TIMEOUT)


def _doc(obj: Any) -> dict[str, Any]:
    made: dict[str, Any] = client.ApiClient().sanitize_for_serialization(obj)
    return made


@pytest.fixture
def world(clusters: Clusters, request: pytest.FixtureRequest) -> Iterator[World]:
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    idc = client.CoreV1Api(config.new_client_from_config(config_file=str(clusters.idc)))
    namespace = f"t-{digest}"
    idc.create_namespace({"metadata": {"name": namespace}})
    made = World(clusters, f"aws-{digest}", namespace, FakeCloud(clusters.cloud, f"aws-{digest}", namespace), idc)
    yield made
    for member in made.members:
        member.close()
    made.cloud.clean()
    for pod in idc.list_namespaced_pod(namespace).items:
        idc.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
    for node in idc.list_node(label_selector=f"tidegate.io/cluster={made.name}").items:
        idc.delete_node(node.metadata.name)


def settle(member: CloudMember, check: Callable[[], bool], seconds: float = 20.0) -> bool:
    """Sync the member until `check` holds (the watches take a moment to see what changed)."""
    deadline = time.monotonic() + seconds
    while True:
        member.sync(time.time())
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _taints(node: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((t["key"], t.get("value", ""), t["effect"]) for t in node["spec"].get("taints") or ())


def _ready(node: dict[str, Any]) -> tuple[str, str]:
    condition = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    return condition["status"], condition.get("reason", "")


# -- provisioning and registration -------------------------------------------------------------------


def test_a_nodeclaim_becomes_a_virtual_node_with_the_seed_s_labels_annotation_and_taint(world: World) -> None:
    member = world.member()
    spot = member.provision("p4d-spot")
    ondemand = member.provision("p4d-ondemand")
    assert {member.instances()[name].state for name in (spot, ondemand)} == {InstanceState.PROVISIONING}
    assert settle(member, lambda: len(world.cloud.claims()) == 2)
    claims = {claim["metadata"]["name"]: claim for claim in world.cloud.claims()}
    assert set(claims) == {spot, ondemand}
    requirements = {r["key"]: r["values"] for r in claims[spot]["spec"]["requirements"]}
    assert requirements == {
        "node.kubernetes.io/instance-type": ["p4d.24xlarge"],
        "karpenter.sh/capacity-type": ["spot"],
        "tidegate.io/pool": ["p4d-spot"],
    }
    assert {r["key"]: r["values"] for r in claims[ondemand]["spec"]["requirements"]}["karpenter.sh/capacity-type"] == [
        "on-demand"
    ]
    assert claims[spot]["spec"]["resources"]["requests"]["nvidia.com/gpu"] == "8"
    member.sync(time.time())
    assert world.vnode(spot) is None  # no Node yet: nothing registered

    world.cloud.provision()
    assert settle(member, lambda: world.vnode(spot) is not None and world.vnode(ondemand) is not None)
    node = world.vnode(spot)
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels["volcano.sh/node-type"] == "cloud-spot"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["tidegate.io/pool"] == "p4d-spot" and labels["tidegate.io/cluster"] == world.name
    assert labels["node.kubernetes.io/instance-type"] == "p4d.24xlarge" and labels["type"] == "virtual-kubelet"
    assert node["metadata"]["annotations"]["latency.ms.local-idc"] == "2"
    assert settle(
        member, lambda: _taints(world.vnode(spot) or {"spec": {}}) == [("cloud.provider", "aws", "NoSchedule")]
    )
    assert _ready(node) == ("True", "KubeletReady")
    allocatable = node["status"]["allocatable"]
    assert allocatable["cpu"] == "95" and allocatable["nvidia.com/gpu"] == "8"  # the cloud Node's figures
    assert allocatable["volcano.sh/gpu-number"] == "8" and allocatable["volcano.sh/gpu-memory"] == "327680"
    other = world.vnode(ondemand)
    assert other is not None and other["metadata"]["labels"]["volcano.sh/node-type"] == "cloud-ondemand"
    assert member.instances()[spot].state is InstanceState.READY
    assert member.instances()[spot].cloud_node.startswith("ip-10-0-")

    # the heartbeat moves on
    beat = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["lastHeartbeatTime"]
    member.heartbeat_seconds = 0.5
    time.sleep(1.1)
    assert settle(
        member,
        lambda: (
            next(c for c in (world.vnode(spot) or {})["status"]["conditions"] if c["type"] == "Ready")[
                "lastHeartbeatTime"
            ]
            != beat
        ),
    )

    member.release(spot)
    assert (world.vnode(spot) or {})["spec"].get("unschedulable") is True
    assert settle(member, lambda: [c["metadata"]["name"] for c in world.cloud.claims()] == [ondemand])
    assert world.cloud.reclaim()  # the provisioner removes the Node of a claim that went
    assert settle(member, lambda: world.vnode(spot) is None)
    assert member.instances()[spot].state is InstanceState.GONE
    assert member.instances()[ondemand].state is InstanceState.READY


# -- pods ---------------------------------------------------------------------------------------------


def test_a_pod_bound_to_a_virtual_node_runs_on_its_instance_and_its_status_comes_back(world: World) -> None:
    member = world.member()
    node = world.ready_instance(member)
    idc_pod = world.bind("worker-0", node)
    assert settle(member, lambda: "worker-0" in world.cloud_pods())
    cloud = world.cloud_pods()["worker-0"]
    assert cloud["metadata"]["namespace"] == world.namespace
    assert cloud["spec"]["nodeName"] == member.instances()[node].cloud_node  # bound to its instance
    assert cloud["metadata"]["labels"]["tidegate.io/idc-uid"] == idc_pod["metadata"]["uid"]
    assert "nodeSelector" not in cloud["spec"]  # placement was the IDC's
    assert cloud["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] == ["/bin/checkpoint"]
    assert settle(
        member,
        lambda: (
            (world.idc_pod("worker-0") or {})["metadata"].get("annotations", {}).get("tidegate.io/cloud-pod-uid")
            == cloud["metadata"]["uid"]
        ),
    )

    world.cloud.run()
    assert settle(member, lambda: (world.idc_pod("worker-0") or {})["status"].get("phase") == "Running")
    status = (world.idc_pod("worker-0") or {})["status"]
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert status["podIP"].startswith("10.1.") and status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

    world.cloud.set_phase(world.namespace, "worker-0", "Succeeded")
    assert settle(member, lambda: (world.idc_pod("worker-0") or {})["status"].get("phase") == "Succeeded")
    terminated = (world.idc_pod("worker-0") or {})["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert len(world.cloud_pods()) == 1  # created once
