"""Queue manifests as the live control plane edits them: a JSON merge patch (`PATCH /queues`), a queue made
in memory written back as a manifest, a budget's change applied to one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tidegate.model.manifests import load_objects
from tidegate.model.objects import NAMESPACES_ANNOTATION, Queue


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def queue_manifest(queue: Queue) -> dict[str, Any]:
    """A queue made in memory as the manifest that would load to it (weight, quotas, state, namespaces)."""
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable, "state": queue.state.value}
    if queue.capability is not None:
        spec["capability"] = queue.capability.to_dict()
    if queue.deserved is not None:
        spec["deserved"] = queue.deserved.to_dict()
    if queue.guarantee:
        spec["guarantee"] = {"resource": queue.guarantee.to_dict()}
    if queue.parent:
        spec["parent"] = queue.parent
    if queue.priority:
        spec["priority"] = queue.priority
    metadata: dict[str, Any] = {"name": queue.name}
    if queue.namespaces:
        metadata["annotations"] = {NAMESPACES_ANNOTATION: ",".join(queue.namespaces)}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": metadata, "spec": spec}


def parsed_queue(manifest: Mapping[str, Any]) -> Queue:
    """A queue manifest the control plane wrote itself, as a Queue."""
    (queue,) = load_objects([manifest], "budget").queues
    return queue


def budgeted_manifest(manifest: Mapping[str, Any], queue: Queue) -> dict[str, Any]:
    """The manifest with the fields a budget changes (weight, capability, state) as `queue` has them."""
    doc = json.loads(json.dumps(manifest))
    spec = doc.setdefault("spec", {})
    spec["weight"] = queue.weight
    spec["state"] = queue.state.value
    if queue.capability is None:
        spec.pop("capability", None)
    else:
        spec["capability"] = queue.capability.to_dict()
    return dict(doc)
