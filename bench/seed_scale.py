"""The seed's scale: `examples/hybrid-idc/` at k = 1, 5 and 25 (bench/scale.py), every scenario alone.

Per scenario and k: wall and CPU seconds of the run (the workload generated, the month simulated, the
summary made; the folder's loading left out), microseconds of CPU a simulated job, the ratio of that
to k = 1's, which is what the issue bounds (at most 1.5x at k = 25, and at most 60 CPU seconds a scenario),
and the run's `placements_digest`, which a change that keeps every decision leaves as it is.
Each run is a child process of its own (`--one`), so one scenario's heap does not slow the next, and CPU
time (`time.process_time` in the child) is the figure to read on this shared machine; wall time is shown
beside it. `--profile` adds, for k = 25, a cProfile of each scenario and the functions costing the most
(their own time, and their time with callees). k = 25's folder is `examples/seed-scale/`, checked to be
what `python -m bench.scale 25 examples/seed-scale` writes; k = 5's is written under `--work`.

python -m bench.seed_scale                     # k = 1, 5, 25, every scenario (about 10 minutes)
python -m bench.seed_scale --k 1 5 --timeout 300
python -m bench.seed_scale --profile elastic-burst --write   # profile one at k = 25; rewrite BENCHMARKS.md's block
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.run_all import BENCHMARKS_MD, machine, write
from bench.scale import SEED_K, SEED_SCALE, SOURCE, render, write_folder

START = "<!-- bench:seed-scale:start -->"
END = "<!-- bench:seed-scale:end -->"
#: From the issue: at the seed's scale a scenario takes at most this many CPU seconds, and its cost per
#: simulated job at most this many times k = 1's.
TARGET_CPU_S = 60.0
TARGET_RATIO = 1.5


@dataclass(frozen=True, slots=True)
class Result:
    k: int
    scenario: str
    wall_s: float
    cpu_s: float
    jobs: int
    days: float
    digest: str
    finished: bool = True  # False: stopped at --timeout (then days is how far it got)

    @property
    def us_per_job(self) -> float:
        return self.cpu_s / self.jobs * 1e6 if self.jobs else 0.0


def folder_for(k: int, work: Path) -> Path:
    if k == 1:
        return SOURCE
    if k == SEED_K:
        stale = [name for name, text in render(k).items() if (SEED_SCALE / name).read_text() != text]
        if stale:
            raise SystemExit(f"examples/seed-scale/ is not bench.scale's output ({', '.join(stale)}): regenerate it")
        return SEED_SCALE
    return write_folder(k, work / f"k{k}")


def scenarios(folder: Path) -> list[str]:
    from tidegate.sim.loader import load_simulation

    inp = load_simulation([str(folder)])
    return list(inp.simulations[next(iter(inp.simulations))].scenarios)


def run_one(folder: Path, scenario: str, profile: Path | None) -> dict[str, Any]:
    """In the child: load the folder, then time the scenario (workload, run, summary)."""
    from tidegate.sim.loader import load_simulation
    from tidegate.sim.run import run_scenario

    inp = load_simulation([str(folder)])
    name = next(iter(inp.simulations))

    def progress(_: str, t: float, __: float) -> None:
        print(f"progress {t / 86400:.3f}", file=sys.stderr, flush=True)

    profiler = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    result = run_scenario(inp, name, scenario, on_progress=progress)
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(profile))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    summary = result.summary
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "jobs": summary["jobs_submitted"],
        "days": summary["simulated_days"],
        "digest": summary["placements_digest"],
    }


def spawn(k: int, folder: Path, scenario: str, timeout: float, profile: Path | None = None) -> Result:
    """One scenario in a child process; stopped after `timeout` wall seconds (reported as unfinished)."""
    cmd = [sys.executable, "-m", "bench.seed_scale", "--one", str(folder), scenario]
    if profile:
        cmd += ["--profile-to", str(profile)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        reached = [float(line.split()[1]) for line in err.splitlines() if line.startswith("progress ")]
        wall = time.perf_counter() - start
        return Result(k, scenario, wall, wall, 0, reached[-1] if reached else 0.0, "", finished=False)
    if proc.returncode:
        raise SystemExit(f"{scenario} at k = {k} failed:\n{err[-3000:]}")
    doc = json.loads(out.strip().splitlines()[-1])
    return Result(k, scenario, doc["wall_s"], doc["cpu_s"], int(doc["jobs"]), float(doc["days"]), doc["digest"])


def top_costs(path: Path, limit: int = 15) -> str:
    """The profile's costliest functions by own time, as a markdown table."""
    stats = pstats.Stats(str(path), stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((own, cumulative, calls, f"{_short(file)}:{line}({func})"))
    rows.sort(reverse=True)
    lines = ["| function | calls | own s | own % | with callees s |", "|---|---:|---:|---:|---:|"]
    for own, cumulative, calls, where in rows[:limit]:
        lines.append(f"| `{where}` | {calls:,} | {own:.2f} | {own / total * 100:.1f} | {cumulative:.2f} |")
    return "\n".join(lines)


def _short(file: str) -> str:
    for marker in ("/tidegate/", "/bench/"):
        if marker in file:
            return marker.strip("/") + "/" + file.split(marker, 1)[1]
    return file.rsplit("/", 1)[-1]


def table(results: list[Result]) -> str:
    base = {r.scenario: r for r in results if r.k == 1 and r.finished}
    lines = [
        "| k | jobs/day | scenario | jobs | wall s | CPU s | µs/job (CPU) | vs k = 1 a job | placements digest |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if not r.finished:
            lines.append(
                f"| {r.k} | {200 * r.k:,} | {r.scenario} | – | > {r.wall_s:.0f} | – | – | "
                f"stopped at day {r.days:.1f} of 30 | – |"
            )
            continue
        ratio = r.us_per_job / base[r.scenario].us_per_job if r.scenario in base else float("nan")
        lines.append(
            f"| {r.k} | {200 * r.k:,} | {r.scenario} | {r.jobs:,} | {r.wall_s:.1f} | {r.cpu_s:.1f} | "
            f"{r.us_per_job:,.0f} | {ratio:.2f}x | {r.digest} |"
        )
    return "\n".join(lines)


def verdicts(results: list[Result]) -> str:
    seed = [r for r in results if r.k == SEED_K]
    if not seed:
        return ""
    base = {r.scenario: r for r in results if r.k == 1 and r.finished}
    worst_cpu = max((r.cpu_s if r.finished else float("inf")) for r in seed)
    ratios = [r.us_per_job / base[r.scenario].us_per_job for r in seed if r.finished and r.scenario in base]
    worst_ratio = max(ratios) if len(ratios) == len(seed) else float("inf")
    cpu_ok = "met" if worst_cpu <= TARGET_CPU_S else "**not met**"
    ratio_ok = "met" if worst_ratio <= TARGET_RATIO else "**not met**"
    return (
        f"- slowest scenario at k = {SEED_K}: {worst_cpu:.1f} CPU s against a target of {TARGET_CPU_S:g}: {cpu_ok}\n"
        f"- worst cost a job at k = {SEED_K} against k = 1: {worst_ratio:.2f}x against a target of "
        f"{TARGET_RATIO:g}x: {ratio_ok}"
    )


def _profile_flag(profile: list[str] | None) -> str:
    if profile is None:
        return ""
    return " --profile" + "".join(f" {name}" for name in profile)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, SEED_K])
    parser.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    parser.add_argument("--timeout", type=float, default=900.0, help="wall seconds before a run is stopped")
    parser.add_argument(
        "--profile",
        nargs="*",
        metavar="SCENARIO",
        help=f"profile these scenarios at k = {SEED_K} too (all when none is named)",
    )
    parser.add_argument("--work", type=Path, default=Path("out/bench-seed-scale"), help="scratch folder")
    parser.add_argument("--write", action="store_true", help="rewrite the results block of BENCHMARKS.md")
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "SCENARIO"), help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(Path(args.one[0]), args.one[1], args.profile_to)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    results: list[Result] = []
    profiles: list[str] = []
    for k in args.k:
        folder = folder_for(k, args.work)
        for scenario in args.scenario or scenarios(folder):
            result = spawn(k, folder, scenario, args.timeout)
            results.append(result)
            print(table([r for r in results if r.k == 1] + ([result] if k != 1 else [])).splitlines()[-1], flush=True)
            if args.profile is not None and k == SEED_K and (not args.profile or scenario in args.profile):
                path = args.work / f"profile-k{k}-{scenario}.prof"
                profiled = spawn(k, folder, scenario, args.timeout * 3, path)
                if profiled.finished:
                    profiles.append(f"**{scenario}** (k = {k}, {profiled.cpu_s:.1f} CPU s under cProfile):\n\n")
                    profiles[-1] += top_costs(path) + "\n"
    after = os.getloadavg()
    text = (
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; load average "
        f"{', '.join(f'{x:.2f}' for x in load)} before, {', '.join(f'{x:.2f}' for x in after)} after.\n"
        f"Command: `python -m bench.seed_scale{_profile_flag(args.profile)}` (each run a child "
        "process of its own, one after another).\n\n" + table(results) + "\n\n" + verdicts(results) + "\n"
    )
    if profiles:
        text += "\nTop costs at the seed's scale, by own time:\n\n" + "\n".join(profiles)
    print(text)
    if args.write:
        write(text, BENCHMARKS_MD, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
