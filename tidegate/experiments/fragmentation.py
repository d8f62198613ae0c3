"""The GPU-sharing placement experiment of Alibaba's ATC'23 paper "Beware of Fragmentation", run
through tidegate's scheduling core.

Protocol (the paper's, as described in ../shared/data/README.md): fill a node list by sampling pods of
a pod list uniformly with replacement (seeded) until the GPUs they ask reach `until`% of the cluster's
GPUs; arrivals come in the order drawn (independent draws are already a shuffled order); nothing
departs; each pod is tried once, and a pod that fits nowhere fails and is not queued.

Every placement goes through the scheduler: one long-lived `Session` over the node list (configured
with the predicates plugin and gpushare with the policy under test, so nothing else ranks nodes), each
arrival registered with `Session.add_group` and placed by the allocate action's per-job turn
(`allocate_job`): the same filters, scores, card choice and statement as any scheduling cycle.

Measures, at each whole percentage p = 0..until of arrived workload (the state when the GPUs asked by
arrived pods first reach p% of capacity; row 0 is the empty cluster):

- alloc_pct = 100 x allocated milli-GPU / (1000 x cluster GPUs);
- frag_pct = 100 x fragmented milli-GPU / (1000 x cluster GPUs), where a node's fragmented milli-GPU is
  its expected fragmentation for the pod list's GPU shapes weighted by how often each appears in the
  list (the workload being sampled), as defined in tidegate/scheduler/fragmentation.py: free GPU
  capacity that a pod of the list, drawn at random, could not use on that node.
"""

from __future__ import annotations

import csv
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tidegate.model.objects import (
    GPU_PRODUCT_LABEL,
    Node,
    PluginOption,
    Pod,
    PodGroup,
    Queue,
    SchedulerConfiguration,
    Tier,
)
from tidegate.model.resources import CPU, MEMORY, Resources
from tidegate.scheduler.actions.allocate import allocate_job
from tidegate.scheduler.fragmentation import CARD_MILLI, FragmentationModel, MixShape
from tidegate.scheduler.info import TaskStatus
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.plugins.gpu_placement import POLICIES
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot
from tidegate.traces.openb import MIB, OpenbPodArrays, gpu_spec_affinity, openb_pod_requests

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: Columns of results.csv, in order.
RESULT_COLUMNS = ("policy", "seed", "arrived_pct", "alloc_pct", "frag_pct")
#: Default arrived-workload points of the summary table (the last one is `until`).
SUMMARY_POINTS = (90, 100)


def experiment_config(policy: str, seed: int) -> SchedulerConfiguration:
    """The scheduler configuration of one run: predicates (resources, constraints) and gpushare with the
    policy; no other plugin scores nodes, so the policy alone decides. `seed` seeds `random`."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    gpushare = PluginOption("gpushare", {"gpushare.policy": policy, "gpushare.seed": seed})
    return SchedulerConfiguration(
        name=f"fragmentation-{policy}", actions=("allocate",), tiers=(Tier((PluginOption("predicates"), gpushare)),)
    )


def sample_arrivals(pods: OpenbPodArrays, capacity_milli: int, until_pct: int, seed: int) -> IntArray:
    """Rows of the pod list in arrival order: uniform draws with replacement (numpy's PCG64 seeded by
    `seed`) until the milli-GPU they ask first reaches `until_pct`% of `capacity_milli`."""
    if until_pct < 0:
        raise ValueError(f"until must be >= 0, not {until_pct}")
    asks = pods.gpu_milli_per_pod
    target = capacity_milli * until_pct / 100
    if target > 0 and not asks.any():
        raise ValueError("the pod list asks for no GPU: arrivals would never reach the target")
    rng = np.random.default_rng(seed)
    mean = float(asks.mean()) if len(asks) else 0.0
    chunk = int(target / mean * 1.05) + 64 if mean else 64
    drawn: list[IntArray] = []
    total = 0
    while total < target:
        draw = rng.integers(0, len(pods), size=chunk)
        cumulative = total + np.cumsum(asks[draw])
        stop = int(np.searchsorted(cumulative, target, side="left"))
        if stop < len(draw):
            drawn.append(draw[: stop + 1])
            break
        drawn.append(draw)
        total = int(cumulative[-1])
    return np.concatenate(drawn) if drawn else np.zeros(0, dtype=np.int64)


def trace_mix(pods: OpenbPodArrays, nodes: Sequence[Node]) -> tuple[list[MixShape], npt.NDArray[np.bool_]]:
    """The pod list's GPU shapes with their counts, and per GPU-model list the nodes it allows."""
    specs: dict[int, int] = {}
    counts: Counter[tuple[int, int, int, int, int]] = Counter()
    for cpu, memory, num_gpu, milli, spec in zip(
        pods.cpu_milli.tolist(),
        pods.memory_mib.tolist(),
        pods.num_gpu.tolist(),
        pods.gpu_milli.tolist(),
        pods.gpu_spec.tolist(),
        strict=True,
    ):
        if not num_gpu:
            continue
        cards, slice_milli = (num_gpu, 0) if milli == CARD_MILLI else (0, milli)
        static = specs.setdefault(spec, len(specs))
        counts[(cpu, memory * MIB, cards, slice_milli, static)] += 1
    masks = np.ones((max(1, len(specs)), len(nodes)), dtype=bool)
    for spec, static in specs.items():
        models = pods.specs[spec]
        if models:
            masks[static] = [node.labels.get(GPU_PRODUCT_LABEL) in models for node in nodes]
    shapes = [
        MixShape(cpu=cpu, memory=memory, cards=cards, milli=milli, count=count, static=static)
        for (cpu, memory, cards, milli, static), count in sorted(counts.items())
    ]
    return shapes, masks


