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
from tidegate.model.objects import Namespace, Node, Pod, PodGroup, PriorityClass, Queue

#: What the objects read from the API server are called in errors.
SOURCE = "kube-apiserver"
_Key = tuple[str, str, str, str, str, str]
#: Entries of replaced or deleted objects a cache keeps beyond twice the listing before it starts afresh.
STALE_SLACK = 1024


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
    """Parses a listing, reusing the objects of the last listing that have not changed.

    A document that is the very object the last listing held (an informer hands back the documents it
    keeps, and replaces a changed one with a new document) is recognised by identity, without reading its
    key; a document read afresh (a list) by its key. Documents must not be changed in place after a read."""

    def __init__(self) -> None:
        self._objects: dict[_Key, Manifest] = {}
        #: Documents read by id: (the document, its key, what it parsed to).
        self._documents: dict[int, tuple[Any, _Key, Manifest]] = {}
        self._classes: tuple[tuple[str, str], ...] = ()
        #: Objects parsed by the last read (the rest came from the one before).
        self.parsed = 0

    def __len__(self) -> int:
        """Documents held from the reads so far (those of the last listing, and replaced ones until they pile up)."""
        return len(self._documents)

    def read(self, docs: Sequence[Any]) -> ManifestSet:
        keys, found, unheld, classes = self._look_up(docs)
        if classes != self._classes:  # objects resolve their priorityClassName through these
            self._objects, self._documents, self._classes = {}, {}, classes
            keys, found, unheld, _ = self._look_up(docs)
        fresh = [i for i, obj in enumerate(found) if obj is None]
        parsed = load_objects([docs[i] for i in fresh], SOURCE)
        self.parsed = len(fresh)

        def here(source: Source) -> Source:
            return Source(SOURCE, fresh[source.index])  # the position in this listing

        bad = {error.source.index for error in parsed.errors}
        objects: list[Manifest] = [*parsed.nodes, *parsed.queues, *parsed.podgroups, *parsed.pods, *parsed.namespaces]
        for parsed_obj in objects + list(parsed.priority_classes):
            if parsed_obj.source.index not in bad:
                found[fresh[parsed_obj.source.index]] = parsed_obj
        if len(self._documents) > 2 * len(docs) + STALE_SLACK:  # replaced and deleted objects piled up
            self._objects, self._documents = {}, {}
            unheld = list(range(len(docs)))
        for i in unheld:  # what the next read may find (a replaced object's entry stays until the pile-up)
            key, obj = keys[i], found[i]
            if key is not None and obj is not None:
                self._objects[key] = obj
                self._documents[id(docs[i])] = (docs[i], key, obj)
        out = ManifestSet()
        lists: dict[type, list[Any]] = {
            Node: out.nodes,
            Queue: out.queues,
            PodGroup: out.podgroups,
            Pod: out.pods,
            PriorityClass: out.priority_classes,
            Namespace: out.namespaces,
        }
        for maybe in found:
            if maybe is not None:
                lists[type(maybe)].append(maybe)
        out.errors = [replace(error, source=here(error.source)) for error in parsed.errors]
        out.warnings = [replace(warning, source=here(warning.source)) for warning in parsed.warnings]
        return out

    def _look_up(
        self, docs: Sequence[Any]
    ) -> tuple[list[_Key | None], list[Manifest | None], list[int], tuple[tuple[str, str], ...]]:
        """Each document's key and, if a read parsed it, its object; the positions of the documents not held
        from a read; and the PriorityClasses' versions."""
        keys: list[_Key | None] = []
        found: list[Manifest | None] = []
        unheld: list[int] = []
        classes: list[tuple[str, str]] = []
        documents, objects = self._documents, self._objects
        for i, doc in enumerate(docs):
            held = documents.get(id(doc))
            if held is not None and held[0] is doc:
                keys.append(held[1])
                found.append(held[2])
                continue
            unheld.append(i)
            key = _key(doc)
            keys.append(key)
            found.append(None if key is None else objects.get(key))
            if key is None and isinstance(doc, dict) and doc.get("kind") == "PriorityClass":
                meta = doc.get("metadata")
                if isinstance(meta, dict):
                    classes.append((str(meta.get("name")), str(meta.get("resourceVersion"))))
        return keys, found, unheld, tuple(classes)
