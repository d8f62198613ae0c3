"""The one shape of every error the API answers: Kubernetes' `Status` object (apimachinery's metav1.Status).

    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
     "message": "POST /jobs: document 1: Job/lost field spec.queue: queue nope does not exist",
     "reason": "Invalid", "code": 422,
     "details": {"name": "lost", "kind": "Job",
                 "causes": [{"reason": "FieldValueInvalid", "field": "spec.queue", "message": "queue nope ...",
                             "file": "POST /jobs", "document": 1, "kind": "Job", "name": "lost",
                             "text": "POST /jobs: document 1: Job/lost field spec.queue: queue nope ..."}]}}

`reason` follows from `code` as kube-apiserver's does (`REASONS`), but for a submission of jobs that exist
already: 409 `AlreadyExists`, as kube-apiserver answers the create of a name it holds (a request that
contradicts an object's state is 409 `Conflict`). `details.causes` lists each problem of a 422 (and each
job of a 409 AlreadyExists): Kubernetes' `reason`, `message` and `field`, and for a problem in a submitted
or patched manifest tidegate's own keys beside them (`file`, `document`, `kind`, `name`, and `text`, the
whole problem on one line); the other errors have none. `failure()` makes the answer; `read_status()` reads
one back, checking its shape (the tests read every error through it, a client may too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from tidegate.model.errors import ManifestError

#: A Status's reason for each HTTP code the API answers, Kubernetes' names (metav1.StatusReason).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
#: Reasons a code may carry instead of its own, as kube-apiserver's: 409 AlreadyExists for a name it holds.
ALSO_REASONS: dict[int, tuple[str, ...]] = {409: ("AlreadyExists",)}
#: A cause's reason (Kubernetes' metav1.CauseType): a field's value is wrong, missing, or a name already taken.
FIELD_INVALID, FIELD_REQUIRED, FIELD_DUPLICATE = "FieldValueInvalid", "FieldValueRequired", "FieldValueDuplicate"


class Cause(BaseModel):
    """One problem of an invalid request (Kubernetes' StatusCause, with tidegate's manifest keys)."""

    model_config = ConfigDict(extra="forbid")

    reason: str
    message: str
    #: The field's path in the object (`spec.weight`, `tasks[1].name`), "" when the problem is the whole body.
    field: str = ""
    #: Where a manifest problem is: the call (`POST /jobs`, `PATCH /queues/dev`), the document's index in it,
    #: the object's kind and name, and the problem on one line.
    file: str | None = None
    document: int | None = None
    kind: str | None = None
    name: str | None = None
    text: str | None = None


class StatusDetails(BaseModel):
    """The object the error is about ("" when none or several) and an invalid request's problems."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    kind: str = ""
    causes: list[Cause] = []


class Status(BaseModel):
    """What every 4xx and 5xx answer holds."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["Status"] = "Status"
    apiVersion: Literal["v1"] = "v1"
    metadata: dict[str, Any] = {}
    status: Literal["Failure"] = "Failure"
    message: str
    reason: str
    details: StatusDetails = StatusDetails()
    code: int


def status(
    code: int, message: str, *, name: str = "", kind: str = "", causes: Iterable[Cause] = (), reason: str = ""
) -> dict[str, Any]:
    """The Status document of an error answer (tidegate's extra cause keys only where set); `reason`, when
    given, one of ALSO_REASONS for the code instead of its own."""
    if reason and reason not in ALSO_REASONS.get(code, ()):
        raise ValueError(f"a Status of code {code} does not have reason {reason}")
    details = StatusDetails(name=name, kind=kind, causes=list(causes))
    body = Status(message=message, reason=reason or REASONS.get(code, "Unknown"), details=details, code=code)
    document = body.model_dump()
    document["details"]["causes"] = [cause.model_dump(exclude_none=True) for cause in details.causes]
    return document


def failure(
    code: int,
    message: str,
    *,
    name: str = "",
    kind: str = "",
    causes: Iterable[Cause] = (),
    headers: Mapping[str, str] | None = None,
    reason: str = "",
) -> JSONResponse:
    """An error answer: the Status document with the code (and `reason`, see `status`)."""
    body = status(code, message, name=name, kind=kind, causes=causes, reason=reason)
    return JSONResponse(body, status_code=code, headers=dict(headers) if headers else None)


def manifest_cause(error: ManifestError, reason: str = FIELD_INVALID) -> Cause:
    """A manifest problem as a cause: its field and message, and where it is."""
    return Cause(
        reason=reason,
        message=error.message,
        field=error.field,
        file=error.source.file,
        document=error.source.index,
        kind=error.kind,
        name=error.name,
        text=str(error),
    )


def invalid(errors: list[ManifestError]) -> JSONResponse:
    """422 for manifest problems: every one a cause; the message says them all (the first ten)."""
    texts = [str(error) for error in errors]
    shown = "; ".join(texts[:10]) + (f"; and {len(texts) - 10} more" if len(texts) > 10 else "")
    message = shown if len(texts) == 1 else f"{len(texts)} problems: {shown}"
    objects = {(error.kind, error.name) for error in errors}
    kind, name = next(iter(objects)) if len(objects) == 1 else ("", "")
    return failure(422, message, name=name, kind=kind, causes=[manifest_cause(error) for error in errors])


def read_status(body: object, code: int | None = None) -> Status:
    """An error answer's body as a Status, checked: exactly the fields above, a reason that goes with its code
    (and the code `code`, when given). Raises ValueError otherwise."""
    parsed = Status.model_validate(body)
    if parsed.reason != REASONS.get(parsed.code, "Unknown") and parsed.reason not in ALSO_REASONS.get(parsed.code, ()):
        raise ValueError(f"a Status of code {parsed.code} has reason {parsed.reason}")
    if code is not None and parsed.code != code:
        raise ValueError(f"a Status of code {parsed.code}, not {code}: {parsed.message}")
    return parsed
