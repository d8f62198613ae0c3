"""`tidegate experiment ...`: experiments that run the scheduling core against published protocols."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tidegate.experiments.fragmentation import (
    RunResult,
    margins,
    parse_policies,
    parse_seeds,
    run_policy,
    summary,
    summary_points,
    write_results,
)
from tidegate.scheduler.plugins.gpu_placement import POLICIES
from tidegate.traces import TraceError, openb_nodes_to_k8s, read_openb_nodes, read_openb_pods_arrays

app = typer.Typer(
    help="Experiments that run tidegate's scheduling core against published protocols and traces.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def fragmentation(
    nodes: Annotated[Path, typer.Option("--nodes", help="openb node list (sn,cpu_milli,memory_mib,gpu,model).")],
    pods: Annotated[Path, typer.Option("--pods", help="openb pod list to sample from.")],
    policy: Annotated[
        str, typer.Option("--policy", help=f"Placement policies, comma-separated: {', '.join(POLICIES)}.")
    ] = ",".join(POLICIES),
    seeds: Annotated[str, typer.Option("--seeds", help="Seeds: 42-51, or 1,5,7-9.")] = "42-51",
    until: Annotated[
        int, typer.Option("--until", min=0, help="Stop when the GPUs asked reach this % of cluster GPUs.")
    ] = 130,
    out: Annotated[Path, typer.Option("--out", help="results.csv: policy,seed,arrived_pct,alloc_pct,frag_pct.")] = Path(
        "results.csv"
    ),
    plot: Annotated[Path | None, typer.Option("--plot", help="Also draw alloc_pct against arrived_pct (PNG).")] = None,
) -> None:
    """The ATC'23 GPU-sharing experiment: fill the cluster with sampled pods (no departures, one try each)
    and measure the GPU allocated and fragmented at each % of arrived workload, per policy and seed."""
    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:
        policies, seed_list = parse_policies(policy), parse_seeds(seeds)
        node_list = openb_nodes_to_k8s(read_openb_nodes(nodes))
        pod_list = read_openb_pods_arrays(pods)
    except (OSError, TraceError, ValueError) as exc:
        err.print(f"[red]error[/]: {exc}", highlight=False)
        raise typer.Exit(1) from exc
    runs = [(name, seed) for name in policies for seed in seed_list]
    results: list[RunResult] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("% arrived"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
    ) as progress:
        task = progress.add_task("starting", total=len(runs) * (until + 1))
        for i, (name, seed) in enumerate(runs, 1):
            progress.update(task, description=f"run {i}/{len(runs)}: {name}, seed {seed}")
            try:
                result = run_policy(node_list, pod_list, name, seed, until, lambda _: progress.advance(task))
            except ValueError as exc:
                err.print(f"[red]error[/]: {exc}", highlight=False)
                raise typer.Exit(1) from exc
            results.append(result)
            progress.console.print(
                f"{name}, seed {seed}: {result.arrivals:,} pods arrived, {result.placed:,} placed, "
                f"{result.alloc_pct[-1]:.2f}% of GPUs allocated at {until}% arrived ({result.seconds:.1f} s)",
                highlight=False,
            )
    write_results(out, results)
    console.print(_summary_table(results, until, len(seed_list)))
    console.print(f"wrote {out}", highlight=False)
    if plot is not None:
        from tidegate.experiments.plot import plot_allocation

        plot_allocation(results, plot, f"{pods.name} on {nodes.name}, {len(seed_list)} seed(s)")
        console.print(f"wrote {plot}", highlight=False)


def _summary_table(results: list[RunResult], until: int, seeds: int) -> Table:
    points = summary_points(until)
    means = summary(results, points)
    table = Table(title=f"GPUs allocated (% of cluster), mean over {seeds} seed(s), by arrived workload")
    table.add_column("policy")
    for p in points:
        table.add_column(f"{p}% arrived", justify="right")
    best = {p: max(row[p] for row in means.values()) for p in points}
    for name, row in means.items():
        table.add_row(name, *(f"[bold]{row[p]:.2f}[/]" if row[p] == best[p] else f"{row[p]:.2f}" for p in points))
    if "frag-aware" in means and len(means) > 1:
        others = [name for name in means if name != "frag-aware"]
        gaps = margins(results, "frag-aware", others, [p for p in points if p >= 100] or points)
        worst = min(gaps.items(), key=lambda item: item[1][1], default=None)
        if worst is not None:
            (other, p), (_, low) = worst
            table.caption = f"frag-aware's smallest margin on one seed: {low:+.2f} points over {other} at {p}% arrived"
    return table
