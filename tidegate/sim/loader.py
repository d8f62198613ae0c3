"""Read a simulation folder: Volcano queues and scheduler configuration, HPAs, and the
tidegate.io simulation kinds, cross-checked so every reference resolves (an HPA's against the pools and
queues, and its metrics against what tidegate can supply: `tidegate/fleet/hpa_supply.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tidegate.autoscale.hpa import HPASpec
from tidegate.autoscale.hpa_manifest import parse_hpa
from tidegate.fleet.hpa_supply import hpa_report
from tidegate.fleet.spec import ClusterSpec, NodePoolSpec
from tidegate.lifecycle.policies import JobPolicy, job_policy
from tidegate.model.errors import FieldError, ManifestError, ManifestErrors, Source
from tidegate.model.manifests import MAX_JOB_PODS, ManifestSet, load_manifests, queue_resources
from tidegate.model.objects import Job, Queue, SchedulerConfiguration
from tidegate.scheduler.admission import admission_errors
from tidegate.sim.spec import (
    API_VERSION,
    SIM_KINDS,
    DatasetSpec,
    ScenarioSpec,
    SimulationSpec,
    WorkloadSpec,
    document_name,
    parse_spec,
)
from tidegate.sim.spot import InterruptionError, Interruptions, grace_warning, resolve_interruptions


@dataclass(slots=True)
class SimulationInput:
    """Everything a simulation folder declares, by name."""

    queues: list[Queue]
    config: SchedulerConfiguration
    clusters: dict[str, ClusterSpec] = field(default_factory=dict)
    pools: dict[str, NodePoolSpec] = field(default_factory=dict)
    datasets: dict[str, DatasetSpec] = field(default_factory=dict)
    workloads: dict[str, WorkloadSpec] = field(default_factory=dict)
    scenarios: dict[str, ScenarioSpec] = field(default_factory=dict)
    simulations: dict[str, SimulationSpec] = field(default_factory=dict)
    hpas: list[HPASpec] = field(default_factory=list)
    #: Spot pools' interruption models, defaults resolved (pools that never interrupt are absent).
    interruptions: dict[str, Interruptions] = field(default_factory=dict)
    #: Each Workload's job lifecycle rules (from its jobTemplate); absent: no policies.
    policies: dict[str, JobPolicy] = field(default_factory=dict)
    sources: dict[tuple[str, str], Source] = field(default_factory=dict)
    warnings: list[ManifestError] = field(default_factory=list)


def load_simulation(paths: list[str], stdin: TextIO | None = None) -> SimulationInput:
    """Load and check a simulation's manifests ("-" reads `stdin`, by default standard input); raise
    ManifestErrors listing every problem."""
    return simulation_input(load_manifests(paths, stdin=stdin))


def simulation_input(ms: ManifestSet) -> SimulationInput:
    """Check loaded manifests as a simulation folder (references, node sizes, interruptions, job templates);
    raise ManifestErrors listing every problem."""
    errors = [*ms.errors, *admission_errors(ms)]
    sim = SimulationInput(
        queues=ms.queues,
        config=ms.configurations[0] if ms.configurations else SchedulerConfiguration(),
        warnings=list(ms.warnings),
    )
    tables: dict[str, dict[str, object]] = {
        "Cluster": sim.clusters,  # type: ignore[dict-item]
        "NodePool": sim.pools,  # type: ignore[dict-item]
        "Dataset": sim.datasets,  # type: ignore[dict-item]
        "Workload": sim.workloads,  # type: ignore[dict-item]
        "Scenario": sim.scenarios,  # type: ignore[dict-item]
        "Simulation": sim.simulations,  # type: ignore[dict-item]
    }

    def register(kind: str, doc: dict[str, Any], source: Source) -> None:
        parsed = parse_spec(kind, doc, source)
        if isinstance(parsed, list):
            errors.extend(parsed)
            return
        name, spec = parsed
        if isinstance(spec, WorkloadSpec):
            spec = _relative_to(spec, source)
        if name in tables[kind]:
            errors.append(ManifestError(source, kind, name, "metadata.name", f"duplicate {kind} name"))
        tables[kind][name] = spec
        sim.sources[(kind, name)] = source

    scenarios: list[tuple[Source, dict[str, Any]]] = []
    for source, doc in ms.other_documents:
        kind, api_version = doc.get("kind", ""), doc.get("apiVersion", "")
        if kind == "HorizontalPodAutoscaler":
            try:
                hpa = parse_hpa(doc, source)
            except ManifestErrors as exc:
                errors.extend(exc.errors)
                continue
            sim.hpas.append(hpa)
            sim.sources[(kind, hpa.name)] = source
        elif api_version == API_VERSION and kind == "Scenario":
            scenarios.append((source, doc))  # parsed once all are read: one may be based on another
        elif api_version == API_VERSION and kind in SIM_KINDS:
            register(kind, doc, source)
    for source, doc in _with_bases(scenarios, errors):
        register("Scenario", doc, source)
    errors.extend(_references(sim))
    errors.extend(_node_sizes(sim))
    errors.extend(_interruptions(sim))
    errors.extend(_job_templates(sim, ms.jobs))
    if errors:
        raise ManifestErrors(errors)
    return sim


def _with_bases(
    docs: list[tuple[Source, dict[str, Any]]], errors: list[ManifestError]
) -> list[tuple[Source, dict[str, Any]]]:
    """Scenario documents with `spec.basedOn` resolved: the base's spec (description left out), then
    the scenario's own keys over it. An unknown or circular base is an error on `spec.basedOn`."""
    named = {document_name(doc): (source, doc) for source, doc in docs}
    merged: dict[str, dict[str, Any] | None] = {}

    def spec_of(name: str, chain: tuple[str, ...]) -> dict[str, Any] | None:
        if name not in merged:
            source, doc = named[name]
            spec = doc.get("spec")
            own = dict(spec) if isinstance(spec, dict) else {}
            base = own.pop("basedOn", None)
            result: dict[str, Any] | None = own
            if base is not None:
                parent, problem = None, ""
                if not isinstance(base, str) or base not in named:
                    problem = f"{base!r} is not a Scenario"
                elif base in chain or base == name:
                    problem = f"{base!r} is based on {name!r}: a cycle"
                else:
                    parent = spec_of(base, (*chain, name))
                if problem:
                    errors.append(ManifestError(source, "Scenario", name, "spec.basedOn", problem))
                result = None if parent is None else {k: v for k, v in parent.items() if k != "description"} | own
            merged[name] = result
        return merged[name]

    out = []
    for source, doc in docs:
        name = document_name(doc)
        spec = spec_of(name, ()) if isinstance(doc.get("spec"), dict) else doc.get("spec")
        if spec is not None or not isinstance(doc.get("spec"), dict):
            out.append((source, {**doc, "spec": spec}))
    return out


