"""Request bodies read whatever their content-type says: JSON, else YAML.

`curl -d '{"spec":{"weight":10}}'` sends `application/x-www-form-urlencoded`, and FastAPI reads a body as
JSON only under a JSON content-type (else the route sees bytes: 422), so every route taking a body reads it
here instead: at most `MAX_BODY_BYTES` (413 beyond, as kube-apiserver caps a request), one JSON document, or
else one YAML document (`{spec: {weight: 10}}` too), checked against the route's model. Problems answer 422
naming the field (`Refused`, answered as a Status by the app).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import yaml
from fastapi import Request
from pydantic import BaseModel, ValidationError

from tidegate.server.status import FIELD_INVALID, FIELD_REQUIRED, Cause

#: The largest body a call takes (`POST /jobs`: every document of a submission); larger answers 413.
MAX_BODY_BYTES = 8 * 1024 * 1024
M = TypeVar("M", bound=BaseModel)


class Refused(Exception):
    """A request answered with an error Status: its code, message and causes."""

    def __init__(self, code: int, message: str, causes: list[Cause] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.causes = code, message, causes or []


def call_of(request: Request) -> str:
    """How errors name the call: its method and path (`PATCH /queues/dev`)."""
    return f"{request.method} {request.url.path}"


async def read_body(request: Request) -> bytes:
    """The body's bytes, refused (413) past `MAX_BODY_BYTES` whether it declares its length or not."""
    too_large = Refused(413, f"{call_of(request)}: a body is at most {MAX_BODY_BYTES:,} bytes; send it in parts")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise too_large
    return body


def parse_document(body: bytes, call: str) -> Any:
    """One JSON document, else one YAML document (YAML's flow style reads `{spec: {weight: 10}}`). Raises
    Refused (422) saying why neither reads it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(422, f"{call}: the body is not UTF-8 text (byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as not_json:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as not_yaml:
            if text.lstrip()[:1] in ("{", "["):  # meant as JSON: JSON's complaint is the one to read
                why = f"not JSON: {not_json.msg} (line {not_json.lineno}, column {not_json.colno})"
            else:
                mark = getattr(not_yaml, "problem_mark", None)
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
                problem = getattr(not_yaml, "problem", None) or str(not_yaml).splitlines()[0]
                why = f"neither JSON nor YAML: {problem}{where}"
            raise Refused(422, f"{call}: the body is {why}") from not_yaml


def checked(model: type[M], document: Any, call: str) -> M:
    """The document as the model, or Refused (422) with a cause per field in the wrong."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        causes = [validation_cause(error, ()) for error in exc.errors(include_input=False)]
        said = "; ".join(f"{cause.field or 'body'}: {cause.message}" for cause in causes)
        raise Refused(422, f"{call}: {said}", causes) from exc


def validation_cause(error: Any, prefix: tuple[str, ...]) -> Cause:
    """A pydantic (or FastAPI request) validation error as a cause: its field path without the `prefix`
    location FastAPI puts first (`body`)."""
    loc = tuple(str(part) for part in error.get("loc", ()))
    field = ".".join(loc[len(prefix) :] if loc[: len(prefix)] == prefix else loc)
    reason = FIELD_REQUIRED if error.get("type") == "missing" else FIELD_INVALID
    return Cause(reason=reason, message=str(error.get("msg", "")), field=field)


def body_of(model: type[M], optional: bool = False) -> Callable[[Request], Awaitable[M | None]]:
    """A route dependency: the request's body as `model`, whatever its content-type (None for an empty body
    when `optional`, else 422)."""

    async def read(request: Request) -> M | None:
        call = call_of(request)
        body = await read_body(request)
        if not body.strip():
            if optional:
                return None
            raise Refused(422, f"{call}: the body is empty; it takes {model.__name__} as JSON or YAML")
        return checked(model, parse_document(body, call), call)

    return read


async def merge_patch(request: Request) -> dict[str, Any]:
    """A route dependency: the body as a JSON merge patch (RFC 7386), an object."""
    call = call_of(request)
    document = parse_document(await read_body(request), call)
    if not isinstance(document, dict):
        raise Refused(422, f'{call}: a merge patch is an object, e.g. {{"spec": {{"weight": 10}}}}')
    return document