@dataclass(slots=True)
class RunResult:
    """One policy x seed run: the curves at each whole arrived percentage and what it cost."""

    policy: str
    seed: int
    arrived_pct: IntArray
    alloc_pct: FloatArray
    frag_pct: FloatArray
    arrivals: int
    placed: int
    #: Wall-clock and CPU seconds of the protocol (session, sampling, placements, measures), not file reading.
    seconds: float
    cpu_seconds: float

    def at(self, pct: int) -> float:
        """alloc_pct when arrived workload first reached pct%."""
        return float(self.alloc_pct[pct])


@dataclass(slots=True)
class _Pods:
    """Kubernetes requests and affinity per pod-list row, made once and shared by every arrival of it."""

    pods: OpenbPodArrays
    requests: dict[int, Resources] = field(default_factory=dict)

    def make(self, row: int, k: int) -> Pod:
        requests = self.requests.get(row)
        pods = self.pods
        if requests is None:
            requests = self.requests[row] = openb_pod_requests(
                int(pods.cpu_milli[row]), int(pods.memory_mib[row]), int(pods.num_gpu[row]), int(pods.gpu_milli[row])
            )
        name = f"{k:06d}-{pods.names[row]}"
        return Pod(
            name=name,
            requests=requests,
            group=name,
            affinity=gpu_spec_affinity(pods.specs[int(pods.gpu_spec[row])]),
            created=float(k),
        )


