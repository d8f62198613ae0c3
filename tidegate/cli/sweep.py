"""`tidegate sweep`: what-if sweeps over a simulation folder's fields, each point a simulation run on Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table as RichTable

from tidegate.cli.output import fail, warn
from tidegate.cli.simulate import ready_out
from tidegate.model.errors import ManifestErrors
from tidegate.sweep.grid import IDC_GPU_MONTH_PRICE, short_name
from tidegate.sweep.plan import describe, plan
from tidegate.sweep.report import HTML_COLUMNS, Table, answer_text, shown, table, write_html, write_json, write_table
from tidegate.sweep.run import Outcome, RayMissing, run_sweep


def sweep(
    paths: Annotated[list[str], typer.Argument(help="The simulation folder(s) or files the points patch.")],
    grid: Annotated[Path, typer.Option("--grid", help="The Sweep manifest: fields, values, sampling, targets.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the points, sweep.csv/.parquet/.json/.html.")] = Path(
        "out/sweep"
    ),
    target: Annotated[
        list[str] | None,
        typer.Option("--target", help="A target such as 'wait_p95<=900' (several allowed; replace the grid's)."),
    ] = None,
    idc_gpu_month_price: Annotated[
        float | None,
        typer.Option(
            "--idc-gpu-month-price",
            min=0,
            help="What an owned IDC GPU costs a month (default: the grid's idcGpuMonthPrice, "
            f"else {IDC_GPU_MONTH_PRICE:g}).",
        ),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="CPUs of the local Ray (points at once).")] = 2,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="An existing Ray cluster to run on (e.g. head:6379, ray://head:10001, auto); one with Ray's "
            "token authentication (the default of clusters Ray starts) needs RAY_AUTH_MODE=token.",
        ),
    ] = None,
) -> None:
    """Run one simulation per point of a grid (or sample) of field values, on Ray; write the points' table
    and an HTML page with the cost/wait Pareto fronts and the cheapest point meeting the targets."""
    console, err = Console(), Console(stderr=True)
    try:
        ready = plan(paths, str(grid), target, idc_gpu_month_price)
        ready_out(out, "the points and sweep.csv, .parquet, .json and .html")  # refused before any point runs
    except ManifestErrors as exc:
        fail(err, exc.errors)
        raise typer.Exit(1) from exc
    except ValueError as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
    warn(err, ready.warnings)
    invalid = [p for p in ready.points if p.inp is None]
    for planned in invalid:
        for error in planned.errors:
            err.print(
                f"[red]point {planned.point.index}[/] ({describe(planned.point.shown)}): {error}", highlight=False
            )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
    ) as progress:
        task = progress.add_task(f"sweep {ready.sweep.name}: points", total=len(ready.points))

        def advance(outcome: Outcome, done: int, total: int) -> None:
            progress.update(task, completed=done)
            if not outcome.ok and outcome.planned.inp is not None:
                progress.console.print(
                    f"[red]point {outcome.planned.point.index} failed[/] "
                    f"({describe(outcome.planned.point.shown)}): {outcome.error}",
                    highlight=False,
                )

        try:
            result = run_sweep(ready, out, workers, address, advance)
        except RayMissing as exc:  # not installed, or --address cannot be joined
            fail(err, [exc])
            raise typer.Exit(1) from exc
    rows = table(ready, result)
    points_table = _terminal_table(rows)
    if not console.is_terminal:  # a pipe or a log: as wide as the table needs, not rich's 80 columns
        wide = console.options.update_width(500)
        console.width = max(console.width, console.measure(points_table, options=wide).maximum)
    console.print(points_table)
    console.print(answer_text(rows), highlight=False)
    written = [*write_table(rows, out), write_json(ready, rows, out)]
    command = f"tidegate sweep {' '.join(paths)} --grid {grid}" + "".join(f" --target '{t}'" for t in target or [])
    written.append(write_html(ready, rows, out, command))
    console.print(
        f"{len(ready.points)} points: {result.ran} ran, {result.resumed} found in {out}, {result.failed} failed; "
        f"wrote {', '.join(str(p) for p in written)}",
        highlight=False,
    )
    if result.failed == len(ready.points):
        raise typer.Exit(1)


def _terminal_table(rows: Table) -> RichTable:
    """The points on either front and the answer, cheapest first."""
    keep = {i for front in rows.fronts.values() for i in front} | ({rows.answer} if rows.answer is not None else set())
    shown_rows = sorted((rows.rows[i] for i in keep), key=lambda r: (r["monthly_cost"], r["point"]))
    out = RichTable(title="Points on a cost/wait Pareto front (* the cheapest meeting the targets)")
    out.add_column("point", justify="right")
    for parameter in rows.parameters:
        out.add_column(short_name(parameter))
    columns = HTML_COLUMNS[:6]
    for _, label, _ in columns:
        out.add_column(label, justify="right")
    for r in shown_rows:
        mark = "*" if r.get("cheapest_meeting_targets") else ""
        out.add_row(
            f"{mark}{r['point']}",
            *(str(r.get(p, "")) for p in rows.parameters),
            *(shown(r.get(c), how) for c, _, how in columns),
        )
    return out
