"""A cloud cluster as a member of the IDC cluster (`tidegate.kube.cloud_member`), against two real
kube-apiservers on loopback: the IDC's and the cloud's (with Karpenter's NodeClaim CRD). The tests play the
cloud's provisioner and kubelets (tests/cloud_cluster.py) and the IDC's scheduler (they bind pods to the
virtual nodes); the member does the rest. Requests time out after 2 s, so a stopped API server fails a sync
at once."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cloud_cluster import FakeCloud
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kube_apiserver import ApiServer, eventually, install_nodeclaim_crd, restartable_kube_apiserver
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tidegate.fleet.spec import ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube.api import timed
from tidegate.kube.cloud_member import CloudMember, NotLeading
from tidegate.kube.failures import expected
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


def _phase(pod: dict[str, Any] | None) -> str:
    return str(((pod or {}).get("status") or {}).get("phase", ""))


def test_deletion_propagates_both_ways_with_the_grace_period_and_leaves_no_orphan(world: World) -> None:
    member = world.member()
    node = world.ready_instance(member)
    for name in ("graceful", "forced", "lost"):
        world.bind(name, node, grace=45)
    assert settle(member, lambda: len(world.cloud_pods()) == 3)
    world.cloud.run()
    assert settle(member, lambda: all(_phase(world.idc_pod(n)) == "Running" for n in ("graceful", "forced", "lost")))

    # the IDC pod deleted with a grace period: the cloud pod gets the same, and once its kubelet has stopped
    # it (after the preStop hook), the IDC pod's deletion completes, as a kubelet completes it
    world.idc.delete_namespaced_pod("graceful", world.namespace, grace_period_seconds=45)
    assert settle(member, lambda: world.cloud_pods()["graceful"]["metadata"].get("deletionTimestamp") is not None)
    assert world.cloud_pods()["graceful"]["metadata"]["deletionGracePeriodSeconds"] == 45
    assert world.idc_pod("graceful") is not None  # still terminating: its containers have not stopped
    assert world.cloud.terminate() == [f"{world.namespace}/graceful"]
    assert settle(member, lambda: world.idc_pod("graceful") is None)

    # an IDC pod removed at once (grace 0): its cloud pod is an orphan, and goes
    world.idc.delete_namespaced_pod("forced", world.namespace, grace_period_seconds=0)
    # (deleted at once too, when a sync saw the IDC pod on its way out with its grace period of 0)
    forced = lambda: world.cloud_pods().get("forced", {"metadata": {"deletionTimestamp": "gone"}})  # noqa: E731
    assert settle(member, lambda: forced()["metadata"].get("deletionTimestamp") is not None)
    world.cloud.terminate()
    assert settle(member, lambda: "forced" not in world.cloud_pods())

    # the cloud pod deleted in the cloud while its IDC pod runs: the IDC pod fails, saying why, not recreated
    world.cloud.delete_pod(world.namespace, "lost")
    assert settle(member, lambda: _phase(world.idc_pod("lost")) == "Failed")
    status = (world.idc_pod("lost") or {})["status"]
    assert status["reason"] == "CloudPodLost"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    for _ in range(5):
        member.sync(time.time())
    assert world.cloud_pods() == {}


def test_an_instance_that_goes_fails_its_pods_as_node_lost_and_its_virtual_node_goes(world: World) -> None:
    member = world.member()
    node = world.ready_instance(member)
    world.bind("worker", node)
    world.bind("leaving", node, grace=30)
    assert settle(member, lambda: len(world.cloud_pods()) == 2)
    world.cloud.run()
    assert settle(member, lambda: _phase(world.idc_pod("worker")) == "Running")
    world.idc.delete_namespaced_pod("leaving", world.namespace, grace_period_seconds=30)
    assert settle(member, lambda: world.cloud_pods()["leaving"]["metadata"].get("deletionTimestamp") is not None)
    # the cloud takes the instance away (its claim and Node go; no kubelet finishes anything)
    cloud_node = member.instances()[node].cloud_node
    world.cloud.core.delete_node(cloud_node)
    assert settle(member, lambda: world.vnode(node) is None)
    assert member.instances()[node].state is InstanceState.GONE
    status = (world.idc_pod("worker") or {})["status"]
    assert status["phase"] == "Failed" and status["reason"] == "NodeLost"
    assert world.idc_pod("leaving") is None  # its deletion completes: nothing is left to stop
    assert world.cloud_pods() == {}  # no kubelet would finish them: removed at once
    member.release(node)
    assert settle(member, lambda: world.cloud.claims() == [])


# -- spot notices -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("aws-node-termination-handler/spot-itn", "spot-itn-1a2b3c"), ("karpenter.sh/disrupted", "")],
    ids=["node-termination-handler", "karpenter"],
)
def test_an_interruption_notice_shows_and_drain_gives_the_pods_their_grace_period(
    world: World, key: str, value: str
) -> None:
    member = world.member()
    node = world.ready_instance(member)
    world.bind("worker", node, grace=100)
    assert settle(member, lambda: "worker" in world.cloud_pods())
    world.cloud.run()
    assert member.notices() == {}
    before = time.time()
    world.cloud.taint(member.instances()[node].cloud_node, key, value)
    assert settle(member, lambda: node in member.notices())
    assert before - 1 <= member.notices()[node] <= time.time() + 1
    assert settle(member, lambda: (key, value, "NoSchedule") in _taints(world.vnode(node) or {"spec": {}}))
    vnode = world.vnode(node) or {}
    assert "tidegate.io/interruption-noticed-at" in vnode["metadata"]["annotations"]

    # a restarted member reports the notice seen when it was first seen
    again = world.member()
    assert settle(again, lambda: node in again.notices())
    assert abs(again.notices()[node] - member.notices()[node]) <= 1.0
    member.close()

    assert again.drain(node, 100) == [f"{world.namespace}/worker"]
    assert (world.vnode(node) or {})["spec"]["unschedulable"] is True
    assert settle(again, lambda: world.cloud_pods()["worker"]["metadata"].get("deletionTimestamp") is not None)
    assert world.cloud_pods()["worker"]["metadata"]["deletionGracePeriodSeconds"] == 100
    world.cloud.terminate()
    assert world.cloud.graces == {f"{world.namespace}/worker": 100}
    assert settle(again, lambda: world.idc_pod("worker") is None)


# -- the link ------------------------------------------------------------------------------------------


def test_a_stopped_cloud_api_server_makes_the_nodes_not_ready_and_its_return_reconciles(world: World) -> None:
    member = world.member()
    node = world.ready_instance(member)
    world.bind("running", node)
    world.bind("deleted", node, grace=30)
    assert settle(member, lambda: len(world.cloud_pods()) == 2)
    world.cloud.run()
    assert settle(member, lambda: _phase(world.idc_pod("running")) == "Running")
    server = world.clusters.cloud_server
    server.stop()
    try:
        started = time.monotonic()
        # the watches see their connections drop at once (a sync meanwhile reads what they hold): fails fast,
        # and no sync raises
        assert settle(member, lambda: not member.reachable, 3 * TIMEOUT + 5)
        assert time.monotonic() - started < 3 * TIMEOUT + 5
        assert "unreachable" in member.link_error, member.link_error
        assert settle(member, lambda: _ready(world.vnode(node) or {}) == ("Unknown", "CloudUnreachable"))
        assert member.instances()[node].state is InstanceState.READY  # what it knew is kept
        late = world.member()  # one started during the outage knows the instance by its virtual node
        late.sync(time.time())
        assert not late.reachable and late.instances()[node].state is InstanceState.READY
        late.close()
        # meanwhile in the IDC: a pod deleted, one bound (nothing reaches the cloud: they wait)
        world.idc.delete_namespaced_pod("deleted", world.namespace, grace_period_seconds=30)
        world.bind("new", node)
        asked = member.provision("p4d-spot")  # an operation waits for the cloud
        for _ in range(3):
            member.sync(time.time())
        assert world.idc_pod("deleted") is not None and _phase(world.idc_pod("new")) == "Pending"
        assert member.instances()[asked].state is InstanceState.PROVISIONING
        assert _phase(world.idc_pod("running")) == "Running"
    finally:
        server.start()
        server.wait_ready(world.clusters.cloud)

    def reconciled() -> bool:
        world.cloud.terminate()  # the kubelet finishes what is deleted
        world.cloud.run()
        return (
            member.reachable
            and _ready(world.vnode(node) or {})[0] == "True"
            and world.idc_pod("deleted") is None
            and _phase(world.idc_pod("new")) == "Running"
            and len(world.cloud.claims()) == 2
        )

    assert settle(member, reconciled, 60)
    assert sorted(world.cloud_pods()) == ["new", "running"]  # nothing lost, nothing twice
    assert _phase(world.idc_pod("running")) == "Running"
    assert world.cloud.graces[f"{world.namespace}/deleted"] == 30


class Cut:
    """A loopback TCP relay to an API server that a test can cut (new connections are closed at once, open
    ones shut) and restore: the cloud's API server is up, but the member cannot reach it."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.up = True
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                conn.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.open += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def cut(self) -> None:
        self.up = False
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self.open = []

    def close(self) -> None:
        self.cut()
        self.listener.close()


