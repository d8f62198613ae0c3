"""`tidegate simulate`: replay a workload over a model of the IDC and clouds, every scenario."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tidegate.cli.output import fail, warn
from tidegate.cli.sources import FILES_HELP, manifest_paths, stdin_once
from tidegate.model.errors import ManifestErrors
from tidegate.sim.loader import load_simulation
from tidegate.sim.report import summary_table, write_html, write_summary
from tidegate.sim.run import chosen_simulation, run_simulation


def simulate(
    paths: Annotated[
        list[str] | None, typer.Argument(help="Simulation folder(s) or files: queues, pools, HPA, workload.")
    ] = None,
    files: Annotated[list[str] | None, typer.Option("-f", "--filename", help=FILES_HELP)] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for summary.json and report.html.")] = Path("out"),
    name: Annotated[str | None, typer.Option("--name", help="Which Simulation manifest to run.")] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Processes running scenarios side by side (0: one per CPU).")
    ] = 0,
) -> None:
    """Simulate every scenario on the same workload; print them side by side and write a report."""
    sources = manifest_paths(paths, files)
    console, err = Console(), Console(stderr=True)
    try:
        inp = load_simulation(sources, stdin=stdin_once(sources)())
        chosen_simulation(inp, name)  # an unknown --name is refused before anything runs
        ready_out(out)
    except ManifestErrors as exc:
        fail(err, exc.errors)
        raise typer.Exit(1) from exc
    except ValueError as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
    warn(err, inp.warnings)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def advance(scenario: str, now: float, horizon: float) -> None:
            if scenario not in tasks:
                tasks[scenario] = progress.add_task(f"scenario {scenario}", total=max(horizon, 1.0))
            progress.update(tasks[scenario], completed=min(now, horizon))

        try:
            results = run_simulation(inp, name, on_progress=advance, workers=workers or None)
        except ValueError as exc:
            fail(err, [exc])
            raise typer.Exit(1) from exc
        for task in tasks.values():
            progress.update(task, completed=progress.tasks[task].total)
    table = summary_table(results)
    if not console.is_terminal:  # a pipe or a log: as wide as the table needs, not rich's 80 columns
        console.width = max(console.width, console.measure(table, options=console.options.update_width(500)).maximum)
    console.print(table)
    summary = write_summary(results, out)
    descriptions = {name: spec.description for name, spec in inp.scenarios.items()}
    report = write_html(results, out, f"tidegate simulate {' '.join(sources)}", descriptions)
    console.print(f"wrote {summary} and {report}", highlight=False)


def ready_out(out: Path, written: str = "summary.json and report.html") -> None:
    """Make the output folder now, so that one that cannot be written is refused before a simulation (or a
    sweep) runs (ValueError naming it and what goes in it)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file, not a folder ({written} are written in it)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot make the folder: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: the folder is not writable")
