"""The API as a new user first meets it: bodies read whatever their content-type says (as curl sends them),
one error shape (Kubernetes' Status) for every error, an OpenAPI document that says so, and documentation
pages that need no CDN and sit behind the token like everything else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_live import CLUSTER, vcjob
from test_live_fleet import fill_the_idc_then_wait, served

from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.views import PlaneViews
from tidegate.model.manifests import load_text
from tidegate.server.access import read_access
from tidegate.server.app import create_app, standby_app
from tidegate.server.docs import ASSETS, ASSETS_PATH
from tidegate.server.status import REASONS, Status, read_status

#: The headers curl sends with `-d` (`curl -X PATCH host/queues/x -d '{...}'`): a form, whatever the bytes are.
CURL = {"user-agent": "curl/7.88.1", "accept": "*/*", "content-type": "application/x-www-form-urlencoded"}
#: Content types a body may come with, each of which must not matter.
CONTENT_TYPES = [
    CURL["content-type"],
    "application/json",
    "application/yaml",
    "text/plain",
    "application/merge-patch+json",
    None,
]


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[TestClient, ControlPlane, SimClock]:
    """A simulation folder served: an IDC node running `first`, a cloud node running `second`."""
    plane, clock = served(tmp_path)
    fill_the_idc_then_wait(plane, clock)
    clock.run(until=200.0)
    return TestClient(create_app(plane)), plane, clock


def _send(client: TestClient, method: str, path: str, body: str, content_type: str | None) -> Any:
    headers = {**CURL, "content-type": content_type} if content_type else {"user-agent": CURL["user-agent"]}
    return client.request(method, path, content=body.encode(), headers=headers)


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
def test_every_body_is_read_whatever_its_content_type(
    fleet: tuple[TestClient, ControlPlane, SimClock], content_type: str | None, as_yaml: bool
) -> None:
    client, plane, _ = fleet
    bodies = {  # each route taking a body: the body as JSON and as YAML
        ("PATCH", "/queues/dev"): ('{"spec":{"weight":10}}', "spec: {weight: 10}"),
        ("POST", "/jobs"): ('{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}', vcjob("third")),
        ("PUT", "/links/aliyun"): ('{"up": false, "reason": "probe"}', "up: false\nreason: probe\n"),
        ("POST", "/nodes/cloud-a100-0/interruption"): ('{"notice_seconds": 30}', "notice_seconds: 30\n"),
        ("POST", "/pods/default/first-worker-0/status"): ('{"phase": "Succeeded"}', "phase: Succeeded\n"),
    }
    for (method, path), (json_body, yaml_body) in bodies.items():
        if path == "/jobs" and not as_yaml:  # a JSON Job must be whole to be accepted
            json_body = '{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "third"},'
            json_body += ' "spec": {"queue": "dev", "tasks": [{"name": "w", "replicas": 1, "template": {"spec":'
            json_body += ' {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]}}'
        reply = _send(client, method, path, yaml_body if as_yaml else json_body, content_type)
        assert reply.status_code in (200, 201), (method, path, reply.text)
    assert plane.queues["dev"].weight == 10
    assert "default/third" in plane.jobs
    assert plane.views.links_view()[0]["up"] is False
    assert plane.notices == {"cloud-a100-0": 230.0}
    assert plane.jobs["default/first"].phase.value == "Completed"


def test_a_body_neither_json_nor_yaml_names_why_and_the_call(served_plane: TestClient) -> None:
    client = served_plane
    for body, why in (
        ('{"spec": {"weight": 10}', "PATCH /queues/dev: the body is not JSON: Expecting ',' delimiter (line 1"),
        ("spec: [weight", "PATCH /queues/dev: the body is neither JSON nor YAML: "),
        ("- a list", "PATCH /queues/dev: a merge patch is an object"),
        (b"\xff\xfe", "PATCH /queues/dev: the body is not UTF-8 text (byte 0)"),
    ):
        reply = client.patch("/queues/dev", content=body, headers=CURL)
        refused = read_status(reply.json(), 422)
        assert refused.message.startswith(why), refused.message
    reply = client.post("/pods/default/x/status", content="phase: Lost\n", headers=CURL)
    (cause,) = read_status(reply.json(), 422).details.causes
    assert (cause.field, cause.reason) == ("phase", "FieldValueInvalid") and "Succeeded" in cause.message
    (cause,) = read_status(client.put("/links/aliyun", content="reason: x\n").json(), 422).details.causes
    assert (cause.field, cause.reason) == ("up", "FieldValueRequired")


@pytest.fixture
def served_plane() -> TestClient:
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    return TestClient(create_app(plane), raise_server_exceptions=False)


TOKENS = 'v13w,grafana,1,"tidegate:view"\nr00t,ops,2,"tidegate:admin"\n'


def test_every_error_answer_is_a_kubernetes_status(tmp_path: Path, served_plane: TestClient) -> None:
    client = served_plane
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    (tmp_path / "tokens").write_text(TOKENS)
    guarded = TestClient(create_app(plane, read_access(tmp_path / "tokens")))
    client.post("/jobs", content=vcjob("a"))
    answers = {
        "no route": (client.get("/nope"), 404),
        "no such method": (client.put("/jobs"), 405),
        "no token": (guarded.get("/queues"), 401),
        "no right": (guarded.patch("/queues/dev", json={}, headers={"Authorization": "Bearer v13w"}), 403),
        "no object": (client.get("/jobs/default/none"), 404),
        "the object's state": (client.post("/pods/default/a-worker-0/status", json={"phase": "Succeeded"}), 409),
        "too large": (client.post("/jobs", headers={"content-length": str(10**9)}, content=b""), 413),
        "a bad manifest": (client.post("/jobs", content=vcjob("b", queue="nope")), 422),
        "a bad body": (client.post("/pods/default/a-worker-0/status", json={"phase": 1}), 422),
    }
    plane.stop()
    for what, (reply, code) in answers.items():
        assert reply.status_code == code, (what, reply.text)
        status = read_status(reply.json(), code)
        assert status.reason == REASONS[code] and status.message, what
    assert "/nope" in read_status(answers["no route"][0].json()).message
    assert "allowed: " in read_status(answers["no such method"][0].json()).message
    assert answers["no token"][0].headers["www-authenticate"] == "Bearer"
    assert read_status(answers["no object"][0].json()).details.model_dump() == {
        "name": "default/none",
        "kind": "Job",
        "causes": [],
    }
    assert read_status(answers["the object's state"][0].json()).details.kind == "Pod"


def test_fastapi_s_own_request_validation_answers_a_status() -> None:
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    app = create_app(plane)

    @app.get("/count")  # the API's routes take strings only: a route that checks a query parameter
    def count(n: int) -> int:
        return n

    reply = TestClient(app).get("/count", params={"n": "many"})
    (cause,) = read_status(reply.json(), 422).details.causes
    assert (cause.field, cause.reason) == ("query.n", "FieldValueInvalid") and "many" not in reply.text
    (cause,) = read_status(TestClient(app).get("/count").json(), 422).details.causes
    assert (cause.field, cause.reason) == ("query.n", "FieldValueRequired")


def test_a_server_failure_and_a_standby_answer_a_status(served_plane: TestClient, monkeypatch: Any) -> None:
    client = served_plane

    def broken(*_: object) -> list[dict[str, Any]]:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(PlaneViews, "queues_view", broken)
    failed = read_status(client.get("/queues").json(), 500)
    assert failed.message == "GET /queues failed: ZeroDivisionError: division by zero"
    standby = TestClient(standby_app(lambda: "host:1:abc"))
    for path in ("/readyz", "/jobs", "/docs", "/openapi.json"):
        waiting = read_status(standby.get(path).json(), 503)
        assert waiting.reason == "ServiceUnavailable" and "host:1:abc" in waiting.message
    assert standby.get("/healthz").json() == {"ok": True, "standby": True, "store_held_by": "host:1:abc"}


def test_the_openapi_document_describes_the_status_every_error_is(served_plane: TestClient) -> None:
    document = served_plane.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert {"Status", "StatusDetails", "Cause", "PodStatusReport", "LinkState", "SpotNotice"} <= schemas.keys()
    assert "HTTPValidationError" not in schemas  # FastAPI's own 422 shape is not what the API answers
    assert set(schemas["Status"]["properties"]) == set(Status.model_fields)
    errors = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if int(code) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Status"}, (method, path, code)
                    errors += 1
            takes_a_body = method in ("patch", "put") or (method == "post" and "{namespace}/{name}" not in path)
            if takes_a_body or path == "/pods/{namespace}/{name}/status":
                content = operation["requestBody"]["content"]
                assert {"application/json", "application/yaml"} <= content.keys(), (method, path)
    assert errors > 50


def _referenced(html: str) -> list[str]:
    """Every URL an HTML page loads: src, href and ReDoc's spec-url attributes, and Swagger UI's `url: '...'`."""
    attributes = re.findall(r"""(?:src|href|spec-url)=["']([^"']+)["']""", html)
    return attributes + re.findall(r"""url: ?["']([^"']+)["']""", html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_documentation_pages_load_only_what_the_api_serves(served_plane: TestClient, page: str) -> None:
    client = served_plane
    reply = client.get(page)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
    urls = _referenced(reply.text)
    assert urls and all(url.startswith("/") and not url.startswith("//") for url in urls), urls
    assert "http://" not in reply.text and "https://" not in reply.text  # no CDN, no validator badge, no font
    for url in urls:
        loaded = client.get(url)
        assert loaded.status_code == 200 and loaded.content, url
    assert "/openapi.json" in urls
    assets = {url.rsplit("/", 1)[1] for url in urls if url.startswith(ASSETS_PATH)}
    assert assets and assets <= set(ASSETS)
    assert client.get(f"{ASSETS_PATH}/swagger-ui.css").headers["content-type"].startswith("text/css")
    read_status(client.get(f"{ASSETS_PATH}/../app.py").json(), 404)
    read_status(client.get(f"{ASSETS_PATH}/index.html").json(), 404)


def test_the_documentation_is_behind_the_token(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    client = TestClient(create_app(plane, read_access(tmp_path / "tokens")))
    for path in ("/docs", "/redoc", "/openapi.json", f"{ASSETS_PATH}/swagger-ui-bundle.js"):
        refused = client.get(path)
        assert refused.status_code == 401 and read_status(refused.json(), 401).reason == "Unauthorized", path
        assert client.get(path, headers={"Authorization": "Bearer v13w"}).status_code == 200, path
