"""Tiresias job traces: gangs split over 8-GPU servers (or a simulation folder's), CPU and memory per GPU,
malformed rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_builders import write_elastic_sim
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.sim.loader import load_simulation
from tidegate.sim.workload import trace_jobs
from tidegate.traces import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_MEMORY_MIB_PER_GPU,
    TraceError,
    TraceJob,
    read_tiresias,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tiresias"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared trace data not found at {DATA}")

HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_jobs_become_whole_card_gangs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n2,16,53,10,resnet50,500,1\n3,12,60,1,bert,7.5,0\n",
    )
    jobs = read_tiresias(path)
    assert [(job.pods, job.gpus_per_pod) for job in jobs] == [(1, 1), (1, 8), (2, 8), (2, 6)]
    assert all(job.gpu_milli == 1000 for job in jobs)
    first = jobs[0]
    assert first == TraceJob(
        job_id="0",
        user="",
        queue="",
        gpus_per_pod=1,
        gpu_milli=1000,
        pods=1,
        cpu_milli=DEFAULT_CPU_MILLI_PER_GPU,
        memory_mib=DEFAULT_MEMORY_MIB_PER_GPU,
        submit_s=0.0,
        duration_s=164.0,
        model_name="vgg19",
    )
    assert jobs[2].total_gpu_milli == 16000
    assert jobs[2].cpu_milli == 8 * DEFAULT_CPU_MILLI_PER_GPU
    assert (jobs[3].submit_s, jobs[3].duration_s) == (60.0, 7.5)


def test_server_size_and_per_gpu_resources_are_parameters(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "0,8,0,1,vgg19,10,0\n")
    (job,) = read_tiresias(path, gpus_per_node=4, cpu_milli_per_gpu=2000, memory_mib_per_gpu=1024)
    assert (job.pods, job.gpus_per_pod, job.cpu_milli, job.memory_mib) == (2, 4, 8000, 4096)


def test_only_the_needed_columns_are_required(tmp_path: Path) -> None:
    path = write(tmp_path, "duration,job_id,submit_time,num_gpu\n30,a,5,2\n")
    (job,) = read_tiresias(path)
    assert (job.job_id, job.gpus_per_pod, job.submit_s, job.duration_s, job.model_name) == ("a", 2, 5.0, 30.0, "")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("1,0,0,1,vgg,10,0", "num_gpu: 0 is below 1"),
        ("1,x,0,1,vgg,10,0", "num_gpu: 'x' is not an integer"),
        ("1,1,0,1,vgg,-10,0", "duration: -10 is negative"),
        ("1,1,soon,1,vgg,10,0", "submit_time: 'soon' is not a number"),
        ("1,1,0,1,vgg,10", "expected 7 columns, got 6"),
        ("0,1,0,1,vgg,10,0", "job_id: duplicate '0'"),
        ("1,1,nan,1,vgg,10,0", "submit_time: 'nan' is not a finite number"),
        ("1,1099511627776,0,1,vgg,10,0", "num_gpu: 1099511627776 is above the maximum 80,000"),
        ("1,1,1e308,1,vgg,10,0", r"submit_time: 1e\+308 is above the maximum 3.15576e\+09 \(100 years in seconds\)"),
        ("1,1,0,1,vgg,1e308,0", r"duration: 1e\+308 is above the maximum"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, HEADER + "0,1,0,1,vgg,10,0\n" + row + "\n", name="60_job.csv")
    with pytest.raises(TraceError, match=message) as info:
        read_tiresias(path)
    assert str(info.value).startswith("60_job.csv:3: ")


def test_missing_column(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"jobs.csv:1: missing column\(s\) duration"):
        read_tiresias(write(tmp_path, "job_id,num_gpu,submit_time\n0,1,0\n"))


@needs_data
def test_real_60_job_trace() -> None:
    jobs = read_tiresias(DATA / "60_job.csv")
    assert len(jobs) == 60
    gpus: dict[int, int] = {}
    for job in jobs:
        total = job.pods * job.gpus_per_pod
        gpus[total] = gpus.get(total, 0) + 1
    assert gpus == {1: 30, 2: 10, 4: 10, 8: 10}
    assert all(job.pods == 1 for job in jobs)
    submits = [job.submit_s for job in jobs]
    assert submits == sorted(submits)
    assert (jobs[0].job_id, jobs[0].model_name, jobs[0].duration_s) == ("0", "vgg19", 164.0)
    assert (jobs[-1].job_id, jobs[-1].submit_s, jobs[-1].duration_s) == ("59", 1779.0, 122.0)
    assert max(job.duration_s for job in jobs) == 1800.0


# --- the Tiresias reader's servers ------------------------------------------------------------------

TIRESIAS_FOLDER = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-t4}
spec: {cluster: idc, count: 4, gpu: {product: T4, count: 4, memoryMiB: 15360}, cpu: "64", memory: 256Gi}
---
apiVersion: tidegate.io/v1alpha1
kind: Workload
metadata: {name: w}
spec: {source: tiresias, path: jobs.csv, defaultQueue: dev%s}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: idc}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [idc]}
"""


def tiresias_folder(tmp_path: Path, workload: str = "") -> Path:
    """4 nodes of 4 GPUs and a Tiresias trace of 1, 4, 8 and 16-GPU jobs."""
    folder = tmp_path / "tiresias"
    folder.mkdir(parents=True)
    (folder / "sim.yaml").write_text(TIRESIAS_FOLDER % workload)
    (folder / "jobs.csv").write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,0,1,vgg19,600,0\n1,4,10,1,resnet50,600,0\n2,8,20,1,bert,600,0\n3,16,30,1,gpt2,600,0\n"
    )
    return folder


def test_a_tiresias_trace_is_cut_into_pods_of_the_idc_s_servers(tmp_path: Path) -> None:
    """On 4-GPU servers an 8-GPU job is 2 pods of 4 (it was one pod of 8 that no node could take)."""
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", str(tiresias_folder(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    (run,) = json.loads((out / "summary.json").read_text())["runs"]
    assert (run["jobs_submitted"], run["jobs_completed"], run["jobs_unfinished"]) == (4, 4, 0)
    assert run["warnings"] == []


def test_a_workload_s_gpus_per_node_wins_over_the_idc_s(tmp_path: Path) -> None:
    default = load_simulation([str(tiresias_folder(tmp_path / "a"))]).workloads["w"]
    assert default.gpus_per_node == 4
    assert [(job.pods, job.gpus_per_pod) for job in trace_jobs(default)] == [(1, 1), (1, 4), (2, 4), (4, 4)]
    explicit = load_simulation([str(tiresias_folder(tmp_path / "b", ", gpusPerNode: 2"))]).workloads["w"]
    assert [(job.pods, job.gpus_per_pod) for job in trace_jobs(explicit)] == [(1, 1), (2, 2), (4, 2), (8, 2)]


def test_a_synthetic_job_larger_than_a_vcjob_of_the_idc_s_servers_is_an_error(tmp_path: Path) -> None:
    folder = write_elastic_sim(tmp_path / "sim")
    text = (folder / "all.yaml").read_text().replace("gpuCounts: {1: 0.3,", "gpuCounts: {20000: 0.1, 1: 0.3,")
    (folder / "all.yaml").write_text(text.replace("  source: synthetic\n", "  source: synthetic\n  gpusPerNode: 1\n"))
    result = runner.invoke(app, ["simulate", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "Workload/w field spec.synthetic.gpuCounts: 20,000 GPUs: a job has at most 10,000" in result.output
