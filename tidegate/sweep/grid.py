"""A Sweep manifest (tidegate.io/v1alpha1): which fields of a simulation folder to vary, over which values,
and how to pick the points (a full grid, or N random or Latin-hypercube samples with a seed).

    apiVersion: tidegate.io/v1alpha1
    kind: Sweep
    metadata: {name: capacity}
    spec:
      scenario: elastic-burst                 # what every point runs (optional when the Simulation has one)
      sample: grid                            # or random / latin-hypercube, with points: N and seed: S
      idcGpuMonthPrice: 850                   # owned IDC capacity, a GPU-month
      targets: ["wait_p95<=900"]
      parameters:
        NodePool/idc-a100.spec.count: [120, 128, 136]          # a field, by path, and its values
        Scenario/elastic-burst.spec.burst.afterSeconds: {min: 60, max: 3600, step: 60}
        cloud-nodes:                                           # fields that move together (zipped)
          label: [small, medium, large]                        # optional: what each step is called
          HorizontalPodAutoscaler/cloud-burst-hpa.spec.maxReplicas: [10, 20, 40]
          Queue/burst-cloud.spec.capability[nvidia.com/gpu]: ["80", "160", "320"]

A path is `Kind/name.field.field[key][0]`: the object by kind and metadata.name, then keys of its
document; brackets hold a key with dots or slashes, or a list index. Every path is checked against the
folder before anything runs (`patch.resolve`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tidegate.model.errors import ManifestError, Source

SAMPLES = ("grid", "random", "latin-hypercube")
#: In a mapping of fields that move together, the key naming each step.
LABEL = "label"
#: Points one sweep may have: each is a simulation run.
MAX_POINTS = 10_000
#: What owned IDC capacity costs a GPU-month by default (docs/simulation.md, Sweeps, says where it comes from):
#: an 8-GPU A100 server at NVIDIA DGX A100's launch price ($199,000) written off over 36 months, $691 a GPU,
#: plus its 6.5 kW at $200 a kW-month of colocation, $163 a GPU.
IDC_GPU_MONTH_PRICE = 850.0


@dataclass(frozen=True, slots=True)
class Dimension:
    """One axis of the sweep: its name, the field paths it sets, and its values (one tuple of values a
    path for each step; a continuous range has `low`/`high` instead)."""

    name: str
    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...] = ()
    low: float | None = None
    high: float | None = None
    integer: bool = False
    #: What each step is called in tables and plots (fields moving together); empty: the values themselves.
    labels: tuple[str, ...] = ()

    def shown(self, values: tuple[Any, ...]) -> Any:
        """A step as tables show it: its label, the value of a single field, or the values joined."""
        if self.labels:
            return self.labels[self.values.index(values)]
        return values[0] if len(values) == 1 else ", ".join(_show(v) for v in values)

    @property
    def discrete(self) -> bool:
        return self.low is None

    def at(self, u: float) -> tuple[Any, ...]:
        """The values a uniform draw u in [0, 1) picks: a list's entry floor(u * len), or a point of the range."""
        if self.discrete:
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        assert self.low is not None and self.high is not None
        if self.integer:
            span = int(self.high) - int(self.low) + 1
            return (int(self.low) + min(int(u * span), span - 1),) * len(self.paths)
        return (self.low + u * (self.high - self.low),) * len(self.paths)


@dataclass(frozen=True, slots=True)
class Point:
    """One simulation of the sweep: its number, each dimension's value as shown, and the fields it sets."""

    index: int
    shown: dict[str, Any]
    patches: tuple[tuple[str, Any], ...]


@dataclass(slots=True)
class SweepSpec:
    """A Sweep manifest, read."""

    name: str
    source: Source
    simulation: str | None = None
    scenario: str | None = None
    sample: str = "grid"
    points: int = 0
    seed: int = 0
    idc_gpu_month_price: float | None = None
    targets: list[str] = field(default_factory=list)
    dimensions: list[Dimension] = field(default_factory=list)

    def error(self, field_: str, message: str) -> ManifestError:
        return ManifestError(self.source, "Sweep", self.name, field_, message)


