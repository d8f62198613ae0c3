"""A simulation folder's fleet, as the live hosts run it (`tidegate serve FOLDER`, `tidegate kube --fleet
FOLDER`): its node pools, the HPAs sizing them, the chosen Scenario's quotas, burst and budget."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

import typer

from tidegate.autoscale.hpa import HPASpec
from tidegate.fleet.burst import Burst
from tidegate.fleet.links import KEEP_RUNNING, CloudPods
from tidegate.fleet.pool import Pool
from tidegate.fleet.spec import BudgetSpec, ClusterSpec
from tidegate.model.errors import ManifestError
from tidegate.model.manifests import ManifestSet
from tidegate.sim.loader import simulation_input
from tidegate.sim.run import scenario_fleet
from tidegate.sim.spec import ScenarioSpec

#: How each live host hears of a spot notice, and of a link's state.
_NOTICES = {
    "serve": "its nodes' agents report the provider's (POST /nodes/<name>/interruption)",
    "kube": "a notice is the node's aws-node-termination-handler/spot-itn or karpenter.sh/disrupted taint",
}
_LINKS = {
    "serve": "report a real link's state with PUT /links/<cluster>",
    "kube": "a cloud's link is down while none of its pools' nodes is Ready",
}


@dataclass(frozen=True)
class ServedFleet:
    """What `tidegate serve` (or `tidegate kube`) runs of a simulation folder besides its nodes and queues."""

    pools: list[Pool] = field(default_factory=list)
    hpas: list[HPASpec] = field(default_factory=list)
    burst: Burst | None = None
    budget: BudgetSpec | None = None
    #: The Scenario served ("" for none).
    scenario: str = ""
    #: What is not served, to warn of.
    notes: list[str] = field(default_factory=list)
    #: What loading the folder warned of: its manifests', and a simulation folder's own (HPAs, spot notices,
    #: job templates), each once, as `tidegate simulate` prints them.
    warnings: list[ManifestError] = field(default_factory=list)
    #: The folder's Clusters, by name.
    clusters: dict[str, ClusterSpec] = field(default_factory=dict)
    #: What pods running in a cloud do when its link goes down: the Scenario's link outages say (their first's
    #: `cloudPods`), else they keep running.
    cloud_pods: CloudPods = KEEP_RUNNING


def served_fleet(
    ms: ManifestSet, scenario: str | None, host: Literal["serve", "kube"] = "serve", keep_clouds: Collection[str] = ()
) -> ServedFleet:
    """A loaded folder's fleet as served live: for a simulation folder (checked as `tidegate simulate` checks
    it) node pools (IDC pools' nodes at once, cloud pools sized by their HPAs; without burst only the pools
    of the `keep_clouds` clusters, whose instances exist whether or not jobs burst), the chosen Scenario's
    quotas (static quotas rewrite `ms.queues`), cloud burst and budget. A folder of Nodes alone gives no
    pools. Raises ManifestErrors or BadParameter."""
    if not any(s.kind in ("Cluster", "NodePool") for s in ms.skipped):
        if scenario is not None:
            raise typer.BadParameter("the folder has no NodePools: --scenario needs a simulation folder")
        notes = [f"skipped {s.kind}/{s.name} ({s.source}): not served live" for s in ms.skipped]
        return ServedFleet(notes=notes, warnings=list(ms.warnings))
    inp = simulation_input(ms)
    name, chosen = _scenario(inp.scenarios, scenario)
    queues, pools = scenario_fleet(inp, chosen)
    ms.queues = queues
    templates = {w.job_template for w in inp.workloads.values() if w.job_template}
    ms.jobs = [job for job in ms.jobs if job.name not in templates]  # a Workload's policy template, not a job
    notes = [] if name else ["no bursting Scenario (choose one with --scenario): IDC pools only, elastic quotas"]
    if not chosen.burst.enabled:
        pools = [pool for pool in pools if not pool.is_cloud or pool.cluster_name in keep_clouds]
    for pool in pools:
        if pool.spec.interruption is not None or pool.spec.pricing.model == "spot":
            notes.append(f"NodePool {pool.name}: spot interruptions are not drawn live; {_NOTICES[host]}")
    cloud_pods = chosen.link_outages[0].cloud_pods if chosen.link_outages else KEEP_RUNNING
    if chosen.link_outages:
        notes.append(
            f"scenario {name}: its linkOutages windows are not replayed live; {_LINKS[host]}; a cut's pods in that "
            f"cloud: {cloud_pods}"
        )
    if chosen.budget is not None and not chosen.burst.enabled:
        notes.append(f"scenario {name}: its budget is not served without burst (no cloud spend to count)")
    if not chosen.burst.enabled:
        return ServedFleet(pools, [], None, None, name, notes, inp.warnings, inp.clusters, cloud_pods)
    burst = Burst(chosen.burst.queue, chosen.burst.after_seconds)
    return ServedFleet(pools, list(inp.hpas), burst, chosen.budget, name, notes, inp.warnings, inp.clusters, cloud_pods)


def _scenario(scenarios: dict[str, ScenarioSpec], wanted: str | None) -> tuple[str, ScenarioSpec]:
    if wanted is not None:
        if wanted not in scenarios:
            raise typer.BadParameter(f"no Scenario {wanted!r}; the folder has {', '.join(scenarios) or 'none'}")
        return wanted, scenarios[wanted]
    if len(scenarios) == 1:
        return next(iter(scenarios.items()))
    bursting = [(n, s) for n, s in scenarios.items() if s.burst.enabled]
    return bursting[0] if bursting else ("", ScenarioSpec())
