"""The `tidegate` command through its real entry point (typer's runner)."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from sim_builders import write_sim
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.server.app import GracefulServer

SEED = str(Path(__file__).resolve().parents[1] / "examples" / "seed")
runner = CliRunner()

CLUSTER = """
apiVersion: v1
kind: Node
metadata:
  name: idc-0
  labels: {volcano.sh/node-type: idc}
status:
  allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "2", pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: cloud-0
  labels: {volcano.sh/node-type: cloud-spot}
spec:
  taints: [{key: cloud.provider, value: aliyun, effect: NoSchedule}]
status:
  allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8", pods: "110"}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1}
"""

GANG = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  queue: dev
  minAvailable: 4
  tasks:
  - name: worker
    replicas: 4
    template:
      spec:
        containers:
        - name: main
          resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}
"""


def test_schedule_seed_json_has_the_documented_shape() -> None:
    result = runner.invoke(app, ["schedule", "-f", SEED, "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["bindings"], "the seed's jobs fit on its IDC nodes"
    for binding in doc["bindings"]:
        assert set(binding) == {"pod", "node", "gpu_index"}
        assert binding["node"].startswith("idc-"), "preferred-local affinity keeps the seed's pods on the IDC"
    assert doc["pending"] == []


def test_schedule_reports_an_untolerated_taint_as_the_pending_reason(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "job.yaml").write_text(GANG)
    result = runner.invoke(app, ["schedule", "-f", str(tmp_path), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["bindings"] == []
    (pending,) = doc["pending"]
    assert pending["job"] == "default/train"
    assert "gang: 2/4 pods fit" in pending["reason"]
    assert "1 untolerated taint cloud.provider=aliyun:NoSchedule" in pending["reason"]
    assert "1 insufficient nvidia.com/gpu" in pending["reason"]


def test_schedule_reads_stdin_and_prints_yaml(tmp_path: Path) -> None:
    result = runner.invoke(app, ["schedule", "-f", "-", "-o", "yaml"], input=CLUSTER + "---" + GANG.replace("4", "2"))
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert [b["node"] for b in doc["bindings"]] == ["idc-0", "idc-0"]


def test_schedule_table_output_lists_placements() -> None:
    result = runner.invoke(app, ["schedule", "-f", SEED])
    assert result.exit_code == 0, result.output
    assert "Placements" in result.stdout and "Pending jobs (0)" in result.stdout


def test_validate_accepts_the_seed() -> None:
    result = runner.invoke(app, ["validate", "-f", SEED])
    assert result.exit_code == 0, result.output
    assert "valid:" in result.stdout
    assert "skipped Deployment/" in result.stderr


def test_validate_lists_every_error_with_file_document_object_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: 0}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  queue: nowhere
  minAvailable: 3
  tasks:
  - {name: a, replicas: 1, template: {spec: {containers: [{name: c}]}}}
  - {name: a, replicas: 1, template: {spec: {containers: [{name: c}]}}}
"""
    )
    result = runner.invoke(app, ["validate", "-f", str(bad)])
    assert result.exit_code == 1
    err = result.stderr
    assert f"{bad}: document 0: Queue/q field spec.weight" in err
    assert f"{bad}: document 1: Job/j field spec.minAvailable" in err
    assert f"{bad}: document 1: Job/j field spec.tasks[1].name" in err
    assert "nowhere" in err
    assert "error(s)" in err


def test_schedule_refuses_invalid_manifests(tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {capability: {cpu: lots}}\n"
    )
    result = runner.invoke(app, ["schedule", "-f", str(tmp_path)])
    assert result.exit_code == 1
    assert "spec.capability[cpu]" in result.stderr


def _gpu_pod(name: str, mib: int, node: str = "", card: str = "", nominated: str = "") -> str:
    annotations = f"annotations: {{volcano.sh/gpu-index: '{card}'}}" if card else "annotations: {}"
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, {annotations}}}
spec:
  nodeName: '{node}'
  containers: [{{name: main, resources: {{requests: {{cpu: "1", volcano.sh/gpu-memory: "{mib}"}}}}}}]
status: {{phase: {"Running" if node else "Pending"}, nominatedNodeName: '{nominated}'}}
"""


def test_schedule_keeps_the_card_held_for_a_nominated_gpu_slice() -> None:
    # Three 80 GiB cards, each half used; `nominee` (a whole card's memory) was pipelined to card 0, whose
    # last victim is still leaving. `slice` fits the node's memory count and half of any card, but not card
    # 0's: the nominee's annotation holds it, and the output says so.
    node = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "32", memory: 256Gi, volcano.sh/gpu-memory: "245760", volcano.sh/gpu-number: "3", pods: "110"}
"""
    pods = [
        _gpu_pod("victim", 40960, node="n1", card="0"),
        _gpu_pod("other-1", 40960, node="n1", card="1"),
        _gpu_pod("other-2", 40960, node="n1", card="2"),
        _gpu_pod("nominee", 81920, card="0", nominated="n1"),
        _gpu_pod("slice", 40960),
    ]
    result = runner.invoke(app, ["schedule", "-f", "-", "-o", "json"], input="---".join([node, *pods]))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["pipelined"] == [{"pod": "default/nominee", "node": "n1", "gpu_index": "0"}]
    (binding,) = doc["bindings"]
    assert binding["pod"] == "default/slice" and binding["gpu_index"] in ("1", "2")


def test_kube_refuses_a_config_file_it_cannot_use_before_touching_a_cluster(tmp_path: Path) -> None:
    bad = tmp_path / "scheduler.yaml"
    bad.write_text("apiVersion: tidegate.io/v1alpha1\nkind: SchedulerConfiguration\nmetadata: {name: x}\nactions: 7\n")
    result = runner.invoke(app, ["kube", "--kubeconfig", str(tmp_path / "none"), "--config", str(bad)])
    assert result.exit_code == 1 and "scheduler.yaml" in result.output and "actions" in result.output
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    result = runner.invoke(app, ["kube", "--kubeconfig", str(tmp_path / "none"), "--config", str(nodes)])
    assert result.exit_code == 1 and "no SchedulerConfiguration in it" in result.output


def test_version_is_the_installed_package_s() -> None:
    for option in ("--version", "-V"):
        result = runner.invoke(app, [option])
        assert result.exit_code == 0 and result.stdout == f"tidegate {version('tidegate')}\n"


def _small_simulation(folder: Path) -> Path:
    return write_sim(folder, "a,u,vc1,1,4,1,COMPLETED,0,0,60,60,0\n", ["idc-only"])


def test_simulate_names_the_simulations_there_are_for_an_unknown_name(tmp_path: Path) -> None:
    folder = _small_simulation(tmp_path / "sim")
    result = runner.invoke(app, ["simulate", str(folder), "--name", "ghost", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "no Simulation 'ghost'; the manifests have s" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written


def test_simulate_refuses_an_out_folder_it_cannot_write_before_running(tmp_path: Path) -> None:
    folder = _small_simulation(tmp_path / "sim")
    (tmp_path / "file").write_text("not a folder\n")
    for out, message in (
        (tmp_path / "file", f"--out {tmp_path / 'file'}: a file, not a folder"),
        (tmp_path / "file" / "out", f"--out {tmp_path / 'file' / 'out'}: cannot make the folder: Not a directory"),
    ):
        result = runner.invoke(app, ["simulate", str(folder), "--out", str(out), "--workers", "1"])
        assert result.exit_code == 1, result.output
        assert message in result.stderr and "scenario idc-only" not in result.stderr  # no progress: nothing ran


def test_simulate_and_serve_take_their_manifests_with_f_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _small_simulation(tmp_path / "sim")
    result = runner.invoke(app, ["simulate", "-f", str(folder), "--out", str(tmp_path / "out"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())
    served: list[object] = []
    monkeypatch.setattr(GracefulServer, "run", lambda server: served.append(server.config))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["serve", "-f", "-", "--store", "memory"], input=CLUSTER)
    assert result.exit_code == 0, result.output
    assert "tidegate: 2 nodes, 1 queues" in result.stdout and served
    result = runner.invoke(app, ["serve", "--store", "memory"])
    assert result.exit_code == 2 and "no manifests" in result.output


def test_simulate_reads_a_simulation_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _small_simulation(tmp_path / "sim")
    monkeypatch.chdir(folder)  # the workload's jobs.csv, relative to "-": the current folder
    text = "---\n".join(path.read_text() for path in sorted(folder.glob("*.yaml")))
    result = runner.invoke(app, ["simulate", "-f", "-", "--out", str(tmp_path / "out"), "--workers", "1"], input=text)
    assert result.exit_code == 0, result.output
    assert "idc-only" in result.stdout
