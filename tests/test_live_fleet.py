"""The live control plane serving a simulation folder's fleet: IDC pools' nodes, a cloud pool sized by its
HPA on the live pending-seconds metric (the simulator's controller, `tidegate/fleet`), and jobs overflowing
to the burst queue; pinned jobs never reach a cloud node. On simulated time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from fastapi.testclient import TestClient
from test_live import vcjob
from typer.testing import CliRunner

from tidegate.cli.fleet_folder import served_fleet
from tidegate.cli.main import app
from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import JobPhase, NotFound
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import load_manifests
from tidegate.model.objects import PodPhase
from tidegate.server.app import GracefulServer, create_app
from tidegate.store.sql import Store

ROOT = Path(__file__).resolve().parent.parent
FOLDER = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: hybrid-gpu-pool}
spec: {weight: 1, reclaimable: true}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {parent: hybrid-gpu-pool, weight: 1, capability: {nvidia.com/gpu: "DEV_CAP"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: prod}
spec: {parent: hybrid-gpu-pool, weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {parent: hybrid-gpu-pool, weight: 1, capability: {nvidia.com/gpu: "16"}}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc, region: cn-beijing}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: aliyun}
spec: {type: cloud, provider: aliyun, region: cn-hangzhou, latencyMs: 35}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-a100}
spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8}, cpu: "64", memory: 512Gi, pricing: {model: owned}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: cloud-a100}
spec:
  cluster: aliyun
  count: 0
  maxCount: 2
  provisioningDelaySeconds: 60
  gpu: {product: A100, count: 8}
  cpu: "64"
  memory: 512Gi
  pricing: {model: on-demand, perHour: 30}
  scaleTargetRef: {name: virtual-kubelet-cloud}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cloud-burst-hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: virtual-kubelet-cloud}
  minReplicas: 0
  maxReplicas: 2
  metrics:
  - type: External
    external:
      metric: {name: volcano_queue_pending_jobs_duration_seconds, selector: {matchLabels: {queue: hybrid-gpu-pool}}}
      target: {type: AverageValue, averageValue: "300"}
  behavior:
    scaleUp: {policies: [{type: Pods, value: 2, periodSeconds: 60}]}
    scaleDown: {stabilizationWindowSeconds: 600, policies: [{type: Pods, value: 1, periodSeconds: 60}]}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: idc-only}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: burst}
spec: {quotas: elastic, burst: {enabled: true, queue: burst-cloud, afterSeconds: 120}}
"""


def job(name: str, gpus: int = 8, pinned: bool = False, queue: str = "dev", replicas: int = 1) -> str:
    """A vcjob of `replicas` pods of `gpus` GPUs; pinned to the IDC by a nodeSelector if `pinned`."""
    return vcjob(name, queue, replicas, gpus, pod_spec='nodeSelector: {"volcano.sh/node-type": idc}' if pinned else "")


def serve_folder(
    folder: Path, clock: SimClock, store: Store | None = None, scenario: str | None = None
) -> ControlPlane:
    """What `tidegate serve <folder> [--scenario]` runs, on simulated time (a new process on `store`)."""
    paths = [str(folder)]
    ms = load_manifests(paths)
    fleet = served_fleet(ms, scenario)
    plane = ControlPlane.from_manifests(ms, clock, store, fleet.pools, fleet.hpas, fleet.burst, fleet.budget)
    plane.start(clock, 1.0)
    return plane


def served(tmp_path: Path, scenario: str | None = None, dev_gpus: int = 16) -> tuple[ControlPlane, SimClock]:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", str(dev_gpus)))
    clock = SimClock()
    return serve_folder(tmp_path, clock, None, scenario), clock


def fill_the_idc_then_wait(plane: ControlPlane, clock: SimClock) -> None:
    """`first` (prod) takes the one IDC node at 0 s; `second` (dev) then waits from 0.5 s: the HPA asks for a
    cloud node at its first sync (15 s; it joins at 75 s) and `second` overflows to it after 120 s."""
    plane.submit(job("first", queue="prod"))
    clock.run(until=0.5)
    plane.submit(job("second"))


