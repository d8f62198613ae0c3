"""`tidegate sweep` end to end on a local Ray: each point's figures equal a direct `tidegate simulate` of
that point, a second run runs nothing new, a failing point is reported and the others kept, and a grid
file naming a field or metric that does not exist is an error naming it and what exists."""

from __future__ import annotations

import copy
import csv
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.model.errors import ManifestErrors
from tidegate.sweep.plan import plan
from tidegate.sweep.run import POINTS_DIR, run_sweep

ray = pytest.importorskip("ray")

FOLDER = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: pool}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1, parent: pool, capability: {nvidia.com/gpu: "32"}, deserved: {nvidia.com/gpu: "32"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {weight: 1, parent: pool, capability: {nvidia.com/gpu: "64"}}
---
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: s}
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}, {name: binpack}]
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc, region: here}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: cloud}
spec: {type: cloud, region: there, provider: aws, latencyMs: 2}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-a100}
spec: {cluster: idc, count: 4, gpu: {product: A100, count: 8, memoryMiB: 81920}, pricing: {model: owned}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: spot}
spec:
  cluster: cloud
  maxCount: 8
  provisioningDelaySeconds: 120
  gpu: {product: A100, count: 8, memoryMiB: 40960}
  pricing: {model: spot, perHour: 10, onDemandPerHour: 30, reservedMonthly: 9000}
  scaleTargetRef: {name: vk}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vk}
  minReplicas: 0
  maxReplicas: 8
  metrics:
  - type: External
    external:
      metric:
        name: volcano_queue_pending_jobs_duration_seconds
        selector: {matchLabels: {queue: pool}}
      target: {type: AverageValue, averageValue: "300"}
---
apiVersion: tidegate.io/v1alpha1
kind: Workload
metadata: {name: w}
spec:
  source: synthetic
  synthetic: {days: 1.5, jobsPerDay: 60, seed: 7, gpuCounts: {1: 0.4, 4: 0.3, 8: 0.3},
              durationMedianSeconds: 7200, durationSigma: 0.8}
  queues: [{name: dev, share: 1.0}]
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: burst}
spec: {quotas: elastic, burst: {enabled: true, queue: burst-cloud, afterSeconds: 600}}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: sim}
spec: {workload: w, scenarios: [burst]}
"""


def sweep_yaml(parameters: dict[str, Any], **spec: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "tidegate.io/v1alpha1",
            "kind": "Sweep",
            "metadata": {"name": "test"},
            "spec": {**spec, "parameters": parameters},
        },
        sort_keys=False,
    )


SIX = {
    "HorizontalPodAutoscaler/hpa.spec.maxReplicas": [1, 4, 8],
    "Scenario/burst.spec.burst.afterSeconds": [300, 1800],
}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One small local Ray for the module: 2 CPUs, no dashboard, a 200 MB object store; shut down after."""
    ray.init(
        num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=200 * 1024 * 1024, log_to_driver=False
    )
    yield
    ray.shutdown()


def write(tmp_path: Path, grid: str, folder: str = FOLDER) -> tuple[Path, Path]:
    sim = tmp_path / "sim"
    sim.mkdir(exist_ok=True)
    (sim / "folder.yaml").write_text(folder)
    (tmp_path / "grid.yaml").write_text(grid)
    return sim, tmp_path / "grid.yaml"


