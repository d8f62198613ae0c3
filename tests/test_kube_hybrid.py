"""The seed's system on real Kubernetes, end to end: an IDC cluster scheduled by `tidegate kube`, a cloud cluster
whose GPU instances appear in it as virtual nodes (a cloud member), and the fleet's controllers between them,
on two real kube-apiservers on loopback.

The test plays what a bare API server lacks: in the cloud, Karpenter's provisioner (a NodeClaim becomes a
Ready Node; a Node whose claim went is deleted) and the kubelets (tests/cloud_cluster.py); in the IDC, the
IDC node's kubelet and Volcano's job controller (a job's pod deleted while it runs is made again,
`PodEvicted -> RestartJob`, and the new pod resumes from the checkpoint its predecessor's preStop hook
wrote). Time is the wall clock's at the start plus what the story has advanced (5 s a step)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_cluster import FakeCloud
from kube_apiserver import ApiServer, install_nodeclaim_crd, restartable_kube_apiserver
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tidegate.cli.kube import kube_fleet
from tidegate.kube.api import KubeApi, timed
from tidegate.kube.cloud_member import CloudMember
from tidegate.kube.scheduler import ClusterScheduler

TIMEOUT = 2.0
NAMESPACE = "story"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
FOLDER = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: pool}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {parent: pool, weight: 1, capability: {nvidia.com/gpu: "8"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {parent: pool, weight: 100}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc, region: us-east-1}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: aws}
spec: {type: cloud, provider: aws, region: us-east-1, latencyMs: 2}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-a100}
spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8}, cpu: "96", memory: 1152Gi}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: p4d-spot}
spec:
  cluster: aws
  count: 0
  maxCount: 3
  provisioningDelaySeconds: 0
  gpu: {product: NVIDIA-A100-SXM4-40GB, count: 8, memoryMiB: 40960}
  cpu: "96"
  memory: 1152Gi
  pricing: {model: spot, perHour: 36}
  labels: {node.kubernetes.io/instance-type: p4d.24xlarge}
  scaleTargetRef: {name: virtual-kubelet-aws}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: aws-burst}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: virtual-kubelet-aws}
  minReplicas: 0
  maxReplicas: 3
  metrics:
  - type: External
    external:
      metric: {name: volcano_queue_pending_jobs_duration_seconds, selector: {matchLabels: {queue: pool}}}
      target: {type: AverageValue, averageValue: "30"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
      policies: [{type: Percent, value: 100, periodSeconds: 15}]
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: seed}
spec:
  quotas: elastic
  burst: {enabled: true, queue: burst-cloud, afterSeconds: 600}
  budget:
    perPeriod: 3
    periodHours: 24
    queue: burst-cloud
    thresholds: [{spentFraction: 0.8, weight: 10}]
"""


