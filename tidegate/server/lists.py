"""Paging and filtering the API's lists as Kubernetes lists them.

`GET /jobs?limit=50` answers a list object, as kube-apiserver does for `?limit=`:

    {"apiVersion": "tidegate.io/v1alpha1", "kind": "JobList",
     "metadata": {"continue": "eyJ2IjoxLC...", "remainingItemCount": 120},
     "items": [...]}

and `GET /jobs?limit=50&continue=eyJ2IjoxLC...` the next page. The continue token is opaque to clients: it
holds which list it belongs to and the last key returned, so a page starts after that key whatever was added
or deleted meanwhile (an object added before it is not seen by this walk, as in Kubernetes, whose pages read
one consistent snapshot). A paged list is in key order (namespace/name for jobs, name otherwise). The last
page has no `continue`; `remainingItemCount` counts what the walk has left after this page. A token that is
not one of this server's, or of another list, is answered 400 (Kubernetes answers a malformed one 400 too).

Without `limit` or `continue` the answer is the plain array the API always gave (scripts and the HPA read it).

`labelSelector` (`app=llm,tier!=batch`, `env in (prod,staging)`, `!spot`) and `fieldSelector`
(`status.phase=Running,spec.queue=dev`) filter the items first, with Kubernetes' syntax; a field a list does
not support is answered 400 naming the fields it does, as kube-apiserver does.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

API_VERSION = "tidegate.io/v1alpha1"
#: The largest page a client may ask for (Kubernetes has no cap; a page is built under the control plane's lock).
MAX_LIMIT = 10_000

_TOKEN_VERSION = 1
_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector: `key op values` (Kubernetes' labels.Requirement)."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return has and value == self.values[0]
        if self.op == "!=":
            return not has or value != self.values[0]
        if self.op == "in":
            return has and value in self.values
        if self.op == "notin":
            return not has or value not in self.values
        if self.op == "exists":
            return has
        return not has  # "!"


def parse_label_selector(text: str) -> list[Requirement]:
    """A `labelSelector` as Kubernetes writes one; raises ValueError saying what is wrong."""
    out: list[Requirement] = []
    for term in _terms(text):
        match = re.fullmatch(r"\s*(\S+?)\s+(in|notin)\s+\(([^)]*)\)\s*", term)
        if match:
            key, op, listed = match.groups()
            values = tuple(v.strip() for v in listed.split(",") if v.strip())
            out.append(Requirement(_label_key(key), op, values))
            continue
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*", term)
        if match:
            key, op, value = match.groups()
            out.append(Requirement(_label_key(key), "!=" if op == "!=" else "=", (value,)))
            continue
        match = re.fullmatch(r"\s*(!?)\s*([^=!\s(),]+)\s*", term)
        if match:
            negated, key = match.groups()
            out.append(Requirement(_label_key(key), "!" if negated else "exists"))
            continue
        raise ValueError(f"unable to parse requirement {term.strip()!r}")
    return out


def _terms(text: str) -> list[str]:
    """The selector's comma-separated terms (commas inside `in (...)` belong to the term)."""
    terms, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    if current.strip() or terms:
        terms.append(current)
    for term in terms:
        if not term.strip():
            raise ValueError("an empty requirement")
    return terms


def _label_key(key: str) -> str:
    if not _KEY.match(key) or len(key) > 316:
        raise ValueError(f"invalid label key {key!r}")
    return key


def parse_field_selector(text: str, fields: Sequence[str]) -> list[tuple[str, bool, str]]:
    """A `fieldSelector` (`a=b`, `a==b`, `a!=b`, comma-separated) over the fields a list supports, as
    (field, equal, value); raises ValueError naming a field it does not support."""
    out = []
    for term in [t for t in text.split(",")] if text.strip() else []:
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*", term)
        if not match:
            raise ValueError(f"invalid selector: {term.strip()!r}; can't understand it")
        name, op, value = match.groups()
        if name not in fields:
            raise ValueError(f'field label "{name}" not supported (supported: {", ".join(fields)})')
        out.append((name, op != "!=", value))
    return out


@dataclass(frozen=True, slots=True)
class ListQuery:
    """What a list call asked: paging, and selectors (parsed)."""

    limit: int | None
    after: str | None
    labels: list[Requirement]
    fields: list[tuple[str, bool, str]]

    @property
    def paged(self) -> bool:
        return self.limit is not None or self.after is not None


def list_query(
    kind: str, limit: str | int | None, token: str, label_selector: str, field_selector: str, fields: Sequence[str]
) -> ListQuery:
    """The query of a list of `kind`, checked (400 naming what is wrong, a `limit` that is no integer too)."""
    if isinstance(limit, str):
        if not limit.strip().lstrip("+-").isdigit():
            raise HTTPException(400, f"limit {limit!r}: not an integer")
        limit = int(limit)
    if limit is not None and not 0 < limit <= MAX_LIMIT:
        raise HTTPException(400, f"limit {limit} must be between 1 and {MAX_LIMIT}")
    try:
        labels = parse_label_selector(label_selector) if label_selector else []
    except ValueError as exc:
        raise HTTPException(400, f"unable to parse labelSelector {label_selector!r}: {exc}") from exc
    try:
        selected = parse_field_selector(field_selector, fields)
    except ValueError as exc:
        raise HTTPException(400, f"fieldSelector {field_selector!r}: {exc}") from exc
    return ListQuery(limit, _read_token(kind, token) if token else None, labels, selected)


def answer(
    kind: str,
    items: Sequence[dict[str, Any]],
    query: ListQuery,
    key: Callable[[dict[str, Any]], str],
    labels: Callable[[dict[str, Any]], Mapping[str, str]],
    field: Callable[[dict[str, Any], str], str],
) -> list[dict[str, Any]] | dict[str, Any]:
    """The items the query selects: the plain array without paging, else one page of a `<kind>List`."""
    chosen = [
        item
        for item in items
        if all(term.matches(labels(item)) for term in query.labels)
        and all((field(item, name) == value) == equal for name, equal, value in query.fields)
    ]
    if not query.paged:
        return chosen
    ordered = sorted(chosen, key=key)
    if query.after is not None:
        ordered = [item for item in ordered if key(item) > query.after]
    page = ordered if query.limit is None else ordered[: query.limit]
    rest = len(ordered) - len(page)
    metadata: dict[str, Any] = {}
    if rest > 0:
        metadata = {"continue": _token(kind, key(page[-1])), "remainingItemCount": rest}
    return {"apiVersion": API_VERSION, "kind": f"{kind}List", "metadata": metadata, "items": page}


def _token(kind: str, after: str) -> str:
    raw = json.dumps({"v": _TOKEN_VERSION, "list": kind, "after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_token(kind: str, token: str) -> str:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(raw, dict) or raw.get("v") != _TOKEN_VERSION or not isinstance(raw.get("after"), str):
            raise ValueError("not a continue token of this server")
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"continue {token!r}: not a continue token of this server's lists") from exc
    if raw.get("list") != kind:
        raise HTTPException(400, f"continue {token!r}: a token of the {raw.get('list')} list, not of {kind}s")
    after: str = raw["after"]
    return after
