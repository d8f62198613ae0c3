"""Run a sweep's points on Ray: each point is one task (one simulation), on a local Ray started here with a
bounded number of CPUs or on an existing cluster. Finished points are written to the output folder as they
come (`points/<key>.json`), so a sweep that stops or is run again only runs the points it does not have.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidegate.sim.loader import SimulationInput
from tidegate.sim.run import run_scenario
from tidegate.sweep.plan import Plan, PlannedPoint, describe, tidegate_version

#: The local Ray's object store: points pass a folder's input (kilobytes) and return a summary.
OBJECT_STORE_BYTES = 200 * 1024 * 1024
POINTS_DIR = "points"
LOG_FILE = "sweep.log"
RAY_LOGS = "ray-logs"


class RayMissing(RuntimeError):
    """Ray is not installed, or (RayUnreachable) the cluster `--address` names cannot be joined."""


class RayUnreachable(RayMissing):
    """Nothing answers at `--address`, or the cluster there refused to be joined."""


#: How long `--address`'s host may take to accept a connection before the sweep says nothing answers there.
ADDRESS_PROBE_SECONDS = 5.0
#: The ports Ray's addresses default to: a GCS (`host`, `host:port`) and a Ray Client server (`ray://host`).
GCS_PORT, CLIENT_PORT = 6379, 10001


@dataclass(slots=True)
class Outcome:
    """What became of a point: its summary (ran now or found in the output folder), or why it failed."""

    planned: PlannedPoint
    summary: dict[str, Any] | None = None
    run_seconds: float = 0.0
    error: str = ""
    resumed: bool = False
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.summary is not None


@dataclass(slots=True)
class SweepRun:
    """Every point's outcome, in point order, and how many ran now."""

    outcomes: list[Outcome] = field(default_factory=list)
    ran: int = 0
    resumed: int = 0
    failed: int = 0


Progress = Callable[[Outcome, int, int], None]


def simulate_point(inp: SimulationInput, simulation: str, scenario: str) -> tuple[dict[str, Any], float]:
    """One point: the scenario run as `tidegate simulate` runs it; its summary and the run's length (s)."""
    result = run_scenario(inp, simulation, scenario)
    return result.summary, result.simulation.end


def stored(out: Path, planned: PlannedPoint) -> Outcome | None:
    """The point as a finished run of this tidegate version left it in the output folder, if it did."""
    path = out / POINTS_DIR / f"{planned.key}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != planned.key or record.get("tidegate") != tidegate_version():
        return None
    summary = record.get("summary")
    if not isinstance(summary, dict):
        return None
    return Outcome(planned, summary, float(record.get("run_seconds", 0.0)), resumed=True)


def _store(out: Path, plan: Plan, outcome: Outcome) -> None:
    planned = outcome.planned
    record = {
        "key": planned.key,
        "tidegate": tidegate_version(),
        "simulation": plan.simulation,
        "scenario": plan.scenario,
        "values": planned.point.shown,
        "idc_gpus": planned.idc_gpus,
        "run_seconds": outcome.run_seconds,
        "wall_seconds": round(outcome.wall_seconds, 2),
        "summary": outcome.summary,
    }
    folder = out / POINTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{planned.key}.json.partial"
    partial.write_text(json.dumps(record, indent=1, default=str) + "\n")
    partial.replace(folder / f"{planned.key}.json")  # a sweep stopped mid-write leaves no half point


def run_sweep(
    plan: Plan,
    out: Path,
    workers: int = 2,
    address: str | None = None,
    on_progress: Progress | None = None,
) -> SweepRun:
    """Every point of the plan: found in `out`, failed in validation, or run on Ray now. A point whose run
    raises is reported with its error; the others are kept."""
    out.mkdir(parents=True, exist_ok=True)
    log = _logger(out)
    result = SweepRun()
    outcomes: dict[int, Outcome] = {}
    todo: list[PlannedPoint] = []
    total = len(plan.points)
    by_key: dict[str, list[PlannedPoint]] = {}
    for planned in plan.points:
        index = planned.point.index
        if planned.inp is None:
            outcomes[index] = Outcome(planned, error="; ".join(planned.errors))
            log.info("point %d (%s): invalid: %s", index, describe(planned.point.shown), outcomes[index].error)
            continue
        found = stored(out, planned)
        if found is not None:
            outcomes[index] = found
            log.info("point %d (%s): found in %s", index, describe(planned.point.shown), POINTS_DIR)
            continue
        if planned.key in by_key:  # the same documents as an earlier point: run once
            by_key[planned.key].append(planned)
            continue
        by_key[planned.key] = [planned]
        todo.append(planned)
    done = 0
    for outcome in sorted(outcomes.values(), key=lambda o: o.planned.point.index):
        done += 1
        if on_progress:
            on_progress(outcome, done, total)
    if todo:
        with ray_session(out, workers, address) as ray:
            for outcome in _run_on_ray(ray, plan, todo, log):
                if outcome.ok:
                    _store(out, plan, outcome)
                for planned in by_key[outcome.planned.key]:
                    same = Outcome(
                        planned, outcome.summary, outcome.run_seconds, outcome.error, False, outcome.wall_seconds
                    )
                    outcomes[planned.point.index] = same
                    done += 1
                    if on_progress:
                        on_progress(same, done, total)
    result.outcomes = [outcomes[p.point.index] for p in plan.points]
    result.resumed = sum(1 for o in result.outcomes if o.resumed)
    result.failed = sum(1 for o in result.outcomes if not o.ok)
    result.ran = len(todo)
    log.info("%d points: %d ran, %d found, %d failed", total, result.ran, result.resumed, result.failed)
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    return result