def edited(folder: str, kind: str, name: str, keys: list[str], value: Any) -> str:
    """The folder's YAML with one field set by hand (independently of the sweep's own patching)."""
    docs = list(yaml.safe_load_all(folder))
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            node = doc
            for key in keys[:-1]:
                node = node[key]
            node[keys[-1]] = copy.deepcopy(value)
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_six_points_on_ray_equal_direct_simulations(tmp_path: Path, local_ray: None) -> None:
    sim, grid = write(tmp_path, sweep_yaml(SIX, targets=["wait_p95<=900"]))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(sim), "--grid", str(grid), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "6 points: 6 ran, 0 found" in result.output
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and all(r["status"] == "ran" for r in rows)
    assert (out / "sweep.parquet").is_file() and (out / "sweep.html").is_file()
    assert (out / "front-wait_p95.png").is_file() and (out / "front-queued_gpu_hours.png").is_file()
    assert (out / "ray-logs").is_dir() is False  # Ray was the test's: its logs are its own
    assert "point 5 (" in (out / "sweep.log").read_text()
    points = {json.loads(p.read_text())["key"]: json.loads(p.read_text()) for p in (out / POINTS_DIR).glob("*.json")}
    assert len(points) == 6
    for row in rows:
        replicas_path, after_path = SIX
        replicas, after = int(row[replicas_path]), float(row[after_path])
        text = edited(FOLDER, "HorizontalPodAutoscaler", "hpa", ["spec", "maxReplicas"], replicas)
        text = edited(text, "Scenario", "burst", ["spec", "burst", "afterSeconds"], after)
        folder = tmp_path / f"point-{row['point']}"
        folder.mkdir()
        (folder / "folder.yaml").write_text(text)
        direct = CliRunner().invoke(app, ["simulate", str(folder), "--out", str(folder / "out"), "--workers", "1"])
        assert direct.exit_code == 0, direct.output
        expected = json.loads((folder / "out" / "summary.json").read_text())["runs"][0]
        assert points[row["key"]]["summary"] == expected
        assert float(row["wait_p95"]) == expected["wait_p95_s"]
        assert float(row["queued_gpu_hours"]) == expected["queued_gpu_hours"]
    # the points differ: the sweep patched what it said
    assert len({p["summary"]["placements_digest"] for p in points.values()}) > 1
    answer = json.loads((out / "sweep.json").read_text())["cheapest_meeting_targets"]
    meeting = [r for r in rows if float(r["wait_p95"]) <= 900]
    assert answer["monthly_cost"] == min(float(r["monthly_cost"]) for r in meeting)
    # the page: the answer's row marked, each point's front marks as the table's, nothing fetched from elsewhere
    page = (out / "sweep.html").read_text()
    marked = re.findall(r'<tr class="answer"><td>(\d+)</td>', page)
    assert marked == [str(answer["point"])] and "The cheapest point meeting wait_p95&lt;=900 is point" in page
    for r in rows:
        marks = re.search(
            rf"<tr(?: class=\"answer\")?><td>{r['point']}</td>.*?<td>([^<]*)</td><td>[^<]*</td></tr>", page
        )
        assert marks is not None
        expected_marks = [
            m for m, y in (("p95", "wait_p95"), ("GPU-h", "queued_gpu_hours")) if r[f"front_{y}"] == "True"
        ]
        assert marks.group(1).split() == expected_marks
    assert not re.search(r'(?:src|href)="(?!data:)', page)
    # --target replaces the grid's targets; run again on the same folder, every point is found, none runs
    least = min(float(r["queued_gpu_hours"]) for r in rows)
    again = CliRunner().invoke(
        app, ["sweep", str(sim), "--grid", str(grid), "--out", str(out), "--target", f"queued_gpu_hours<={least}"]
    )
    assert again.exit_code == 0, again.output
    assert "6 points: 0 ran, 6 found" in again.output
    written = json.loads((out / "sweep.json").read_text())
    assert written["targets"] == [f"queued_gpu_hours<={least:g}"]
    best = written["cheapest_meeting_targets"]
    fewest = [r for r in rows if float(r["queued_gpu_hours"]) == least]
    assert best["point"] == int(min(fewest, key=lambda r: (float(r["monthly_cost"]), float(r["wait_p95"])))["point"])


def test_a_second_run_runs_nothing_new(tmp_path: Path, local_ray: None) -> None:
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2, 4]}))
    out = tmp_path / "out"
    first = run_sweep(plan([str(sim)], str(grid)), out)
    assert (first.ran, first.resumed) == (2, 0)
    again = run_sweep(plan([str(sim)], str(grid)), out)
    assert (again.ran, again.resumed, again.failed) == (0, 2, 0)
    assert [o.summary for o in again.outcomes] == [o.summary for o in first.outcomes]
    # one more value: only the new point runs
    (tmp_path / "grid.yaml").write_text(sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2, 4, 6]}))
    more = run_sweep(plan([str(sim)], str(grid)), out)
    assert (more.ran, more.resumed) == (1, 2)


