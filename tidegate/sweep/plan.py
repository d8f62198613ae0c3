"""A sweep made ready to run: the folder and the Sweep manifest read and checked, every point's documents
patched in memory and validated exactly as `tidegate simulate` validates a folder, and each point keyed by
a hash of its patched documents and tidegate's version (what a resumed sweep finds in its output folder).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tidegate.model.errors import ManifestError, ManifestErrors, Source
from tidegate.model.kinds import SWEEP_KIND, TIDEGATE_API_VERSION
from tidegate.model.manifests import load_documents, read_documents
from tidegate.sim.loader import SimulationInput, simulation_input
from tidegate.sweep.analysis import Target, known_metrics, parse_target
from tidegate.sweep.grid import IDC_GPU_MONTH_PRICE, Point, SweepSpec, parameter_field, parse_sweep, points
from tidegate.sweep.patch import Document, FieldPath, PathError, apply, resolve


def tidegate_version() -> str:
    try:
        return version("tidegate")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "unknown"


@dataclass(slots=True)
class PlannedPoint:
    """A point ready to run (`inp`), or the errors its patched folder has (it will not run)."""

    point: Point
    key: str
    inp: SimulationInput | None
    errors: list[str] = field(default_factory=list)
    idc_gpus: int = 0


@dataclass(slots=True)
class Plan:
    """What `tidegate sweep` runs: the Simulation and Scenario each point runs, its points, the targets and
    the price of owned IDC capacity."""

    sweep: SweepSpec
    simulation: str
    scenario: str
    points: list[PlannedPoint]
    targets: list[Target]
    idc_gpu_month_price: float
    metrics: list[str]
    warnings: list[ManifestError] = field(default_factory=list)


def read_sweep(grid: str) -> SweepSpec:
    """The one Sweep manifest in `grid`; ManifestErrors naming the file and field for anything wrong."""
    docs, errors, _ = read_documents([grid])
    if errors:
        raise ManifestErrors(errors)
    sweeps = [(s, d) for s, d in docs if isinstance(d, dict) and d.get("kind") == SWEEP_KIND]
    if len(sweeps) != 1:
        found = f"{len(sweeps)} Sweep documents" if sweeps else "no Sweep document"
        message = f"{found}: the grid file holds one (apiVersion: {TIDEGATE_API_VERSION}, kind: {SWEEP_KIND})"
        raise ManifestErrors([ManifestError(Source(grid, 0), SWEEP_KIND, "", "", message)])
    source, doc = sweeps[0]
    assert isinstance(doc, dict)
    if doc.get("apiVersion") != TIDEGATE_API_VERSION:
        message = f"must be {TIDEGATE_API_VERSION}"
        raise ManifestErrors([ManifestError(source, SWEEP_KIND, "", "apiVersion", message)])
    sweep, problems = parse_sweep(doc, source)
    if problems:
        raise ManifestErrors(problems)
    return sweep


def plan(
    folder: list[str],
    grid: str,
    targets: list[str] | None = None,
    idc_gpu_month_price: float | None = None,
) -> Plan:
    """Read and check everything a sweep needs before any point runs: ManifestErrors for the folder (as
    `tidegate simulate` reports them) and the grid file (naming its entry and what exists); ValueError for a
    target naming an unknown metric. A point whose patched folder is invalid is kept, with its errors."""
    docs, errors, warnings = read_documents(folder)
    if errors:
        raise ManifestErrors(errors)
    where = ", ".join(folder)
    base = simulation_input(load_documents(docs, where))
    sweep = read_sweep(grid)
    simulation, scenario = _what_runs(base, sweep)
    resolved: dict[str, FieldPath] = {}
    problems: list[ManifestError] = []
    for dimension in sweep.dimensions:
        for path in dimension.paths:
            try:
                resolved[path] = resolve(path, docs)
            except PathError as exc:
                entry = parameter_field(dimension.name) + (f"[{path}]" if path != dimension.name else "")
                problems.append(sweep.error(entry, str(exc)))
    if problems:
        raise ManifestErrors(problems)
    metrics = known_metrics(q.name for q in base.queues)
    parsed = [parse_target(t, metrics) for t in (targets if targets else sweep.targets)]
    price = idc_gpu_month_price if idc_gpu_month_price is not None else sweep.idc_gpu_month_price
    root = _root(folder)
    planned = [_point(p, docs, resolved, where, root, simulation, scenario) for p in points(sweep)]
    return Plan(
        sweep,
        simulation,
        scenario,
        planned,
        parsed,
        IDC_GPU_MONTH_PRICE if price is None else price,
        metrics,
        [*warnings, *base.warnings],
    )


def _what_runs(inp: SimulationInput, sweep: SweepSpec) -> tuple[str, str]:
    """The Simulation (the Sweep's, or the folder's only one) and the Scenario every point runs (the Sweep's,
    or the Simulation's only one)."""
    if not inp.simulations:
        raise ValueError("no Simulation manifest found (kind: Simulation, apiVersion: tidegate.io/v1alpha1)")
    name = sweep.simulation
    if name is None:
        if len(inp.simulations) > 1:
            message = f"the folder has several simulations ({', '.join(inp.simulations)}): choose one"
            raise ManifestErrors([sweep.error("spec.simulation", message)])
        name = next(iter(inp.simulations))
    elif name not in inp.simulations:
        message = f"{name!r} is not a Simulation of the folder (it has {', '.join(inp.simulations)})"
        raise ManifestErrors([sweep.error("spec.simulation", message)])
    scenarios = inp.simulations[name].scenarios
    scenario = sweep.scenario
    if scenario is None:
        if len(scenarios) != 1:
            message = f"Simulation {name} runs {', '.join(scenarios)}: say which one every point runs"
            raise ManifestErrors([sweep.error("spec.scenario", message)])
        scenario = scenarios[0]
    elif scenario not in inp.scenarios:
        message = f"{scenario!r} is not a Scenario of the folder (it has {', '.join(inp.scenarios)})"
        raise ManifestErrors([sweep.error("spec.scenario", message)])
    return name, scenario


def _point(
    point: Point,
    docs: list[Document],
    resolved: dict[str, FieldPath],
    where: str,
    root: Path,
    simulation: str,
    scenario: str,
) -> PlannedPoint:
    patched = apply(docs, ((resolved[path], value) for path, value in point.patches))
    key = point_key(patched, root, simulation, scenario)
    try:
        inp = simulation_input(load_documents(patched, where))
    except ManifestErrors as exc:
        return PlannedPoint(point, key, None, [str(e) for e in exc.errors])
    return PlannedPoint(point, key, absolute_paths(inp), [], idc_gpus(inp))


def point_key(docs: list[Document], root: Path, simulation: str, scenario: str) -> str:
    """A hash of the point's documents (with their files relative to the folder, so the folder may be named
    another way or moved), the Simulation and Scenario it runs, and tidegate's version."""
    content = [
        [_relative(source.file, root), source.index, doc]
        for source, doc in docs
        if not (isinstance(doc, dict) and doc.get("kind") == SWEEP_KIND)
    ]
    text = json.dumps(
        {"tidegate": tidegate_version(), "simulation": simulation, "scenario": scenario, "documents": content},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _root(folder: list[str]) -> Path:
    first = Path(folder[0]) if folder else Path()
    return first if first.is_dir() else first.parent


def _relative(file: str, root: Path) -> str:
    try:
        return os.path.relpath(file, root)
    except ValueError:  # pragma: no cover - another drive on Windows
        return file


def absolute_paths(inp: SimulationInput) -> SimulationInput:
    """The input with its workloads' trace and tide files as absolute paths, for workers whose current folder
    is not the driver's (a Ray cluster's)."""
    for name, workload in inp.workloads.items():
        synthetic = workload.synthetic.model_copy(
            update={"tide_from": [os.path.abspath(p) for p in workload.synthetic.tide_from]}
        )
        path = os.path.abspath(workload.path) if workload.path else ""
        inp.workloads[name] = workload.model_copy(update={"path": path, "synthetic": synthetic})
    return inp


def idc_gpus(inp: SimulationInput) -> int:
    """The GPUs the folder owns: its IDC pools' nodes times their GPUs."""
    return sum(
        pool.count * pool.gpu.count
        for pool in inp.pools.values()
        if getattr(inp.clusters.get(pool.cluster), "type", "") == "idc"
    )


def describe(values: dict[str, Any]) -> str:
    """A point's values on one line."""
    return ", ".join(f"{name}={value}" for name, value in values.items())