def node_of(plane: ControlPlane, key: str) -> str:
    (node,) = {pod.node_name for pod in plane.jobs[key].pods}
    return node


def test_idc_pools_become_nodes_and_a_waiting_job_bursts_onto_a_cloud_node_the_hpa_adds(tmp_path: Path) -> None:
    plane, clock = served(tmp_path)
    assert served_fleet(load_manifests([str(tmp_path)]), None).scenario == "burst"  # it bursts
    assert sorted(plane.nodes) == ["idc-a100-0"]
    plane.submit(job("first", queue="prod"))
    clock.run(until=0.5)
    assert node_of(plane, "default/first") == "idc-a100-0"
    plane.submit(job("second"))  # the IDC is full; dev is not at capability
    clock.run(until=1.0)
    second = plane.jobs["default/second"]
    assert second.waiting and second.group.queue == "dev"
    # it waits in dev until afterSeconds, then overflows; the HPA sees its wait summed under the parent queue
    clock.run(until=119.0)
    assert second.group.queue == "dev" and plane.pending_seconds()["hybrid-gpu-pool"] == pytest.approx(118.5)
    clock.run(until=122.0)
    assert second.group.queue == "burst-cloud"
    assert any("overflowed from dev to burst-cloud" in text for _, text in second.events)
    # 300 s of summed waiting per replica: the HPA asks for a node, which joins after its 60 s delay
    clock.run(until=400.0)
    (pool,) = [p for p in plane.views.pools_view() if p["name"] == "cloud-a100"]
    assert pool["billed_nodes"] == 1 and pool["events"]
    # GET /pools shows the HPA's status as `kubectl get hpa -o yaml` would
    (shown,) = [p for p in TestClient(create_app(plane)).get("/pools").json() if p["name"] == "cloud-a100"]
    status = shown["hpa_status"]
    assert (shown["hpa"], status["currentReplicas"], status["desiredReplicas"]) == ("cloud-burst-hpa", 1, 1)
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("AbleToScale", "True"),
        ("ScalingActive", "True"),
        ("ScalingLimited", "False"),
    ]
    assert status["currentMetrics"][0]["type"] == "External" and status["lastScaleTime"] is not None
    clock.run(until=600.0)
    assert node_of(plane, "default/second") == "cloud-a100-0"
    cloud = plane.nodes["cloud-a100-0"]
    assert cloud.labels["volcano.sh/node-type"] == "cloud-ondemand"
    assert cloud.annotations["latency.ms.local-idc"] == "35"
    assert [t.key for t in cloud.taints] == ["cloud.provider"]
    # the job ends; after the 600 s stabilisation window the idle node is removed and billing stops
    for pod in plane.jobs["default/second"].pods:
        plane.report_pod(pod.key, PodPhase.SUCCEEDED)
    clock.run(until=2000.0)
    assert "cloud-a100-0" not in plane.nodes
    (pool,) = [p for p in plane.views.pools_view() if p["name"] == "cloud-a100"]
    assert pool["nodes"] == [] and pool["billed_nodes"] == 0


def test_a_job_whose_queue_is_at_capability_overflows_at_once(tmp_path: Path) -> None:
    plane, clock = served(tmp_path, dev_gpus=8)
    plane.submit(job("first") + "---" + job("second"))
    clock.run(until=1.0)
    second = plane.jobs["default/second"]
    assert second.waiting and second.group.queue == "burst-cloud"
    assert [pod.tolerations[-1].key for pod in second.pods] == ["cloud.provider"]


def test_a_job_never_overflows_to_a_burst_queue_that_does_not_take_its_namespace(tmp_path: Path) -> None:
    team_a = "metadata: {name: burst-cloud, annotations: {tidegate.io/namespaces: team-a}}"
    (tmp_path / "fleet.yaml").write_text(
        FOLDER.replace("DEV_CAP", "8").replace("metadata: {name: burst-cloud}", team_a)
    )
    clock = SimClock()
    plane = serve_folder(tmp_path, clock)
    assert plane.core.ssn.queues["burst-cloud"].queue.namespaces == ("team-a",)
    plane.submit(job("first") + "---" + job("second"))
    clock.run(until=600.0)
    second = plane.jobs["default/second"]
    assert second.waiting and second.group.queue == "dev"  # at capability, but burst-cloud is team-a's