def test_a_cut_link_keeps_what_was_known_and_on_return_takes_what_changed_on_both_sides(
    world: World, tmp_path: Path
) -> None:
    text = world.clusters.cloud.read_text()
    port = int(text.split("https://127.0.0.1:")[1].split('"')[0])
    relay = Cut(port)
    (tmp_path / "cloud").write_text(text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{relay.port}"))
    member = CloudMember(
        world.name,
        CLUSTER,
        pools(world.name),
        _client(world.clusters.idc),
        _client(tmp_path / "cloud"),
        request_timeout=TIMEOUT,
    )
    world.members.append(member)
    try:
        node = world.ready_instance(member)
        for name in ("finishes", "vanishes", "deleted", "stays"):
            world.bind(name, node)
        assert settle(member, lambda: len(world.cloud_pods()) == 4)
        world.cloud.run()
        names = ("finishes", "vanishes", "deleted", "stays")
        assert settle(member, lambda: all(_phase(world.idc_pod(n)) == "Running" for n in names))
        relay.cut()
        assert settle(member, lambda: not member.reachable)
        assert settle(member, lambda: _ready(world.vnode(node) or {}) == ("Unknown", "CloudUnreachable"))
        # meanwhile, on both sides
        world.cloud.set_phase(world.namespace, "finishes", "Succeeded")
        world.cloud.delete_pod(world.namespace, "vanishes")
        world.idc.delete_namespaced_pod("deleted", world.namespace, grace_period_seconds=0)
        world.bind("bound-meanwhile", node)
        for _ in range(3):
            member.sync(time.time())
        assert _phase(world.idc_pod("finishes")) == "Running" and _phase(world.idc_pod("vanishes")) == "Running"
        relay.up = True

        def reconciled() -> bool:
            world.cloud.terminate()
            world.cloud.run()
            return (
                _phase(world.idc_pod("finishes")) == "Succeeded"
                and _phase(world.idc_pod("vanishes")) == "Failed"
                and "deleted" not in world.cloud_pods()
                and _phase(world.idc_pod("bound-meanwhile")) == "Running"
                and _ready(world.vnode(node) or {})[0] == "True"
            )

        assert settle(member, reconciled, 60)
        assert (world.idc_pod("vanishes") or {})["status"]["reason"] == "CloudPodLost"
        assert sorted(world.cloud_pods()) == ["bound-meanwhile", "finishes", "stays"]
        assert _phase(world.idc_pod("stays")) == "Running"
    finally:
        relay.close()


# -- restarts and replicas -----------------------------------------------------------------------------


def _vnodes(world: World) -> list[str]:
    return sorted(
        n.metadata.name for n in world.idc.list_node(label_selector=f"tidegate.io/cluster={world.name}").items
    )


def test_a_restarted_member_adopts_what_exists_and_leaves_no_orphan_nor_duplicate(world: World) -> None:
    first = world.member()
    node = world.ready_instance(first)
    for name in ("deleted", "finishes", "stays"):
        world.bind(name, node)
    assert settle(first, lambda: len(world.cloud_pods()) == 3)
    world.cloud.run()
    assert settle(first, lambda: _phase(world.idc_pod("stays")) == "Running")
    first.close()  # the process ends; while none runs:
    world.idc.delete_namespaced_pod("deleted", world.namespace, grace_period_seconds=0)
    world.cloud.set_phase(world.namespace, "finishes", "Succeeded")
    world.bind("new", node)

    second = world.member(watch=False)  # listing every sync, this time

    def adopted() -> bool:
        world.cloud.terminate()
        world.cloud.run()
        return (
            "deleted" not in world.cloud_pods()
            and _phase(world.idc_pod("finishes")) == "Succeeded"
            and _phase(world.idc_pod("new")) == "Running"
        )

    assert settle(second, adopted)
    assert second.instances()[node].state is InstanceState.READY
    assert _vnodes(world) == [node] and len(world.cloud.claims()) == 1
    assert sorted(world.cloud_pods()) == ["finishes", "new", "stays"]
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in world.cloud_pods().values()}
    assert (world.idc_pod("stays") or {})["metadata"]["annotations"]["tidegate.io/cloud-pod-uid"] == uids["stays"]


