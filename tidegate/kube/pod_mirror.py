"""A pod bound in the IDC to a virtual node, as the pod the cloud cluster runs for it, and the cloud pod's
status as the IDC pod's.

The cloud pod has the IDC pod's namespace and name, and is bound to the instance's Node (`spec.nodeName`),
so no scheduler of the cloud's is involved. It carries the IDC pod's uid as a label, by which a restarted
member matches the two; the IDC pod carries the cloud pod's uid as an annotation, written once the cloud pod
exists, so a cloud pod that later disappears is told from one not created yet. Placement was decided in
the IDC: the node selector, affinity, topology spread and priority fields are left out (the cloud Node has
none of the virtual node's labels, and the cloud knows none of the IDC's PriorityClasses), and so are the
IDC's service-account token volumes (the pod runs as the cloud namespace's service account). The status
mirrored back is what a kubelet reports: phase, conditions, container states, IPs, start time, reason.
"""

from __future__ import annotations

import copy
from typing import Any

from tidegate.kube.nodeclaims import MANAGED_BY, MANAGED_BY_LABEL

#: The IDC pod's uid, on the cloud pod made for it.
IDC_UID_LABEL = "tidegate.io/idc-uid"
#: The cloud pod's uid, on the IDC pod once the cloud pod exists.
CLOUD_POD_ANNOTATION = "tidegate.io/cloud-pod-uid"
#: Where a pod's service-account token is mounted.
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: The pod spec's fields about placement and priority, which the cloud pod leaves out.
PLACEMENT_FIELDS = (
    "nodeSelector",
    "affinity",
    "topologySpreadConstraints",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "serviceAccountName",
    "serviceAccount",
    "nodeName",
)
#: The status fields a kubelet writes, mirrored from the cloud pod to the IDC pod.
MIRRORED = (
    "phase",
    "conditions",
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
    "podIP",
    "podIPs",
    "hostIP",
    "startTime",
    "reason",
    "message",
    "qosClass",
)
FINISHED = ("Succeeded", "Failed")
#: Reasons the member gives an IDC pod it fails: its instance went, or its cloud pod went while it ran.
NODE_LOST, CLOUD_POD_LOST = "NodeLost", "CloudPodLost"


def uid(doc: dict[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("uid") or "")


def key(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def deleting(doc: dict[str, Any]) -> bool:
    return bool((doc.get("metadata") or {}).get("deletionTimestamp"))


def phase(doc: dict[str, Any]) -> str:
    return str((doc.get("status") or {}).get("phase") or "Pending")


def annotation(doc: dict[str, Any], name: str) -> str:
    return str(((doc.get("metadata") or {}).get("annotations") or {}).get(name) or "")


def grace_seconds(doc: dict[str, Any]) -> int | None:
    """The grace period a pod marked for deletion was given (`metadata.deletionGracePeriodSeconds`)."""
    value = (doc.get("metadata") or {}).get("deletionGracePeriodSeconds")
    return int(value) if isinstance(value, int) else None


def cloud_pod(idc_pod: dict[str, Any], cloud_node: str) -> dict[str, Any]:
    """The cloud pod to create for an IDC pod, bound to the cloud Node `cloud_node`."""
    meta = idc_pod.get("metadata") or {}
    spec = copy.deepcopy(idc_pod.get("spec") or {})
    for field in PLACEMENT_FIELDS:
        spec.pop(field, None)
    tokens = set()
    for section in ("initContainers", "containers"):
        for container in spec.get(section) or ():
            mounts = container.get("volumeMounts") or []
            tokens |= {mount.get("name") for mount in mounts if mount.get("mountPath") == TOKEN_PATH}
            kept = [mount for mount in mounts if mount.get("mountPath") != TOKEN_PATH]
            if "volumeMounts" in container:
                container["volumeMounts"] = kept
    if tokens and "volumes" in spec:
        spec["volumes"] = [volume for volume in spec["volumes"] if volume.get("name") not in tokens]
    spec["nodeName"] = cloud_node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": {**(meta.get("labels") or {}), IDC_UID_LABEL: uid(idc_pod), MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": spec,
    }


def status_patch(idc_status: dict[str, Any], cloud_status: dict[str, Any]) -> dict[str, Any] | None:
    """The patch making the IDC pod's status say what the cloud pod's does, or None when it already does.
    Conditions are compared by type (the IDC pod may hold others, which stay); a field the cloud pod no
    longer has is cleared."""
    patch: dict[str, Any] = {}
    for field in MIRRORED:
        theirs, ours = cloud_status.get(field), idc_status.get(field)
        if field == "conditions":
            mine = {c.get("type"): c for c in ours or () if isinstance(c, dict)}
            if any(mine.get(c.get("type")) != c for c in theirs or () if isinstance(c, dict)):
                patch[field] = theirs
        elif theirs != ours:
            patch[field] = theirs
    if isinstance(patch.get("podIPs"), list):  # a strategic merge would add the cloud's IPs to the IDC's
        patch["podIPs"] = [{"$patch": "replace"}, *patch["podIPs"]]
    return patch or None


def lost_status(reason: str, message: str, status: dict[str, Any]) -> dict[str, Any]:
    """The status of an IDC pod whose cloud pod or instance went while it ran: Failed, saying why, its
    containers that ran marked terminated (exit code 137, as killed), as a kubelet whose node vanished
    would leave them."""
    containers = []
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        if "terminated" not in state:
            running = state.get("running") or {}
            terminated = {"exitCode": 137, "reason": reason, "message": message}
            if running.get("startedAt"):
                terminated["startedAt"] = running["startedAt"]
            container = {**container, "state": {"terminated": terminated}, "ready": False}
        containers.append(container)
    patch: dict[str, Any] = {"phase": "Failed", "reason": reason, "message": message}
    if containers:
        patch["containerStatuses"] = containers
    return patch