def test_a_job_pinned_to_the_idc_never_bursts_nor_asks_for_cloud_nodes(tmp_path: Path) -> None:
    plane, clock = served(tmp_path)
    plane.submit(job("first", queue="prod"))
    clock.run(until=0.5)
    plane.submit(job("sensitive", pinned=True))
    clock.run(until=3600.0)
    sensitive = plane.jobs["default/sensitive"]
    assert sensitive.waiting and sensitive.group.queue == "dev"
    assert plane.pending_seconds()["dev"] == 0.0  # not a wait the cloud could end
    assert [p["billed_nodes"] for p in plane.views.pools_view()] == [0, 0]
    assert sorted(plane.nodes) == ["idc-a100-0"]


def test_a_scenario_without_burst_serves_the_idc_pools_only(tmp_path: Path) -> None:
    plane, clock = served(tmp_path, "idc-only")
    assert [p["name"] for p in plane.views.pools_view()] == ["idc-a100"] and not plane.fleet.sizing.autoscalers
    plane.submit(job("first") + "---" + job("second"))
    clock.run(until=3600.0)
    assert plane.jobs["default/second"].phase is JobPhase.PENDING
    assert plane.jobs["default/second"].group.queue == "dev"


def test_an_unknown_scenario_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter, match="no Scenario 'nope'; the folder has idc-only, burst"):
        served(tmp_path, "nope")


def test_the_demo_folder_is_served_with_its_burst_scenario_and_without_its_job_template() -> None:
    paths = [str(ROOT / "examples" / "hybrid-idc")]
    ms = load_manifests(paths)
    fleet = served_fleet(ms, None)
    assert (fleet.scenario, fleet.warnings) == ("elastic-burst", [])
    assert fleet.notes == [
        "NodePool aws-p4d-spot: spot interruptions are not drawn live; its nodes' agents report the "
        "provider's (POST /nodes/<name>/interruption)"
    ]
    assert fleet.burst is not None and (fleet.burst.queue, fleet.burst.after_seconds) == ("burst-cloud", 600.0)
    assert [p.name for p in fleet.pools] == ["idc-a100", "aws-p4d-spot"]
    assert [h.name for h in fleet.hpas] == ["cloud-burst-hpa"]
    assert ms.jobs == []  # llm-finetune is the workload's policy template, not a job to run
    plane = ControlPlane.from_manifests(ms, SimClock(), None, fleet.pools, fleet.hpas, fleet.burst, fleet.budget)
    assert len(plane.nodes) == 128


