"""`tidegate serve`: the live control plane behind its REST API, scheduling on the wall clock."""

from __future__ import annotations

import ssl
import threading
import time
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from tidegate.cli.fleet_folder import served_fleet
from tidegate.cli.output import fail, warn
from tidegate.cli.sources import FILES_HELP, manifest_paths, stdin_once
from tidegate.clock import WallClock
from tidegate.live.control_plane import DEFAULT_PERIOD_SECONDS
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import load_manifests
from tidegate.server.access import read_access
from tidegate.server.audit import STDERR, AuditLog
from tidegate.store import StoreError
from tidegate.store.lease import DURATION_SECONDS, RENEW_SECONDS, StoreLease, identity

#: Where state lives unless told: a file in the current directory, so accepted work survives a restart.
DEFAULT_STORE = "sqlite:///tidegate.db"
#: The `--store` value that keeps state in memory only (a restart forgets it).
MEMORY = "memory"
#: Seconds a standby's answering server has to give its address up to the API.
STANDBY_STOP_SECONDS = 10.0
#: Addresses only this machine reaches: an API served there without a token is not a warning.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Manifest files or folders: Nodes, Queues, PriorityClasses, a configuration."),
    ] = None,
    files: Annotated[list[str] | None, typer.Option("-f", "--filename", help=FILES_HELP)] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8080,
    period: Annotated[
        float, typer.Option("--period", min=0.001, help="Seconds between scheduling cycles (Volcano's schedulePeriod).")
    ] = DEFAULT_PERIOD_SECONDS,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            envvar="TIDEGATE_STORE",
            help="Where state lives: a SQLAlchemy URL (sqlite:///path.db, postgresql+psycopg://...), "
            "a file path (SQLite), or 'memory' (a restart forgets every job). Also read from $TIDEGATE_STORE, "
            "which keeps a database password out of the process list.",
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
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="The API's bearer tokens: one token (may do everything), or Kubernetes' static token file "
            '(token,user,uid,"groups" per line; groups tidegate:view, tidegate:submit[:<namespace>], '
            "tidegate:agent, tidegate:admin). Every call but /healthz, /readyz and /metrics must then send "
            "'Authorization: Bearer <token>'. Without it the API is open to whoever reaches the port.",
        ),
    ] = None,
    tls_cert_file: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert-file",
            help="Serve HTTPS with this PEM certificate (chain), with --tls-private-key-file. Without them the "
            "API speaks plain HTTP.",
        ),
    ] = None,
    tls_private_key_file: Annotated[
        Path | None, typer.Option("--tls-private-key-file", help="The PEM private key of --tls-cert-file.")
    ] = None,
    audit_log: Annotated[
        str,
        typer.Option(
            "--audit-log",
            help="Where every API call that may change state is recorded, one JSON line each (who, verb, path, "
            "time, answer): a file appended to, or '-' for standard error.",
        ),
    ] = STDERR,
    standby: Annotated[
        bool,
        typer.Option(
            "--standby",
            help="When another server holds the store, wait and take it over once that server stops (or stops "
            "renewing its lease), instead of refusing to start.",
        ),
    ] = False,
    lease_seconds: Annotated[
        float,
        typer.Option(
            "--store-lease-seconds",
            min=0.1,
            help="How long a server that stopped renewing its hold on the store keeps it before another may "
            "take over (a clean stop gives it up at once).",
        ),
    ] = DURATION_SECONDS,
) -> None:
    """Run the live control plane: the cluster comes from the manifests, jobs through the API (see docs/live.md)."""
    import uvicorn  # the web stack loads only when serving: the other commands start faster

    from tidegate.server.app import GracefulServer, create_app
    from tidegate.server.history import PoolHistory
    from tidegate.server.metrics import MeteredPlane
    from tidegate.store.sql import Store

    sources = manifest_paths(paths, files)
    stdin = stdin_once(sources)
    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:
        access = read_access(token_file) if token_file is not None else None
        tls = check_tls(tls_cert_file, tls_private_key_file)
        audit = AuditLog(audit_log)
    except ValueError as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
    if access is None and host not in LOOPBACK:
        warn(
            err, [f"the API on {host} has no authentication: anyone who reaches it can submit and patch (--token-file)"]
        )
    elif tls is None and host not in LOOPBACK:
        warn(err, [f"the API on {host} is plain HTTP: its bearer token crosses the network readable (--tls-cert-file)"])
    ms = load_manifests(sources, stdin=stdin())
    clock = WallClock(start=time.time())
    lease = None
    cert, key = tls or (None, None)
    #: How the API is served (and a standby's answers while it waits).
    options: dict[str, Any] = {"host": host, "port": port, "log_level": "warning", "ssl_certfile": cert}
    options["ssl_keyfile"] = key
    try:
        fleet = served_fleet(ms, scenario)
        warn(err, [*fleet.warnings, *fleet.notes])
        opened = None if store == MEMORY else Store(store_url(store))
        if opened is not None:
            lease = StoreLease(opened, identity(), lease_seconds, min(RENEW_SECONDS, lease_seconds / 3))
        plane = MeteredPlane.from_manifests(
            ms,
            clock,
            opened,
            fleet.pools,
            fleet.hpas,
            fleet.burst,
            fleet.budget,
            claim=partial(take_store, lease, standby, console, options) if lease is not None else None,
            cloud_pods=fleet.cloud_pods,
        )
    except (ValueError, typer.BadParameter, StoreError, ManifestErrors) as exc:
        if lease is not None:
            lease.release()  # the next start need not wait for it
        fail(err, exc.errors if isinstance(exc, ManifestErrors) else [exc])
        raise typer.Exit(1) from exc
    warn(err, plane.warnings)
    plane.start(clock, period)
    history = PoolHistory(plane)
    history.start(clock)
    threading.Thread(target=clock.run, name="tidegate-cycles", daemon=True).start()
    console.print(
        f"tidegate: {len(plane.nodes)} nodes, {len(plane.queues)} queues, {len(plane.jobs)} jobs; "
        f"a cycle every {period:g} s; API on {'https' if tls else 'http'}://{host}:{port}",
        highlight=False,
    )
    where = f"in {opened.where}" if opened is not None else "in memory only (a restart forgets it)"
    console.print(f"tidegate: state lives {where}", highlight=False, soft_wrap=True)
    if fleet.scenario:
        budget = fleet.budget
        console.print(
            f"tidegate: scenario {fleet.scenario}: {len(fleet.pools)} node pools, {len(fleet.hpas)} HPAs, "
            f"burst {'to ' + fleet.burst.queue if fleet.burst else 'off'}, "
            f"budget {f'{budget.per_period:,.2f} per {budget.period_hours:g} h' if budget else 'off'}",
            highlight=False,
        )
    server = GracefulServer(uvicorn.Config(create_app(plane, access, audit, history), **options))
    stopped, lost = threading.Event(), threading.Event()
    if lease is not None:
        threading.Thread(
            target=keep_store, args=(lease, stopped, lost, server, err), name="tidegate-lease", daemon=True
        ).start()
    try:
        server.run()
    finally:
        stopped.set()
        plane.stop()
        history.stop()
        if lease is not None:
            lease.release()
        if opened is not None:
            opened.close()
        audit.close()
    if lost.is_set():
        raise typer.Exit(1)


