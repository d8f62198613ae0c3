"""The API server's objects as tidegate's model, parsed once per version.

Every cycle lists the whole cluster, but between two cycles few objects change: an object whose
`metadata.resourceVersion` (and uid) the last read already parsed is taken from that read instead of
parsed again (parsing a pod is most of a quiet cycle's cost). PriorityClasses are always parsed, and a
change among them parses everything again, since objects resolve their `priorityClassName` through them.
An object with a bad field is left out whole (not read with a default) and its error kept; it is parsed
again each read, so the error is reported until the object is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tidegate.model.errors import Source
from tidegate.model.manifests import Manifest, ManifestSet, load_objects

#: What the objects read from the API server are called in errors.
SOURCE = "kube-apiserver"
_Key = tuple[str, str, str, str, str, str]


def _key(doc: Any) -> _Key | None:
    """An object's identity and version, or None when it has none to go by."""
    if not isinstance(doc, dict):
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("resourceVersion") or doc.get("kind") == "PriorityClass":
        return None
    return (
        str(doc.get("kind")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        str(meta["resourceVersion"]),
        str(doc.get("apiVersion")),
    )


class ObjectCache:
    """Parses a listing, reusing the objects of the last listing that have not changed."""

    def __init__(self) -> None:
        self._objects: dict[_Key, Manifest] = {}
        self._classes: tuple[tuple[str, str], ...] = ()
        #: Objects parsed by the last read (the rest came from the one before).
        self.parsed = 0

    def read(self, docs: Sequence[Any]) -> ManifestSet:
        classes = tuple(
            (str(d["metadata"].get("name")), str(d["metadata"].get("resourceVersion")))
            for d in docs
            if isinstance(d, dict) and d.get("kind") == "PriorityClass" and isinstance(d.get("metadata"), dict)
        )
        if classes != self._classes:
            self._objects.clear()
            self._classes = classes
        keys = [_key(doc) for doc in docs]
        found: list[Manifest | None] = [None if key is None else self._objects.get(key) for key in keys]
        fresh = [i for i, obj in enumerate(found) if obj is None]
        parsed = load_objects([docs[i] for i in fresh], SOURCE)
        self.parsed = len(fresh)

        def here(source: Source) -> Source:
            return Source(SOURCE, fresh[source.index])  # the position in this listing

        bad = {error.source.index for error in parsed.errors}
        objects: list[Manifest] = [*parsed.nodes, *parsed.queues, *parsed.podgroups, *parsed.pods]
        for parsed_obj in objects + list(parsed.priority_classes):
            if parsed_obj.source.index not in bad:
                found[fresh[parsed_obj.source.index]] = parsed_obj
        self._objects = {key: obj for key, obj in zip(keys, found, strict=True) if key is not None and obj is not None}
        out = ManifestSet()
        for maybe in found:
            if maybe is not None:
                out.add(maybe)
        out.errors = [replace(error, source=here(error.source)) for error in parsed.errors]
        out.warnings = [replace(warning, source=here(warning.source)) for warning in parsed.warnings]
        return out
