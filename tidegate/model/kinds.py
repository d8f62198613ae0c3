"""The API groups tidegate reads, the versions each serves and the kinds in each, so a typo in a kind or
an apiVersion is an error as `kubectl apply` gives it (`no matches for kind "Jobb" in version
"batch.volcano.sh/v1alpha1"`), not a document silently skipped.

A group listed here is one tidegate knows: each of its documents must name a version it serves and a kind
it has. Kinds of a known group that tidegate does not read (a core ConfigMap, a Volcano CronJob) are still
listed as skipped, as are documents of any group not listed (apps, batch, rbac.authorization.k8s.io...).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

#: tidegate's own group and its one version.
TIDEGATE_GROUP, TIDEGATE_VERSION = "tidegate.io", "v1alpha1"
TIDEGATE_API_VERSION = f"{TIDEGATE_GROUP}/{TIDEGATE_VERSION}"
#: The simulation's kinds in tidegate's group (read by tidegate.sim and tidegate.fleet, not by the loader here).
SIMULATION_KINDS = ("Cluster", "NodePool", "Dataset", "Workload", "Scenario", "Simulation")
#: A what-if sweep over a simulation folder's fields (read by tidegate.sweep; a folder's loaders skip it).
SWEEP_KIND = "Sweep"


@dataclass(frozen=True, slots=True)
class ApiGroup:
    """A group's served versions and its kinds (as discovery lists them: what `kubectl apply` can map)."""

    versions: tuple[str, ...]
    kinds: tuple[str, ...]


#: Known groups by name ("" is the core group, apiVersion v1).
GROUPS: Mapping[str, ApiGroup] = {
    # The core group's kinds, as kube-apiserver's discovery lists them (plus List, which kubectl reads itself).
    "": ApiGroup(
        ("v1",),
        (
            "Binding",
            "ComponentStatus",
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "List",
            "Namespace",
            "Node",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "Pod",
            "PodTemplate",
            "ReplicationController",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
        ),
    ),
    # v1beta1 and v1alpha1 are no longer served since Kubernetes 1.22.
    "scheduling.k8s.io": ApiGroup(("v1",), ("PriorityClass",)),
    # Volcano's CRDs (volcano.sh/apis: batch/v1alpha1, scheduling/v1beta1).
    "batch.volcano.sh": ApiGroup(("v1alpha1",), ("Job", "CronJob")),
    "scheduling.volcano.sh": ApiGroup(("v1beta1",), ("Queue", "PodGroup")),
    # v2beta2 is no longer served since Kubernetes 1.26, but its HPAs read the same and tidegate takes them.
    "autoscaling": ApiGroup(("v1", "v2", "v2beta2"), ("HorizontalPodAutoscaler",)),
    TIDEGATE_GROUP: ApiGroup((TIDEGATE_VERSION,), ("SchedulerConfiguration", *SIMULATION_KINDS, SWEEP_KIND)),
}


def split_api_version(api_version: str) -> tuple[str, str]:
    """(group, version): "batch.volcano.sh/v1alpha1" -> ("batch.volcano.sh", "v1alpha1"), "v1" -> ("", "v1")."""
    group, _, version = api_version.rpartition("/")
    return group, version


def type_problem(api_version: str, kind: str) -> tuple[str, str] | None:
    """(field, message) when `api_version` is a known group's and the version or the kind does not exist in
    it; None for a known kind and for any group tidegate does not know."""
    group_name, version = split_api_version(api_version)
    group = GROUPS.get(group_name)
    if group is None:
        return None
    what = group_name or "the core API group"
    no_match = f'no matches for kind "{kind}" in version "{api_version}"'
    if version not in group.versions:
        return "apiVersion", f"{no_match}: {what} serves {', '.join(group.versions)}"
    if kind not in group.kinds:
        close = difflib.get_close_matches(kind, group.kinds, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return "kind", f"{no_match}: {what} has {', '.join(group.kinds)}{hint}"
    return None