def _run_on_ray(ray: Any, plan: Plan, todo: list[PlannedPoint], log: logging.Logger) -> Iterator[Outcome]:
    """Submit every point as a task (one CPU each, never retried: a crash is the point's result), then yield
    each as it finishes."""
    task = ray.remote(simulate_point).options(num_cpus=1, max_retries=0)
    pending: dict[Any, tuple[PlannedPoint, float]] = {}
    for planned in todo:
        ref = task.remote(planned.inp, plan.simulation, plan.scenario)
        pending[ref] = (planned, time.perf_counter())
        log.info("point %d (%s): submitted", planned.point.index, describe(planned.point.shown))
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            planned, started = pending.pop(ref)
            wall = time.perf_counter() - started
            try:
                summary, end = ray.get(ref)
            except Exception as exc:  # the point's own error (RayTaskError wraps it) or a dead worker
                error = _error_text(exc)
                log.info("point %d (%s): failed: %s", planned.point.index, describe(planned.point.shown), error)
                yield Outcome(planned, error=error, wall_seconds=wall)
                continue
            log.info("point %d (%s): done", planned.point.index, describe(planned.point.shown))
            yield Outcome(planned, summary, end, wall_seconds=wall)


def _error_text(exc: BaseException) -> str:
    """The point's own exception as `Type: message` (Ray wraps it in a RayTaskError with the remote traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip() or "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


@contextmanager
def ray_session(out: Path, workers: int, address: str | None) -> Iterator[Any]:
    """Ray, connected for the sweep: an existing one (a test's, or the caller's) is used as it is; `address`
    joins a running cluster; otherwise a local Ray starts with `workers` CPUs, no dashboard, no usage stats and
    a small object store, and stops when the sweep ends (its logs copied to `out/ray-logs`)."""
    try:
        import ray
    except ImportError as exc:
        raise RayMissing("tidegate sweep runs on Ray: pip install 'tidegate[sweep]'") from exc
    if ray.is_initialized():
        yield ray
        return
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if address:
        _join(ray, address)
        try:
            yield ray
        finally:
            ray.shutdown()
        return
    # Ray's session folder holds its sockets, whose paths must stay short: a temporary folder, logs copied out.
    temp = tempfile.mkdtemp(prefix="tg-ray-")
    try:
        ray.init(
            num_cpus=workers,
            num_gpus=0,
            include_dashboard=False,
            object_store_memory=OBJECT_STORE_BYTES,
            logging_level=logging.ERROR,  # not its notes on token authentication and the like
            log_to_driver=False,
            _temp_dir=temp,
        )
        try:
            yield ray
        finally:
            ray.shutdown()
            logs = Path(temp) / "session_latest" / "logs"
            if logs.is_dir():
                shutil.copytree(logs, out / RAY_LOGS, dirs_exist_ok=True, symlinks=True)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _join(ray: Any, address: str) -> None:
    """Connect to the cluster at `address`, or raise RayUnreachable saying why in one line. A host:port where
    nothing listens is found out with one connection first: Ray itself retries it for many minutes."""
    probe = _probe_target(address)
    if probe is not None:
        host, port = probe
        try:
            socket.create_connection((host, port), timeout=ADDRESS_PROBE_SECONDS).close()
        except OSError as exc:
            why = "no answer in time" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            raise RayUnreachable(f"--address {address}: no Ray cluster answers at {host}:{port} ({why})") from exc
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except Exception as exc:  # Ray's ConnectionError, RuntimeError, AuthenticationError, ValueError ...
        chain: list[BaseException] = []
        seen: BaseException | None = exc
        while seen is not None and len(chain) < 8:
            chain.append(seen)
            seen = seen.__cause__ or seen.__context__
        said = " ".join(str(e) for e in chain)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = ""
        if "InvalidAuthToken" in said or "authentication token" in said.lower():
            hint = (
                ": the cluster asks for its token (Ray's token authentication): set RAY_AUTH_MODE=token, with the "
                "cluster's token in ~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH"
            )
        raise RayUnreachable(f"--address {address}: cannot join the Ray cluster: {first}{hint}") from exc


def _probe_target(address: str) -> tuple[str, int] | None:
    """The host and port a Ray address connects to first (`host:port`, `host` for a GCS on 6379,
    `ray://host[:port]` for a Ray Client server on 10001), or None for what Ray looks up itself (`auto`,
    `local`, another scheme)."""
    text = address.strip()
    default = GCS_PORT
    if text.startswith("ray://"):
        text, default = text[len("ray://") :], CLIENT_PORT
    elif "://" in text or text in ("auto", "local", ""):
        return None
    host, _, port = text.rpartition(":") if text.count(":") == 1 or text.startswith("[") else ("", "", "")
    if not host:
        host, port = text, ""
    host = host.strip("[]")
    if not port:
        return host, default
    if not port.isdigit():
        return None  # Ray's own error says what it makes of it
    return host, int(port)


def _logger(out: Path) -> logging.Logger:
    """The sweep's own log, `out/sweep.log`: each point submitted, found, done or failed."""
    log = logging.getLogger(f"tidegate.sweep.{out.resolve()}")
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(out / LOG_FILE)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    return log
