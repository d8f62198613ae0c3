"""The HPA's metric types end to end: what a cloud pool's HPA reads in a simulation folder (Resource and Pods
metrics of the pool's virtual nodes, Object metrics of Volcano Queues), what the folder's loader refuses
or warns of, and the conditions the HPA reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_builders import QUEUES, write_sim
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.model.errors import ManifestErrors
from tidegate.sim.loader import load_simulation
from tidegate.sim.run import RunResult, run_simulation

# a (8 GPUs, 1000 s) fills the IDC's node from 0 s; b (8 GPUs, 100 s) overflows to burst-cloud at once.
TWO_JOBS = "a,u,vc1,8,8,1,COMPLETED,0,0,1000,1000,0\nb,u,vc1,8,8,1,COMPLETED,0,0,100,100,0\n"
PENDING = """  - type: External
    external:
      metric:
        name: volcano_queue_pending_jobs_duration_seconds
        selector: {matchLabels: {queue: pool}}
      target: {type: AverageValue, averageValue: "300"}
"""
GPU_HALF = """  - type: Resource
    resource:
      name: nvidia.com/gpu
      target: {type: Utilization, averageUtilization: 50}
"""


def folder_with(tmp_path: Path, metrics: str, *, replace: tuple[tuple[str, str], ...] = ()) -> Path:
    """write_sim's folder with the HPA's metrics replaced (and any other text replaced)."""
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["burst"])
    base = (folder / "base.yaml").read_text()
    assert PENDING in base
    base = base.replace(PENDING, metrics)
    for old, new in replace:
        assert old in base
        base = base.replace(old, new)
    (folder / "base.yaml").write_text(base)
    return folder


def burst(folder: Path) -> RunResult:
    (result,) = run_simulation(load_simulation([str(folder)]))
    return result


def fields_of(caught: pytest.ExceptionInfo[ManifestErrors]) -> dict[str, str]:
    return {e.field: e.message for e in caught.value.errors if e.kind == "HorizontalPodAutoscaler"}


def test_simulate_with_a_gpu_utilization_metric_keeps_the_pool_half_allocated(tmp_path: Path) -> None:
    """External pending seconds and Resource nvidia.com/gpu at 50%: the largest proposal wins. b waits from 0
    s; at 15 s its 15 s of waiting ask for ceil(15 / 300) = 1 node (the Resource metric has no pods yet: it
    fails, the External one scales up). b runs on that node from 75 s: 8 of its 8 GPUs allocated is 100%,
    twice the target, so that sync (after the cycle that placed b) asks for ceil(2 x 1) = 2 nodes, though
    nothing waits any more (the External metric proposes 0). With pending seconds alone: one node at most."""
    folder = folder_with(tmp_path, PENDING + GPU_HALF)
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["simulate", str(folder), "--out", str(out), "--workers", "1"])
    assert done.exit_code == 0, done.output
    (summary,) = json.loads((out / "summary.json").read_text())["runs"]
    assert summary["cloud_peak_nodes"] == 2
    report = (out / "report.html").read_text()
    assert "cloud-a100: 1 -&gt; 2 nodes (DesiredWithinRange)" in report
    assert "nvidia.com/gpu resource utilization (percentage of request)" in report  # the HPA's status
    assert "ScalingActive True ValidMetricFound" in report

    result = burst(folder_with(tmp_path / "again", PENDING + GPU_HALF))
    scaled = [(t, text) for t, text in result.simulation.events if text.startswith("cloud-a100: 1 -> 2")]
    assert [t for t, _ in scaled] == [75.0]
    (hpa,) = result.simulation.hpas
    assert (hpa["name"], hpa["pool"], hpa["currentReplicas"]) == ("cloud-burst-hpa", "cloud-a100", 0)
    pending_only = burst(folder_with(tmp_path / "pending", PENDING))
    assert pending_only.summary["cloud_peak_nodes"] == 1


def test_pods_and_queue_object_metrics_read_the_pool_and_the_queues(tmp_path: Path) -> None:
    """Object tidegate_queue_jobs{phase: waiting} of burst-cloud at value 1 (one waiting job is one node's
    worth) and Pods tidegate_node_jobs at 1 job per node: b waits in burst-cloud from 0 s, so the first sync
    (0 s, the pool at 0) proposes ceil(1 / 1) = 1 node; once b runs there, 1 job on 1 node keeps it."""
    metrics = """  - type: Object
    object:
      describedObject: {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, name: burst-cloud}
      metric: {name: tidegate_queue_jobs, selector: {matchLabels: {phase: waiting}}}
      target: {type: Value, value: "1"}
  - type: Pods
    pods:
      metric: {name: tidegate_node_jobs}
      target: {type: AverageValue, averageValue: "1"}
"""
    result = burst(folder_with(tmp_path, metrics))
    b = next(job for job in result.simulation.jobs if job.name == "b")
    assert b.queue == "burst-cloud" and b.started == 60.0  # asked at 0 s, joined after its 60 s delay
    assert result.summary["cloud_peak_nodes"] == 1
    (hpa,) = result.simulation.hpas
    assert [m["metric"] for m in hpa["currentMetrics"]] == [
        "Queue metric tidegate_queue_jobs",
        "pods metric tidegate_node_jobs",
    ]


def test_what_tidegate_cannot_supply_is_an_error_naming_the_file_the_hpa_and_the_field(tmp_path: Path) -> None:
    metrics = """  - type: External
    external:
      metric: {name: queue_messages_ready}
      target: {type: AverageValue, averageValue: "30"}
  - type: Object
    object:
      describedObject: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: main}
      metric: {name: requests-per-second}
      target: {type: Value, value: 2k}
  - type: Object
    object:
      describedObject: {kind: Queue, name: dev}
      metric: {name: tidegate_queue_jobs, selector: {matchLabels: {phase: Pending}}}
      target: {type: Value, value: "1"}
  - type: Pods
    pods:
      metric: {name: packets-per-second}
      target: {type: AverageValue, averageValue: 1k}
  - type: Resource
    resource:
      name: ephemeral-storage
      target: {type: Utilization, averageUtilization: 50}
  - type: ContainerResource
    containerResource:
      name: cpu
      container: application
      target: {type: Utilization, averageUtilization: 60}