def _relative_to(spec: WorkloadSpec, source: Source) -> WorkloadSpec:
    """Trace and tide paths are relative to the manifest that names them."""
    base = _base(source)

    def resolve(path: str) -> str:
        return str(base / path) if path and not Path(path).is_absolute() else path

    synthetic = spec.synthetic.model_copy(update={"tide_from": [resolve(p) for p in spec.synthetic.tide_from]})
    return spec.model_copy(update={"path": resolve(spec.path), "synthetic": synthetic})


def _references(sim: SimulationInput) -> list[ManifestError]:
    """Every name a spec points at must exist."""
    out: list[ManifestError] = []
    queues = {q.name for q in sim.queues}

    def missing(kind: str, name: str, field_: str, message: str) -> None:
        out.append(ManifestError(sim.sources[(kind, name)], kind, name, field_, message))

    for name, cluster in sim.clusters.items():
        if cluster.cache is not None and cluster.type != "idc":
            missing("Cluster", name, "spec.cache", "only an idc cluster has a dataset cache")
        if cluster.link is not None and cluster.type != "cloud":
            missing("Cluster", name, "spec.link", "only a cloud cluster has a link to the IDC")
    for name, pool in sim.pools.items():
        if pool.cluster not in sim.clusters:
            missing("NodePool", name, "spec.cluster", f"cluster {pool.cluster!r} is not defined")
        if pool.max_count is not None and pool.max_count < max(pool.min_count, pool.count):
            missing("NodePool", name, "spec.maxCount", "is below minCount or count")
    for name, workload in sim.workloads.items():
        for i, mix in enumerate(workload.queues):
            if mix.name not in queues:
                missing("Workload", name, f"spec.queues[{i}].name", f"queue {mix.name!r} is not defined")
        for vc, queue in workload.queue_by_vc.items():
            if queue not in queues:
                missing("Workload", name, f"spec.queueByVc.{vc}", f"queue {queue!r} is not defined")
        shares = [(f"spec.datasets[{i}].name", s.name) for i, s in enumerate(workload.datasets)]
        for q, mix in enumerate(workload.queues):
            shares += [(f"spec.queues[{q}].datasets[{i}].name", s.name) for i, s in enumerate(mix.datasets)]
        for field_, dataset in shares:
            if dataset not in sim.datasets:
                missing("Workload", name, field_, f"dataset {dataset!r} is not defined")
        if workload.source != "synthetic" and not workload.path:
            missing("Workload", name, "spec.path", f"a {workload.source} workload needs the trace's path")
        elif workload.source != "synthetic" and not Path(workload.path).is_file():
            missing("Workload", name, "spec.path", f"file {workload.path} does not exist")
        for i, tide in enumerate(workload.synthetic.tide_from if workload.source == "synthetic" else []):
            if not Path(tide).is_file():
                missing("Workload", name, f"spec.synthetic.tideFrom[{i}]", f"file {tide} does not exist")
    for name, scenario in sim.scenarios.items():
        if scenario.burst.enabled and scenario.burst.queue not in queues:
            missing("Scenario", name, "spec.burst.queue", f"queue {scenario.burst.queue!r} is not defined")
        for i, outage in enumerate(scenario.link_outages):
            target = sim.clusters.get(outage.cluster)
            if outage.cluster and (target is None or target.type != "cloud"):
                missing(
                    "Scenario", name, f"spec.linkOutages[{i}].cluster", f"{outage.cluster!r} is not a cloud cluster"
                )
    for name, simulation in sim.simulations.items():
        if simulation.workload not in sim.workloads:
            missing("Simulation", name, "spec.workload", f"workload {simulation.workload!r} is not defined")
        for i, scenario_name in enumerate(simulation.scenarios):
            if scenario_name not in sim.scenarios:
                missing("Simulation", name, f"spec.scenarios[{i}]", f"scenario {scenario_name!r} is not defined")
    targets: dict[str, str] = {}
    for name, pool in sim.pools.items():
        ref = pool.scale_target_ref
        if ref is not None and ref.name:
            other = targets.setdefault(ref.name, name)
            if other != name:
                message = f"NodePool {other} is scaled through {ref.name} too"
                missing("NodePool", name, "spec.scaleTargetRef.name", message)
    hpa_errors, hpa_warnings = hpa_report(sim.hpas, queues, sim.pools)
    out.extend(hpa_errors)
    sim.warnings.extend(hpa_warnings)
    return out


