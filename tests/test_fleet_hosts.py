"""One hand-checkable story through the three hosts of the fleet's controllers: the simulator, `tidegate
serve`'s control plane and `tidegate kube` on a real kube-apiserver. Each hears the same things (a job
overflows, the link to the cloud is cut and restored, the budget crosses a threshold, a spot notice) in its
own way, and the controllers must decide the same.

The story, on an IDC of one 8-GPU node and a cloud pool of one 8-GPU spot node (36 an hour; budget 2 a day,
weight 10 at 80%); queue dev holds 8 GPUs at most:
-   0 s  job a (8 GPUs, dev) runs on the IDC node;
-  10 s  job b (8 GPUs, dev): dev is at capability, so b overflows to burst-cloud and runs on the cloud node;
-  20 s  job d overflows too, and waits in burst-cloud (the cloud node is b's);
- 100 s  the link to the cloud is cut: b keeps running, d goes back to dev; job c (110 s) cannot overflow while
         it is;
- 165 s  the budget's check sees 1.65 spent (one node since 0 s, 0.01 a second): burst-cloud's weight -> 10;
- 200 s  the link is back: d and c overflow (and wait: the cloud node is b's);
- 300 s  a spot notice for the cloud node (AWS's 120 s): b is told to stop; at 420 s the instance is gone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_apiserver import kube_apiserver
from kubernetes import client, config
from sim_builders import write_helios_sim
from test_live import vcjob

from tidegate.cli.fleet_folder import served_fleet
from tidegate.cli.kube import kube_fleet
from tidegate.clock import SimClock
from tidegate.fleet.port import EventKind
from tidegate.kube.api import KubeApi
from tidegate.kube.scheduler import ClusterScheduler
from tidegate.live.control_plane import ControlPlane
from tidegate.model.manifests import load_manifests
from tidegate.sim.loader import load_simulation
from tidegate.sim.run import build_simulation

FOLDER = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1, capability: {nvidia.com/gpu: "8"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {weight: 1}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc, region: bj}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: aws}
spec: {type: cloud, provider: aws, region: us-east-1, latencyMs: 20}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-a100}
spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8}, cpu: "64", memory: 512Gi}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: cloud-a100}
spec:
  cluster: aws
  count: 1
  gpu: {product: A100, count: 8}
  cpu: "64"
  memory: 512Gi
  pricing: {model: spot, perHour: 36}
  interruption: {atSeconds: [300]}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: story}
spec:
  quotas: elastic
  burst: {enabled: true, queue: burst-cloud, afterSeconds: 600}
  linkOutages: [{start: 100, durationSeconds: 100}]
  budget:
    perPeriod: 2
    periodHours: 24
    queue: burst-cloud
    thresholds: [{spentFraction: 0.8, weight: 10}]
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [story], untilSeconds: 500}
"""
#: The jobs: name and submission time (8 GPUs each, in dev, for longer than the story).
JOBS = [("a", 0), ("b", 10), ("d", 20), ("c", 110)]
LINK_CUT, LINK_BACK, NOTICE, END = 100, 200, 300, 500

EXPECTED = [
    ("overflow", "b", "overflowed from dev to burst-cloud"),
    ("overflow", "d", "overflowed from dev to burst-cloud"),
    ("link", "", "link to aws cut (cloud pods: keepRunning)"),
    ("link-affected", "b", "keeps running through the link cut; checkpoints kept locally"),
    ("link-affected", "d", "moved back from burst-cloud to dev (link cut)"),
    (
        "budget",
        "",
        "budget: queue burst-cloud weight 1, capability none -> weight 10, capability none "
        "(spent 1.65 of 2.00 in period 0 (>= 80%))",
    ),
    ("link", "", "link to aws restored"),
    ("overflow", "d", "overflowed from dev to burst-cloud"),
    ("overflow", "c", "overflowed from dev to burst-cloud"),
    ("spot", "", "cloud-a100-0: spot interruption notice (120 s); stopping b"),
    ("spot", "", "cloud-a100: cloud-a100-0 interrupted"),
]

