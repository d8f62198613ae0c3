"""The REST API of the live control plane (`tidegate serve`), with a Prometheus exporter.

    GET    /                               the dashboard (tidegate.server.dashboard; the page asks for the token)
    GET    /whoami                         the token's holder and rights (what the dashboard offers)
    GET    /healthz                        liveness: cycles run, 503 while the last one failed
    GET    /readyz                         readiness: 200 once serving (a standby answers 503)
    GET    /queues                         every queue: spec, jobs by phase, allocated, deserved, why jobs wait
    GET    /queues/{name}
    PATCH  /queues/{name}                  JSON merge patch, e.g. {"spec": {"weight": 10}}
    POST   /jobs                           Jobs, PodGroups with pods, bare pods: YAML or JSON, any number
    GET    /jobs?queue=&phase=&namespace=
    GET    /jobs/{namespace}/{name}
    DELETE /jobs/{namespace}/{name}
    GET    /nodes
    GET    /nodes/{name}/pods              what the node's agent runs
    GET    /pools                          node pools served from a simulation folder: nodes, HPA, bill
    GET    /pools/history                  each pool and the budget sampled over time (tidegate.server.history)
    GET    /budget                         the Scenario's cloud budget: period, spent, changes
    GET    /links                          each cloud cluster's link to the IDC
    PUT    /links/{cluster}                {"up": false, "reason": "..."}: a prober's or operator's word
    POST   /pods/{namespace}/{name}/status {"phase": "Succeeded" | "Failed", "message": "..."}
    POST   /nodes/{name}/interruption      a spot interruption notice, {"notice_seconds": 120} (optional)
    GET    /metrics                        volcano_queue_pending_jobs_duration_seconds and more
    GET    /docs, /redoc, /openapi.json    the API's documentation (Swagger UI, ReDoc: served here, no CDN)

The lists (queues, jobs, nodes, pools, links) page and filter as Kubernetes lists do: `limit` and `continue`
answer a `<Kind>List` with `metadata.continue` and `remainingItemCount`, `labelSelector` and `fieldSelector`
filter (`tidegate.server.lists`).

With `tidegate serve --token-file`, every call but /healthz, /readyz, /metrics and the dashboard's page needs
`Authorization: Bearer <token>` (401 otherwise, whatever the path: authentication comes before routing, as in
kube-apiserver), and the token's groups must grant the call's right (403 otherwise; see
`tidegate.server.access`): reads and the documentation need view, submitting and deleting jobs submit (in
the job's namespace), pod status, spot notices and link state agent, and editing a queue admin. Bodies are
read as JSON, else YAML, whatever their content-type (`tidegate.server.bodies`). Every error answer is a
Kubernetes `Status` (`tidegate.server.status`): bad input 422 with every problem in `details.causes`
(field, message, and the file, document, kind and name of a manifest's); an unknown object or route 404; a
request the object's state refuses 409 (a submission whose jobs exist already 409 AlreadyExists); a change
the store could not write 503 (a submission is then not accepted; other changes are written with the next
one).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib.metadata import version as package_version
from typing import Annotated, Any, Literal

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import AlreadyExists, Conflict, Forbidden, NotFound
from tidegate.model.errors import ManifestErrors
from tidegate.model.objects import PodPhase
from tidegate.prometheus import HttpMetrics
from tidegate.server.access import Access, Principal, Right
from tidegate.server.audit import AuditLog
from tidegate.server.bodies import (
    MAX_BODY_BYTES,
    Refused,
    body_of,
    call_of,
    merge_patch,
    read_body,
    validation_cause,
)
from tidegate.server.dashboard import add_dashboard, is_dashboard_file
from tidegate.server.docs import add_docs
from tidegate.server.history import PoolHistory
from tidegate.server.lists import ListQuery, answer, list_query
from tidegate.server.metrics import MeteredPlane, PlaneCollector, route_of
from tidegate.server.status import FIELD_DUPLICATE, Status, failure, invalid, manifest_cause
from tidegate.store import StoreError

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The API's version in its OpenAPI document: the package's.
VERSION = package_version("tidegate")
#: Reads `Authorization: Bearer <token>` (at module level: the routes' annotations are resolved here).
BEARER = HTTPBearer(auto_error=False)


class SpotNotice(BaseModel):
    """A spot interruption notice as a node's agent reports it; without a notice, the pool's or provider's."""

    model_config = ConfigDict(extra="forbid")

    notice_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class PodStatusReport(BaseModel):
    """A bound pod's phase as its node's agent reports it (other fields of a PodStatus are ignored)."""

    model_config = ConfigDict(extra="ignore")

    phase: Literal["Running", "Succeeded", "Failed"]
    message: str = ""


