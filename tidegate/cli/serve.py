"""`tidegate serve`: the live control plane behind its REST API, scheduling on the wall clock."""

from __future__ import annotations

import threading
import time
from typing import Annotated

import typer
from rich.console import Console

from tidegate.autoscale.hpa import HPASpec
from tidegate.cli.output import fail, warn
from tidegate.clock import WallClock
from tidegate.fleet.burst import Burst
from tidegate.fleet.pool import Pool
from tidegate.live.control_plane import DEFAULT_PERIOD_SECONDS, ControlPlane
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import ManifestSet, load_manifests
from tidegate.sim.loader import load_simulation
from tidegate.sim.run import scenario_fleet
from tidegate.sim.spec import ScenarioSpec
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
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            help="With a simulation folder: the Scenario whose quotas and cloud burst are served "
            "(default: its only one, else the first that bursts).",
        ),
    ] = None,
) -> None:
    """Run the live control plane: the cluster comes from the manifests, jobs through the API (see docs/live.md)."""
    import uvicorn  # the web stack loads only when serving: the other commands start faster

    from tidegate.server.app import create_app
    from tidegate.store.sql import Store

    console, err = Console(), Console(stderr=True)
    ms = load_manifests(paths)
    warn(err, ms.warnings)
    clock = WallClock(start=time.time())
    try:
        pools, hpas, burst, served, notes = served_fleet(paths, ms, scenario)
        warn(err, notes)
        opened = None if store == MEMORY else Store(store_url(store))
        plane = ControlPlane.from_manifests(ms, clock, opened, pools, hpas, burst)
    except (ValueError, typer.BadParameter) as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
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
    if served:
        console.print(
            f"tidegate: scenario {served}: {len(pools)} node pools, {len(hpas)} HPAs, "
            f"burst {'to ' + burst.queue if burst else 'off'}",
            highlight=False,
        )
    try:
        uvicorn.run(create_app(plane), host=host, port=port, log_level="warning")
    finally:
        plane.stop()
        if opened is not None:
            opened.close()


def served_fleet(
    paths: list[str], ms: ManifestSet, scenario: str | None
) -> tuple[list[Pool], list[HPASpec], Burst | None, str, list[str]]:
    """A simulation folder's fleet as served live: node pools (IDC pools' nodes at once, cloud pools sized by
    their HPAs), the chosen Scenario's quotas (static quotas rewrite `ms.queues`) and cloud burst, its name
    ("" for none), and notes on what is not served. A folder of Nodes alone gives no pools. Raises
    ManifestErrors or BadParameter."""
    if not any(s.kind in ("Cluster", "NodePool") for s in ms.skipped):
        if scenario is not None:
            raise typer.BadParameter("the folder has no NodePools: --scenario needs a simulation folder")
        return [], [], None, "", [f"skipped {s.kind}/{s.name} ({s.source}): not served live" for s in ms.skipped]
    inp = load_simulation(paths)
    name, chosen = _scenario(inp.scenarios, scenario)
    queues, pools = scenario_fleet(inp, chosen)
    ms.queues = queues
    templates = {w.job_template for w in inp.workloads.values() if w.job_template}
    ms.jobs = [job for job in ms.jobs if job.name not in templates]  # a Workload's policy template, not a job
    notes = [] if name else ["no bursting Scenario (choose one with --scenario): IDC pools only, elastic quotas"]
    if not chosen.burst.enabled:
        pools = [pool for pool in pools if not pool.is_cloud]
    for pool in pools:
        if pool.spec.interruption is not None or pool.spec.pricing.model == "spot":
            notes.append(f"NodePool {pool.name}: spot interruptions are not simulated live (the provider's happen)")
    ignored = [what for what, on in (("budget", chosen.budget), ("linkOutages", chosen.link_outages)) if on]
    if ignored:
        notes.append(f"scenario {name}: {', '.join(ignored)} not served live")
    burst = Burst(chosen.burst.queue, chosen.burst.after_seconds) if chosen.burst.enabled else None
    return pools, list(inp.hpas) if burst is not None else [], burst, name, notes


def _scenario(scenarios: dict[str, ScenarioSpec], wanted: str | None) -> tuple[str, ScenarioSpec]:
    if wanted is not None:
        if wanted not in scenarios:
            raise typer.BadParameter(f"no Scenario {wanted!r}; the folder has {', '.join(scenarios) or 'none'}")
        return wanted, scenarios[wanted]
    if len(scenarios) == 1:
        return next(iter(scenarios.items()))
    bursting = [(n, s) for n, s in scenarios.items() if s.burst.enabled]
    return bursting[0] if bursting else ("", ScenarioSpec())


def store_url(value: str) -> str:
    """`--store`'s value as a SQLAlchemy URL: a URL as given, anything else a SQLite file's path."""
    return value if "://" in value else f"sqlite:///{value}"
