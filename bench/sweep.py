"""Sweep throughput: points of `tidegate sweep` finished per minute on a local Ray of 1 and of 2 workers.

The points are burst months of `examples/hybrid-idc/` (elastic-burst, the HPA's maxReplicas 8 to 29; with
`--quick`, a 7-day month), the same points at each worker count, each count in a fresh output folder, so
nothing is resumed. The wall time includes starting and stopping the local Ray (shown apart: the time to
the first point's submission is not the sweep's work). The baseline is the 1-worker run: the ratio is
what the second worker buys on this 2-core machine, shared with other work. Both runs must give the same
figures point by point.

python -m bench.sweep             # 8 months at 1 and at 2 workers (several minutes)
python -m bench.sweep --quick     # 4 seven-day months: a smoke run, not for the record
python -m bench.sweep --write     # full run, results section of BENCHMARKS.md rewritten
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.run_all import BENCHMARKS_MD, load_average, machine, write
from tidegate.sweep.plan import plan
from tidegate.sweep.run import run_sweep

ROOT = Path(__file__).resolve().parent.parent
HYBRID = ROOT / "examples" / "hybrid-idc"
START = "<!-- bench:sweep:start -->"
END = "<!-- bench:sweep:end -->"


def grid(points: int, days: int) -> str:
    """The benchmark's Sweep: `points` values of maxReplicas (with the burst queue's capability to match),
    and the month cut to `days` (single values are fields every point sets)."""
    replicas = [8 + 3 * i for i in range(points)]
    parameters: dict[str, object] = {
        "cloud": {
            "HorizontalPodAutoscaler/cloud-burst-hpa.spec.maxReplicas": replicas,
            "Queue/burst-cloud.spec.capability[nvidia.com/gpu]": [str(8 * r) for r in replicas],
        }
    }
    if days < 30:
        parameters["Workload/tidal-month.spec.synthetic.days"] = [days]
        parameters["Simulation/hybrid-idc.spec.untilSeconds"] = [days * 86400]
    spec = {"scenario": "elastic-burst", "parameters": parameters}
    return yaml.safe_dump(
        {"apiVersion": "tidegate.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "bench"}, "spec": spec}
    )


@dataclass(frozen=True, slots=True)
class Run:
    workers: int
    points: int
    seconds: float
    point_seconds: float  # the points' own wall time, summed

    @property
    def per_minute(self) -> float:
        return self.points / self.seconds * 60


def measure(grid_file: Path, workers: int) -> tuple[Run, list[object]]:
    ready = plan([str(HYBRID)], str(grid_file))
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as out:
        started = time.perf_counter()
        result = run_sweep(ready, Path(out), workers=workers)
        seconds = time.perf_counter() - started
    if result.failed or result.resumed:
        raise AssertionError(f"{result.failed} points failed, {result.resumed} resumed: every point should run")
    point_seconds = sum(o.wall_seconds for o in result.outcomes)
    return Run(workers, len(result.outcomes), seconds, point_seconds), [o.summary for o in result.outcomes]


def report(runs: list[Run], days: int, quick: bool, load_before: str) -> str:
    base = runs[0]
    lines = [
        "| Ray workers | points | wall s (Ray start and stop included) | points / minute | vs 1 worker |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        ratio = r.per_minute / base.per_minute
        lines.append(f"| {r.workers} | {r.points} | {r.seconds:.1f} | {r.per_minute:.2f} | **{ratio:.2f}×** |")
    command = "python -m bench.sweep" + (" --quick" if quick else "")
    return (
        f"Measured {datetime.date.today().isoformat()} on {machine()}; load average {load_before} before, "
        f"{load_average()} after.\nCommand: `{command}` ({base.points} points of a {days}-day burst month at each "
        f"worker count; one run each).\n\n" + "\n".join(lines) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 seven-day months (a smoke run)")
    parser.add_argument("--write", action="store_true", help="rewrite the results section of BENCHMARKS.md")
    args = parser.parse_args(argv)
    points, days = (4, 7) if args.quick else (8, 30)
    load_before = load_average()
    runs: list[Run] = []
    figures = []
    with tempfile.TemporaryDirectory() as folder:
        grid_file = Path(folder) / "grid.yaml"
        grid_file.write_text(grid(points, days))
        for workers in (1, 2):
            run, summaries = measure(grid_file, workers)
            runs.append(run)
            figures.append(summaries)
            print(f"{workers} worker(s): {run.points} points in {run.seconds:.1f} s, {run.per_minute:.2f} a minute",
                  file=sys.stderr, flush=True)  # fmt: skip
    if figures[0] != figures[1]:
        raise AssertionError("1 and 2 workers gave different figures")
    text = report(runs, days, args.quick, load_before)
    print(text)
    if args.write:
        write(text, BENCHMARKS_MD, START, END)
        print(f"wrote {BENCHMARKS_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
