"""Who may call the live API: the token file's forms and each group's rights, route by route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_live import CLUSTER, vcjob

from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.model.manifests import load_text
from tidegate.server.access import Access, Principal, Right, read_access
from tidegate.server.app import create_app
from tidegate.server.audit import AuditLog
from tidegate.server.status import read_status

TOKENS = """# token,user,uid,"groups": Kubernetes' static token file
root,ops,1,"tidegate:admin"
look,grafana,2,tidegate:view
team,alice,3,"tidegate:submit:default,tidegate:submit:research"
anyns,ci,4,"tidegate:submit,system:authenticated"
agent,node-agent,5,"tidegate:agent"
"""


def test_a_static_token_file_gives_each_token_its_user_and_rights(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    access = read_access(tmp_path / "tokens")
    admin, viewer, team, anyns, agent = (access.holder(t) for t in ("root", "look", "team", "anyns", "agent"))
    assert admin == Principal("ops", frozenset(Right), None)
    assert viewer == Principal("grafana", frozenset({Right.VIEW}))
    assert team == Principal("alice", frozenset({Right.VIEW, Right.SUBMIT}), frozenset({"default", "research"}))
    assert anyns is not None and anyns.namespaces is None and anyns.may_submit_to("anything")
    assert agent is not None and agent.may(Right.REPORT) and not agent.may(Right.SUBMIT)
    assert team is not None and team.may_submit_to("research") and not team.may_submit_to("prod")
    assert access.holder("nope") is None and access.holder("") is None and access.holder("roo") is None


def test_one_bare_token_may_do_everything(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n  s3cret \n")
    holder = read_access(tmp_path / "token").holder("s3cret")
    assert holder is not None and holder.rights == frozenset(Right) and holder.namespaces is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a,b", 'line 1: expected token,user,uid,"groups"'),
        ('a,alice,1,"tidegate:view"\nb,bob,2,"tidegate:owner"', "line 2: unknown group tidegate:owner (known: "),
        ('a,alice,1,"tidegate:view:default"', "line 1: unknown group tidegate:view:default"),
        ('a,alice,1,"tidegate:submit:"', "line 1: unknown group tidegate:submit:"),
        ('a,alice,1,"system:masters"', "line 1: user alice is in no tidegate group, so may do nothing"),
        ("a,alice,1", "line 1: user alice is in no tidegate group"),
        ('a,alice,1,"tidegate:view"\n\na,bob,2,"tidegate:view"', "line 3: the token of line 1 again"),
        ('a,,1,"tidegate:view"', "line 1: the user is empty"),
        ('a b,alice,1,"tidegate:view"', "line 1: the token is empty or has whitespace inside"),
    ],
)
def test_a_bad_token_file_is_refused_naming_its_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "tokens").write_text(content)
    with pytest.raises(ValueError, match=r"^--token-file .*tokens, ") as refused:
        read_access(tmp_path / "tokens")
    assert message in str(refused.value)


@pytest.fixture
def api(tmp_path: Path) -> tuple[TestClient, ControlPlane]:
    (tmp_path / "tokens").write_text(TOKENS)
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    return TestClient(create_app(plane, read_access(tmp_path / "tokens"))), plane


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _in(namespace: str, manifest: str) -> str:
    return manifest.replace("metadata: {name: ", f"metadata: {{namespace: {namespace}, name: ")


def test_each_group_may_call_exactly_its_routes(api: tuple[TestClient, ControlPlane]) -> None:
    client, plane = api
    reads = ["/queues", "/queues/dev", "/jobs", "/nodes", "/nodes/n1/pods", "/pools", "/links"]
    for token in ("root", "look", "team", "anyns", "agent"):
        assert [client.get(path, headers=_as(token)).status_code for path in reads] == [200] * len(reads), token
    patch = {"spec": {"weight": 7}}
    for token in ("look", "team", "anyns", "agent"):
        refused = client.patch("/queues/dev", json=patch, headers=_as(token))
        assert refused.status_code == 403 and "may not edit queues (needs group tidegate:admin)" in refused.text
    assert client.get("/queues/dev").status_code == 401
    assert client.patch("/queues/dev", json=patch, headers=_as("root")).status_code == 200
    assert plane.queues["dev"].weight == 7
    for token in ("look", "agent"):
        refused = client.post("/jobs", content=vcjob("x"), headers=_as(token))
        assert refused.status_code == 403 and "may not submit or delete jobs" in refused.text
    assert plane.jobs == {}
    assert client.post("/jobs", content=vcjob("x"), headers=_as("team")).status_code == 201
    plane.cycle()
    status = {"phase": "Succeeded"}
    for token in ("look", "team"):
        assert client.post("/pods/default/x-worker-0/status", json=status, headers=_as(token)).status_code == 403
        assert client.post("/nodes/n1/interruption", headers=_as(token)).status_code == 403
        assert client.put("/links/cloud", json={"up": False}, headers=_as(token)).status_code == 403
    done = client.post("/pods/default/x-worker-0/status", json=status, headers=_as("agent"))
    assert done.status_code == 200 and done.json()["phase"] == "Completed"


def test_a_team_token_submits_and_deletes_in_its_namespaces_only(api: tuple[TestClient, ControlPlane]) -> None:
    client, plane = api
    mixed = _in("research", vcjob("a")) + "---\n" + _in("prod", vcjob("b"))
    refused = client.post("/jobs", content=mixed, headers=_as("team"))
    assert refused.status_code == 403
    forbidden = read_status(refused.json(), 403)
    said = "POST /jobs#1: Job b: metadata.namespace prod: alice may submit to default, research only"
    assert forbidden.message == said
    assert (forbidden.reason, forbidden.details.kind, forbidden.details.name) == ("Forbidden", "Job", "b")
    assert plane.jobs == {}  # all or nothing: the allowed document was not taken either
    accepted = client.post("/jobs", content=_in("research", vcjob("a")), headers=_as("team"))
    assert accepted.json() == {"accepted": ["research/a"]}
    assert client.post("/jobs", content=_in("prod", vcjob("b")), headers=_as("anyns")).status_code == 201
    assert client.get("/jobs/research/a", headers=_as("look")).json()["events"][0]["message"] == "submitted by alice"
    gone = client.delete("/jobs/prod/b", headers=_as("team"))
    assert gone.status_code == 403 and "may not delete jobs in namespace prod" in gone.text
    assert "prod/b" in plane.jobs
    assert client.delete("/jobs/research/a", headers=_as("team")).status_code == 200
    assert client.delete("/jobs/prod/b", headers=_as("root")).status_code == 200
    assert plane.jobs == {}


def test_a_single_token_is_the_admin_of_before_roles(tmp_path: Path) -> None:
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    client = TestClient(create_app(plane, Access.single("s3cret")))
    assert client.patch("/queues/dev", json={"spec": {"weight": 3}}, headers=_as("s3cret")).status_code == 200
    assert client.post("/jobs", content=_in("any", vcjob("x")), headers=_as("s3cret")).status_code == 201
    assert plane.jobs["any/x"].events[0][1] == "submitted by admin"


def test_every_call_that_may_change_state_is_audited_with_its_user(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), SimClock())
    audit = AuditLog(str(tmp_path / "audit.log"))
    client = TestClient(create_app(plane, read_access(tmp_path / "tokens"), audit))
    assert client.patch("/queues/dev", json={"spec": {"weight": 7}}, headers=_as("root")).status_code == 200
    assert client.post("/jobs", content=vcjob("x"), headers=_as("look")).status_code == 403
    assert client.post("/jobs", content=vcjob("x"), headers=_as("team")).status_code == 201
    assert client.delete("/jobs/default/x", headers=_as("nope")).status_code == 401
    assert client.get("/jobs", headers=_as("look")).status_code == 200  # a read: not audited
    audit.close()
    lines = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert [(e["user"], e["verb"], e["path"], e["code"]) for e in lines] == [
        ("ops", "PATCH", "/queues/dev", 200),
        ("grafana", "POST", "/jobs", 403),
        ("alice", "POST", "/jobs", 201),
        ("", "DELETE", "/jobs/default/x", 401),
    ]
    assert all(e["time"].endswith("Z") for e in lines)


def test_an_audit_log_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^--audit-log .*missing/audit.log: No such file"):
        AuditLog(str(tmp_path / "missing" / "audit.log"))