class LinkState(BaseModel):
    """A cloud link's state as a prober or an operator reports it."""

    model_config = ConfigDict(extra="forbid")

    up: bool
    reason: str = ""


#: Who calls when the API has no tokens: anyone who reaches the port may do everything.
ANYONE = Principal("", frozenset(Right))


#: Paths answered without a token when the API has tokens: the probes and Prometheus.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: What a request without a known token is answered (401).
NO_TOKEN = "a valid bearer token is required"


def bearer_token(request: Request) -> str:
    """The token of the request's `Authorization: Bearer <token>` header ("" without one)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def caller(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> Principal:
    """The holder of the request's bearer token, as `authenticate` found it before routing; anyone when the app
    has no tokens. (The bearer dependency puts the token in the OpenAPI document's security schemes.)"""
    if request.app.state.access is None:
        return ANYONE
    holder: Principal | None = getattr(request.state, "principal", None)
    if holder is None:  # never on a route that needs a token: `authenticate` answered 401 already
        raise HTTPException(401, NO_TOKEN, {"WWW-Authenticate": "Bearer"})
    return holder


def authenticate(app: FastAPI, access: Access) -> None:
    """Every request but OPEN_PATHS' must carry a known bearer token, checked before anything else (routing
    included, so an unknown route or method without one answers 401, not 404 or 405), as kube-apiserver
    authenticates every request first: 401 otherwise, its body unread. The holder is kept for the routes'
    rights and the audit log."""

    @app.middleware("http")
    async def authenticated(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if path not in OPEN_PATHS and not is_dashboard_file(path):
            holder = access.holder(bearer_token(request))
            if holder is None:
                return failure(401, NO_TOKEN, headers={"WWW-Authenticate": "Bearer"})
            request.state.principal, request.state.user = holder, holder.user
        return await call_next(request)


#: What each right lets a caller do, for the 403 message.
_DOING = {
    Right.VIEW: "read the API (needs group tidegate:view)",
    Right.SUBMIT: "submit or delete jobs (needs group tidegate:submit)",
    Right.REPORT: "report pod status, spot notices or link state (needs group tidegate:agent)",
    Right.ADMIN: "edit queues (needs group tidegate:admin)",
}


def _needs(right: Right) -> Callable[[Principal], Principal]:
    def check(who: Annotated[Principal, Depends(caller)]) -> Principal:
        if not who.may(right):
            raise HTTPException(403, f"user {who.user} may not {_DOING[right]} (its token's groups do not allow it)")
        return who

    return check


#: The largest `POST /jobs` body (every body's cap, `tidegate.server.bodies`); larger answers 413.
MAX_SUBMISSION_BYTES = MAX_BODY_BYTES
#: What the API's calls may answer besides success, for its OpenAPI document: each a Status.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": description, "model": Status}
    for code, description in (
        (400, "a bad list query: a limit out of range, a malformed selector or continue token"),
        (401, "no token, or one the server does not know"),
        (403, "the token's holder lacks the right (or the namespace) the call needs"),
        (404, "no such queue, job, node, pod or cluster"),
        (409, "the object's state refuses it (Conflict: a pod not bound), or a submitted job exists (AlreadyExists)"),
        (413, "a body larger than MAX_BODY_BYTES"),
        (422, "bad input: details.causes names each problem's field (and a manifest's file, document, object)"),
        (500, "the server failed (a bug)"),
        (503, "the store cannot be written, or this server is a standby"),
    )
}
#: The models of the bodies routes read themselves, added to the OpenAPI document's schemas.
BODY_MODELS: tuple[type[BaseModel], ...] = (SpotNotice, PodStatusReport, LinkState)


def _body(description: str, schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    """A route's OpenAPI requestBody: the body is read as JSON or YAML whatever its content-type says."""
    content = {media: {"schema": schema} for media in ("application/json", "application/yaml")}
    return {"requestBody": {"required": required, "description": description, "content": content}}


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


#: `POST /jobs` takes one or more documents, not one model.
SUBMISSION_BODY = _body(
    "Volcano Jobs, PodGroups with their pods, bare pods: YAML documents or a JSON object", {"type": "string"}
)


#: A route's caller, with the right it needs (403 otherwise).
Submitter = Annotated[Principal, Depends(_needs(Right.SUBMIT))]
Agent = Annotated[Principal, Depends(_needs(Right.REPORT))]
Admin = Annotated[Principal, Depends(_needs(Right.ADMIN))]
Viewer = Annotated[Principal, Depends(_needs(Right.VIEW))]

#: The fields each list's `fieldSelector` may name, and how an item answers one.
JOB_FIELDS = ("metadata.name", "metadata.namespace", "spec.queue", "status.phase")
QUEUE_FIELDS = ("metadata.name", "spec.parent")
NODE_FIELDS = ("metadata.name", "spec.unschedulable")
NAME_FIELDS = ("metadata.name",)


def _job_field(item: dict[str, Any], name: str) -> str:
    return str(
        {
            "metadata.name": item["name"],
            "metadata.namespace": item["namespace"],
            "spec.queue": item["queue"],
            "status.phase": item["phase"],
        }[name]
    )


def _queue_field(item: dict[str, Any], name: str) -> str:
    return str(item["name"] if name == "metadata.name" else item["spec"].get("parent", ""))


def _node_field(item: dict[str, Any], name: str) -> str:
    return str(item["name"] if name == "metadata.name" else str(not item["schedulable"]).lower())


def _name_field(item: dict[str, Any], name: str) -> str:
    return _by_name(item)


def _no_labels(item: dict[str, Any]) -> dict[str, str]:
    return {}


def _by_name(item: dict[str, Any]) -> str:
    return str(item.get("name", item.get("cluster", "")))


def _listing(kind: str, fields: tuple[str, ...]) -> Callable[..., ListQuery]:
    """The query parameters of a list of `kind` (Kubernetes' names), as a dependency."""

    def query(
        limit: str | None = Query(None, description="At most this many items: a page (a <Kind>List)"),
        token: str = Query("", alias="continue", description="The continue token of the previous page"),
        label_selector: str = Query("", alias="labelSelector", description="e.g. app=llm,tier!=batch"),
        field_selector: str = Query("", alias="fieldSelector", description=f"on {', '.join(fields)}"),
    ) -> ListQuery:
        return list_query(kind, limit, token, label_selector, field_selector, fields)

    return query


def create_app(
    plane: ControlPlane,
    access: Access | None = None,
    audit: AuditLog | None = None,
    history: PoolHistory | None = None,
) -> FastAPI:
    """The API over one control plane (the caller runs its clock). With `access`, every call but
    `/healthz`, `/readyz`, `/metrics` and the dashboard's page must carry `Authorization: Bearer <token>` of a
    holder with the call's right (401 without a known token, 403 without the right). With `audit`, every call
    that may change state is recorded there, answered or refused. `history` samples the pools for
    `GET /pools/history` (the caller starts it on the plane's clock; by default one that is not started)."""
    app = FastAPI(
        title="tidegate",
        summary="tidegate's live control plane",
        version=VERSION,
        docs_url=None,  # served by `add_docs`, behind the token and without a CDN
        redoc_url=None,
        openapi_url=None,
    )
    app.state.access = access
    app.state.history = history = history if history is not None else PoolHistory(plane)
    http = HttpMetrics()
    if access is not None:
        authenticate(app, access)

    @app.middleware("http")  # outside authentication: 401s are measured too
    async def measured(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        http.observe(request.method, route_of(request.scope), response.status_code, time.perf_counter() - started)
        return response

    if audit is not None:  # added last, so outermost: the audit log records 401s too

        @app.middleware("http")
        async def audited(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            response = await call_next(request)
            if request.method not in ("GET", "HEAD"):
                user = getattr(request.state, "user", "")
                audit.record(user, request.method, request.url.path, response.status_code)
            return response

    api = APIRouter(dependencies=[Depends(_needs(Right.VIEW))], responses=ERROR_RESPONSES)
    registry = CollectorRegistry()
    registry.register(PlaneCollector(plane))
    for collector in (
        *http.collectors(),
        *(plane.cycle_metrics.collectors() if isinstance(plane, MeteredPlane) else ()),
    ):
        registry.register(collector)
    answer_errors_as_status(app)

    def openapi() -> dict[str, Any]:
        """FastAPI's document, with the schemas of the bodies routes read themselves."""
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            for model in BODY_MODELS:
                schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/healthz", responses={503: {"description": "the last scheduling cycle failed", "model": Status}})
    def healthz() -> JSONResponse:
        """503 while the last scheduling cycle failed (a liveness probe then restarts the server)."""
        if plane.last_error:
            message = f"the last scheduling cycle failed ({plane.failed_cycles} so far): {plane.last_error}"
            return failure(503, message)
        return JSONResponse(
            {
                "ok": True,
                "cycles": plane.cycles,
                "last_cycle": plane.last_cycle_s,
                "failed_cycles": plane.failed_cycles,
                "error": "",
            }
        )

    @app.get("/readyz")
    def readyz() -> dict[str, Any]:
        """This server holds its store and serves the API (a standby answers 503: `standby_app`)."""
        return {"ready": True}

    @api.get("/whoami")
    def whoami(who: Viewer) -> dict[str, Any]:
        """Who holds the token, and what it may do (`user` "" when the API has no tokens)."""
        namespaces = None if who.namespaces is None else sorted(who.namespaces)
        return {"user": who.user, "rights": sorted(r.value for r in who.rights), "namespaces": namespaces}

    @api.get("/queues")
    def queues(query: Annotated[ListQuery, Depends(_listing("Queue", QUEUE_FIELDS))]) -> Any:
        return answer("Queue", plane.views.queues_view(), query, _by_name, lambda item: item["labels"], _queue_field)

    @api.get("/queues/{name}")
    def queue(name: str) -> dict[str, Any]:
        return plane.views.queue_view(name)

    @api.patch("/queues/{name}", openapi_extra=_body("A JSON merge patch of the Queue", {"type": "object"}))
    def patch_queue(name: str, _: Admin, patch: Annotated[dict[str, Any], Depends(merge_patch)]) -> dict[str, Any]:
        plane.patch_queue(name, patch)
        return plane.views.queue_view(name)

    @api.post("/jobs", status_code=201, openapi_extra=SUBMISSION_BODY)
    async def submit(request: Request, who: Submitter) -> dict[str, Any]:
        text = (await read_body(request)).decode("utf-8", errors="replace")
        return {"accepted": plane.submit(text, "POST /jobs", who.user, who.namespaces)}

    @api.get("/jobs")
    def jobs(
        query: Annotated[ListQuery, Depends(_listing("Job", JOB_FIELDS))],
        queue: str = "",
        phase: str = "",
        namespace: str = "",
    ) -> Any:
        items = plane.views.jobs_view(queue, phase, namespace)
        return answer("Job", items, query, lambda item: str(item["key"]), lambda item: item["labels"], _job_field)

    @api.get("/jobs/{namespace}/{name}")
    def job(namespace: str, name: str) -> dict[str, Any]:
        return plane.views.job_view(f"{namespace}/{name}")

    @api.delete("/jobs/{namespace}/{name}")
    def delete_job(namespace: str, name: str, who: Submitter) -> dict[str, Any]:
        if not who.may_submit_to(namespace):
            raise Forbidden(f"user {who.user} may not delete jobs in namespace {namespace}", "Job", name)
        plane.delete_job(f"{namespace}/{name}")
        return {"deleted": f"{namespace}/{name}"}

    @api.get("/nodes")
    def nodes(query: Annotated[ListQuery, Depends(_listing("Node", NODE_FIELDS))]) -> Any:
        return answer("Node", plane.views.nodes_view(), query, _by_name, lambda item: item["labels"], _node_field)

    @api.get("/pools")
    def pools(query: Annotated[ListQuery, Depends(_listing("Pool", NAME_FIELDS))]) -> Any:
        return answer("Pool", plane.views.pools_view(), query, _by_name, _no_labels, _name_field)

    @api.get("/pools/history")
    def pools_history(since: float | None = None) -> dict[str, Any]:
        """Each pool sampled over time (nodes, provisioning, draining, billed, the HPA's recommendation and
        metric, spend) and the budget's spend; `since` leaves out samples at or before that time."""
        return history.view(since)

    @api.get("/budget")
    def budget() -> dict[str, Any]:
        return plane.views.budget_view()

    @api.get("/links")
    def links(query: Annotated[ListQuery, Depends(_listing("Link", NAME_FIELDS))]) -> Any:
        return answer("Link", plane.views.links_view(), query, _by_name, _no_labels, _name_field)

    @api.put("/links/{cluster}", openapi_extra=_body("The link's state", _schema(LinkState)))
    def set_link(
        cluster: str, _: Agent, link: Annotated[LinkState, Depends(body_of(LinkState))]
    ) -> list[dict[str, Any]]:
        plane.set_link(cluster, link.up, link.reason)
        return plane.views.links_view()

    @api.get("/nodes/{name}/pods")
    def node_pods(name: str) -> list[dict[str, Any]]:
        return plane.views.node_pods(name)

    @api.post(
        "/nodes/{name}/interruption",
        openapi_extra=_body("The notice (none: the pool's or provider's)", _schema(SpotNotice), required=False),
    )
    def interruption(
        name: str, _: Agent, notice: Annotated[SpotNotice | None, Depends(body_of(SpotNotice, optional=True))]
    ) -> dict[str, Any]:
        goes_at = plane.spot_notice(name, notice.notice_seconds if notice is not None else None)
        return {"node": name, "goes_at": goes_at}

    @api.post("/pods/{namespace}/{name}/status", openapi_extra=_body("The pod's phase", _schema(PodStatusReport)))
    def pod_status(
        namespace: str, name: str, _: Agent, status: Annotated[PodStatusReport, Depends(body_of(PodStatusReport))]
    ) -> dict[str, Any]:
        job = plane.report_pod(f"{namespace}/{name}", PodPhase(status.phase), status.message)
        return plane.views.job_view(job.key)

    @app.get("/metrics", response_class=PlainTextResponse, responses={200: {"content": {"text/plain": {}}}})
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(registry), media_type=PROMETHEUS_CONTENT_TYPE)

    add_docs(api, app)
    add_dashboard(app)
    app.include_router(api)
    return app


def answer_errors_as_status(app: FastAPI) -> None:
    """Every error `app` answers as a Kubernetes Status (`tidegate.server.status`): the control plane's,
    bad bodies, FastAPI's request validation, Starlette's 404 and 405 for unknown routes, and any failure."""

    @app.exception_handler(ManifestErrors)
    def manifest_errors(_: Request, exc: ManifestErrors) -> JSONResponse:
        return invalid(exc.errors)

    @app.exception_handler(Refused)
    def refused(_: Request, exc: Refused) -> JSONResponse:
        return failure(exc.code, exc.message, causes=exc.causes)

    @app.exception_handler(RequestValidationError)
    def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's checks of path and query parameters, without the input they echo."""
        causes = [validation_cause(error, ("body",)) for error in exc.errors()]
        said = "; ".join(f"{cause.field}: {cause.message}" for cause in causes)
        return failure(422, f"{call_of(request)}: {said}", causes=causes)

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":  # no such route: Kubernetes' words
            message = f"the server could not find the requested resource ({call_of(request)})"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"{request.method} is not allowed on {request.url.path} (allowed: {allowed})"
        return failure(exc.status_code, message, headers=exc.headers)

    @app.exception_handler(NotFound)
    def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return failure(404, exc.message, name=exc.name, kind=exc.kind)

    @app.exception_handler(Conflict)
    def conflict(_: Request, exc: Conflict) -> JSONResponse:
        return failure(409, exc.message, name=exc.name, kind=exc.kind)

    @app.exception_handler(AlreadyExists)
    def already_exists(_: Request, exc: AlreadyExists) -> JSONResponse:
        causes = [manifest_cause(error, FIELD_DUPLICATE) for error in exc.errors]
        return failure(409, exc.message, name=exc.name, kind=exc.kind, causes=causes, reason="AlreadyExists")

    @app.exception_handler(Forbidden)
    def forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return failure(403, exc.message, name=exc.name, kind=exc.kind)

    @app.exception_handler(StoreError)
    def store_failed(_: Request, exc: StoreError) -> JSONResponse:
        return failure(503, str(exc))

    @app.exception_handler(Exception)
    def failed(request: Request, exc: Exception) -> JSONResponse:
        return failure(500, f"{call_of(request)} failed: {type(exc).__name__}: {exc}")


def standby_app(held_by: Callable[[], str]) -> FastAPI:
    """What a standby server (`tidegate serve --standby`) answers while another holds the store: alive
    (`/healthz` 200, so a liveness probe leaves it be), not ready (`/readyz` 503, so a Service sends it no
    calls), and 503 to everything else, naming the holder."""
    app = FastAPI(title="tidegate (standby)", version=VERSION, docs_url=None, redoc_url=None, openapi_url=None)
    answer_errors_as_status(app)

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "standby": True, "store_held_by": held_by()}

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    def elsewhere(path: str) -> JSONResponse:
        return failure(503, f"standby: another server holds the store ({held_by()}); this one takes over when it stops")

    return app


class GracefulServer(uvicorn.Server):
    """uvicorn's server, except that SIGTERM and SIGINT only stop it. uvicorn raises a caught signal again
    once it has shut down, which would kill `tidegate serve` before it gives its store up."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