def _node_sizes(sim: SimulationInput) -> list[ManifestError]:
    """Each Workload's GPUs a server (`spec.gpusPerNode`), filled in from the IDC pools when absent (the
    largest GPU count a node, so a gang's pods fit the IDC's biggest servers); a synthetic GPU count must
    then fit a vcjob's 10,000 pods of that size."""
    out: list[ManifestError] = []
    idc = [
        pool.gpu.count
        for pool in sim.pools.values()
        if pool.gpu.count and getattr(sim.clusters.get(pool.cluster), "type", "") == "idc"
    ]
    for name, workload in sim.workloads.items():
        if workload.gpus_per_node is None and idc:
            workload = sim.workloads[name] = workload.model_copy(update={"gpus_per_node": max(idc)})
        largest = workload.gpus_per_server * MAX_JOB_PODS
        too_many = sorted(count for count in workload.synthetic.gpu_counts or () if count > largest)
        if workload.source == "synthetic" and too_many:
            message = (
                f"{too_many[0]:,} GPUs: a job has at most {largest:,} ({MAX_JOB_PODS:,} pods of "
                f"{workload.gpus_per_server} GPUs, a node's)"
            )
            out.append(
                ManifestError(sim.sources[("Workload", name)], "Workload", name, "spec.synthetic.gpuCounts", message)
            )
    return out


