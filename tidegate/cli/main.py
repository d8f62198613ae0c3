"""The `tidegate` command line."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from enum import StrEnum
from importlib.metadata import version as installed_version
from typing import Annotated

import typer
from rich.console import Console

from tidegate.cli.experiment import app as experiment_app
from tidegate.cli.kube import kube
from tidegate.cli.kubectl import apply, delete, describe, get, patch
from tidegate.cli.manifest_snapshot import prepare
from tidegate.cli.output import fail, render, warn
from tidegate.cli.serve import serve
from tidegate.cli.simulate import simulate
from tidegate.cli.sources import FILES_HELP
from tidegate.cli.sweep import sweep
from tidegate.model.manifests import load_manifests
from tidegate.scheduler.scheduler import schedule as run_schedule

app = typer.Typer(
    help="tidegate: a Volcano-compatible scheduler for GPU fleets spanning an IDC and public clouds.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(experiment_app, name="experiment")


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"tidegate {installed_version('tidegate')}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", is_eager=True, callback=_print_version, help="Print tidegate's version and exit."
        ),
    ] = False,
) -> None:
    """tidegate: a Volcano-compatible scheduler for GPU fleets spanning an IDC and public clouds."""


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def _stdout() -> Console:
    return Console(soft_wrap=True)


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True)


@app.command()
def validate(
    files: Annotated[list[str], typer.Option("-f", "--filename", help=FILES_HELP)],
) -> None:
    """Check manifests like Volcano's admission webhook; exit 1 listing every error."""
    ms = load_manifests(files, stdin=sys.stdin)
    prepared = prepare(ms)
    err = _stderr()
    warn(err, prepared.warnings)
    fail(err, prepared.errors)
    counts = (
        f"{len(ms.nodes)} nodes, {len(ms.queues)} queues, {len(ms.jobs)} jobs, "
        f"{len(ms.podgroups)} podgroups, {len(ms.pods)} pods, {len(ms.skipped)} skipped"
    )
    if prepared.errors:
        err.print(f"{len(prepared.errors)} error(s) ({counts})", highlight=False)
        raise typer.Exit(1)
    for skipped in ms.skipped:
        err.print(f"skipped {skipped.kind}/{skipped.name} ({skipped.source}): not scheduled by tidegate")
    _stdout().print(f"valid: {counts}", highlight=False)


@app.command()
def schedule(
    files: Annotated[list[str], typer.Option("-f", "--filename", help=FILES_HELP)],
    output: Annotated[Format, typer.Option("-o", "--output", help="Output format.")] = Format.table,
    now: Annotated[
        datetime | None,
        typer.Option(
            "--now",
            help="The time the pass takes place at (RFC 3339; default: the clock's). An object without a "
            "creationTimestamp counts as created then; the sla plugin measures waiting times up to it.",
            formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"],
        ),
    ] = None,
) -> None:
    """One scheduling pass over the manifests: placements, evictions and pending jobs with reasons."""
    ms = load_manifests(files, stdin=sys.stdin)
    prepared = prepare(ms, _seconds(now))
    err = _stderr()
    warn(err, prepared.warnings)
    if prepared.errors:
        fail(err, prepared.errors)
        raise typer.Exit(1)
    decisions = run_schedule(prepared.snapshot, prepared.config)
    render(decisions, output.value, _stdout())


def _seconds(moment: datetime | None) -> float:
    """An instant as seconds since the epoch (a time without an offset is UTC, as creationTimestamps are read)."""
    if moment is None:
        return time.time()
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


app.command()(simulate)
app.command()(sweep)
app.command()(serve)
app.command()(kube)
for client_command in (get, describe, apply, delete, patch):
    app.command()(client_command)


if __name__ == "__main__":  # pragma: no cover
    app()
