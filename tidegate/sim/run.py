"""Run a simulation folder: every scenario on the same workload, summarised side by side."""

from __future__ import annotations

import copy
import dataclasses
import os
import queue as queue_module
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import Manager
from typing import Any

import numpy as np

from tidegate.clock import EventLoop
from tidegate.fleet.pool import Pool
from tidegate.fleet.spec import NodePoolSpec
from tidegate.lifecycle.policies import JobPolicy
from tidegate.model.objects import Queue
from tidegate.model.quantity import parse_quantity
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_MILLI, GPU_NUMBER, MEMORY, NVIDIA_GPU
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.scheduler import cyclic_gc_paused
from tidegate.sim.core import Core
from tidegate.sim.engine import DataInputs, Outcome, Simulation, static_quotas
from tidegate.sim.link import GBPS
from tidegate.sim.loader import SimulationInput
from tidegate.sim.spec import ScenarioSpec, SimulationSpec
from tidegate.sim.spot import Interruptions
from tidegate.sim.workload import SimJob, sim_jobs, workload_records

MONTH_S = 30 * 86400.0
WORKLOAD_RESOURCES = (CPU, MEMORY, NVIDIA_GPU, GPU_MILLI, GPU_MEMORY, GPU_NUMBER)


@dataclass(slots=True)
class RunResult:
    """A finished scenario: its series, jobs and events, and its summary figures."""

    name: str
    simulation: Outcome
    summary: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def _waits(waits: list[float]) -> dict[str, Any]:
    return {
        "wait_p50_s": round(percentile(waits, 50), 1),
        "wait_p95_s": round(percentile(waits, 95), 1),
        "jobs": len(waits),
    }


def summarise(name: str, sim: Outcome, window: float) -> dict[str, Any]:
    """The figures summary.json reports for one run. Utilisation is measured over [0, window]
    (the workload's span, the same for every scenario); cost and waits over the whole run."""
    end = max(sim.end, 1e-9)
    window = window if window > 0 else end
    meter = sim.meter
    idc_gpus = sim.idc_gpus
    waits: dict[str, list[float]] = {}
    all_waits: list[float] = []
    queued_gpu_s = 0.0  # the waits weighted by the GPUs each job asks: what the percentiles of jobs hide
    for job in sim.jobs:
        wait = job.wait_s(end)
        if wait is None:
            continue
        all_waits.append(wait)
        queued_gpu_s += wait * job.gpus
        waits.setdefault(job.home_queue, []).append(wait)
    cloud_gpu_hours = cloud_cost = reserved = 0.0
    peak_nodes = 0
    for pool in sim.pools.values():
        if not pool.is_cloud:
            continue
        billed = meter[f"billed_nodes/{pool.name}"]
        node_seconds = billed.integral(end)
        cloud_gpu_hours += node_seconds * pool.gpus_per_node / 3600
        cloud_cost += node_seconds * pool.spec.pricing.per_hour / 3600
        reserved += billed.peak * pool.spec.pricing.reserved_monthly * end / MONTH_S
        peak_nodes += int(billed.peak)
    return {
        "name": name,
        "local_gpu_utilization": round(meter["local_gpus"].integral(window) / (idc_gpus * window), 4)
        if idc_gpus
        else 0.0,
        "cloud_gpu_hours": round(cloud_gpu_hours, 1),
        "cloud_cost": round(cloud_cost, 2),
        "reserved_peak_cost": round(reserved, 2),
        "cloud_peak_nodes": peak_nodes,
        "wait_p50_s": round(percentile(all_waits, 50), 1),
        "wait_p95_s": round(percentile(all_waits, 95), 1),
        "queued_gpu_hours": round(queued_gpu_s / 3600, 1),
        "jobs_submitted": len(sim.jobs),
        "jobs_completed": sum(1 for j in sim.jobs if j.finished is not None),
        "jobs_failed": sum(1 for j in sim.jobs if j.failed_reason),
        "jobs_unfinished": sum(1 for j in sim.jobs if j.finished is None and not j.failed_reason),
        "jobs_overflowed": sum(1 for j in sim.jobs if j.queue != j.home_queue),
        "restarts": sum(j.restarts for j in sim.jobs),
        "lost_gpu_hours": round(meter["lost_gpu_seconds"].value / 3600, 1),
        "spot_interruptions": int(meter["spot_interruptions"].value),
        "spot_interrupted_jobs": int(meter["spot_interrupted_jobs"].value),
        "spot_checkpoints_saved": int(meter["spot_checkpoints_saved"].value),
        "spot_restarts": int(meter["spot_restarts"].value),
        "spot_lost_gpu_hours": round(meter["spot_lost_gpu_seconds"].value / 3600, 1),
        "spot_lost_cost": round(meter["spot_lost_cost"].value, 2),
        "budget_changes": sim.budget_changes,
        "failed_jobs": {j.name: j.failed_reason for j in sim.jobs if j.failed_reason},
        # work the failed jobs had kept in checkpoints, thrown away with them (their lost work is in lost_gpu_hours)
        "failed_jobs_gpu_hours": round(sum(j.done_s * j.gpus for j in sim.jobs if j.failed_reason) / 3600, 1),
        "warnings": list(sim.warnings),
        "simulated_days": round(end / 86400, 2),
        "placements_digest": sim.placements_digest,
        **data_summary(sim, end),
        "queues": {
            queue: {
                "wait_p50_s": round(percentile(w, 50), 1),
                "wait_p95_s": round(percentile(w, 95), 1),
                "jobs": len(w),
            }
            for queue, w in sorted(waits.items())
        },
    }