def test_a_restart_keeps_the_cloud_nodes_and_what_runs_on_them(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16"))

    def start(clock: SimClock) -> ControlPlane:
        return serve_folder(tmp_path, clock, Store(f"sqlite:///{tmp_path / 'state.db'}"))

    clock = SimClock()
    plane = start(clock)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=600.0)
    assert node_of(plane, "default/second") == "cloud-a100-0"
    (kept,) = [p["hpa_status"] for p in plane.views.pools_view() if p["name"] == "cloud-a100"]
    plane.stop()
    again = start(SimClock(start=700.0))  # a new process on the same store
    assert sorted(again.nodes) == ["cloud-a100-0", "idc-a100-0"]
    # the HPA's status is its object's, kept as written (conditions with their transition times)
    (shown,) = [p["hpa_status"] for p in again.views.pools_view() if p["name"] == "cloud-a100"]
    assert shown == kept and kept["lastScaleTime"] == 15.0 and kept["conditions"][0]["lastTransitionTime"] == 0.0
    second = again.jobs["default/second"]
    assert second.phase is JobPhase.RUNNING and node_of(again, "default/second") == "cloud-a100-0"
    # still in the burst queue it overflowed to (not charged to dev), its pods still tolerating the cloud
    assert second.group.queue == "burst-cloud" and again.core.jobs["default/second"].group.queue == "burst-cloud"
    assert all(pod.tolerations[-1].key == "cloud.provider" for pod in [*second.pods, *second.template])
    (pool,) = [p for p in again.views.pools_view() if p["name"] == "cloud-a100"]
    assert pool["nodes"] == ["cloud-a100-0"] and pool["billed_nodes"] == 1
    # the restored jobs hold their nodes: a new job finds both full and waits
    again.submit(job("fourth", queue="prod"))
    again.cycle()
    assert again.jobs["default/fourth"].waiting and not any(p.node_name for p in again.jobs["default/fourth"].pods)
    again.delete_job("default/fourth")
    assert again.fleet.pools["cloud-a100"].new_node().name == "cloud-a100-1"  # names go on, never reused
    again.stop()
    # the folder drops the burst queue and its Scenario: the job goes back to its own queue, and says so
    burst_queue = FOLDER.index("metadata: {name: burst-cloud}")
    burst_queue = FOLDER.rindex("---", 0, burst_queue)
    without = FOLDER[:burst_queue] + FOLDER[FOLDER.index("---", burst_queue + 3) :]
    (tmp_path / "fleet.yaml").write_text(without[: without.rindex("---")].replace("DEV_CAP", "16"))
    third = start(SimClock(start=800.0))
    assert third.jobs["default/second"].group.queue == "dev" and third.jobs["default/second"].waiting
    assert third.warnings == [
        "job default/second had overflowed to queue burst-cloud, which the folder no longer has: back in queue dev"
    ]
    for served_plane in (plane, again, third):
        assert served_plane.store is not None
        served_plane.store.close()


def test_a_restart_keeps_the_nodes_still_being_provisioned_and_when_they_join(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16"))
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")

    clock = SimClock()
    plane = serve_folder(tmp_path, clock, store)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=30.0)  # the second job's wait made the HPA ask for a node at its first sync
    (arrival,) = plane.fleet.pools["cloud-a100"].arriving
    assert arrival.due == pytest.approx(15.0 + 60.0)
    plane.stop()
    clock = SimClock(start=40.0)  # a new process on the same store, before the node has joined
    again = serve_folder(tmp_path, clock, store)
    (pool,) = [p for p in again.views.pools_view() if p["name"] == "cloud-a100"]
    assert (pool["nodes"], pool["provisioning"], pool["billed_nodes"]) == ([], 1, 1)
    clock.run(until=arrival.due - 0.5)
    assert again.fleet.pools["cloud-a100"].nodes == []
    clock.run(until=arrival.due)
    assert again.fleet.pools["cloud-a100"].nodes == ["cloud-a100-0"]  # when it was due, not a new full delay
    assert again.fleet.pools["cloud-a100"].provisioning == 0 and again.bill.nodes["cloud-a100"] == 1
    store.close()


def test_a_node_cancelled_while_provisioning_does_not_hurry_the_next_one_asked_for(tmp_path: Path) -> None:
    plane, clock = served(tmp_path)
    cloud = plane.fleet.pools["cloud-a100"]
    plane.fleet.sizing.resize(cloud, 1)  # due at 60 s
    clock.run(until=10.0)
    plane.fleet.sizing.resize(cloud, 0)  # cancelled: billing stops
    assert cloud.provisioning == 0 and plane.bill.nodes["cloud-a100"] == 0
    clock.run(until=20.0)
    plane.fleet.sizing.resize(cloud, 1)  # due at 80 s, its own full delay
    clock.run(until=70.0)
    assert cloud.nodes == [] and cloud.provisioning == 1
    clock.run(until=81.0)
    assert cloud.nodes == ["cloud-a100-0"] and cloud.provisioning == 0 and plane.bill.nodes["cloud-a100"] == 1


