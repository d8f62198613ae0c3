"""Simulation speed: simulated jobs per wall-second of `tidegate simulate`'s engine.

Two workloads, each with the reference measured in the same run:
- *openb replay*: the Alibaba openb default pod list (8,152 pods with creation and deletion times; each
  pod a one-pod job that leaves at its deletion time) on 1,213 eight-GPU IDC nodes (the trace's GPU
  node count), one queue, the default plugins plus gpushare;
- *synthetic month*: `examples/hybrid-idc/` (1,024 IDC GPUs, a tidal month), each scenario.

The baseline is the same engine driving `SnapshotCore`: a fresh `schedule(snapshot, config)` every
cycle, as a control plane that rebuilds its view each time would (O(cluster) a cycle). It is measured
on a prefix of the replay (`--baseline-jobs`), which is enough for a rate. Wall time by
time.perf_counter, one process (`workers=1`) so the figure is the engine's, not the CPU count's.

python -m bench.simulation             # full run (a few minutes)
python -m bench.simulation --quick     # prefixes only: a smoke run, not for the record
python -m bench.simulation --write     # full run, results section of BENCHMARKS.md rewritten
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.run_all import BENCHMARKS_MD, write
from tidegate.model.objects import Queue
from tidegate.sim.core import Core, SnapshotCore
from tidegate.sim.loader import SimulationInput, load_simulation
from tidegate.sim.run import run_simulation

ROOT = Path(__file__).resolve().parent.parent
OPENB = ROOT.parent / "shared" / "data" / "alibaba-openb" / "openb_pod_list_default.csv"
HYBRID = ROOT / "examples" / "hybrid-idc"
START = "<!-- bench:simulation:start -->"
END = "<!-- bench:simulation:end -->"
#: From the issue: simulated jobs per wall-second on trace replay.
TARGET_JOBS_PER_S = 10_000

REPLAY = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc, region: bench}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: gpu}
spec: {cluster: idc, count: 1213, gpu: {product: A100, count: 8, memoryMiB: 81920}, cpu: "96", memory: 768Gi}
---
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: replay}
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}, {name: gpushare}]
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: replay}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: replay}
spec: {workload: openb, scenarios: [replay]}
"""


@dataclass(frozen=True, slots=True)
class Row:
    workload: str
    core: str
    jobs: int
    seconds: float
    simulated_days: float

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def replay_input(folder: Path, limit: int) -> SimulationInput:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "replay.yaml").write_text(REPLAY)
    workload = f"""apiVersion: tidegate.io/v1alpha1
kind: Workload
metadata: {{name: openb}}
spec: {{source: openb, path: {OPENB}, limit: {limit}}}
"""
    (folder / "workload.yaml").write_text(workload)
    return load_simulation([str(folder)])


def snapshot_core(inp: SimulationInput, queues: list[Queue]) -> Core:
    return SnapshotCore(queues, inp.config)


def timed(workload: str, core: str, inp: SimulationInput, baseline: bool) -> list[Row]:
    rows = []
    for scenario in inp.simulations[next(iter(inp.simulations))].scenarios:
        one = _only(inp, scenario)
        start = time.perf_counter()
        (result,) = run_simulation(one, core_factory=snapshot_core if baseline else None, workers=1)
        seconds = time.perf_counter() - start
        summary: dict[str, Any] = result.summary
        several = len(inp.simulations[next(iter(inp.simulations))].scenarios) > 1
        name = f"{workload}: {scenario}" if several else workload
        rows.append(Row(name, core, int(summary["jobs_submitted"]), seconds, float(summary["simulated_days"])))
    return rows


def _only(inp: SimulationInput, scenario: str) -> SimulationInput:
    name = next(iter(inp.simulations))
    spec = inp.simulations[name].model_copy(update={"scenarios": [scenario]})
    return dataclasses.replace(inp, simulations={name: spec})


def run(quick: bool, baseline_jobs: int, work: Path) -> list[Row]:
    rows = []
    prefix = replay_input(work / "prefix", baseline_jobs)
    rows += timed(f"openb replay, first {baseline_jobs} jobs", "SnapshotCore (baseline)", prefix, baseline=True)
    rows += timed(f"openb replay, first {baseline_jobs} jobs", "OnlineScheduler", prefix, baseline=False)
    if not quick:
        rows += timed("openb replay, all jobs", "OnlineScheduler", replay_input(work / "all", 0), baseline=False)
        rows += timed("synthetic month", "OnlineScheduler", load_simulation([str(HYBRID)]), baseline=False)
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| workload | core | jobs | simulated days | wall s | jobs/s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.workload} | {r.core} | {r.jobs:,} | {r.simulated_days:.1f} | {r.seconds:.1f} | {r.jobs_per_s:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: list[Row]) -> str:
    base = next(r for r in rows if r.core.startswith("SnapshotCore"))
    same = next(r for r in rows if r.workload == base.workload and r is not base)
    out = [f"Online core vs the snapshot baseline on the same prefix: **{same.jobs_per_s / base.jobs_per_s:.1f}x**."]
    full = [r for r in rows if r.workload == "openb replay, all jobs"]
    if full:
        rate = full[0].jobs_per_s
        verdict = "met" if rate >= TARGET_JOBS_PER_S else "**not met**"
        out.append(f"Trace replay: {rate:,.0f} jobs/s against the target of {TARGET_JOBS_PER_S:,} ({verdict}).")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="prefixes only (smoke run)")
    parser.add_argument("--write", action="store_true", help="rewrite the results section of BENCHMARKS.md")
    parser.add_argument("--baseline-jobs", type=int, default=400, help="replay prefix both cores run")
    parser.add_argument("--work", type=Path, default=Path("out/bench-simulation"), help="scratch folder")
    parser.add_argument("--write-to", type=Path, default=BENCHMARKS_MD, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rows = run(args.quick, args.baseline_jobs, args.work)
    text = table(rows) + "\n" + summary(rows)
    print(text)
    if args.write or args.write_to != BENCHMARKS_MD:
        write(text, args.write_to, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