def _count(sim: Outcome, name: str) -> int:
    level = sim.meter.levels.get(name)
    return int(level.value) if level is not None else 0


def data_summary(sim: Outcome, end: float) -> dict[str, Any]:
    """Data gravity and link figures: prefetch delay (per job and total), GPU-hours held idle waiting
    for data and what they cost at the pools' prices, the IDC cache, checkpoint traffic, each link's
    utilisation (bytes moved / (capacity x run length)) and the outages. Zeros when not modelled."""
    meter = sim.meter
    delays = {j.name: j.prefetch_s for j in sim.jobs if j.prefetch_s > 0}
    idle_s = idle_cost = 0.0
    for pool in sim.pools.values():
        level = meter.levels.get(f"data_idle_gpu_seconds/{pool.name}")
        if level is None:
            continue
        idle_s += level.value
        if pool.gpus_per_node:
            idle_cost += level.value / 3600 * pool.spec.pricing.per_hour / pool.gpus_per_node
    links: dict[str, dict[str, Any]] = {}
    for pool in sorted(sim.pools.values(), key=lambda p: p.cluster_name):
        link = pool.cluster.link
        if link is None or pool.cluster_name in links:
            continue
        rate = meter.levels.get(f"link_rate/{pool.cluster_name}")
        moved = rate.integral(end) if rate is not None else 0.0
        transfers = meter.levels.get(f"link_transfers/{pool.cluster_name}")
        links[pool.cluster_name] = {
            "utilization": round(moved / (link.bandwidth_gbps * GBPS * end), 4),
            "transferred_gb": round(moved / 1e9, 1),
            "peak_transfers": int(transfers.peak) if transfers is not None else 0,
        }
    cut = meter.levels.get("link_cut_clouds")
    cloud_wait, idc_wait = (meter.levels.get(f"prefetch_seconds/{where}") for where in ("cloud", "idc"))
    return {
        "prefetch_jobs": len(delays),
        "prefetch_delay_total_s": round(sum(delays.values()), 1),
        "prefetch_delay_p50_s": round(percentile(list(delays.values()), 50), 1),
        "prefetch_delay_p95_s": round(percentile(list(delays.values()), 95), 1),
        "prefetch_delay_by_job": {name: round(seconds, 1) for name, seconds in delays.items()},
        "cloud_prefetch_delay_total_s": round(cloud_wait.value if cloud_wait is not None else 0.0, 1),
        "idc_miss_read_delay_total_s": round(idc_wait.value if idc_wait is not None else 0.0, 1),
        "data_idle_gpu_hours": round(idle_s / 3600, 2),
        "data_idle_cost": round(idle_cost, 2),
        "prefetches": _count(sim, "prefetches"),
        "dataset_reuses": _count(sim, "dataset_reuses"),
        "idc_cache_hits": _count(sim, "idc_cache_hits"),
        "idc_cache_misses": _count(sim, "idc_cache_misses"),
        "checkpoint_uploads": _count(sim, "checkpoint_uploads"),
        "checkpoint_uploads_superseded": _count(sim, "checkpoint_uploads_superseded"),
        "local_checkpoint_resumes": _count(sim, "local_resumes"),
        "link_utilization": max((v["utilization"] for v in links.values()), default=0.0),
        "links": links,
        "link_outages": _count(sim, "link_outages"),
        "link_cut_s": round(cut.integral(end) if cut is not None else 0.0, 1),
        "outage_affected_jobs": _count(sim, "outage_affected_jobs"),
        "outage_events": [[round(t, 1), text] for t, text in sim.outage_events],
    }