BUDGETED = """
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: budgeted}
spec:
  quotas: elastic
  burst: {enabled: true, queue: burst-cloud, afterSeconds: 120}
  budget:
    perPeriod: 2
    periodHours: 1
    queue: burst-cloud
    thresholds:
    - {spentFraction: 0.5, weight: 10}
    - {spentFraction: 1.0, state: Closed, maxReplicas: 1}
"""


def budgeted(tmp_path: Path, clock: SimClock, store: Store) -> ControlPlane:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16") + BUDGETED)
    return serve_folder(tmp_path, clock, store, "budgeted")


def burst_queue(plane: ControlPlane) -> tuple[int, str, int]:
    queue = plane.queues["burst-cloud"]
    return queue.weight, queue.state.value, plane.fleet.sizing.autoscalers[0].spec.max_replicas


def test_the_budget_patches_the_burst_queue_and_caps_the_hpa_live_and_a_restart_resumes_its_period(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    clock = SimClock()
    plane = budgeted(tmp_path, clock, store)
    plane.submit(job("first", queue="prod"))
    clock.run(until=0.5)
    plane.submit(job("second"))  # waits; the HPA asks for a cloud node at 15 s: 30 an hour is billed from then
    clock.run(until=134.0)
    assert burst_queue(plane) == (1, "Open", 2)
    # half of the budget of 2 is spent at 135 s (120 s at 1/120 a second), a check time (every 15 s)
    clock.run(until=135.0)
    assert burst_queue(plane) == (10, "Open", 2)
    view = plane.views.budget_view()
    assert (view["period"], view["spent"], view["thresholds_crossed"]) == (0, pytest.approx(1.0), 1)
    assert "weight 1, capability nvidia.com/gpu=16 -> weight 10" in view["events"][0]["message"]
    clock.run(until=255.0)  # all of it at 255 s: closed, and the HPA capped at one node
    assert burst_queue(plane) == (10, "Closed", 1)
    assert [p["spent"] for p in plane.views.pools_view()] == [0.0, pytest.approx(2.0)]
    plane.stop()
    store.close()

    # a new process at 400 s: the same period, thresholds crossed, queue patched, HPA capped; the node ran
    # on while it was down, so its spend goes on from the kept bill
    store = Store(store.url)
    clock = SimClock(start=400.0)
    again = budgeted(tmp_path, clock, store)
    assert burst_queue(again) == (10, "Closed", 1)
    view = again.views.budget_view()
    assert (view["period"], view["thresholds_crossed"], view["hpa_capped"]) == (0, 2, True)
    assert view["spent"] == pytest.approx((400.0 - 15.0) / 120)
    # the operator raises the weight: the queue's own spec, which the next period restores to
    again.patch_queue("burst-cloud", {"spec": {"weight": 5}})
    assert burst_queue(again) == (5, "Closed", 1)
    clock.run(until=3600.0)
    assert burst_queue(again) == (5, "Open", 2)
    view = again.views.budget_view()
    assert (view["period"], view["period_start"], view["thresholds_crossed"], view["spent"]) == (1, 3600.0, 0, 0.0)
    assert [e["time"] for e in view["events"]][-2:] == [3600.0, 3600.0]  # the queue, then the HPA, restored
    again.stop()
    store.close()


def test_a_restart_in_a_later_period_starts_it_where_it_began(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    clock = SimClock()
    plane = budgeted(tmp_path, clock, store)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=300.0)
    assert burst_queue(plane) == (10, "Closed", 1)
    plane.stop()
    store.close()
    store = Store(store.url)
    clock = SimClock(start=3700.0)  # down across the start of period 1
    again = budgeted(tmp_path, clock, store)
    assert burst_queue(again) == (1, "Open", 2)
    view = again.views.budget_view()
    assert (view["period"], view["period_start"], view["thresholds_crossed"]) == (1, 3600.0, 0)
    assert view["spent"] == pytest.approx(100.0 / 120)  # the node billed from the period's start
    clock.run(until=3729.0)  # 50% at 3,720 s, seen at the first check after it (every 15 s from 3,700 s)
    assert burst_queue(again) == (1, "Open", 2)
    clock.run(until=3730.0)
    assert burst_queue(again) == (10, "Open", 2)
    again.stop()
    store.close()


def test_the_api_shows_the_budget_and_the_pools_spend(tmp_path: Path) -> None:
    clock = SimClock()
    plane = budgeted(tmp_path, clock, Store(f"sqlite:///{tmp_path / 'state.db'}"))
    plane.submit(job("first", queue="prod") + "---" + job("second"))
    clock.run(until=135.0)
    api = TestClient(create_app(plane))
    budget = api.get("/budget").json()
    assert (budget["queue"], budget["per_period"], budget["thresholds_crossed"]) == ("burst-cloud", 2.0, 1)
    metrics = api.get("/metrics").text
    assert 'tidegate_pool_spend_total{pool="cloud-a100"} 1.0' in metrics
    assert "tidegate_budget_period_spent 1.0" in metrics
    (tmp_path / "plain").mkdir()
    plain, _ = served(tmp_path / "plain")
    assert TestClient(create_app(plain)).get("/budget").status_code == 404
    assert plane.store is not None
    plane.store.close()


def test_while_the_cloud_link_is_down_work_degrades_to_the_idc_and_comes_back_when_it_is_up(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16"))
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")

    clock = SimClock()
    plane = serve_folder(tmp_path, clock, store)
    plane.submit(job("first", queue="prod"))
    clock.run(until=0.5)
    plane.submit(job("second"))  # overflows at 120.5 s onto the cloud node that joined at 75 s
    clock.run(until=130.0)
    assert node_of(plane, "default/second") == "cloud-a100-0"
    plane.submit(job("third"))  # overflows at 250 s; the one cloud node is busy
    clock.run(until=251.0)
    third = plane.jobs["default/third"]
    assert third.waiting and third.group.queue == "burst-cloud"
    with pytest.raises(NotFound, match="cloud cluster nowhere is not served"):
        plane.set_link("nowhere", False)
    plane.set_link("aliyun", False, "probe: no route")
    # the one cloud is cut off: third goes back to dev with the pods it was submitted with
    assert third.group.queue == "dev" and third.template == third.home[1]
    assert (
        third.events[-1][1] == "moved back from burst-cloud to dev (link cut)"
    )  # the fleet's words, as the simulator's
    assert plane.views.links_view() == [
        {"cluster": "aliyun", "up": False, "down_since": 251.0, "reason": "probe: no route"}
    ]
    plane.report_pod(plane.jobs["default/second"].pods[0].key, PodPhase.SUCCEEDED)
    clock.run(until=1500.0)  # the cloud node is free but cordoned; nothing overflows; the pool does not grow
    assert third.waiting and third.group.queue == "dev"
    (cloud,) = [p for p in plane.views.pools_view() if p["name"] == "cloud-a100"]
    assert cloud["nodes"] == ["cloud-a100-0"] and cloud["provisioning"] == 0
    # third waits in dev: its HPA wants a second node, and the scale update fails while the cloud is cut off
    able = cloud["hpa_status"]["conditions"][0]
    assert (able["type"], able["status"], able["reason"]) == ("AbleToScale", "False", "FailedUpdateScale")
    assert able["message"] == (
        "the HPA controller was unable to update the target scale: "
        "NodePool cloud-a100 may not grow now: its cluster aliyun is cut off"
    )
    assert any("HPA cloud-burst-hpa AbleToScale False FailedUpdateScale" in e["message"] for e in cloud["events"])
    plane.stop()
    clock = SimClock(start=1600.0)
    again = serve_folder(tmp_path, clock, store)  # a restart keeps the link down until it is reported up
    assert again.views.links_view()[0]["up"] is False
    clock.run(until=1700.0)
    assert again.jobs["default/third"].waiting
    again.set_link("aliyun", True)
    clock.run(until=1702.0)  # it overflows again at once (it has waited long enough) and lands on the cloud node
    third = again.jobs["default/third"]
    assert third.phase is JobPhase.RUNNING and node_of(again, "default/third") == "cloud-a100-0"
    assert [m for _, m in again.fleet_events if m.startswith("link")] == ["link to aliyun restored"]
    again.stop()
    store.close()


def test_the_api_reports_and_sets_a_cloud_link(tmp_path: Path) -> None:
    plane, _ = served(tmp_path)
    api = TestClient(create_app(plane))
    assert api.get("/links").json() == [{"cluster": "aliyun", "up": True, "down_since": None, "reason": ""}]
    down = api.put("/links/aliyun", json={"up": False, "reason": "probe: no route"})
    assert down.status_code == 200 and down.json()[0]["up"] is False
    assert 'tidegate_link_up{cluster="aliyun"} 0.0' in api.get("/metrics").text
    assert api.put("/links/idc", json={"up": False}).status_code == 404  # not a cloud cluster
    assert api.put("/links/aliyun", json={"up": "maybe"}).status_code == 422
    assert api.put("/links/aliyun", json={"up": True}).json()[0]["up"] is True


def test_a_busy_node_cordoned_by_scale_in_leaves_with_its_last_job(tmp_path: Path) -> None:
    plane, clock = served(tmp_path)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=200.0)
    assert node_of(plane, "default/second") == "cloud-a100-0"
    clock.run(until=900.0)  # nothing waits: after the 600 s window the HPA wants no node; a busy one is cordoned
    cloud = plane.fleet.pools["cloud-a100"]
    assert cloud.draining == ["cloud-a100-0"] and plane.bill.nodes["cloud-a100"] == 1
    plane.report_pod(plane.jobs["default/second"].pods[0].key, PodPhase.SUCCEEDED)
    assert cloud.nodes == [] and cloud.draining == [] and plane.bill.nodes["cloud-a100"] == 0
    assert "cloud-a100-0" not in plane.nodes


def test_a_spot_notice_cordons_the_node_the_hpa_replaces_it_and_its_jobs_restart_when_it_goes(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16"))
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")

    clock = SimClock()
    plane = serve_folder(tmp_path, clock, store)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=200.0)
    assert node_of(plane, "default/second") == "cloud-a100-0"
    with pytest.raises(NotFound, match="node idc-a100-0 is not a node of a served cloud pool"):
        plane.spot_notice("idc-a100-0")
    # aliyun's notice is 300 s: the instance goes at 500 s
    assert plane.spot_notice("cloud-a100-0") == 500.0
    assert plane.spot_notice("cloud-a100-0") == 500.0  # a second notice changes nothing
    second = plane.jobs["default/second"]
    assert second.events[-1] == (200.0, "spot interruption notice for cloud-a100-0: checkpoint now")
    view = next(n for n in plane.views.nodes_view() if n["name"] == "cloud-a100-0")
    assert (view["schedulable"], view["interrupted_at"]) == (False, 500.0)
    plane.stop()
    clock = SimClock(start=300.0)
    again = serve_folder(tmp_path, clock, store)  # a restart keeps the notice and its time
    assert again.notices == {"cloud-a100-0": 500.0}
    clock.run(until=499.0)  # the job runs on through the notice (its checkpoint is its own business)
    assert again.jobs["default/second"].phase is JobPhase.RUNNING and again.bill.nodes["cloud-a100"] == 1
    clock.run(until=501.0)  # the instance is gone: its pod evicted, the job restarted, waiting in burst-cloud
    second = again.jobs["default/second"]
    assert "cloud-a100-0" not in again.nodes and again.notices == {} and again.bill.nodes["cloud-a100"] == 0
    assert any("evicted: node cloud-a100-0 removed" in text for _, text in second.events)
    assert second.waiting and second.group.queue == "burst-cloud"
    clock.run(until=600.0)  # its wait makes the HPA ask for a new node, which joins after 60 s
    assert second.phase is JobPhase.RUNNING and node_of(again, "default/second") == "cloud-a100-1"
    again.stop()
    store.close()


def test_the_api_takes_a_spot_notice(tmp_path: Path) -> None:
    plane, clock = served(tmp_path)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=200.0)
    api = TestClient(create_app(plane))
    answer = api.post("/nodes/cloud-a100-0/interruption", json={"notice_seconds": 30})
    assert answer.status_code == 200 and answer.json() == {"node": "cloud-a100-0", "goes_at": 230.0}
    assert api.post("/nodes/idc-a100-0/interruption").status_code == 404
    assert api.post("/nodes/cloud-a100-0/interruption", json={"notice_seconds": -1}).status_code == 422