def _base(source: Source) -> Path:
    return Path(source.file).parent if source.file not in ("-", "<memory>") else Path()


def _interruptions(sim: SimulationInput) -> list[ManifestError]:
    """Resolve each spot pool's interruption model (rate from the Spot Advisor band, provider notice)."""
    out: list[ManifestError] = []
    for name, pool in sim.pools.items():
        cluster = sim.clusters.get(pool.cluster)
        if cluster is None:
            continue
        source = sim.sources[("NodePool", name)]
        try:
            resolved = resolve_interruptions(pool, cluster, _base(source))
        except InterruptionError as exc:
            out.append(ManifestError(source, "NodePool", name, exc.field, str(exc)))
            continue
        if resolved is not None:
            sim.interruptions[name] = resolved
    for name, scenario in sim.scenarios.items():
        source = sim.sources[("Scenario", name)]
        if scenario.cloud_pricing == "on-demand":
            for pool_name, pool in sim.pools.items():
                if pool.pricing.model == "spot" and pool.pricing.on_demand_per_hour <= 0:
                    message = f"NodePool {pool_name} is spot and has no pricing.onDemandPerHour to switch to"
                    out.append(ManifestError(source, "Scenario", name, "spec.cloudPricing", message))
        budget = scenario.budget
        if budget is None:
            continue
        if budget.queue not in {q.name for q in sim.queues}:
            out.append(
                ManifestError(source, "Scenario", name, "spec.budget.queue", f"queue {budget.queue!r} is not defined")
            )
        for i, threshold in enumerate(budget.thresholds):
            field_ = f"spec.budget.thresholds[{i}]"
            if all(
                v is None for v in (threshold.weight, threshold.capability, threshold.state, threshold.max_replicas)
            ):
                message = "set weight, capability, state and/or maxReplicas"
                out.append(ManifestError(source, "Scenario", name, field_, message))
            try:
                queue_resources(threshold.capability, f"{field_}.capability")
            except FieldError as exc:
                out.append(ManifestError(source, "Scenario", name, exc.field, exc.message))
    return out


def _job_templates(sim: SimulationInput, jobs: list[Job]) -> list[ManifestError]:
    """Each Workload's jobTemplate must name a vcjob; its policies become the workload's JobPolicy.
    A grace period longer than a spot pool's notice is a warning (the instance dies first)."""
    out: list[ManifestError] = []
    by_name = {job.name: job for job in jobs}
    for name, workload in sim.workloads.items():
        source = sim.sources[("Workload", name)]
        if not workload.job_template:
            sim.policies[name] = JobPolicy(checkpoint_s=workload.checkpoint_seconds)
            continue
        template = by_name.get(workload.job_template)
        if template is None:
            message = f"no Job (batch.volcano.sh/v1alpha1) named {workload.job_template!r} in the folder"
            out.append(ManifestError(source, "Workload", name, "spec.jobTemplate", message))
            continue
        policy = job_policy(template, workload.checkpoint_seconds)
        sim.policies[name] = policy
        for pool_name, interruptions in sorted(sim.interruptions.items()):
            warning = grace_warning(policy.grace_s, template.name, pool_name, interruptions)
            if warning:
                field_ = "spec.tasks[0].template.spec.terminationGracePeriodSeconds"
                sim.warnings.append(ManifestError(template.source, "Job", template.name, field_, warning))
    return out