def data_inputs(inp: SimulationInput, workload_name: str) -> DataInputs:
    """Dataset sizes and the workload's checkpoint size, in bytes."""
    workload = inp.workloads[workload_name]
    sizes = {name: float(parse_quantity(spec.size)) for name, spec in inp.datasets.items()}
    return DataInputs(sizes, float(parse_quantity(workload.checkpoint_size)))


def online_core(inp: SimulationInput, queues: list[Queue]) -> Core:
    """The default core: one long-lived session; resource columns for what workloads ask. A run reads no
    waiting job's reason but for its refusal code (overflow's AtCapability), so nodes are not explained."""
    return OnlineScheduler(
        [], queues, inp.config, resources=WORKLOAD_RESOURCES, report_waiting=False, explain_nodes=False
    )


Progress = Callable[[str, float, float], None]
CoreFactory = Callable[[SimulationInput, list[Queue]], Core]


def build_simulation(
    inp: SimulationInput,
    name: str,
    scenario_name: str,
    core_factory: CoreFactory | None = None,
    on_progress: Progress | None = None,
    clock: EventLoop | None = None,
) -> tuple[Simulation, float]:
    """A scenario of the named Simulation ready to run on a fresh copy of its workload, and the
    workload's span (the last submission); on simulated time unless another `clock` is given."""
    spec = inp.simulations[name]
    workload = inp.workloads[spec.workload]
    # The readers keep nearly every object they make: a collection pass would free next to nothing, yet the
    # tens of thousands of new objects set one off (~30 ms of the openb replay's first run in a process).
    with cyclic_gc_paused():
        records, warnings = workload_records(workload)
        if not records:
            raise ValueError(_no_jobs(inp, spec.workload, warnings))
        jobs: list[SimJob] = sim_jobs(workload, records)
    horizon = max((r.submit_s for r in records), default=0.0)
    scenario = inp.scenarios[scenario_name]
    queues, pools = scenario_fleet(inp, scenario)
    core = core_factory(inp, queues) if core_factory else online_core(inp, queues)
    progress = (lambda t: on_progress(scenario_name, t, horizon)) if on_progress else None
    policy = inp.policies.get(spec.workload, JobPolicy(checkpoint_s=workload.checkpoint_seconds))
    hpas = copy.deepcopy(inp.hpas)
    interruptions = scenario_interruptions(inp.interruptions, scenario)
    data = data_inputs(inp, spec.workload)
    sim = Simulation(
        scenario_name, core, queues, pools, hpas, jobs, scenario, spec, progress, interruptions, policy, data, clock
    )
    sim.warnings[:0] = warnings
    return sim, horizon


def _no_jobs(inp: SimulationInput, name: str, warnings: list[str]) -> str:
    """Why a workload has nothing to replay, naming its file (the trace, or the manifest of a synthetic one)."""
    workload = inp.workloads[name]
    source = inp.sources.get(("Workload", name))
    where = workload.path if workload.source != "synthetic" else (source.file if source else "")
    why = f" ({'; '.join(warnings)})" if warnings else ""
    return f"{where}: Workload {name}: no job to replay{why}"


def chosen_simulation(inp: SimulationInput, name: str | None) -> tuple[str, SimulationSpec]:
    """The named Simulation (None: the only one) and its spec. Raises ValueError saying which exist."""
    if not inp.simulations:
        raise ValueError("no Simulation manifest found (kind: Simulation, apiVersion: tidegate.io/v1alpha1)")
    if name is None:
        if len(inp.simulations) > 1:
            raise ValueError(f"several simulations ({', '.join(inp.simulations)}); choose one with --name")
        name = next(iter(inp.simulations))
    if name not in inp.simulations:
        raise ValueError(f"no Simulation {name!r}; the manifests have {', '.join(sorted(inp.simulations))}")
    return name, inp.simulations[name]


