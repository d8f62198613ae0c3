"""`tidegate serve`: the live control plane behind its REST API, scheduling on the wall clock."""

from __future__ import annotations

import threading
import time
from typing import Annotated

import typer
from rich.console import Console

from tidegate.cli.output import fail, warn
from tidegate.clock import WallClock
from tidegate.live.control_plane import DEFAULT_PERIOD_SECONDS, ControlPlane
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import load_manifests
from tidegate.store import StoreError

#: Where state lives unless told: a file in the current directory, so accepted work survives a restart.
DEFAULT_STORE = "sqlite:///tidegate.db"
#: The `--store` value that keeps state in memory only (a restart forgets it).
MEMORY = "memory"


def serve(
    paths: Annotated[
        list[str], typer.Argument(help="Manifest files or folders: Nodes, Queues, PriorityClasses, a configuration.")
    ],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8080,
    period: Annotated[
        float, typer.Option("--period", min=0.001, help="Seconds between scheduling cycles (Volcano's schedulePeriod).")
    ] = DEFAULT_PERIOD_SECONDS,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="Where state lives: a SQLAlchemy URL (sqlite:///path.db, postgresql+psycopg://...), "
            "a file path (SQLite), or 'memory' (a restart forgets every job).",
        ),
    ] = DEFAULT_STORE,
) -> None:
    """Run the live control plane: the cluster comes from the manifests, jobs through the API (see docs/live.md)."""
    import uvicorn  # the web stack loads only when serving: the other commands start faster

    from tidegate.server.app import create_app
    from tidegate.store.sql import Store

    console, err = Console(), Console(stderr=True)
    ms = load_manifests(paths)
    warn(err, ms.warnings)
    # e.g. a simulation's NodePools and HPA: not run live
    warn(err, (f"skipped {s.kind}/{s.name} ({s.source}): not served live" for s in ms.skipped))
    clock = WallClock(start=time.time())
    try:
        opened = None if store == MEMORY else Store(store_url(store))
        plane = ControlPlane.from_manifests(ms, clock, opened)
    except StoreError as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
    except ManifestErrors as exc:
        fail(err, exc.errors)
        raise typer.Exit(1) from exc
    warn(err, plane.warnings)
    plane.start(clock, period)
    threading.Thread(target=clock.run, name="tidegate-cycles", daemon=True).start()
    console.print(
        f"tidegate: {len(plane.nodes)} nodes, {len(plane.queues)} queues, {len(plane.jobs)} jobs; "
        f"a cycle every {period:g} s; API on http://{host}:{port}",
        highlight=False,
    )
    where = f"in {opened.where}" if opened is not None else "in memory only (a restart forgets it)"
    console.print(f"tidegate: state lives {where}", highlight=False, soft_wrap=True)
    try:
        uvicorn.run(create_app(plane), host=host, port=port, log_level="warning")
    finally:
        plane.stop()
        if opened is not None:
            opened.close()


def store_url(value: str) -> str:
    """`--store`'s value as a SQLAlchemy URL: a URL as given, anything else a SQLite file's path."""
    return value if "://" in value else f"sqlite:///{value}"