def test_only_the_lease_holder_acts_and_a_replica_takes_over(world: World) -> None:
    coordination = client.CoordinationV1Api(config.new_client_from_config(config_file=str(world.clusters.idc)))
    lock = f"tidegate-cloud-{world.name}"
    one = world.member(lease=Lease(coordination, "kube-system", lock, "one", duration_seconds=3, renew_seconds=1))
    two = world.member(lease=Lease(coordination, "kube-system", lock, "two", duration_seconds=3, renew_seconds=1))
    one.sync(time.time())
    two.sync(time.time())
    assert one.leading and not two.leading
    with pytest.raises(NotLeading):
        two.provision("p4d-spot")
    node = world.ready_instance(one)
    world.bind("worker", node)
    assert settle(one, lambda: "worker" in world.cloud_pods())
    for _ in range(3):
        two.sync(time.time())
    assert len(world.cloud_pods()) == 1 and not two.leading
    assert one.lease is not None
    one.lease.release()  # the holder stops
    world.cloud.run()
    assert settle(two, lambda: two.leading and _phase(world.idc_pod("worker")) == "Running")
    assert len(world.cloud_pods()) == 1 and _vnodes(world) == [node]


def test_an_idc_api_server_that_stops_fails_syncs_and_its_return_reconciles(world: World) -> None:
    member = world.member()
    node = world.ready_instance(member)
    world.bind("worker", node)
    assert settle(member, lambda: "worker" in world.cloud_pods())
    server = world.clusters.idc_server
    server.stop()
    try:
        with pytest.raises(Exception) as failed:
            member.sync(time.time())
        assert expected(failed.value)
        world.cloud.run()  # the cloud goes on meanwhile
        world.cloud.set_phase(world.namespace, "worker", "Succeeded")
    finally:
        server.start()
        server.wait_ready(world.clusters.idc)
    assert settle(member, lambda: _phase(world.idc_pod("worker")) == "Succeeded", 60)
    assert len(world.cloud_pods()) == 1 and _vnodes(world) == [node]