def test_failing_points_are_reported_and_the_others_kept(tmp_path: Path, local_ray: None) -> None:
    # 0.0001 jobs a day draws no job: the run itself fails (as `tidegate simulate` does); -1 fails validation
    parameters = {"Workload/w.spec.synthetic.jobsPerDay": [60, 0.0001, -1]}
    sim, grid = write(tmp_path, sweep_yaml(parameters))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(sim), "--grid", str(grid), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 points: 2 ran, 0 found" in result.output and "2 failed" in result.output
    with (out / "sweep.csv").open() as f:
        rows = {int(r["point"]): r for r in csv.DictReader(f)}
    assert rows[0]["status"] == "ran" and rows[0]["error"] == ""
    assert rows[1]["status"] == "failed" and "ValueError" in rows[1]["error"] and "no job to replay" in rows[1]["error"]
    assert rows[2]["status"] == "failed" and "Workload/w field spec.synthetic.jobsPerDay" in rows[2]["error"]
    assert "folder.yaml" in rows[2]["error"]
    assert "point 2 (" in result.output and "jobsPerDay" in result.output
    page = (out / "sweep.html").read_text()
    assert "Points that failed (2)" in page and "no job to replay" in page and "spec.synthetic.jobsPerDay" in page
    assert len(list((out / POINTS_DIR).glob("*.json"))) == 1  # only the point that ran is kept for a resume


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (
            {"NodePool/nope.spec.count": [1]},
            "no NodePool named as the path says; the folder's NodePool objects: idc-a100, spot",
        ),
        ({"Gadget/x.spec.count": [1]}, "the folder has no Gadget; its kinds: Cluster, HorizontalPodAutoscaler"),
        ({"NodePool/spot.spec.countt": [1]}, "NodePool/spot.spec has no field 'countt'; it has: cluster, count,"),
        (
            {"HorizontalPodAutoscaler/hpa.spec.maxReplica": [1]},
            "has no field 'maxReplica'; it has: maxReplicas, metrics",
        ),
        (
            {"Scenario/burst.spec.budget.perPeriodd": [1]},
            "Scenario/burst.spec.budget has no field 'perPeriodd'; it has: pe",
        ),
        (
            {"HorizontalPodAutoscaler/hpa.spec.metrics[3].type": ["x"]},
            "spec.metrics has 1 item(s): [3] is not one of them",
        ),
        ({"NodePool/spot.spec.count": {"min": 0, "max": 4}}, "a range in a grid needs a step"),
        ({"pair": {"NodePool/spot.spec.count": [1, 2], "NodePool/spot.spec.minCount": [0]}}, "as long as each other"),
    ],
)
def test_a_grid_naming_what_does_not_exist_is_an_error(
    tmp_path: Path, parameters: dict[str, Any], expected: str
) -> None:
    sim, grid = write(tmp_path, sweep_yaml(parameters))
    result = CliRunner().invoke(app, ["sweep", str(sim), "--grid", str(grid), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"{grid}: document 0: Sweep/test field spec.parameters[" in text
    assert expected in text
    assert "Traceback" not in result.output


def test_a_target_naming_an_unknown_metric_lists_the_known_ones(tmp_path: Path) -> None:
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2]}))
    args = ["sweep", str(sim), "--grid", str(grid), "--out", str(tmp_path / "out"), "--target", "wait_p99<=900"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "unknown metric 'wait_p99'" in text and "monthly_cost" in text and "wait_p95.dev" in text


def test_schema_fields_a_document_leaves_out_can_be_set(tmp_path: Path) -> None:
    budget = {"perPeriod": 100, "thresholds": [{"spentFraction": 1.0, "maxReplicas": 1}]}
    parameters = {
        "Scenario/burst.spec.budget": [None, budget],
        "Queue/burst-cloud.spec.capability[nvidia.com/gpu]": ["16"],
    }
    sim, grid = write(tmp_path, sweep_yaml(parameters))
    ready = plan([str(sim)], str(grid))
    assert [p.errors for p in ready.points] == [[], []]
    with_budget = ready.points[1].inp
    assert with_budget is not None and with_budget.scenarios["burst"].budget is not None
    assert with_budget.scenarios["burst"].budget.per_period == 100
    assert ready.points[0].inp is not None and ready.points[0].inp.scenarios["burst"].budget is None
    queue = next(q for q in with_budget.queues if q.name == "burst-cloud")
    assert queue.capability is not None and queue.capability.get("nvidia.com/gpu") == 16_000
    assert ready.points[0].key != ready.points[1].key


def test_the_base_folder_is_checked_as_simulate_checks_it(tmp_path: Path) -> None:
    broken = FOLDER.replace("count: 4, gpu", "count: -4, gpu")
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2]}), broken)
    with pytest.raises(ManifestErrors, match=r"NodePool/idc-a100 field spec\.count"):
        plan([str(sim)], str(grid))


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_point_runs(tmp_path: Path) -> None:
    """As `tidegate simulate` refuses it: one line naming --out, no traceback, and nothing run (it was a
    FileExistsError traceback from the folder's mkdir)."""
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2]}))
    (tmp_path / "file").write_text("not a folder\n")
    for out, message in (
        (tmp_path / "file", f"--out {tmp_path / 'file'}: a file, not a folder (the points and sweep.csv"),
        (tmp_path / "file" / "out", f"--out {tmp_path / 'file' / 'out'}: cannot make the folder: Not a directory"),
    ):
        result = CliRunner().invoke(app, ["sweep", str(sim), "--grid", str(grid), "--out", str(out)])
        assert result.exit_code == 1, result.output
        assert message in " ".join(result.stderr.split()), result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output and "points:" not in result.stderr  # no progress: nothing ran


