"""Smoke test of the benchmark code paths on a tiny cluster: no timing, only that both schedulers agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.run_all import Row, report, table
from bench.scheduler_throughput import (
    CONFIGS,
    build_workload,
    check_placements,
    jobs_for,
    main,
    measure_baseline,
    measure_tidegate,
    run_baseline,
    run_tidegate,
    same_bound_count,
    subset,
    tidegate_placements,
)


@pytest.mark.parametrize("gang", [1, 8])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_both_schedulers_bind_the_same_pods(gang: int, config: str) -> None:
    workload = build_workload(20, gang, jobs_for(20, gang))
    ours, theirs = same_bound_count(workload, CONFIGS[config]())
    assert ours == theirs == workload.pods
    assert check_placements(workload.snapshot, tidegate_placements(run_tidegate(workload, CONFIGS[config]()))) == []
    assert check_placements(workload.snapshot, run_baseline(workload)) == []


def test_an_overfull_workload_is_placed_validly_by_both() -> None:
    # Past saturation the two pack differently (and proportion caps queues), so counts may differ.
    workload = build_workload(10, 8, jobs_for(10, 8, load=1.5))
    ours = tidegate_placements(run_tidegate(workload, CONFIGS["default"]()))
    theirs = run_baseline(workload)
    assert 0 < len(ours) < workload.pods and 0 < len(theirs) < workload.pods
    assert check_placements(workload.snapshot, ours) == []
    assert check_placements(workload.snapshot, theirs) == []


def test_workloads_are_deterministic() -> None:
    first, second = build_workload(20, 1, 40), build_workload(20, 1, 40)
    assert first.snapshot == second.snapshot
    assert run_tidegate(first, CONFIGS["default"]()) == run_tidegate(second, CONFIGS["default"]())


def test_report_renders() -> None:
    workload = build_workload(20, 8, 4)
    small = subset(workload, 2)
    row = Row(
        20,
        workload.label,
        "default",
        8,
        measure_tidegate(workload, CONFIGS["default"](), 1),
        measure_baseline(small, 1),
        small.pods,
    )
    assert "gangs of 8" in table([row])
    assert "Command:" in report([row], quick=True, repeats=1)


def test_python_m_bench_scheduler_throughput_measures_one_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--nodes", "20", "--gang", "8", "--config", "capacity", "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert (
        printed.startswith("20 nodes, gangs of 8, capacity: tidegate bound 80 pods in ")
        and "baseline 80 pods" in printed
    )
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-m", "bench.scheduler_throughput", "--nodes", "20", "--repeats", "1"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0 and run.stdout.startswith("20 nodes, 1-pod jobs, default: tidegate bound 80 pods"), run
    with pytest.raises(SystemExit) as refused:
        main(["--nodes", "0"])
    assert refused.value.code == 2