# -- tidegate kube --------------------------------------------------------------------------------------


def test_tidegate_kube_with_a_cloud_schedules_a_pod_on_a_virtual_node_that_runs_it_in_the_cloud(
    world: World, tmp_path: Path
) -> None:
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "fleet.yaml").write_text(
        f"""apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {{name: {world.name}}}
spec: {{type: cloud, provider: aws, region: us-east-1, latencyMs: 2}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {{name: p4d-spot}}
spec:
  cluster: {world.name}
  gpu: {{product: NVIDIA-A100-SXM4-40GB, count: 8, memoryMiB: 40960}}
  cpu: "96"
  memory: 1152Gi
  pricing: {{model: spot}}
"""
    )
    asker = world.member()  # as the fleet will ask for it
    asker.sync(time.time())
    instance = asker.provision("p4d-spot")
    asker.close()
    world.cloud.provision()
    custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(world.clusters.idc)))
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
    with contextlib.suppress(ApiException):  # another test made it
        custom.create_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", {**queue, "spec": {"weight": 1}}
        )
    world.idc.create_namespaced_pod(
        world.namespace,
        {
            "metadata": {"name": "burst"},
            "spec": {
                "schedulerName": "volcano",
                "tolerations": [{"key": "cloud.provider", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "main", "image": "train", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
            },
        },
    )
    log = tmp_path / "kube.log"
    command = [
        *(sys.executable, "-m", "tidegate.cli.main", "kube", "--kubeconfig", str(world.clusters.idc)),
        *("--fleet", str(tmp_path / "fleet"), "--cloud", f"{world.name}={world.clusters.cloud}"),
        *("--period", "0.3", "--request-timeout", "2s"),
    ]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        assert eventually(lambda: "burst" in world.cloud_pods(), 60), log.read_text()
        assert (world.idc_pod("burst") or {})["spec"]["nodeName"] == instance  # tidegate bound it to the virtual node
        world.cloud.run()
        assert eventually(lambda: _phase(world.idc_pod("burst")) == "Running", 30), log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        stopped = process.wait(timeout=30)
    text = log.read_text()
    assert stopped == 0, text
    assert f"cloud {world.name} (pools p4d-spot)" in text and "Traceback" not in text


# -- interleavings ---------------------------------------------------------------------------------------

step = st.one_of(
    st.tuples(st.just("bind"), st.sampled_from([0, 30])),
    st.tuples(st.just("bind"), st.sampled_from([0, 30])),
    st.tuples(st.just("delete"), st.integers(0, 9), st.sampled_from([0, 30])),
    st.tuples(st.just("kubelet"), st.integers(0, 9), st.sampled_from(["Running", "Succeeded", "Failed"])),
    st.tuples(st.just("delete-in-cloud"), st.integers(0, 9)),
    st.tuples(st.just("terminate")),
    st.tuples(st.just("sync")),
    st.tuples(st.just("sync")),
    st.tuples(st.just("restart"), st.booleans()),
    st.tuples(st.just("cut")),
    st.tuples(st.just("restore")),
)


@pytest.fixture
def linked(world: World, tmp_path: Path) -> Iterator[tuple[World, Cut, Path]]:
    """The world, with a relay the test can cut between the member and the cloud."""
    text = world.clusters.cloud.read_text()
    port = int(text.split("https://127.0.0.1:")[1].split('"')[0])
    relay = Cut(port)
    (tmp_path / "cloud").write_text(text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{relay.port}"))
    yield world, relay, tmp_path / "cloud"
    relay.close()


_examples = itertools.count()


@settings(
    max_examples=int(os.environ.get("TIDEGATE_CLOUD_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=10, max_size=30))
def test_whatever_happens_in_whatever_order_the_two_sides_converge(
    linked: tuple[World, Cut, Path], steps: list[tuple[Any, ...]]
) -> None:
    """Pods bound, deleted (gracefully or at once) in the IDC, run, finished or deleted in the cloud, the
    kubelets finishing deletions, the member restarted, the link cut and restored, syncs: once the link is
    back and the cloud's kubelets and the member have caught up, the two sides agree. Every IDC pod not
    finished has one cloud pod, made once, whose phase it shows; a finished one shows its cloud pod's end or
    says its cloud pod was lost; no cloud pod outlives its IDC pod; no deletion is left hanging."""
    world, relay, cloud_config = linked
    relay.up = True
    namespace = f"{world.namespace}-{next(_examples)}"
    world.idc.create_namespace({"metadata": {"name": namespace}})
    kubelet = FakeCloud(world.clusters.cloud, world.name, namespace)

    def start(watch: bool) -> CloudMember:
        made = CloudMember(
            world.name,
            CLUSTER,
            pools(world.name),
            _client(world.clusters.idc),
            _client(cloud_config),
            watch=watch,
            request_timeout=TIMEOUT,
        )
        world.members.append(made)
        return made

    member = start(True)
    if not world.cloud.claims():
        world.ready_instance(member)
    node = (
        next(name for name, i in member.instances().items() if i.state is InstanceState.READY)
        if any(i.state is InstanceState.READY for i in member.instances().values())
        else ""
    )
    if not node:
        assert settle(member, lambda: any(i.state is InstanceState.READY for i in member.instances().values()))
        node = next(name for name, i in member.instances().items() if i.state is InstanceState.READY)
    bound: list[str] = []  # IDC pods, in the order bound
    uids: dict[str, str] = {}
    #: Pods whose cloud pod the test deleted while their IDC pod may still have run, and the phase the cloud's
    #: kubelet gave each pod last.
    vanished: set[str] = set()
    ended: dict[str, str] = {}
    for action, *args in steps:
        if action == "bind":
            name = f"p{len(bound)}"
            made = World.bind(replace_namespace(world, namespace), name, node, grace=args[0])
            bound.append(name)
            uids[name] = made["metadata"]["uid"]
        elif action == "delete" and bound:
            name = bound[args[0] % len(bound)]
            with contextlib.suppress(ApiException):
                world.idc.delete_namespaced_pod(name, namespace, grace_period_seconds=args[1])
        elif action == "kubelet" and bound:
            name = bound[args[0] % len(bound)]
            pod = {p["metadata"]["name"]: p for p in kubelet.pods()}.get(name)
            if pod is not None and not pod["metadata"].get("deletionTimestamp") and name not in ended:
                kubelet.set_phase(namespace, name, args[1])
                if args[1] != "Running":
                    ended[name] = args[1]
        elif action == "delete-in-cloud" and bound:
            name = bound[args[0] % len(bound)]
            with contextlib.suppress(ApiException):
                kubelet.delete_pod(namespace, name)
                vanished.add(name)
        elif action == "terminate":
            kubelet.terminate()
        elif action == "sync":
            member.sync(time.time())
        elif action == "restart":
            member.close()
            member = start(args[0])
        elif action == "cut":
            relay.cut()
        elif action == "restore":
            relay.up = True

    relay.up = True
    idc = client.CoreV1Api(_client(world.clusters.idc))
    event(f"{len(bound)} pods bound")
    for action, *_ in steps:
        event(f"step {action}")

    def agreed() -> bool:
        kubelet.terminate()
        idc_pods = {p.metadata.name: _doc(p) for p in idc.list_namespaced_pod(namespace).items}
        cloud_pods = {p["metadata"]["name"]: p for p in kubelet.all_pods()}
        if not member.reachable or any(p["metadata"].get("deletionTimestamp") for p in idc_pods.values()):
            return False
        for name, cloud in cloud_pods.items():
            idc_pod = idc_pods.get(name)
            if idc_pod is None or idc_pod["metadata"]["uid"] != cloud["metadata"]["labels"]["tidegate.io/idc-uid"]:
                return False  # an orphan
        for name, pod in idc_pods.items():
            cloud = cloud_pods.get(name)
            phase = _phase(pod)
            if phase not in ("Succeeded", "Failed"):
                if cloud is None or _phase(cloud) != phase:
                    return False
                if pod["metadata"].get("annotations", {}).get("tidegate.io/cloud-pod-uid") != cloud["metadata"]["uid"]:
                    return False
            elif cloud is not None and _phase(cloud) not in ("Succeeded", "Failed"):
                return False  # the IDC pod is over: its cloud pod must not run on
        return True

    assert settle(member, agreed, 30), (steps, vanished, ended)
    idc_pods = {p.metadata.name: _doc(p) for p in idc.list_namespaced_pod(namespace).items}
    cloud_pods = {p["metadata"]["name"]: p for p in kubelet.all_pods()}
    for name, pod in idc_pods.items():
        assert pod["metadata"]["uid"] == uids[name]
        status = pod["status"]
        if name in vanished:  # never made again: failed, unless its end was seen first
            assert name not in cloud_pods
            assert (status["phase"] == "Failed" and status.get("reason") == "CloudPodLost") or status[
                "phase"
            ] == ended.get(name), (name, status, steps)
        elif name in ended and name in cloud_pods:
            assert status["phase"] == ended[name], (name, status, steps)
        if name in cloud_pods:  # the container states came back with the phase
            assert status.get("containerStatuses") == cloud_pods[name]["status"].get("containerStatuses") or (
                status["phase"] in ("Succeeded", "Failed")
            )
    member.close()


def replace_namespace(world: World, namespace: str) -> World:
    """The world with another namespace (each example has its own)."""
    return World(world.clusters, world.name, namespace, world.cloud, world.idc, world.members)