def parameter_field(name: str) -> str:
    return f"spec.parameters[{name}]"


def parse_sweep(doc: dict[str, Any], source: Source) -> tuple[SweepSpec, list[ManifestError]]:
    """The Sweep document's spec, and every problem in it (each naming its field)."""
    metadata = doc.get("metadata")
    name = str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
    sweep = SweepSpec(name, source)
    errors: list[ManifestError] = []
    if not name:
        errors.append(sweep.error("metadata.name", "is required"))
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return sweep, [*errors, sweep.error("spec", "is required: a mapping with parameters")]
    known = {"simulation", "scenario", "sample", "points", "seed", "idcGpuMonthPrice", "targets", "parameters"}
    for key in spec:
        if key not in known:
            errors.append(sweep.error(f"spec.{key}", f"unknown field; a Sweep has {', '.join(sorted(known))}"))
    for key in ("simulation", "scenario"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            errors.append(sweep.error(f"spec.{key}", "must be a name"))
        elif value is not None:
            setattr(sweep, key, value)
    sample = spec.get("sample", "grid")
    if sample not in SAMPLES:
        errors.append(sweep.error("spec.sample", f"{sample!r}: one of {', '.join(SAMPLES)}"))
    else:
        sweep.sample = sample
    for key, low in (("points", 1), ("seed", 0)):
        value = spec.get(key)
        if value is None:
            continue
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < low
            or value > (MAX_POINTS if key == "points" else 2**63)
        ):
            bound = f"from 1 to {MAX_POINTS:,}" if key == "points" else "a whole number >= 0"
            errors.append(sweep.error(f"spec.{key}", f"{value!r}: must be {bound}"))
        else:
            setattr(sweep, key, value)
    if sweep.sample != "grid" and not sweep.points and "points" not in spec:
        errors.append(sweep.error("spec.points", f"is required with sample: {sweep.sample} (how many points)"))
    if sweep.sample == "grid" and "points" in spec:
        errors.append(sweep.error("spec.points", "only with sample: random or latin-hypercube (a grid has them all)"))
    price = spec.get("idcGpuMonthPrice")
    if price is not None:
        if not _number(price) or price < 0:
            errors.append(sweep.error("spec.idcGpuMonthPrice", f"{price!r}: must be a number >= 0"))
        else:
            sweep.idc_gpu_month_price = float(price)
    targets = spec.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        errors.append(sweep.error("spec.targets", "must be a list of strings such as 'wait_p95<=900'"))
    else:
        sweep.targets = list(targets)
    parameters = spec.get("parameters")
    if not isinstance(parameters, dict) or not parameters:
        errors.append(sweep.error("spec.parameters", "is required: a mapping of field paths to their values"))
        return sweep, errors
    for key, value in parameters.items():
        dimension, problems = _dimension(str(key), value, sweep)
        errors.extend(problems)
        if dimension is not None:
            sweep.dimensions.append(dimension)
    return sweep, errors


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_path(key: str) -> bool:
    """A parameter named by a field path (Kind/name.field...), not a dimension of fields moving together."""
    return "/" in key.split(".", 1)[0].split("[", 1)[0]


def short_name(name: str) -> str:
    """A parameter's name for a narrow column: `HorizontalPodAutoscaler/hpa.spec.maxReplicas` -> `hpa maxReplicas`."""
    if not is_path(name):
        return name
    rest = name.split("/", 1)[1]
    obj, _, fields = rest.partition(".")
    return f"{obj} {fields.removeprefix('spec.')}" if fields else obj