Decisions = list[tuple[str, str, str]]


def _job(key: str) -> str:
    """A job by its name alone (hosts key jobs by namespace/name, the simulator by its trace's job id)."""
    return re.sub(r"-r\d+$", "", key.rpartition("/")[2])


def _normal(text: str) -> str:
    """A cut's cause is each host's own (a scripted window, a prober's reason, no node Ready): left out."""
    text = re.sub(r"^(link to \S+ cut).*(\(cloud pods: \w+\))$", r"\1 \2", text)
    return re.sub(r"stopping (.+)$", lambda m: "stopping " + ", ".join(_job(k) for k in m[1].split(", ")), text)


def watch(host: Any) -> Decisions:
    """Record every decision the fleet's controllers report to `host` (and let the host have it too)."""
    seen: Decisions = []
    record: Callable[..., None] = host.record

    def recorded(text: str, kind: EventKind, job: str = "") -> None:
        seen.append((kind.value, _job(job) if job else "", _normal(text)))
        record(text, kind, job)

    host.record = recorded
    return seen


def folder(tmp_path: Path) -> Path:
    rows = "".join(f"{name},u,vc1,8,8,1,COMPLETED,{at},{at},0,100000,0\n" for name, at in JOBS)
    spec = {"queueByVc": {"vc1": "dev"}, "queues": [{"name": "dev", "share": 1}]}
    return write_helios_sim(tmp_path / "story", FOLDER, rows, spec)


def simulated(tmp_path: Path) -> Decisions:
    inp = load_simulation([str(folder(tmp_path))])
    sim, _ = build_simulation(inp, "s", "story")
    seen = watch(sim)
    sim.run()
    return seen


def served(tmp_path: Path) -> Decisions:
    ms = load_manifests([str(folder(tmp_path))])
    fleet = served_fleet(ms, "story")
    clock = SimClock()
    plane = ControlPlane.from_manifests(ms, clock, None, fleet.pools, fleet.hpas, fleet.burst, fleet.budget)
    seen = watch(plane)
    plane.start(clock, 1.0)
    for t in range(END + 1):
        clock.run(until=float(t))
        for name, at in JOBS:
            if at == t:
                plane.submit(vcjob(name, "dev", 1, 8))
        if t == LINK_CUT:
            plane.set_link("aws", False, "probe: no route")
        elif t == LINK_BACK:
            plane.set_link("aws", True)
        elif t == NOTICE:
            plane.spot_notice("cloud-a100-0")
    return seen


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with kube_apiserver(tmp_path_factory.mktemp("kube")) as path:
        yield path


def on_kubernetes(tmp_path: Path, kubeconfig: Path) -> Decisions:
    """`tidegate kube --fleet FOLDER --scenario story`, a step a second; the test plays the kubelets (bound pods
    run; a pod being deleted stops at once), the virtual kubelet whose heartbeats stop while the link is cut
    (its node NotReady), AWS's node-termination-handler (the node's spot-itn taint) and Volcano's job
    controller (a PodGroup and its pod for each job)."""
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    custom = client.CustomObjectsApi(core.api_client)
    for doc in yaml.safe_load_all(FOLDER):
        if doc["kind"] == "Queue":
            custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", doc)
    gpus = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    idc = {"name": "idc-a100-0", "labels": {"volcano.sh/node-type": "idc"}}
    ready = [{"type": "Ready", "status": "True"}]
    core.create_node({"metadata": idc, "status": {"capacity": gpus, "allocatable": gpus, "conditions": ready}})
    core.patch_node("idc-a100-0", {"spec": {"taints": []}})  # the API server's not-ready taint: no controller lifts it
    api = KubeApi(str(kubeconfig), watch=False)
    scheduler = ClusterScheduler(api, fleet=kube_fleet(str(folder(tmp_path)), "story", None), start=0.0)
    seen = watch(scheduler.fleet)
    try:
        for t in range(END + 1):
            for name, at in JOBS:
                if at == t:
                    _submit(core, custom, name)
            if t in (LINK_CUT, LINK_BACK):
                ready = {"type": "Ready", "status": "True" if t == LINK_BACK else "False", "reason": "Heartbeat"}
                core.patch_node_status("cloud-a100-0", {"status": {"conditions": [ready]}})
            elif t == NOTICE:
                taint = {"key": "aws-node-termination-handler/spot-itn", "value": "true", "effect": "NoSchedule"}
                core.patch_node("cloud-a100-0", {"spec": {"taints": [*_taints(core, "cloud-a100-0"), taint]}})
            scheduler.step(float(t))
            _kubelets(core)
    finally:
        api.close()
    events = core.list_namespaced_event("default").items
    assert any(e.involved_object.kind == "Queue" and e.reason == "BudgetThreshold" for e in events)
    queue = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "burst-cloud")
    assert queue["spec"]["weight"] == 10
    return seen