def test_jobs_may_ask_for_what_the_pools_offer_though_no_queue_names_it(tmp_path: Path) -> None:
    no_gpu_in_queues = FOLDER.replace('capability: {nvidia.com/gpu: "DEV_CAP"}', "").replace(
        ', capability: {nvidia.com/gpu: "16"}', ""
    )
    assert "capability" not in no_gpu_in_queues
    (tmp_path / "fleet.yaml").write_text(no_gpu_in_queues)
    clock = SimClock()
    plane = serve_folder(tmp_path, clock)
    assert plane.submit(job("first", queue="prod")) == ["default/first"]
    clock.run(until=0.5)
    assert node_of(plane, "default/first") == "idc-a100-0"


def test_serve_refuses_a_metric_it_cannot_supply_and_warns_of_a_selector_naming_no_queue(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(
        FOLDER.replace("DEV_CAP", "16").replace("name: volcano_queue_pending_jobs_duration_seconds", "name: qps")
    )
    with pytest.raises(ManifestErrors) as caught:
        serve_folder(tmp_path, SimClock())
    assert [e.field for e in caught.value.errors] == ["spec.metrics[0].external.metric.name"]
    (tmp_path / "fleet.yaml").write_text(
        FOLDER.replace("DEV_CAP", "16").replace("queue: hybrid-gpu-pool", "queue: nowhere")
    )
    (warning,) = served_fleet(load_manifests([str(tmp_path)]), None).warnings  # the loader's, made once there
    assert "HorizontalPodAutoscaler/cloud-burst-hpa field spec.metrics[0].external.metric.selector" in str(warning)
    clock = SimClock()
    plane = serve_folder(tmp_path, clock)
    assert plane.warnings == []  # the control plane no longer works them out again
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=300.0)
    (cloud,) = [p for p in plane.views.pools_view() if p["name"] == "cloud-a100"]
    active = cloud["hpa_status"]["conditions"][1]
    assert (active["reason"], cloud["billed_nodes"]) == ("FailedGetExternalMetric", 0)
    plane.stop()