def take_store(lease: StoreLease, standby: bool, console: Console, options: dict[str, Any]) -> None:
    """Hold the store's lease before anything is loaded from it. Another server's lease is waited out
    while its record does not change (that server died); a change shows it alive, and then this one
    refuses to start (StoreError), or with `standby` waits until it stops, answering on its address
    meanwhile (`standby_app`: alive, not ready). A store that cannot be opened or reached, at first or
    while waiting, is a StoreError naming it and why."""
    import uvicorn

    from tidegate.server.app import standby_app

    if lease.hold():
        return
    if lease.error:  # the store cannot be opened or reached: no server holds it, none is waited for
        raise StoreError(lease.error)
    answering, thread = None, None
    if standby:
        answering = uvicorn.Server(uvicorn.Config(standby_app(lambda: lease.seen_holder), **options))
        thread = threading.Thread(target=answering.run, name="tidegate-standby", daemon=True)
        thread.start()
    try:
        told = False
        while not lease.hold():
            if lease.error:
                raise StoreError(lease.error)
            if not standby and lease.renewals_seen:
                raise StoreError(
                    f"store {lease.store.where} is in use by {lease.seen_holder}, which keeps renewing its hold: "
                    "stop that server first, or start this one with --standby to take over when it stops"
                )
            if not told:
                doing = "standing by to take over when it stops" if standby else f"waiting {lease.duration:g} s for it"
                console.print(f"tidegate: store held by {lease.seen_holder}; {doing}", highlight=False)
                told = True
            time.sleep(lease.renew / 2)
    finally:
        if answering is not None and thread is not None:  # the address is the API's from now on
            answering.should_exit = True
            thread.join(STANDBY_STOP_SECONDS)


def keep_store(lease: StoreLease, stopped: threading.Event, lost: threading.Event, server: Any, err: Console) -> None:
    """Renew the store's lease until the server stops; a lost lease stops the server (its writes are refused
    from then on), and `tidegate serve` exits 1."""
    while not stopped.wait(lease.renew / 2):
        if not lease.hold():
            err.print(f"tidegate: lost the store to {lease.seen_holder or 'another server'}: stopping", highlight=False)
            lost.set()
            server.should_exit = True
            return


def check_tls(cert: Path | None, key: Path | None) -> tuple[str, str] | None:
    """The certificate and key files to serve HTTPS with (None: plain HTTP), loaded once here so a bad one is
    refused before serving. Raises ValueError naming the option and file."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = (
            ("--tls-cert-file", "--tls-private-key-file")
            if key is None
            else ("--tls-private-key-file", "--tls-cert-file")
        )
        raise ValueError(f"{given} needs {missing}")
    for option, path in (("--tls-cert-file", cert), ("--tls-private-key-file", key)):
        try:
            path.read_bytes()
        except OSError as exc:
            raise ValueError(f"{option} {path}: {exc.strerror or exc}") from exc
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ValueError(
            f"--tls-cert-file {cert} with --tls-private-key-file {key}: not a PEM certificate and its private key "
            f"({exc.reason or exc})"
        ) from exc
    return str(cert), str(key)


def store_url(value: str) -> str:
    """`--store`'s value as a SQLAlchemy URL: a URL as given, anything else a SQLite file's path."""
    return value if "://" in value else f"sqlite:///{value}"
