"""The live control plane's REST API: through FastAPI's test client, and `tidegate serve` as a real server."""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme
import uvicorn
from fastapi.testclient import TestClient
from test_live import CLUSTER, batch, vcjob
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.queue_manifests import parsed_queue, queue_manifest
from tidegate.model.manifests import load_text
from tidegate.model.objects import Queue
from tidegate.server.access import Access
from tidegate.server.app import MAX_SUBMISSION_BYTES, GracefulServer, create_app
from tidegate.server.audit import AuditLog
from tidegate.server.status import Cause, read_status

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed"


def _cause(reply: Any, code: int) -> Cause:
    """The first cause of an error answer (a Status of that code)."""
    return read_status(reply.json(), code).details.causes[0]


@pytest.fixture
def served() -> tuple[TestClient, ControlPlane]:
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    return TestClient(create_app(plane)), plane


def test_jobs_submitted_in_a_batch_run_and_complete_through_the_api(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    response = client.post("/jobs", content=batch(vcjob("a", replicas=2), vcjob("b", "prod", gpus=3)))
    assert response.status_code == 201 and response.json() == {"accepted": ["default/a", "default/b"]}
    assert client.get("/jobs/default/a").json()["phase"] == "Pending"
    plane.cycle()
    assert {job["key"]: job["phase"] for job in client.get("/jobs").json()} == {
        "default/a": "Running",
        "default/b": "Running",
    }
    agents = {node["name"]: client.get(f"/nodes/{node['name']}/pods").json() for node in client.get("/nodes").json()}
    pods = sorted(pod["name"] for listed in agents.values() for pod in listed)
    assert pods == ["default/a-worker-0", "default/a-worker-1", "default/b-worker-0"]
    for pod in ("a-worker-0", "a-worker-1"):
        reply = client.post(f"/pods/default/{pod}/status", json={"phase": "Succeeded"})
        assert reply.status_code == 200
    assert reply.json()["phase"] == "Completed"
    assert [job["key"] for job in client.get("/jobs", params={"phase": "Running"}).json()] == ["default/b"]


def test_bad_submissions_answer_422_naming_document_object_and_field(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    response = client.post("/jobs", content=batch(vcjob("ok"), vcjob("lost", queue="nope")))
    refused = read_status(response.json(), 422)
    assert response.status_code == 422 and refused.reason == "Invalid"
    (error,) = refused.details.causes
    assert (error.file, error.document, error.kind, error.name, error.field) == (
        "POST /jobs",
        1,
        "Job",
        "lost",
        "spec.queue",
    )
    assert error.reason == "FieldValueInvalid" and error.text == refused.message
    assert refused.message.startswith("POST /jobs: document 1: Job/lost field spec.queue: ")
    assert (refused.details.kind, refused.details.name) == ("Job", "lost")
    assert plane.jobs == {}
    garbled = client.post("/jobs", content="kind: [")
    assert garbled.status_code == 422 and read_status(garbled.json(), 422).details.causes[0].file == "POST /jobs"


def test_a_job_submitted_twice_answers_409_already_exists(served: tuple[TestClient, ControlPlane]) -> None:
    """kube-apiserver answers the create of a name it holds 409 AlreadyExists (it was 422 Invalid here)."""
    client, plane = served
    assert client.post("/jobs", content=vcjob("once")).status_code == 201
    again = client.post("/jobs", content=vcjob("once"))
    there = read_status(again.json(), 409)
    assert (again.status_code, there.reason, there.details.kind, there.details.name) == (
        409,
        "AlreadyExists",
        "Job",
        "once",
    )
    (cause,) = there.details.causes
    assert (cause.reason, cause.field, cause.document) == ("FieldValueDuplicate", "metadata.name", 0)
    assert (
        there.message
        == "POST /jobs: document 0: Job/once field metadata.name: job default/once already exists; delete it first"
    )
    both = client.post("/jobs", content=batch(vcjob("once"), vcjob("lost", queue="nope")))
    refused = read_status(both.json(), 422)  # with other problems, 422 naming every one, as before
    assert [(c.name, c.field) for c in refused.details.causes] == [("lost", "spec.queue"), ("once", "metadata.name")]
    assert list(plane.jobs) == ["default/once"]


def test_a_queue_is_given_to_a_namespace_live_and_a_queue_made_in_memory_keeps_it(
    served: tuple[TestClient, ControlPlane],
) -> None:
    client, plane = served
    only_a = {"metadata": {"annotations": {"tidegate.io/namespaces": "team-a"}}}
    assert client.patch("/queues/dev", json=only_a).status_code == 200
    assert plane.core.ssn.queues["dev"].queue.namespaces == ("team-a",)
    refused = client.post("/jobs", content=vcjob("theirs"))
    assert refused.status_code == 422 and _cause(refused, 422).field == "spec.queue"
    bad = client.patch("/queues/dev", json={"metadata": {"annotations": {"tidegate.io/namespaces": "Team A"}}})
    assert bad.status_code == 422 and _cause(bad, 422).field == "metadata.annotations.tidegate.io/namespaces"
    emoji = client.patch("/queues/dev", json={"metadata": {"annotations": {"owner": "team \U0001f680"}}})
    assert emoji.status_code == 200 and emoji.json()["namespaces"] == ["team-a"]
    assert plane.queues["dev"].raw["metadata"]["annotations"]["owner"] == "team \U0001f680"
    for change in ({"kind": "Job"}, {"apiVersion": "v1"}):
        wrong = client.patch("/queues/dev", json=change)
        assert wrong.status_code == 422 and _cause(wrong, 422).field in ("kind", "apiVersion")
    made = Queue("teams", weight=2, namespaces=("team-a", "team-b"))
    assert parsed_queue(queue_manifest(made)).namespaces == made.namespaces


def test_a_submission_larger_than_the_cap_is_refused_unread(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    comments = b"# a comment\n" * (MAX_SUBMISSION_BYTES // 12 + 1)
    reply = client.post("/jobs", content=comments)
    too_large = read_status(reply.json(), 413)
    assert reply.status_code == 413 and too_large.reason == "RequestEntityTooLarge"
    assert too_large.message == "POST /jobs: a body is at most 8,388,608 bytes; send it in parts"
    chunked = client.post("/jobs", content=iter([comments[: len(comments) // 2], comments[len(comments) // 2 :]]))
    assert chunked.status_code == 413 and plane.jobs == {}


def test_the_openapi_document_says_what_calls_answer_and_take(served: tuple[TestClient, ControlPlane]) -> None:
    client, _ = served
    paths = client.get("/openapi.json").json()["paths"]
    assert {"401", "403", "404", "422", "503"} <= paths["/queues/{name}"]["patch"]["responses"].keys()
    assert "application/yaml" in paths["/jobs"]["post"]["requestBody"]["content"]
    assert list(paths["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]
    assert client.get("/metrics").headers["content-type"].startswith("text/plain")
    status = paths["/pods/{namespace}/{name}/status"]["post"]["requestBody"]["content"]["application/json"]
    assert status["schema"]["$ref"].endswith("/PodStatusReport")


def test_a_queue_weight_is_patched_live(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    reply = client.patch("/queues/dev", json={"spec": {"weight": 10}})
    assert reply.status_code == 200 and reply.json()["spec"]["weight"] == 10
    assert plane.core.ssn.queues["dev"].queue.weight == 10  # the scheduler's next cycle reads it
    assert 'tidegate_queue_weight{queue="dev"} 10.0' in client.get("/metrics").text
    bad = client.patch("/queues/dev", json={"spec": {"weight": "ten"}})
    assert bad.status_code == 422 and _cause(bad, 422).field == "spec.weight"
    missing = client.patch("/queues/nope", json={"spec": {"weight": 1}})
    assert missing.status_code == 404 and read_status(missing.json(), 404).details.name == "nope"
    assert client.get("/queues/dev").json()["spec"]["weight"] == 10


def test_errors_for_unknown_objects_and_refused_reports(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    assert client.get("/jobs/default/none").status_code == 404
    assert client.delete("/jobs/default/none").status_code == 404
    assert client.get("/nodes/none/pods").status_code == 404
    client.post("/jobs", content=vcjob("a"))
    assert client.post("/pods/default/a-worker-0/status", json={"phase": "Succeeded"}).status_code == 409  # not bound
    for bad in ({"phase": "Lost"}, {"phase": []}, {"phase": {}}, {"phase": "Running", "message": {"a": 1}}, {}):
        reply = client.post("/pods/default/a-worker-0/status", json=bad)
        field = "message" if "message" in bad else "phase"
        assert reply.status_code == 422 and _cause(reply, 422).field == field
    for path, body in (("/links/aliyun", '{"up": NaN}'), ("/nodes/idc-a100-0/interruption", '{"notice_seconds": NaN}')):
        reply = client.request("PUT" if "links" in path else "POST", path, content=body)  # NaN: not strict JSON
        assert reply.status_code == 422 and "NaN" not in reply.text  # the input is not echoed
    for notice in ("Infinity", "-1", "0"):
        reply = client.post("/nodes/idc-a100-0/interruption", content=f'{{"notice_seconds": {notice}}}')
        assert reply.status_code == 422
    plane.cycle()
    assert client.delete("/jobs/default/a").json() == {"deleted": "default/a"}


def test_healthz_fails_while_the_last_cycle_failed(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    assert client.get("/healthz").status_code == 200
    plane.last_error, plane.failed_cycles = "ZeroDivisionError: division by zero", 1
    reply = client.get("/healthz")
    failed = read_status(reply.json(), 503)
    assert reply.status_code == 503 and failed.reason == "ServiceUnavailable"
    assert failed.message == f"the last scheduling cycle failed (1 so far): {plane.last_error}"


def test_metrics_export_the_pending_duration_the_hpa_reads(served: tuple[TestClient, ControlPlane]) -> None:
    client, plane = served
    client.post("/jobs", content=batch(*(vcjob(f"j{i}", gpus=4) for i in range(3))))
    plane.cycle()
    clock = plane.clock
    assert isinstance(clock, SimClock)
    clock.call_at(300.0, lambda: None)
    clock.run()
    text = client.get("/metrics").text
    assert 'volcano_queue_pending_jobs_duration_seconds{queue="dev"} 300.0' in text
    assert 'tidegate_queue_jobs{phase="running",queue="dev"} 2.0' in text
    assert 'tidegate_queue_allocated{queue="dev",resource="nvidia.com/gpu"} 8.0' in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _call(
    url: str, method: str = "GET", body: bytes | None = None, token: str = "", tls: ssl.SSLContext | None = None
) -> Any:
    headers = {"content-type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=5, context=tls) as response:
        return json.loads(response.read())


@contextmanager
def _serving(tmp_path: Path, *options: str, tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, Path]]:
    """`tidegate serve` on the seed as a real process (run in tmp_path), once its /healthz answers: its base
    URL and log. Stopped after."""
    port = _free_port()
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tidegate.cli.main", "serve", str(SEED), "--port", str(port), *options]
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _call(f"{base}/healthz", tls=tls)["ok"]  # open: a liveness probe carries no token
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "tidegate serve did not answer in 30 s"
                time.sleep(0.2)
        yield base, log
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_tidegate_serve_reads_its_store_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("TIDEGATE_STORE", url)  # a password stays out of the process list
    with _serving(tmp_path, "--period", "0.1") as (_, log):
        assert f"state lives in {url}" in log.read_text()
    assert (tmp_path / "from-env.db").is_file() and not (tmp_path / "tidegate.db").exists()


def test_tidegate_serve_schedules_on_the_wall_clock(tmp_path: Path) -> None:
    with _serving(tmp_path, "--period", "0.1") as (base, log):
        deadline = time.monotonic() + 30
        accepted = _call(f"{base}/jobs", "POST", vcjob("live-job", queue="dev").encode())
        assert accepted == {"accepted": ["default/live-job"]}
        while _call(f"{base}/jobs/default/live-job")["phase"] != "Running":
            assert time.monotonic() < deadline, "the job was not scheduled"
            time.sleep(0.1)
        patched = _call(f"{base}/queues/dev", "PATCH", json.dumps({"spec": {"weight": 10}}).encode())
        assert patched["spec"]["weight"] == 10
    assert (tmp_path / "tidegate.db").is_file()  # state lives in the current directory unless told
    assert "state lives in sqlite:///tidegate.db" in log.read_text()


def test_the_seed_s_curl_line_patches_a_queue_of_a_real_server(tmp_path: Path) -> None:
    # `curl -X PATCH localhost:8080/queues/burst-cloud -d '{"spec":{"weight":10}}'`, byte for byte as curl
    # sends it: -d makes the body a form (application/x-www-form-urlencoded), whatever it holds
    with _serving(tmp_path, "--store", "memory") as (base, _):
        host, port = base.removeprefix("http://").split(":")
        body = b'{"spec":{"weight":10}}'
        request = (
            b"PATCH /queues/burst-cloud HTTP/1.1\r\n"
            + f"Host: {host}:{port}\r\n".encode()
            + b"User-Agent: curl/7.88.1\r\nAccept: */*\r\n"
            + f"Content-Length: {len(body)}\r\n".encode()
            + b"Content-Type: application/x-www-form-urlencoded\r\n\r\n"
            + body
        )
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(request)
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += connection.recv(65536)
            head, _, text = answer.partition(b"\r\n\r\n")
            (length,) = re.findall(rb"(?im)^content-length: *(\d+)", head)
            while len(text) < int(length):
                text += connection.recv(65536)
        assert head.startswith(b"HTTP/1.1 200 "), answer.decode()
        assert json.loads(text)["spec"]["weight"] == 10
        assert _call(f"{base}/queues/burst-cloud")["spec"]["weight"] == 10


def test_tidegate_serve_refuses_a_bad_folder_naming_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "queues.yaml").write_text(
        CLUSTER + "---\nkind: Queue\napiVersion: scheduling.volcano.sh/v1beta1\n"
        "metadata: {name: broken}\nspec: {weight: heavy}\n"
    )
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--port", str(_free_port())])
    assert result.exit_code == 1
    assert "Queue/broken field spec.weight" in result.output
    assert not (tmp_path / "tidegate.db").exists()  # nothing was accepted: no store is left behind


def test_with_a_token_every_call_but_health_and_metrics_needs_it() -> None:
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    client = TestClient(create_app(plane, Access.single("s3cret")))
    assert client.get("/queues").status_code == 401
    wrong = client.post("/jobs", content=vcjob("x"), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert plane.jobs == {}  # refused before anything was read
    ok = client.post("/jobs", content=vcjob("x"), headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 201
    assert client.get("/healthz").status_code == 200 and client.get("/metrics").status_code == 200


def test_with_a_token_an_unknown_route_or_method_answers_401_before_404_or_405(tmp_path: Path) -> None:
    """kube-apiserver authenticates every request before it routes it: without a known token an unknown path
    is 401, not 404 (which told a stranger which paths exist); with one, 404 and 405 as before."""
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    audit = tmp_path / "audit.log"
    client = TestClient(create_app(plane, Access.single("s3cret"), AuditLog(str(audit))))
    for token in ("", "nope"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for method, path in (("GET", "/nowhere"), ("DELETE", "/queues"), ("POST", "/healthz/x"), ("GET", "/docs")):
            answer = client.request(method, path, headers=headers)
            refused = read_status(answer.json(), 401)
            assert (refused.reason, answer.headers["www-authenticate"]) == ("Unauthorized", "Bearer"), (method, path)
    known = {"Authorization": "Bearer s3cret"}
    assert read_status(client.get("/nowhere", headers=known).json(), 404).reason == "NotFound"
    assert read_status(client.delete("/queues", headers=known).json(), 405).reason == "MethodNotAllowed"
    assert [client.get(path).status_code for path in ("/healthz", "/readyz", "/metrics")] == [200, 200, 200]
    recorded = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["verb"], r["path"], r["code"], r["user"]) for r in recorded if r["path"] == "/healthz/x"] == [
        ("POST", "/healthz/x", 401, ""),
        ("POST", "/healthz/x", 401, ""),
    ]
    assert [(r["code"], r["user"]) for r in recorded if r["verb"] == "DELETE"][-1] == (405, "admin")


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "the file is empty"), ("two words", "a token has no whitespace inside"), (None, "No such file")],
)
def test_tidegate_serve_refuses_an_unusable_token_file(tmp_path: Path, content: str | None, message: str) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    result = CliRunner().invoke(app, ["serve", str(SEED), "--token-file", str(token), "--store", "memory"])
    assert result.exit_code == 1
    assert f"--token-file {token}: {message}" in result.output


def test_tidegate_serve_with_a_token_file_refuses_calls_without_the_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret\n")
    with _serving(tmp_path, "--store", "memory", "--token-file", str(tmp_path / "token")) as (base, _):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _call(f"{base}/queues")
        assert refused.value.code == 401
        refused.value.close()
        assert [q["name"] for q in _call(f"{base}/queues", token="s3cret")]


def test_tidegate_serve_with_a_static_token_file_grants_each_user_its_groups(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('v13w,grafana,1,"tidegate:view"\nt3am,alice,2,"tidegate:submit:default"\n')
    with _serving(tmp_path, "--store", "memory", "--token-file", str(tokens)) as (base, log):
        assert [q["name"] for q in _call(f"{base}/queues", token="v13w")]
        with pytest.raises(urllib.error.HTTPError) as refused:
            _call(f"{base}/jobs", "POST", vcjob("x").encode(), token="v13w")
        assert refused.value.code == 403
        refused.value.close()
        assert _call(f"{base}/jobs", "POST", vcjob("x").encode(), token="t3am") == {"accepted": ["default/x"]}
        assert _call(f"{base}/jobs/default/x", token="v13w")["events"][0]["message"] == "submitted by alice"
    audited = [json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"time"')]
    assert [(e["user"], e["verb"], e["code"]) for e in audited] == [("grafana", "POST", 403), ("alice", "POST", 201)]


def test_tidegate_serve_speaks_https_with_a_certificate_and_key(tmp_path: Path) -> None:
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    options = ("--store", "memory", "--tls-cert-file", str(cert), "--tls-private-key-file", str(key))
    with _serving(tmp_path, *options, tls=trusting) as (base, log):
        assert base.startswith("https://")
        assert [q["name"] for q in _call(f"{base}/queues", tls=trusting)]
        with pytest.raises(urllib.error.URLError):  # a client that does not trust the certificate
            _call(f"{base}/queues", tls=ssl.create_default_context())
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not served
            _call(base.replace("https://", "http://") + "/healthz")
    assert f"API on {base}" in log.read_text()


@pytest.mark.parametrize(
    ("token", "tls", "warning"),
    [
        (False, False, "has no authentication"),
        (False, True, "has no authentication"),
        (True, False, "is plain HTTP: its bearer token crosses the network readable"),
        (True, True, ""),
    ],
)
def test_serving_another_address_warns_of_what_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: bool, tls: bool, warning: str
) -> None:
    served: list[uvicorn.Config] = []
    monkeypatch.setattr(GracefulServer, "run", lambda server: served.append(server.config))
    options = ["--store", "memory", "--host", "0.0.0.0"]
    if token:
        (tmp_path / "token").write_text("s3cret")
        options += ["--token-file", str(tmp_path / "token")]
    if tls:
        issued = trustme.CA().issue_cert("tidegate.example")
        issued.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
        issued.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
        options += ["--tls-cert-file", str(tmp_path / "cert.pem"), "--tls-private-key-file", str(tmp_path / "key.pem")]
    result = CliRunner().invoke(app, ["serve", str(SEED), *options])
    assert result.exit_code == 0, result.output
    assert warning in result.output
    if not warning:
        assert "no authentication" not in result.output and "plain HTTP" not in result.output
    ((run,),) = [served]
    assert run.host == "0.0.0.0" and (run.ssl_certfile is not None) == tls


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (("--tls-cert-file", "cert.pem"), "--tls-cert-file needs --tls-private-key-file"),
        (("--tls-private-key-file", "key.pem"), "--tls-private-key-file needs --tls-cert-file"),
        (
            ("--tls-cert-file", "missing.pem", "--tls-private-key-file", "key.pem"),
            "--tls-cert-file missing.pem: No such file",
        ),
        (
            ("--tls-cert-file", "cert.pem", "--tls-private-key-file", "key.pem"),
            "--tls-cert-file cert.pem with --tls-private-key-file key.pem: not a PEM certificate and its private key",
        ),
    ],
)
def test_tidegate_serve_refuses_unusable_tls_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: tuple[str, ...], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    result = CliRunner().invoke(app, ["serve", str(SEED), "--store", "memory", *given])
    assert result.exit_code == 1
    assert message in result.output