"""
    with pytest.raises(ManifestErrors) as caught:
        load_simulation([str(folder_with(tmp_path, metrics))])
    fields = fields_of(caught)
    assert set(fields) == {
        "spec.metrics[0].external.metric.name",
        "spec.metrics[1].object.describedObject",
        "spec.metrics[2].object.metric.selector",
        "spec.metrics[3].pods.metric.name",
        "spec.metrics[4].resource.name",
        "spec.metrics[5].containerResource.container",
    }
    assert "supplies volcano_queue_pending_jobs_duration_seconds" in fields["spec.metrics[0].external.metric.name"]
    assert "Volcano Queues only" in fields["spec.metrics[1].object.describedObject"]
    assert "NodePool cloud-a100's nodes offer no ephemeral-storage" in fields["spec.metrics[4].resource.name"]
    assert "one container, virtual-kubelet" in fields["spec.metrics[5].containerResource.container"]
    first = str(next(e for e in caught.value.errors if e.kind == "HorizontalPodAutoscaler"))
    assert (
        first.startswith(f"{tmp_path / 'sim' / 'base.yaml'}: document ")
        and "HorizontalPodAutoscaler/cloud-burst-hpa" in first
    )


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (
            "name: virtual-kubelet-cloud}\n  minReplicas",
            "name: elsewhere}\n  minReplicas",
            "spec.scaleTargetRef.name",
            "no NodePool",
        ),
        (
            "kind: Deployment, name: virtual-kubelet-cloud}\n  min",
            "kind: StatefulSet, name: virtual-kubelet-cloud}\n  min",
            "spec.scaleTargetRef.kind",
            "scaled through Deployment/virtual-kubelet-cloud",
        ),
        (
            "{apiVersion: apps/v1, kind: Deployment, name: virtual-kubelet-cloud}\n  min",
            "{apiVersion: v1, kind: Deployment, name: virtual-kubelet-cloud}\n  min",
            "spec.scaleTargetRef.apiVersion",
            "API group apps",
        ),
    ],
)
def test_a_scale_target_that_names_no_pool_is_an_error(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    with pytest.raises(ManifestErrors) as caught:
        load_simulation([str(folder_with(tmp_path, PENDING, replace=((old, new),)))])
    fields = fields_of(caught)
    assert list(fields) == [field] and message in fields[field]


def test_a_selector_that_names_no_queue_loads_with_a_warning_and_the_hpa_reports_it(tmp_path: Path) -> None:
    """Kubernetes accepts an External metric whose selector matches no series and reports it every sync; so
    does tidegate: a warning when the folder loads, and ScalingActive False FailedGetExternalMetric (the pool
    never scales, and the condition is a scaling event)."""
    folder = folder_with(tmp_path, PENDING.replace("queue: pool", "queue: poool"))
    inp = load_simulation([str(folder)])
    (warning,) = [w for w in inp.warnings if w.kind == "HorizontalPodAutoscaler"]
    assert warning.field == "spec.metrics[0].external.metric.selector"
    assert "matches no queue" in warning.message and "FailedGetExternalMetric" in warning.message
    (result,) = run_simulation(inp)
    assert result.summary["cloud_peak_nodes"] == 0
    reported = [text for _, text in result.simulation.events if ": HPA " in text]
    assert reported == [
        "cloud-a100: HPA cloud-burst-hpa ScalingActive False FailedGetExternalMetric: the HPA was unable to compute "
        "the replica count: unable to get external metric default/volcano_queue_pending_jobs_duration_seconds/"
        "&LabelSelector{MatchLabels:map[string]string{queue: poool,},MatchExpressions:[]LabelSelectorRequirement{},}: "
        "no metrics returned from external metrics API"
    ]
    (hpa,) = result.simulation.hpas
    assert [(c["type"], c["status"], c["reason"]) for c in hpa["conditions"]] == [
        ("AbleToScale", "True", "SucceededGetScale"),
        ("ScalingActive", "False", "FailedGetExternalMetric"),
    ]


def test_two_hpas_on_one_pool_warn_and_neither_scales(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["burst"])
    hpa = QUEUES[
        QUEUES.index("apiVersion: autoscaling/v2") : QUEUES.index(
            "---\napiVersion: tidegate.io/v1alpha1\nkind: Scenario"
        )
    ]
    (folder / "second.yaml").write_text(hpa.replace("name: cloud-burst-hpa", "name: second-hpa"))
    inp = load_simulation([str(folder)])
    shared = [w for w in inp.warnings if w.field == "spec.scaleTargetRef"]
    assert [w.name for w in shared] == ["cloud-burst-hpa", "second-hpa"]
    assert "AmbiguousSelector" in shared[0].message
    (result,) = run_simulation(inp)
    assert result.summary["cloud_peak_nodes"] == 0
    assert {h["conditions"][1]["reason"] for h in result.simulation.hpas} == {"AmbiguousSelector"}
    assert result.simulation.hpas[0]["conditions"][1]["message"] == (
        "pods by selector tidegate.io/pool=cloud-a100 are controlled by multiple HPAs: "
        "[default/cloud-burst-hpa default/second-hpa]"
    )
