"""Run the benchmarks and print a markdown table; `--write` also rewrites the results in BENCHMARKS.md.

python -m bench.run_all            # full run (a few minutes)
python -m bench.run_all --quick    # smaller workloads, one repeat (a smoke run, not for the record)
python -m bench.run_all --write    # full run, results section of BENCHMARKS.md rewritten
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.scheduler_throughput import (
    BASELINE_NODE_VISITS,
    CONFIGS,
    Measurement,
    Workload,
    build_workload,
    jobs_for,
    measure_baseline,
    measure_tidegate,
    same_bound_count,
    subset,
)

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
START = "<!-- bench:scheduler-throughput:start -->"
END = "<!-- bench:scheduler-throughput:end -->"
#: Targets from the issue, checked here (never in timed unit tests).
TARGET_PODS_PER_S = 10_000  # 1-pod jobs on 5,000 nodes
TARGET_GANGS_PER_S = 1_000  # gangs of 8 on 5,000 nodes


@dataclass(frozen=True, slots=True)
class Row:
    nodes: int
    workload: str
    config: str
    gang: int
    tidegate: Measurement
    baseline: Measurement
    baseline_pods: int  # pods offered to the baseline (a prefix of the same workload)

    @property
    def ratio(self) -> float:
        base = self.baseline.pods_per_s
        return self.tidegate.pods_per_s / base if base else float("inf")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )


def run(quick: bool, repeats: int, log: bool = True) -> list[Row]:
    sizes = (1_000, 5_000)
    load = 0.1 if quick else 0.5
    rows: list[Row] = []
    for nodes in sizes:
        for gang in (1, 8):
            workload = build_workload(nodes, gang, max(1, jobs_for(nodes, gang, load)))
            base_jobs = max(1, BASELINE_NODE_VISITS // (nodes * gang) // (4 if quick else 1))
            small = subset(workload, base_jobs)
            ours, theirs = same_bound_count(small, CONFIGS["default"]())
            if ours != theirs:
                raise AssertionError(f"{nodes} nodes, {workload.label}: tidegate bound {ours}, baseline {theirs}")
            baseline = measure_baseline(small, repeats)
            for config_name in CONFIGS if gang == 1 or not quick else ("default",):
                row = _measure(workload, config_name, repeats, baseline, small)
                rows.append(row)
                if log:
                    print(_progress(row), file=sys.stderr, flush=True)
    return rows


def _measure(workload: Workload, config_name: str, repeats: int, baseline: Measurement, small: Workload) -> Row:
    tidegate = measure_tidegate(workload, CONFIGS[config_name](), repeats)
    if tidegate.pods != workload.pods:
        raise AssertionError(f"tidegate bound {tidegate.pods} of {workload.pods} pods; the workload should fit")
    return Row(workload.nodes, workload.label, config_name, workload.gang, tidegate, baseline, small.pods)


def _progress(row: Row) -> str:
    return (
        f"{row.nodes} nodes, {row.workload}, {row.config}: {row.tidegate.pods_per_s:,.0f} pods/s "
        f"({row.tidegate.seconds:.2f} s), baseline {row.baseline.pods_per_s:,.0f} pods/s, x{row.ratio:,.0f}"
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| nodes | workload | config | pods | tidegate s (CPU s) | tidegate pods/s | tidegate gangs/s "
        "| baseline pods, s | baseline pods/s | baseline gangs/s | ratio |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        gangs = f"{r.tidegate.jobs_per_s:,.0f}" if r.gang > 1 else "–"
        base_gangs = f"{r.baseline.jobs_per_s:,.1f}" if r.gang > 1 else "–"
        lines.append(
            f"| {r.nodes:,} | {r.workload} | {r.config} | {r.tidegate.pods:,} "
            f"| {r.tidegate.seconds:.3f} ({r.tidegate.cpu_seconds:.3f}) "
            f"| {r.tidegate.pods_per_s:,.0f} | {gangs} | {r.baseline.pods:,}, {r.baseline.seconds:.2f} "
            f"| {r.baseline.pods_per_s:,.0f} | {base_gangs} | **{r.ratio:,.0f}×** |"
        )
    return "\n".join(lines)


def targets(rows: list[Row]) -> list[tuple[str, float, float, bool]]:
    """(what, target, measured, met) for the issue's targets, on the default configuration."""
    out = []
    for row in rows:
        if row.nodes != 5_000 or row.config != "default":
            continue
        if row.gang == 1:
            out.append(("pods/s, 1-pod jobs, 5,000 nodes", TARGET_PODS_PER_S, row.tidegate.pods_per_s))
        elif row.gang == 8:
            out.append(("gangs of 8/s, 5,000 nodes", TARGET_GANGS_PER_S, row.tidegate.jobs_per_s))
    return [(what, target, got, got >= target) for what, target, got in out]


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def report(rows: list[Row], quick: bool, repeats: int, load_before: str = "") -> str:
    today = datetime.date.today().isoformat()
    command = (
        "python -m bench.run_all" + (" --quick" if quick else "") + (f" --repeats {repeats}" if repeats != 3 else "")
    )
    met = "\n".join(
        f"- {what}: target {target:,.0f}, measured {got:,.0f} — {'met' if ok else 'NOT MET'}"
        for what, target, got, ok in targets(rows)
    )
    load = f"; load average {load_before} before, {load_average()} after" if load_before else ""
    return (
        f"Measured {today} on {machine()}{load}.\n"
        f"Command: `{command}` (best of {repeats} runs per row; `make bench` runs the full set).\n\n"
        f"{table(rows)}\n\n{met}\n"
    )


def write(text: str, path: Path = BENCHMARKS_MD, start: str = START, end: str = END) -> None:
    """Replace the block between the start and end markers in `path` (append it if absent)."""
    content = path.read_text() if path.exists() else ""
    block = f"{start}\n{text}{end}"
    if start in content and end in content:
        content = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, content, flags=re.S)
    else:
        content = content.rstrip() + ("\n\n" if content else "") + block + "\n"
    path.write_text(content)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads and one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per row; the best counts (default 3)")
    parser.add_argument("--write", action="store_true", help="rewrite the results section of BENCHMARKS.md")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    load_before = load_average()
    rows = run(args.quick, repeats)
    text = report(rows, args.quick, repeats, load_before)
    print(text)
    if args.write:
        write(text)
        print(f"wrote {BENCHMARKS_MD}", file=sys.stderr)
    return 0 if all(ok for *_, ok in targets(rows)) or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