HEAD = """
import logging, os, sys
import ray
ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, object_store_memory=200 * 1024 * 1024,
         logging_level=logging.ERROR, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the test closes it
ray.shutdown()
"""


def _sweep_command(sim: Path, grid: Path, out: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "tidegate.cli.main", "sweep", str(sim), "--grid", str(grid), "--out", str(out), *more]


def _environment(**more: str) -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **more}


def test_address_joins_an_existing_ray_cluster_and_says_what_it_needs_when_it_cannot(tmp_path: Path) -> None:
    """`--address` runs the points on a cluster someone else started (a separate process here, as `ray start`
    would be), and leaves it running. Ray's token authentication (on by default for clusters Ray starts since
    2.5x) is never enabled for an explicit address: without RAY_AUTH_MODE=token the join fails, in one line
    saying so, not a traceback."""
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2, 4]}))
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_environment(RAY_AUTH_MODE="token"),
    )
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        assert address, "the Ray head did not start"
        if importlib.util.find_spec("ray._private.authentication") is not None:  # Ray with token authentication
            refused = subprocess.run(
                _sweep_command(sim, grid, tmp_path / "refused", "--address", address),
                capture_output=True,
                text=True,
                timeout=300,
                env=_environment(RAY_AUTH_MODE="disabled"),
            )
            assert refused.returncode == 1, refused.stderr
            text = " ".join(refused.stderr.split())
            assert f"--address {address}: cannot join the Ray cluster: " in text
            assert "set RAY_AUTH_MODE=token" in text and "Traceback" not in text
        done = subprocess.run(
            _sweep_command(sim, grid, tmp_path / "out", "--address", address),
            capture_output=True,
            text=True,
            timeout=300,
            env=_environment(RAY_AUTH_MODE="token"),
        )
        assert done.returncode == 0, done.stderr
        assert "2 points: 2 ran, 0 found" in done.stdout
        assert not (tmp_path / "out" / "ray-logs").exists()  # the cluster is not the sweep's: its logs stay there
        assert head.poll() is None  # and it is left running
    finally:
        head.communicate("", timeout=60)


def test_an_address_where_no_ray_answers_is_one_line_at_once(tmp_path: Path) -> None:
    """Ray retries a GCS address where nothing listens for many minutes (the command seemed to hang): one
    connection tells, and the sweep stops with one line naming the address."""
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2]}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])  # closed: nothing listens there
    done = subprocess.run(
        _sweep_command(sim, grid, tmp_path / "out", "--address", f"127.0.0.1:{port}"),
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(),
    )
    assert done.returncode == 1
    text = " ".join(done.stderr.split())
    assert f"--address 127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port} (Connection refused)" in text
    assert "Traceback" not in text


def test_without_address_the_command_starts_a_local_ray_and_stops_it(tmp_path: Path) -> None:
    """No cluster to start by hand: the command's own local Ray (`--workers` CPUs) runs the points, and its
    logs are copied out when it stops (the other tests here run on the module's Ray, which the command uses)."""
    sim, grid = write(tmp_path, sweep_yaml({"HorizontalPodAutoscaler/hpa.spec.maxReplicas": [2, 4]}))
    out = tmp_path / "out"
    done = subprocess.run(
        _sweep_command(sim, grid, out, "--workers", "1"),
        capture_output=True,
        text=True,
        timeout=300,
        env=_environment(),
    )
    assert done.returncode == 0, done.stderr
    assert "2 points: 2 ran, 0 found" in done.stdout and "Traceback" not in done.stderr
    assert (out / "ray-logs").is_dir() and len(list((out / POINTS_DIR).glob("*.json"))) == 2