class Story:
    """Two clusters, tidegate kube with its cloud member, and the machinery the test plays, on a story clock."""

    def __init__(self, idc: Path, cloud: Path, cloud_server: ApiServer, folder: Path) -> None:
        self.cloud_kubeconfig, self.cloud_server = cloud, cloud_server
        admin = config.new_client_from_config(config_file=str(idc))
        self.idc, self.custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
        self.cloud = FakeCloud(cloud, "aws", NAMESPACE)
        self.idc.create_namespace({"metadata": {"name": NAMESPACE}})
        for queue in ("pool", "dev", "burst-cloud"):
            spec = {"weight": 100 if queue == "burst-cloud" else 1}
            if queue != "pool":
                spec["parent"] = "pool"
            if queue == "dev":
                spec["capability"] = {"nvidia.com/gpu": "8"}  # type: ignore[assignment]
            doc = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": queue}, "spec": spec}
            self.custom.create_cluster_custom_object(GROUP, VERSION, "queues", doc)
        gpus = {"cpu": "96", "memory": "1152Gi", "nvidia.com/gpu": "8", "pods": "110"}
        ready = [{"type": "Ready", "status": "True"}]
        self.idc.create_node(
            {
                "metadata": {"name": "idc-a100-0", "labels": {"volcano.sh/node-type": "idc"}},
                "status": {"capacity": gpus, "allocatable": gpus, "conditions": ready},
            }
        )
        self.idc.patch_node("idc-a100-0", {"spec": {"taints": []}})  # no node controller lifts not-ready here
        fleet = kube_fleet(str(folder), "seed", None, ["aws"])
        (pool,) = [p for p in fleet.pools if p.cluster_name == "aws"]
        self.member = CloudMember(
            "aws",
            pool.cluster,
            {pool.name: pool.spec},
            timed(config.new_client_from_config(config_file=str(idc)), TIMEOUT),
            timed(config.new_client_from_config(config_file=str(cloud)), TIMEOUT),
            watch=False,
            request_timeout=TIMEOUT,
        )
        self.api = KubeApi(str(idc), watch=False, request_timeout=TIMEOUT)
        self.t0 = time.time()
        self.t = 0.0
        from dataclasses import replace

        self.scheduler = ClusterScheduler(self.api, fleet=replace(fleet, members=(self.member,)), start=self.t0)
        #: The jobs the test's job controller keeps: name -> (restarts, done).
        self.jobs: dict[str, list[Any]] = {}
        #: Checkpoints written by preStop hooks (the object store's part): job -> epoch.
        self.checkpoints: dict[str, int] = {}

    # -- the story's clock ------------------------------------------------------------------------------
    def advance(self, seconds: float, every: float = 5.0) -> None:
        end = self.t + seconds
        while self.t < end:
            self.t += every
            self.scheduler.step(self.t0 + self.t)
            self.play()

    def until(self, check: Any, seconds: float = 300.0) -> bool:
        end = self.t + seconds
        while self.t < end:
            self.advance(5.0)
            if check():
                return True
        return False

    # -- what the test plays ---------------------------------------------------------------------------
    def play(self) -> None:
        """The cloud's provisioner and kubelets, the IDC node's kubelet, Volcano's job controller."""
        if self.cloud_server.process is None:
            return  # the cloud's API server is down: its machinery with it
        self.cloud.provision()
        self.cloud.run()
        for pod in self.cloud.pods():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):  # the preStop hook checkpoints before the container stops
                job = meta["name"].rsplit("-", 1)[0]
                self.checkpoints[job] = self.checkpoints.get(job, 0) + 1
        self.cloud.terminate()
        self.cloud.reclaim()
        for pod in self.idc.list_namespaced_pod(NAMESPACE).items:
            if pod.spec.node_name == "idc-a100-0" and pod.status.phase == "Pending":
                self.idc.patch_namespaced_pod_status(pod.metadata.name, NAMESPACE, {"status": {"phase": "Running"}})
        pods = {pod.metadata.name for pod in self.idc.list_namespaced_pod(NAMESPACE).items}
        for name, state in self.jobs.items():
            if not state[1] and f"{name}-0" not in pods:  # PodEvicted -> RestartJob
                state[0] += 1
                self._pod(name)

    def submit(self, name: str) -> None:
        group = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name}}
        spec = {"minMember": 1, "queue": "dev", "minResources": {"nvidia.com/gpu": "8"}}
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "podgroups", {**group, "spec": spec})
        self.jobs[name] = [0, False]
        self._pod(name)

    def _pod(self, job: str) -> None:
        requests = {"cpu": "8", "nvidia.com/gpu": "8"}
        container = {
            "name": "train",
            "image": "pytorch/pytorch:2.1.0",
            "resources": {"requests": requests, "limits": requests},
            "env": [{"name": "RESUME_FROM_EPOCH", "value": str(self.checkpoints.get(job, 0))}],
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/checkpoint"]}}},
        }
        pod = {
            "metadata": {"name": f"{job}-0", "annotations": {"scheduling.k8s.io/group-name": job}},
            "spec": {"schedulerName": "volcano", "terminationGracePeriodSeconds": 90, "containers": [container]},
        }
        self.idc.create_namespaced_pod(NAMESPACE, pod)

    def finish(self, job: str) -> None:
        """The job's pod succeeds where it runs (in the cloud, or on the IDC node)."""
        pod = self.idc.read_namespaced_pod(f"{job}-0", NAMESPACE)
        if pod.spec.node_name == "idc-a100-0":
            self.idc.patch_namespaced_pod_status(pod.metadata.name, NAMESPACE, {"status": {"phase": "Succeeded"}})
        else:
            self.cloud.set_phase(NAMESPACE, pod.metadata.name, "Succeeded")
        self.jobs[job][1] = True

    # -- what the test reads ---------------------------------------------------------------------------
    def node_of(self, job: str) -> str:
        try:
            return str(self.idc.read_namespaced_pod(f"{job}-0", NAMESPACE).spec.node_name or "")
        except ApiException:
            return ""

    def phase(self, job: str) -> str:
        try:
            return str(self.idc.read_namespaced_pod(f"{job}-0", NAMESPACE).status.phase)
        except ApiException:
            return ""

    def queue_of(self, job: str) -> str:
        group = self.custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "podgroups", job)
        return str(group["spec"]["queue"])

    def virtual_nodes(self) -> list[str]:
        return [n.metadata.name for n in self.idc.list_node(label_selector="tidegate.io/pool=p4d-spot").items]

    def fleet_events(self) -> list[str]:
        return [text for _, text in self.scheduler.fleet.events]

    def close(self) -> None:
        self.api.close()
        self.member.close()


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "seed.yaml").write_text(FOLDER)
    with (
        restartable_kube_apiserver(tmp_path / "idc-server") as (idc, _),
        restartable_kube_apiserver(tmp_path / "cloud-server") as (cloud, cloud_server),
    ):
        install_nodeclaim_crd(cloud)
        made = Story(idc, cloud, cloud_server, tmp_path / "fleet")
        try:
            yield made
        finally:
            made.close()


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    (tmp_path / "idc-server").mkdir()
    (tmp_path / "cloud-server").mkdir()


