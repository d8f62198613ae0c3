"""The ATC'23 GPU-sharing experiment: sampling, accounting, the protocol, results.csv and the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.experiments.fragmentation import (
    RESULT_COLUMNS,
    RunResult,
    margins,
    parse_policies,
    parse_seeds,
    run_policy,
    sample_arrivals,
    summary,
    summary_points,
    write_results,
)
from tidegate.model.objects import Node
from tidegate.scheduler.plugins.gpu_placement import POLICIES
from tidegate.traces import openb_nodes_to_k8s, read_openb_nodes, read_openb_pods_arrays
from tidegate.traces.openb import OpenbPodArrays

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-openb"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared trace data not found at {DATA}")

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
runner = CliRunner()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def cluster(tmp_path: Path, rows: str) -> list[Node]:
    return openb_nodes_to_k8s(read_openb_nodes(write(tmp_path, "nodes.csv", NODE_HEADER + rows)))


def pod_list(tmp_path: Path, rows: str) -> OpenbPodArrays:
    return read_openb_pods_arrays(write(tmp_path, "pods.csv", POD_HEADER + rows))


# -- sampling ---------------------------------------------------------------------------------------------------


def test_arrivals_stop_once_the_asked_gpus_reach_the_target(tmp_path: Path) -> None:
    pods = pod_list(tmp_path, "a,1000,1024,1,500\nb,1000,1024,2,1000\nc,1000,1024,0,0\n")
    asks = pods.gpu_milli_per_pod  # 500, 2000, 0
    for seed in range(20):
        rows = sample_arrivals(pods, capacity_milli=10_000, until_pct=130, seed=seed)
        total = asks[rows].cumsum()
        assert total[-1] >= 13_000 > total[-2]  # the last arrival is the one that reaches 130%
        assert set(rows.tolist()) <= {0, 1, 2}
    assert len(sample_arrivals(pods, 10_000, 0, seed=1)) == 0


def test_arrivals_are_deterministic_by_seed(tmp_path: Path) -> None:
    pods = pod_list(tmp_path, "".join(f"p{i},1000,1024,1,{100 * (i + 1)}\n" for i in range(9)))
    first, again = sample_arrivals(pods, 50_000, 130, seed=42), sample_arrivals(pods, 50_000, 130, seed=42)
    assert first.tolist() == again.tolist()
    assert first.tolist() != sample_arrivals(pods, 50_000, 130, seed=43).tolist()


def test_a_pod_list_without_gpus_cannot_reach_the_target(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="asks for no GPU"):
        sample_arrivals(pod_list(tmp_path, "c,1000,1024,0,0\n"), 1000, 10, seed=0)


# -- accounting: a worked example -------------------------------------------------------------------------------


def test_allocation_and_fragmentation_worked_example(tmp_path: Path) -> None:
    # One node with two cards; the pod list has one pod, a 600-thousandths slice, so every arrival is it.
    # Capacity 2 x 1000 = 2000 milli-GPU; until 60% = 1200: two arrivals (600 = 30%, then 1200 = 60%).
    nodes = cluster(tmp_path, "n,8000,65536,2,T4\n")
    pods = pod_list(tmp_path, "s,1000,1024,1,600\n")
    result = run_policy(nodes, pods, "first-fit", seed=7, until=60)
    assert result.arrivals == 2 and result.placed == 2
    assert result.arrived_pct.tolist() == list(range(61))
    # 0%: empty; both cards can take a 600 slice: nothing fragmented.
    assert (result.alloc_pct[0], result.frag_pct[0]) == (0.0, 0.0)
    # 1..30%: the state after the first arrival (it brought the asked GPUs to 30%): card 0 has 600 in use.
    # Allocated 600 / 2000 = 30%. Card 0's 400 left cannot take a 600 slice: fragmented 400 / 2000 = 20%.
    assert result.alloc_pct[1:31].tolist() == [30.0] * 30
    assert result.frag_pct[1:31].tolist() == [20.0] * 30
    # 31..60%: after the second arrival (card 0 has no room for 600, so card 1): 1200 / 2000 = 60% allocated;
    # 400 left on each card, none usable by the mix: 800 / 2000 = 40% fragmented.
    assert result.alloc_pct[31:].tolist() == [60.0] * 30
    assert result.frag_pct[31:].tolist() == [40.0] * 30


def test_fragmentation_weights_the_pod_lists_shapes_by_count(tmp_path: Path) -> None:
    # Shapes: three 600 slices and one whole card (1 CPU each): C = 4. With card 0 holding a 600 slice
    # (400 left): the slices cannot use card 0's 400; the whole card can use card 1 but not card 0's 400:
    # every shape finds 400 fragmented -> 400 of 2000 = 20%.
    nodes = cluster(tmp_path, "n,8000,65536,2,T4\n")
    pods = pod_list(tmp_path, "a,1000,1024,1,600\nb,1000,1024,1,600\nc,1000,1024,1,600\nw,1000,1024,1,1000\n")
    result = run_policy(nodes, pods, "first-fit", seed=0, until=30)
    first = int(np.flatnonzero(result.alloc_pct)[0])
    if result.alloc_pct[first] == 30.0:  # the first arrival was a slice
        assert result.frag_pct[first] == 20.0
    else:  # a whole card: card 1 left untouched, usable by every shape
        assert (result.alloc_pct[first], result.frag_pct[first]) == (50.0, 0.0)


# -- the protocol ---------------------------------------------------------------------------------------------

SMALL_NODES = "n0,16000,65536,2,T4\nn1,32000,131072,4,T4\nn2,64000,262144,8,G2\nn3,8000,32768,1,T4\n"
SMALL_PODS = (
    "a,2000,4096,1,1000\nb,4000,8192,1,500\nc,1000,2048,1,250\nd,8000,16384,2,1000\n"
    "e,1000,1024,0,0\nf,6000,8192,1,810\ng,2000,2048,1,160\nh,16000,32768,4,1000\n"
)


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_runs_the_protocol_deterministically(tmp_path: Path, policy: str) -> None:
    nodes, pods = cluster(tmp_path, SMALL_NODES), pod_list(tmp_path, SMALL_PODS)
    result = run_policy(nodes, pods, policy, seed=3, until=130)
    again = run_policy(nodes, pods, policy, seed=3, until=130)
    assert result.alloc_pct.tolist() == again.alloc_pct.tolist()
    assert result.frag_pct.tolist() == again.frag_pct.tolist()
    assert result.arrived_pct.tolist() == list(range(131))
    alloc = result.alloc_pct
    assert (np.diff(alloc) >= 0).all()  # no departures
    assert (alloc <= np.minimum(result.arrived_pct + 8 / 15 * 100, 100)).all()  # at most one pod (8 GPUs) ahead
    assert 0 < result.placed <= result.arrivals
    assert ((result.frag_pct >= 0) & (result.frag_pct + alloc <= 100 + 1e-9)).all()


def test_unknown_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        run_policy(cluster(tmp_path, SMALL_NODES), pod_list(tmp_path, SMALL_PODS), "worst-fit", seed=0)


# -- results, summary, argument parsing ------------------------------------------------------------------------


def _result(policy: str, seed: int, alloc: list[float]) -> RunResult:
    n = len(alloc)
    return RunResult(policy, seed, np.arange(n), np.array(alloc), np.zeros(n), 1, 1, 0.0, 0.0)


def test_results_csv_has_one_row_per_policy_seed_and_percent(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    write_results(path, [_result("best-fit", 1, [0.0, 1.5, 2.25]), _result("frag-aware", 1, [0.0, 1.5, 3.0])])
    lines = path.read_text().splitlines()
    assert lines[0] == "policy,seed,arrived_pct,alloc_pct,frag_pct" == ",".join(RESULT_COLUMNS)
    assert lines[1:4] == ["best-fit,1,0,0.0000,0.0000", "best-fit,1,1,1.5000,0.0000", "best-fit,1,2,2.2500,0.0000"]
    assert len(lines) == 1 + 2 * 3


def test_summary_and_margins_are_paired_by_seed() -> None:
    results = [
        _result("best-fit", 1, [0, 1, 2]),
        _result("best-fit", 2, [0, 1, 4]),
        _result("frag-aware", 1, [0, 1, 3]),
        _result("frag-aware", 2, [0, 1, 4.5]),
    ]
    assert summary(results, [1, 2]) == {"best-fit": {1: 1.0, 2: 3.0}, "frag-aware": {1: 1.0, 2: 3.75}}
    assert margins(results, "frag-aware", ["best-fit"], [2]) == {("best-fit", 2): (0.75, 0.5)}
    assert summary_points(130) == [90, 100, 130] and summary_points(95) == [90, 95]


def test_seed_and_policy_arguments() -> None:
    assert parse_seeds("42-51") == list(range(42, 52))
    assert parse_seeds("1, 5,7-9,5") == [1, 5, 7, 8, 9]
    assert parse_policies("best-fit,frag-aware,best-fit") == ["best-fit", "frag-aware"]
    for bad in ("", "x", "9-3"):
        with pytest.raises(ValueError, match="seeds"):
            parse_seeds(bad)
    with pytest.raises(ValueError, match="worst-fit"):
        parse_policies("best-fit,worst-fit")


# -- the command ------------------------------------------------------------------------------------------------


def test_cli_writes_results_and_a_plot(tmp_path: Path) -> None:
    nodes, pods = (
        write(tmp_path, "nodes.csv", NODE_HEADER + SMALL_NODES),
        write(tmp_path, "pods.csv", POD_HEADER + SMALL_PODS),
    )
    out, plot = tmp_path / "results.csv", tmp_path / "results.png"
    args = ["experiment", "fragmentation", "--nodes", str(nodes), "--pods", str(pods)]
    args += [
        "--policy",
        "best-fit,frag-aware",
        "--seeds",
        "1-2",
        "--until",
        "120",
        "--out",
        str(out),
        "--plot",
        str(plot),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert lines[0] == "policy,seed,arrived_pct,alloc_pct,frag_pct"
    assert len(lines) == 1 + 2 * 2 * 121
    assert {line.split(",")[0] for line in lines[1:]} == {"best-fit", "frag-aware"}
    assert [line.split(",")[2] for line in lines[1:122]] == [str(p) for p in range(121)]
    assert "120% arrived" in result.output and "frag-aware" in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    nodes = write(tmp_path, "nodes.csv", NODE_HEADER + SMALL_NODES)
    pods = write(tmp_path, "pods.csv", POD_HEADER + "a,1000,1024,2,500\n")  # 2 cards of 500 each: not allowed
    result = runner.invoke(app, ["experiment", "fragmentation", "--nodes", str(nodes), "--pods", str(pods)])
    assert result.exit_code == 1
    assert "pods.csv:2" in result.output
    result = runner.invoke(
        app, ["experiment", "fragmentation", "--nodes", str(nodes), "--pods", str(nodes), "--policy", "nope"]
    )
    assert result.exit_code == 1 and "nope" in result.output


# -- the real traces, reduced ----------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("trace", ["default", "gpushare20", "multigpu20"])
def test_real_traces_on_a_slice_of_the_cluster(trace: str) -> None:
    # Every 8th GPU node (152 nodes) and one seed keep this quick; the full protocol is bench/fragmentation.py.
    nodes = openb_nodes_to_k8s(read_openb_nodes(DATA / "openb_node_list_gpu_node.csv"))[::8]
    pods = read_openb_pods_arrays(DATA / f"openb_pod_list_{trace}.csv")
    runs = {policy: run_policy(nodes, pods, policy, seed=42) for policy in ("best-fit", "gpu-packing", "frag-aware")}
    for result in runs.values():
        assert result.arrived_pct.tolist() == list(range(131))
        assert 80 < result.at(130) <= 100
    assert runs["frag-aware"].at(130) > max(runs["best-fit"].at(130), runs["gpu-packing"].at(130))


def test_a_gpu_model_list_pins_pods_and_the_measure(tmp_path: Path) -> None:
    # gpu_spec becomes required node affinity on nvidia.com/gpu.product: the V100 pods land on the V100 node
    # only, and for the measure the T4 node's free cards are all fragmented (the pod list's only shape
    # cannot go there): at 0%, 2000 of 4000 milli-GPU = 50%.
    nodes = cluster(tmp_path, "t4,16000,65536,2,T4\nv100,16000,65536,2,V100M16\n")
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    header += "scheduled_time\n"
    pods = read_openb_pods_arrays(write(tmp_path, "pods.csv", header + "v,1000,1024,1,1000,V100M16,LS,Running,0,1,0\n"))
    result = run_policy(nodes, pods, "first-fit", seed=1, until=100)
    assert result.frag_pct[0] == 50.0
    assert result.arrivals == 4 and result.placed == 2  # two fit on the V100 node, two fail
    assert result.alloc_pct[-1] == 50.0
    # Both V100 cards taken: nothing free is usable by the list's shape; the T4 cards still count.
    assert result.frag_pct[-1] == 50.0
