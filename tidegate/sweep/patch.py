"""Field paths into a folder's documents (`Kind/name.spec.a.b[key][0]`), checked against what exists, and
a point's values written into copies of the documents, in memory.

A path names an object by kind and metadata.name, then keys of its document. A key the document holds
is always a field. A key it leaves out is one only where tidegate's own schema has it (the simulation
kinds' `spec`: `Scenario/x.spec.budget.perPeriod` on a scenario without a budget); for Kubernetes and
Volcano kinds the key must be in the document (their readers skip fields they do not know, so a typo
would change nothing): set the mapping above it instead.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

from tidegate.model.errors import Source
from tidegate.model.kinds import SWEEP_KIND
from tidegate.sim.spec import SPEC_TYPES, document_name

_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")
Document = tuple[Source, object]


class PathError(ValueError):
    """A path that names no object or field; the message says what exists."""


@dataclass(frozen=True, slots=True)
class FieldPath:
    """A resolved path: the document it lands in (by position) and the keys below it."""

    text: str
    document: int
    keys: tuple[str | int, ...]


def _keys(text: str) -> list[str | int]:
    """`spec.a[nvidia.com/gpu][0].b` -> ["spec", "a", "nvidia.com/gpu", 0, "b"]; a bracket of digits is an index."""
    out: list[str | int] = []
    position = 0
    while position < len(text):
        if text[position] == ".":
            position += 1
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PathError(f"cannot read the field path {text!r} at {text[position:]!r}")
        bracket, plain = match.groups()
        if bracket is not None:
            out.append(int(bracket) if bracket.isdigit() else bracket)
        else:
            out.append(plain)
        position = match.end()
    if not out:
        raise PathError("names no field (write Kind/name.field...)")
    return out


def resolve(path: str, docs: list[Document]) -> FieldPath:
    """Find the document and check every key of the path; PathError says what is there instead."""
    kind, slash, rest = path.partition("/")
    if not slash or not kind or not rest:
        raise PathError("is not a field path: write Kind/name.field, e.g. NodePool/idc-a100.spec.count")
    objects = {
        (str(doc.get("kind")), document_name(doc)): i
        for i, (_, doc) in enumerate(docs)
        if isinstance(doc, dict) and doc.get("kind") != SWEEP_KIND
    }
    names = sorted(name for k, name in objects if k == kind)
    # metadata.name may hold dots: the longest name that the path starts with (and a dot after it).
    name = max((n for n in names if rest.startswith(n + ".") or rest.startswith(n + "[")), key=len, default=None)
    if name is None:
        if names:
            raise PathError(f"no {kind} named as the path says; the folder's {kind} objects: {', '.join(names)}")
        kinds = sorted({k for k, _ in objects})
        raise PathError(f"the folder has no {kind}; its kinds: {', '.join(kinds)}")
    index = objects[(kind, name)]
    keys = tuple(_keys(rest[len(name) :].lstrip(".")))
    _check(kind, name, docs[index][1], keys)
    return FieldPath(path, index, keys)


def _check(kind: str, name: str, doc: object, keys: tuple[str | int, ...]) -> None:
    """Walk the document; where it leaves a key out, go on in the kind's schema (simulation kinds' spec)."""
    node: object = doc
    schema: object = None  # the schema of `node`, where known
    for depth, key in enumerate(keys):
        where = f"{kind}/{name}" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys[:depth])
        child = (SPEC_TYPES.get(kind) if key == "spec" else None) if depth == 0 else _child(schema, key)
        if isinstance(node, list):
            if not isinstance(key, int):
                raise PathError(f"{where} is a list: give an index [0]..[{len(node) - 1}], not {key!r}")
            if key >= len(node):
                raise PathError(f"{where} has {len(node)} item(s): [{key}] is not one of them")
            node = node[key]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, dict) or node is None:
            fields = _fields(schema) if depth > 0 else ({"spec"} if kind in SPEC_TYPES else None)
            if fields is None or (key not in fields and fields != {"*"}):
                have = {str(k) for k in node} if isinstance(node, dict) else set()
                have |= fields if fields is not None and fields != {"*"} else set()
                listed = f"; it has: {', '.join(sorted(have))}" if have else ""
                raise PathError(f"{where} has no field {key!r}{listed}")
            node = None  # not in the document, but the schema has it: the patch creates it
        else:
            raise PathError(f"{where} is a value ({node!r}), not an object with a field {key!r}")
        schema = child


def _unwrap(annotation: object) -> object:
    """Annotated[X, ...] -> X; X | None -> X (the first type that is not None)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = options[0] if options else annotation
            if not options:
                return annotation
        else:
            return annotation


def _fields(schema: object) -> set[str] | None:
    """The field names a schema node has: a model's (by their manifest names), {"*"} for a mapping of any
    keys, None when the schema says nothing (a value, a list, or no schema)."""
    schema = _unwrap(schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return {info.alias or name for name, info in schema.model_fields.items()}
    if typing.get_origin(schema) is dict:
        return {"*"}
    return None


def _child(schema: object, key: str | int) -> object:
    """The schema of a field, a mapping's value or a list's item (None when unknown)."""
    schema = _unwrap(schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        for name, info in schema.model_fields.items():
            if (info.alias or name) == key:
                return info.annotation
        return None
    origin = typing.get_origin(schema)
    if origin is dict:
        return typing.get_args(schema)[1]
    if origin is list:
        return typing.get_args(schema)[0]
    return None


def apply(docs: list[Document], patches: Iterable[tuple[FieldPath, Any]]) -> list[Document]:
    """The documents with each path set to its value: the documents touched are copied, the rest shared;
    a mapping the path runs through but the document leaves out is created."""
    out = list(docs)
    copied: set[int] = set()
    for path, value in patches:
        if path.document not in copied:
            source, doc = out[path.document]
            out[path.document] = (source, copy.deepcopy(doc))
            copied.add(path.document)
        node: Any = out[path.document][1]
        for key in path.keys[:-1]:
            if isinstance(node, dict) and node.get(key) is None:
                node[key] = {}
            node = node[key]
        node[path.keys[-1]] = copy.deepcopy(value)
    return out