def test_the_seed_s_story_on_an_idc_cluster_and_a_cloud_cluster(story: Story) -> None:
    # The tide arrives: dev may hold 8 GPUs, its first job takes the IDC node, the next two overflow at once.
    for job in ("j1", "j2", "j3"):
        story.submit(job)
    story.advance(5)
    assert story.node_of("j1") == "idc-a100-0"
    assert story.queue_of("j2") == story.queue_of("j3") == "burst-cloud"

    # Their wait grows the cloud pool (the HPA on the pending-seconds metric): NodeClaims in the cloud, Nodes
    # there, virtual nodes here; the two jobs are bound to them and run in the cloud cluster.
    assert story.until(lambda: story.phase("j2") == story.phase("j3") == "Running", 120), story.fleet_events()
    vnodes = story.virtual_nodes()
    assert len(vnodes) == 2 and {story.node_of("j2"), story.node_of("j3")} == set(vnodes)
    assert len(story.cloud.claims()) == 2 and {p["metadata"]["name"] for p in story.cloud.pods()} == {"j2-0", "j3-0"}

    # j2 completes in the cloud; its status comes back.
    story.finish("j2")
    assert story.until(lambda: story.phase("j2") == "Succeeded", 30)

    # A spot notice on j3's instance (node-termination-handler's taint on the cloud Node): its pod is deleted
    # with its grace period (its preStop hook checkpoints), Volcano's job controller makes it again, and it
    # resumes from that checkpoint on the other instance; the noticed instance goes when its notice runs out.
    noticed = story.node_of("j3")
    cloud_node = story.member.instances()[noticed].cloud_node
    story.cloud.taint(cloud_node, "aws-node-termination-handler/spot-itn", "true")
    restarted = story.until(lambda: story.jobs["j3"][0] == 1 and story.phase("j3") == "Running", 120)
    assert restarted, "\n".join(story.fleet_events())
    assert story.cloud.graces[f"{NAMESPACE}/j3-0"] == 90 and story.checkpoints["j3"] == 1
    assert story.node_of("j3") != noticed
    resumed = story.idc.read_namespaced_pod("j3-0", NAMESPACE).spec.containers[0].env[0]
    assert (resumed.name, resumed.value) == ("RESUME_FROM_EPOCH", "1")
    assert story.until(lambda: noticed not in story.virtual_nodes(), 200), story.fleet_events()
    assert any(f"{noticed}: spot interruption notice (120 s)" in e for e in story.fleet_events())

    # The budget: two instances at 36 an hour; at 80% of 3 burst-cloud's weight drops to 10 (the Queue object),
    # with an Event on it.
    assert story.until(
        lambda: story.custom.get_cluster_custom_object(GROUP, VERSION, "queues", "burst-cloud")["spec"]["weight"] == 10,
        300,
    )
    events = story.idc.list_namespaced_event("default").items
    assert any(e.involved_object.kind == "Queue" and e.reason == "BudgetThreshold" for e in events)

    # The link is cut (the cloud's API server stops): the virtual nodes go NotReady and are cordoned, nothing
    # overflows; j4 waits in dev. When it is back, state is reconciled and j4 overflows.
    story.cloud_server.stop()
    story.advance(10)
    assert any(e.startswith("link to aws cut") for e in story.fleet_events()), story.fleet_events()
    for name in story.virtual_nodes():
        node = story.idc.read_node(name)
        assert node.spec.unschedulable
        assert next(c for c in node.status.conditions if c.type == "Ready").status != "True"
    story.submit("j4")
    story.advance(15)
    assert story.queue_of("j4") == "dev"
    story.cloud_server.start()
    story.cloud_server.wait_ready(story.cloud_kubeconfig)
    assert story.until(lambda: story.queue_of("j4") == "burst-cloud", 60), story.fleet_events()
    assert "link to aws restored" in story.fleet_events()
    assert story.until(lambda: story.phase("j4") == "Running", 120), story.fleet_events()
    assert story.phase("j3") == "Running" and story.jobs["j3"][0] == 1  # ran through the cut, nothing duplicated
    running = [p["metadata"]["name"] for p in story.cloud.pods() if p["status"]["phase"] == "Running"]
    assert sorted(running) == ["j3-0", "j4-0"]

    # Every job completes; with nothing waiting the pool shrinks to zero: instances released, NodeClaims and
    # virtual nodes gone.
    for job in ("j1", "j3", "j4"):
        story.finish(job)
    shrunk = story.until(lambda: not story.virtual_nodes() and not story.cloud.claims(), 300)
    assert shrunk, "\n".join(story.fleet_events()) + f"\n{story.virtual_nodes()} {story.cloud.claims()}"
    assert story.scheduler.fleet.fleet.pools["p4d-spot"].size == 0


def test_the_kube_hybrid_example_is_what_tidegate_kube_runs() -> None:
    """examples/kube-hybrid/ loads as `tidegate kube --fleet examples/kube-hybrid/ --scenario seed --cloud ...`
    reads it: the two clouds' spot pools with their HPAs, burst to burst-cloud, the daily budget."""
    folder = Path(__file__).resolve().parents[1] / "examples" / "kube-hybrid"
    fleet = kube_fleet(str(folder), "seed", None, ["aws-us-east-1", "aliyun-cn-hangzhou"])
    assert [pool.name for pool in fleet.pools] == ["aws-p4d-spot", "aliyun-a100-spot"]
    assert {hpa.name for hpa in fleet.hpas} == {"aws-burst", "aliyun-burst"}
    assert fleet.burst is not None and fleet.burst.queue == "burst-cloud"
    assert fleet.budget is not None and fleet.budget.per_period == 1500