def _dimension(key: str, value: Any, sweep: SweepSpec) -> tuple[Dimension | None, list[ManifestError]]:
    where = parameter_field(key)
    if is_path(key):
        if isinstance(value, list):
            if not value:
                return None, [sweep.error(where, "has no value")]
            return Dimension(key, (key,), tuple((v,) for v in value)), []
        if isinstance(value, dict) and value and set(value) <= {"min", "max", "step"}:
            return _range(key, value, sweep)
        message = "must be a list of values, or a range {min, max} (with step: in a grid)"
        return None, [sweep.error(where, message)]
    fields = {k: v for k, v in value.items() if k != LABEL} if isinstance(value, dict) else {}
    if not fields or not all(isinstance(k, str) and is_path(k) for k in fields):
        message = (
            "a name that is not a field path (Kind/name.field) holds fields that move together: "
            f"a mapping of field paths to lists of the same length (and '{LABEL}': a name for each step)"
        )
        return None, [sweep.error(where, message)]
    lists = list(value.values())
    if not all(isinstance(v, list) and v for v in lists):
        return None, [sweep.error(where, "each field's values must be a non-empty list")]
    lengths = {len(v) for v in lists}
    if len(lengths) > 1:
        counts = ", ".join(f"{path}: {len(v)}" for path, v in value.items())
        return None, [sweep.error(where, f"the lists move together and must be as long as each other ({counts})")]
    labels = tuple(str(v) for v in value.get(LABEL, ()))
    rows = tuple(zip(*fields.values(), strict=True))
    return Dimension(key, tuple(fields), rows, labels=labels), []


def _range(key: str, value: dict[str, Any], sweep: SweepSpec) -> tuple[Dimension | None, list[ManifestError]]:
    where = parameter_field(key)
    low, high, step = value.get("min"), value.get("max"), value.get("step")
    if not isinstance(low, int | float) or not isinstance(high, int | float) or not _number(low) or not _number(high):
        return None, [sweep.error(where, f"a range needs numbers min <= max (got min {low!r}, max {high!r})")]
    if low > high:
        return None, [sweep.error(where, f"a range needs min <= max (got min {low!r}, max {high!r})")]
    integer = isinstance(low, int) and isinstance(high, int)
    if step is None:
        if sweep.sample == "grid":
            return None, [sweep.error(where, "a range in a grid needs a step (or sample: random / latin-hypercube)")]
        return Dimension(key, (key,), low=float(low), high=float(high), integer=integer), []
    if not isinstance(step, int | float) or not _number(step) or step <= 0:
        return None, [sweep.error(f"{where}.step", f"{step!r}: must be a number > 0")]
    count = math.floor((high - low) / step + 1e-9) + 1
    if count > MAX_POINTS:
        return None, [sweep.error(where, f"{count:,} values; at most {MAX_POINTS:,}")]
    integer = integer and isinstance(step, int)
    values = tuple((low + i * step,) if integer else (round(low + i * step, 12),) for i in range(count))
    return Dimension(key, (key,), values), []


def points(sweep: SweepSpec) -> list[Point]:
    """Every point of the sweep, in order: the grid's product (the last dimension varying fastest), or
    `points` random or Latin-hypercube draws from a numpy generator seeded by `seed` (same seed, same points).

    A Latin hypercube cuts each dimension into `points` equal strata and takes each stratum once, in a
    random order per dimension: every value of a short list comes up about equally often, and N points
    cover each range evenly, where N random draws would leave gaps."""
    dims = sweep.dimensions
    if sweep.sample == "grid":
        combos: list[tuple[tuple[Any, ...], ...]] = list(itertools.product(*(d.values for d in dims)))
    else:
        rng = np.random.default_rng(sweep.seed)
        n = sweep.points
        if sweep.sample == "random":
            draws = rng.random((n, len(dims)))
        else:
            strata = np.stack([rng.permutation(n) for _ in dims], axis=1) if dims else np.zeros((n, 0))
            draws = (strata + rng.random((n, len(dims)))) / n
        combos = [tuple(d.at(float(u)) for d, u in zip(dims, row, strict=True)) for row in draws]
    out = []
    for i, combo in enumerate(combos):
        shown: dict[str, Any] = {}
        patches: list[tuple[str, Any]] = []
        for dim, values in zip(dims, combo, strict=True):
            shown[dim.name] = dim.shown(values)
            patches.extend(zip(dim.paths, values, strict=True))
        out.append(Point(i, shown, tuple(patches)))
    return out


def grid_size(sweep: SweepSpec) -> int:
    """How many points the sweep has."""
    if sweep.sample != "grid":
        return sweep.points
    return math.prod(len(d.values) for d in sweep.dimensions)


def _show(value: Any) -> str:
    return "null" if value is None else str(value)