def _submit(core: client.CoreV1Api, custom: Any, name: str) -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": "dev", "minResources": {"nvidia.com/gpu": "8"}},
    }
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "default", "podgroups", group)
    requests = {"cpu": "1", "nvidia.com/gpu": "8"}
    container = {"name": "main", "image": "trainer", "resources": {"requests": requests, "limits": requests}}
    pod = {
        "metadata": {"name": f"{name}-0", "annotations": {"scheduling.k8s.io/group-name": name}},
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }
    core.create_namespaced_pod("default", pod)


def _taints(core: client.CoreV1Api, node: str) -> list[dict[str, str]]:
    taints = core.read_node(node).spec.taints or []
    return [{"key": t.key, "value": t.value or "", "effect": t.effect} for t in taints]


def _kubelets(core: client.CoreV1Api) -> None:
    for pod in core.list_namespaced_pod("default").items:
        if pod.metadata.deletion_timestamp is not None:
            core.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)
        elif pod.spec.node_name and pod.status.phase == "Pending":
            core.patch_namespaced_pod_status(pod.metadata.name, "default", {"status": {"phase": "Running"}})


@pytest.mark.parametrize("host", ["simulate", "serve", "kube"])
def test_the_same_story_gives_the_same_decisions_on_every_host(
    host: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if host == "simulate":
        decisions = simulated(tmp_path)
    elif host == "serve":
        decisions = served(tmp_path)
    else:
        decisions = on_kubernetes(tmp_path, request.getfixturevalue("kubeconfig"))
    assert decisions == EXPECTED


def test_a_scenario_whose_cuts_fail_cloud_pods_is_served_so(tmp_path: Path) -> None:
    """`tidegate serve` takes what a cut does to pods running in the cloud from the Scenario's link outages
    (`cloudPods: fail`): reported down, b's pods fail and its policies restart it, from its checkpoint."""
    folder(tmp_path)
    story = tmp_path / "story" / "base.yaml"
    story.write_text(
        story.read_text().replace(
            "[{start: 100, durationSeconds: 100}]", "[{start: 100, durationSeconds: 100, cloudPods: fail}]"
        )
    )
    ms = load_manifests([str(tmp_path / "story")])
    fleet = served_fleet(ms, "story")
    assert fleet.cloud_pods == "fail"
    clock = SimClock()
    plane = ControlPlane.from_manifests(
        ms, clock, None, fleet.pools, fleet.hpas, fleet.burst, fleet.budget, cloud_pods=fleet.cloud_pods
    )
    seen = watch(plane)
    plane.start(clock, 1.0)
    for name, at in JOBS[:2]:
        clock.run(until=float(at))
        plane.submit(vcjob(name, "dev", 1, 8))
    clock.run(until=50.0)
    plane.set_link("aws", False, "probe: no route")
    assert ("link-affected", "b", "lost its data path (link to aws cut); restarting") in seen
    b = plane.jobs["default/b"]
    assert b.waiting and any(text == "restarted" for _, text in b.events)
    # restarted into the burst queue while every link is down, it waits at home
    assert b.group.queue == "dev" and ("link", "b", "back to dev (link cut)") in seen