def test_tidegate_serve_prints_a_simulation_folder_s_warnings_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's warnings of a simulation folder were dropped (a spot notice shorter than the job
    template's grace period) or worked out again by the control plane (an HPA's): each is printed once."""
    folder = tmp_path / "hybrid-idc"
    shutil.copytree(ROOT / "examples" / "hybrid-idc", folder)
    data = (ROOT / "examples" / "hybrid-idc" / "../../../shared/data").resolve()
    for manifest in folder.glob("*.yaml"):  # the public data it names, where it is
        manifest.write_text(manifest.read_text().replace("../../../shared/data", str(data)))
    template = folder / "job-template.yaml"
    template.write_text(
        template.read_text().replace("terminationGracePeriodSeconds: 120", "terminationGracePeriodSeconds: 300")
    )
    hpa = folder / "hpa.yaml"
    hpa.write_text(hpa.read_text().replace("queue: hybrid-gpu-pool", "queue: nowhere"))
    monkeypatch.setattr(GracefulServer, "run", lambda self, sockets=None: None)  # start, print, stop at once
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["serve", str(folder), "--store", "memory", "--port", "0"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    grace = [line for line in lines if "terminationGracePeriodSeconds 300 is longer than NodePool aws-p4d-spot" in line]
    selector = [line for line in lines if "HorizontalPodAutoscaler/cloud-burst-hpa field spec.metrics[0]" in line]
    assert len(grace) == 1 and len(selector) == 1, result.output
    assert all(line.startswith("warning: ") for line in grace + selector)