def run_scenario(
    inp: SimulationInput,
    name: str,
    scenario_name: str,
    core_factory: CoreFactory | None = None,
    on_progress: Progress | None = None,
) -> RunResult:
    """One scenario of the named Simulation on a fresh copy of its workload."""
    spec = inp.simulations[name]
    sim, horizon = build_simulation(inp, name, scenario_name, core_factory, on_progress)
    sim.run()
    outcome = sim.outcome()
    return RunResult(scenario_name, outcome, summarise(scenario_name, outcome, spec.until_seconds or horizon))


def scenario_fleet(inp: SimulationInput, scenario: ScenarioSpec) -> tuple[list[Queue], list[Pool]]:
    """The queues and node pools as the scenario runs them (static quotas, pricing), for the simulator
    and for `tidegate serve`."""
    queues = static_quotas(inp.queues) if scenario.quotas == "static" else list(inp.queues)
    pools = [
        Pool(pool_name, priced(pool, scenario), pool.cluster, inp.clusters[pool.cluster])
        for pool_name, pool in inp.pools.items()
    ]
    return queues, pools


def priced(pool: NodePoolSpec, scenario: ScenarioSpec) -> NodePoolSpec:
    """The pool as the scenario runs it: with `cloudPricing: on-demand`, a spot pool becomes an
    on-demand one (billed at its onDemandPerHour, labelled cloud-ondemand, never interrupted)."""
    if scenario.cloud_pricing != "on-demand" or pool.pricing.model != "spot":
        return pool
    pricing = pool.pricing.model_copy(update={"model": "on-demand", "per_hour": pool.pricing.on_demand_per_hour})
    return pool.model_copy(update={"pricing": pricing, "interruption": None})


def scenario_interruptions(interruptions: dict[str, Interruptions], scenario: ScenarioSpec) -> dict[str, Interruptions]:
    """The spot pools that interrupt in this scenario (none without burst, whose cloud pools stay empty,
    with interruptions off or with on-demand pricing)."""
    if not scenario.burst.enabled or not scenario.interruptions or scenario.cloud_pricing == "on-demand":
        return {}
    rate = scenario.interruption_rate_per_hour
    if rate is None:
        return dict(interruptions)
    origin = f"scenario interruptionRatePerHour {rate:g}"
    return {name: dataclasses.replace(i, rate_per_hour=rate, origin=origin) for name, i in interruptions.items()}


def _run_in_worker(
    inp: SimulationInput, name: str, scenario_name: str, updates: queue_module.Queue[tuple[str, float, float]]
) -> RunResult:
    return run_scenario(inp, name, scenario_name, on_progress=lambda s, t, h: updates.put((s, t, h)))


def run_simulation(
    inp: SimulationInput,
    name: str | None = None,
    core_factory: CoreFactory | None = None,
    on_progress: Progress | None = None,
    workers: int | None = None,
) -> list[RunResult]:
    """Every scenario of the named (or only) Simulation, each on a fresh copy of the same workload.

    Scenarios are independent, so with `workers` > 1 (default: one per CPU) they run in parallel
    processes; every figure is the same as in one process. A custom core factory runs in-process.
    """
    name, spec = chosen_simulation(inp, name)
    workers = min(workers or os.cpu_count() or 1, len(spec.scenarios))
    if workers <= 1 or core_factory is not None:
        return [run_scenario(inp, name, s, core_factory, on_progress) for s in spec.scenarios]
    # Bursting scenarios first: they also run the cloud pools and their HPAs, the longest runs, and a pool
    # finishes soonest when the longest runs start first.
    first = sorted(spec.scenarios, key=lambda s: not inp.scenarios[s].burst.enabled)
    with Manager() as manager, ProcessPoolExecutor(max_workers=workers) as pool:
        updates = manager.Queue()
        submitted = {s: pool.submit(_run_in_worker, inp, name, s, updates) for s in first}
        futures: list[Future[RunResult]] = [submitted[s] for s in spec.scenarios]
        while not all(f.done() for f in futures):
            try:
                update = updates.get(timeout=0.2)
            except queue_module.Empty:
                continue
            if on_progress:
                on_progress(*update)
        return [f.result() for f in futures]