def run_policy(
    nodes: Sequence[Node],
    pods: OpenbPodArrays,
    policy: str,
    seed: int,
    until: int = 130,
    on_percent: Callable[[int], None] | None = None,
) -> RunResult:
    """Run the protocol once (module docstring). `on_percent(p)` is called as each whole percentage of
    arrived workload is reached (for progress bars)."""
    wall, cpu = time.perf_counter(), time.process_time()
    ssn = Session(
        Snapshot(list(nodes), [Queue(name="default")], [], []), experiment_config(policy, seed), default_registry()
    )
    table = ssn.table
    capacity = int(table.card_exists.sum()) * CARD_MILLI
    if not capacity:
        raise ValueError("the node list has no GPUs")
    shapes, masks = trace_mix(pods, nodes)
    measure = FragmentationModel(table, ssn.index.col[CPU], ssn.index.col[MEMORY])
    measure.set_mix(shapes, masks)
    arrivals = sample_arrivals(pods, capacity, until, seed)
    asks = pods.gpu_milli_per_pod.tolist()
    alloc_pct = np.zeros(until + 1)
    frag_pct = np.zeros(until + 1)
    allocated = 0

    def record(pct: int) -> None:
        measure.shares.sync()
        alloc_pct[pct] = 100 * allocated / capacity
        fragmented = float(measure.fragmented(np.arange(len(table))).sum()) / measure.total if measure.total else 0.0
        frag_pct[pct] = 100 * fragmented / capacity
        if on_percent is not None:
            on_percent(pct)

    record(0)
    maker = _Pods(pods)
    arrived = placed = 0
    pct = 1
    for k, row in enumerate(arrivals.tolist()):
        new = maker.make(row, k)
        job = ssn.add_group(PodGroup(name=new.name, created=new.created), [new])
        allocate_job(ssn, job)
        if job.tasks[0].status is TaskStatus.ALLOCATED:
            allocated += asks[row]
            placed += 1
        arrived += asks[row]
        while pct <= until and arrived * 100 >= pct * capacity:
            record(pct)
            pct += 1
    return RunResult(
        policy=policy,
        seed=seed,
        arrived_pct=np.arange(until + 1, dtype=np.int64),
        alloc_pct=alloc_pct,
        frag_pct=frag_pct,
        arrivals=len(arrivals),
        placed=placed,
        seconds=time.perf_counter() - wall,
        cpu_seconds=time.process_time() - cpu,
    )


def parse_seeds(text: str) -> list[int]:
    """'42-51' -> 42..51; '1,5,7-9' -> [1, 5, 7, 8, 9]; each seed once, in the order given."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            first, last = (int(low), int(high)) if sep else (int(part), int(part))
        except ValueError:
            raise ValueError(f"seeds: {part!r} is not an integer or a range like 42-51") from None
        if last < first:
            raise ValueError(f"seeds: {part!r} is an empty range")
        seeds.extend(seed for seed in range(first, last + 1) if seed not in seeds)
    if not seeds:
        raise ValueError("seeds: none given")
    return seeds


def parse_policies(text: str) -> list[str]:
    """'best-fit,frag-aware' -> the policies, checked against the known names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names:
        raise ValueError(f"policy: {', '.join(unknown) or 'none given'}; known: {', '.join(POLICIES)}")
    return list(dict.fromkeys(names))


def write_results(path: str | os.PathLike[str], results: Iterable[RunResult]) -> None:
    """results.csv: one row per policy, seed and whole arrived percentage (RESULT_COLUMNS)."""
    with Path(path).open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(RESULT_COLUMNS)
        for result in results:
            for pct, alloc, frag in zip(
                result.arrived_pct.tolist(), result.alloc_pct.tolist(), result.frag_pct.tolist(), strict=True
            ):
                writer.writerow((result.policy, result.seed, pct, f"{alloc:.4f}", f"{frag:.4f}"))


def summary(results: Sequence[RunResult], points: Sequence[int]) -> dict[str, dict[int, float]]:
    """Mean alloc_pct over seeds at each arrived percentage of `points`, per policy (in run order)."""
    by_policy: dict[str, list[RunResult]] = {}
    for result in results:
        by_policy.setdefault(result.policy, []).append(result)
    return {
        policy: {p: float(np.mean([r.at(p) for r in runs])) for p in points if p < len(runs[0].alloc_pct)}
        for policy, runs in by_policy.items()
    }


def summary_points(until: int) -> list[int]:
    """90, 100 and `until` (those within 0..until, each once)."""
    return sorted({p for p in (*SUMMARY_POINTS, until) if 0 <= p <= until})


def margins(
    results: Sequence[RunResult], policy: str, others: Sequence[str], points: Sequence[int]
) -> Mapping[tuple[str, int], tuple[float, float]]:
    """(mean, min) over seeds of policy's alloc_pct minus each other's, at each point: the paired margin."""
    runs = {(r.policy, r.seed): r for r in results}
    seeds = sorted({r.seed for r in results if r.policy == policy})
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for other in others:
        for p in points:
            diffs = [runs[(policy, s)].at(p) - runs[(other, s)].at(p) for s in seeds if (other, s) in runs]
            if diffs:
                out[(other, p)] = (float(np.mean(diffs)), float(np.min(diffs)))
    return out
