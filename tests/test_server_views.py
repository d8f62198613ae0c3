"""What the dashboard and `tidegate get` read from the API: lists paged and filtered as Kubernetes lists
(limit, continue, labelSelector, fieldSelector), who the token is, the pools over time, the queues' quota
figures, the nodes' GPU cards, Prometheus' Volcano-named metrics, and the dashboard's page itself."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_live_fleet import FOLDER, fill_the_idc_then_wait, job

from tidegate.cli.fleet_folder import served_fleet
from tidegate.clock import SimClock
from tidegate.model.manifests import load_manifests
from tidegate.prometheus import LATENCY_BUCKETS_MS
from tidegate.server.access import read_access
from tidegate.server.app import create_app
from tidegate.server.dashboard import ASSETS, CONTENT_SECURITY_POLICY
from tidegate.server.history import PoolHistory
from tidegate.server.lists import parse_label_selector
from tidegate.server.metrics import MeteredPlane
from tidegate.server.status import read_status


def metered(tmp_path: Path, clock: SimClock, scenario: str | None = None) -> MeteredPlane:
    """`tidegate serve <folder>` as it runs (a metered control plane), on simulated time."""
    (tmp_path / "fleet.yaml").write_text(FOLDER.replace("DEV_CAP", "16"))
    paths = [str(tmp_path)]
    ms = load_manifests(paths)
    fleet = served_fleet(ms, scenario)
    plane = MeteredPlane.from_manifests(ms, clock, None, fleet.pools, fleet.hpas, fleet.burst, fleet.budget)
    plane.start(clock, 1.0)
    return plane


def labelled(name: str, namespace: str, team: str) -> str:
    """A one-pod vcjob of one GPU whose pods are labelled `team`."""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  queue: prod
  tasks:
  - name: worker
    replicas: 1
    template:
      metadata: {{labels: {{team: {team}}}}}
      spec:
        containers: [{{name: main, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}}}]
"""


@pytest.fixture
def many(tmp_path: Path) -> TestClient:
    """Seven running jobs in two namespaces, labelled by team."""
    clock = SimClock()
    plane = metered(tmp_path, clock)
    for i in range(7):
        plane.submit(labelled(f"job-{i}", "team-a" if i % 2 else "team-b", f"t{i % 3}"))
    clock.run(until=2.0)
    return TestClient(create_app(plane))


def test_a_list_pages_with_limit_and_an_opaque_continue_token(many: TestClient) -> None:
    seen: list[str] = []
    token, pages = "", 0
    while True:
        page = many.get("/jobs", params={"limit": 3, **({"continue": token} if token else {})}).json()
        assert (page["kind"], page["apiVersion"]) == ("JobList", "tidegate.io/v1alpha1")
        seen += [item["key"] for item in page["items"]]
        pages += 1
        token = page["metadata"].get("continue", "")
        if not token:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert page["metadata"]["remainingItemCount"] == 7 - len(seen)
    assert pages == 3 and seen == sorted(seen) and len(set(seen)) == 7  # key order, each once
    assert isinstance(many.get("/jobs").json(), list)  # unpaged: the plain array, as before


def test_a_page_starts_after_the_last_key_whatever_was_deleted_meanwhile(many: TestClient) -> None:
    first = many.get("/jobs?limit=2").json()
    assert [i["key"] for i in first["items"]] == ["team-a/job-1", "team-a/job-3"]
    assert many.delete("/jobs/team-a/job-5").status_code == 200
    rest = many.get("/jobs", params={"continue": first["metadata"]["continue"]}).json()
    assert [i["key"] for i in rest["items"]] == ["team-b/job-0", "team-b/job-2", "team-b/job-4", "team-b/job-6"]


def test_a_bad_limit_or_continue_token_is_a_400_status(many: TestClient) -> None:
    queue_token = many.get("/queues?limit=1").json()["metadata"]["continue"]
    for query, words in (
        ("limit=0", "limit 0 must be between 1 and"),
        ("limit=abc", "limit 'abc': not an integer"),
        ("continue=not-a-token", "not a continue token"),
        (f"continue={queue_token}", "a token of the Queue list, not of Jobs"),
    ):
        answer = many.get(f"/jobs?{query}")
        status = read_status(answer.json(), 400)
        assert status.reason == "BadRequest" and words in status.message, (query, status.message)


def test_label_and_field_selectors_filter_as_kubernetes_does(many: TestClient) -> None:
    def keys(query: str) -> list[str]:
        return sorted(item["key"] for item in many.get(f"/jobs?{query}").json())

    assert keys("labelSelector=team=t0") == ["team-a/job-3", "team-b/job-0", "team-b/job-6"]
    assert keys("labelSelector=team in (t1,t2),team!=t2") == ["team-a/job-1", "team-b/job-4"]
    assert keys("labelSelector=!team") == []
    assert keys("fieldSelector=metadata.namespace=team-a") == ["team-a/job-1", "team-a/job-3", "team-a/job-5"]
    assert keys("fieldSelector=metadata.namespace!=team-a,status.phase=Running") == keys("namespace=team-b")
    assert keys("namespace=team-a&labelSelector=team=t0") == ["team-a/job-3"]
    nodes = many.get("/nodes?labelSelector=volcano.sh/node-type=idc").json()
    assert [node["name"] for node in nodes] == ["idc-a100-0"]
    bad = read_status(many.get("/jobs?fieldSelector=spec.nodeName=x").json(), 400)
    assert 'field label "spec.nodeName" not supported' in bad.message and "status.phase" in bad.message
    assert "unable to parse" in read_status(many.get("/jobs?labelSelector=a in b").json(), 400).message
    with pytest.raises(ValueError, match="invalid label key"):
        parse_label_selector("-x=1")


def test_whoami_says_what_the_token_may_do(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text('a,ops,1,"tidegate:admin"\nv,grafana,2,"tidegate:view"\nt,ci,3,"tidegate:submit:team-a"\n')
    plane = metered(tmp_path, SimClock())
    api = TestClient(create_app(plane, read_access(tokens)))
    who = {t: api.get("/whoami", headers={"Authorization": f"Bearer {t}"}).json() for t in "avt"}
    assert who["a"] == {"user": "ops", "rights": ["admin", "report", "submit", "view"], "namespaces": None}
    assert who["v"] == {"user": "grafana", "rights": ["view"], "namespaces": None}
    assert who["t"] == {"user": "ci", "rights": ["submit", "view"], "namespaces": ["team-a"]}
    assert api.get("/whoami").status_code == 401
    assert TestClient(create_app(plane)).get("/whoami").json()["user"] == ""  # an open API: anyone, everything


def test_the_pools_history_samples_nodes_the_hpa_and_spend_over_time(tmp_path: Path) -> None:
    clock = SimClock()
    plane = metered(tmp_path, clock, "burst")
    history = PoolHistory(plane, interval=5.0)
    history.start(clock)
    fill_the_idc_then_wait(plane, clock)  # the HPA asks for a cloud node at 15 s; it joins at 75 s
    clock.run(until=200.0)
    api = TestClient(create_app(plane, history=history))
    answer = api.get("/pools/history").json()
    assert answer["interval_seconds"] == 5.0
    cloud = next(pool for pool in answer["pools"] if pool["name"] == "cloud-a100")
    assert cloud["hpa"] == "cloud-burst-hpa" and cloud["cloud"] is True
    assert cloud["metric"] == "volcano_queue_pending_jobs_duration_seconds{queue=hybrid-gpu-pool}"
    samples = {s["time"]: s for s in cloud["samples"]}
    assert sorted(samples)[:3] == [0.0, 5.0, 10.0] and len(samples) == 41
    assert (samples[10.0]["nodes"], samples[10.0]["provisioning"], samples[10.0]["desired"]) == (0, 0, 0)
    assert (samples[20.0]["provisioning"], samples[20.0]["billed"], samples[20.0]["desired"]) == (1, 1, 1)
    assert (samples[80.0]["nodes"], samples[80.0]["provisioning"]) == (1, 0)
    assert (samples[25.0]["metric"], samples[30.0]["metric"]) == (0.0, 29.5)  # the 30 s sync: `second` waited 29.5 s
    assert samples[200.0]["spent"] == pytest.approx(30 * (200 - 15) / 3600)
    later = api.get("/pools/history", params={"since": 190.0}).json()
    assert [s["time"] for s in next(p for p in later["pools"] if p["name"] == "cloud-a100")["samples"]] == [
        195.0,
        200.0,
    ]


def test_queues_show_their_deserved_share_and_why_their_jobs_wait(tmp_path: Path) -> None:
    clock = SimClock()
    plane = metered(tmp_path, clock, "idc-only")  # `second` waits in prod (no burst)
    plane.submit(job("first", queue="prod") + "---\n" + job("second", queue="prod"))
    clock.run(until=2.0)
    api = TestClient(create_app(plane))
    prod = api.get("/queues/prod").json()
    assert prod["allocated"] == {"cpu": "1", "nvidia.com/gpu": "8"}
    (proportion,) = [p for p in plane.core.ssn.plugins if p.name == "proportion"]  # the water-fill's own figure
    deserved = proportion.deserved_of(plane.core.ssn.queues["prod"])  # type: ignore[attr-defined]
    gpus = int(deserved[plane.core.ssn.index.col["nvidia.com/gpu"]]) // 1000
    assert prod["deserved"]["nvidia.com/gpu"] == str(gpus) and prod["share"] == 8 / gpus
    assert prod["jobs"] == {"Pending": 1, "Inqueue": 0, "Running": 1, "Completed": 0, "Failed": 0}
    ((why, count),) = prod["waiting"].items()
    assert count == 1 and why == plane.jobs["default/second"].reason and why
    parent = api.get("/queues/hybrid-gpu-pool").json()
    assert parent["allocated"] == {} and parent["allocated_with_children"] == prod["allocated"]


def test_nodes_show_each_gpu_card_and_who_holds_it(tmp_path: Path) -> None:
    clock = SimClock()
    plane = metered(tmp_path, clock)
    plane.submit(job("half", gpus=4, queue="prod"))
    clock.run(until=2.0)
    (node,) = TestClient(create_app(plane)).get("/nodes").json()
    assert (node["type"], node["pool"], node["draining"]) == ("idc", "idc-a100", False)
    held = [card for card in node["gpu_cards"] if card["pods"]]
    assert len(node["gpu_cards"]) == 8 and len(held) == 4
    assert {pod for card in held for pod in card["pods"]} == {"default/half-worker-0"}


def _samples(metrics: str, name: str) -> dict[str, float]:
    return {
        match.group(1): float(match.group(2))
        for match in re.finditer(rf"^{re.escape(name)}(\{{.*\}}|) (\S+)$", metrics, re.MULTILINE)
    }


def test_metrics_carry_volcano_s_queue_names_the_cycle_latency_and_http_requests(tmp_path: Path) -> None:
    clock = SimClock()
    plane = metered(tmp_path, clock, "idc-only")
    plane.submit(job("first", queue="prod") + "---\n" + job("second", queue="prod"))
    clock.run(until=3.0)
    api = TestClient(create_app(plane))
    api.get("/jobs/default/first")
    api.get("/jobs/default/nope")
    metrics = api.get("/metrics").text
    allocated = _samples(metrics, "volcano_queue_allocated_scalar_resources")
    assert allocated['{queue_name="prod",resource="nvidia.com/gpu"}'] == 8000  # milli-units, as Volcano's
    assert _samples(metrics, "volcano_queue_allocated_milli_cpu")['{queue_name="prod"}'] == 1000
    assert _samples(metrics, "volcano_queue_request_milli_cpu")['{queue_name="prod"}'] >= 1000
    assert _samples(metrics, "volcano_queue_allocated_memory_bytes")['{queue_name="prod"}'] == 0
    deserved = _samples(metrics, "volcano_queue_deserved_scalar_resources")
    assert deserved['{queue_name="prod",resource="nvidia.com/gpu"}'] == 1000 * int(
        plane.views.queue_view("prod")["deserved"]["nvidia.com/gpu"]
    )
    assert (
        _samples(metrics, "volcano_queue_capacity_scalar_resources")['{queue_name="dev",resource="nvidia.com/gpu"}']
        == 16000
    )
    assert '{queue_name="prod"}' not in _samples(metrics, "volcano_queue_capacity_milli_cpu")  # no capability
    assert (
        _samples(metrics, "volcano_queue_share")['{queue_name="prod"}'] == plane.views.queue_view("prod")["share"] > 0
    )
    assert _samples(metrics, "volcano_queue_weight")['{queue_name="dev"}'] == 1
    assert set(_samples(metrics, "volcano_queue_overused")) == {f'{{queue_name="{q}"}}' for q in plane.queues}
    assert _samples(metrics, "volcano_queue_pod_group_running_count")['{queue_name="prod"}'] == 1
    assert _samples(metrics, "volcano_queue_pod_group_pending_count")['{queue_name="prod"}'] == 1
    latency = _samples(metrics, "volcano_e2e_scheduling_latency_milliseconds_count")
    assert latency[""] == plane.cycles == 4
    assert f'le="{LATENCY_BUCKETS_MS[-1]}"' in metrics and LATENCY_BUCKETS_MS[0] == 1.0
    assert LATENCY_BUCKETS_MS[-1] == pytest.approx(5000) and len(LATENCY_BUCKETS_MS) == 20
    assert _samples(metrics, "tidegate_pods_bound_total")[""] == 1
    requests = _samples(metrics, "tidegate_http_requests_total")
    assert requests['{code="200",method="GET",route="/jobs/{namespace}/{name}"}'] == 1
    assert requests['{code="404",method="GET",route="/jobs/{namespace}/{name}"}'] == 1  # a template, not names
    assert '{code="200",method="GET",route="/jobs/{namespace}/{name}"}' in "".join(
        _samples(metrics, "tidegate_http_request_duration_seconds_count")
    )


def test_the_dashboard_page_is_served_without_a_token_and_loads_only_its_own_files(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("secret\n")
    api = TestClient(create_app(metered(tmp_path, SimClock()), read_access(tokens)))
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    referenced = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
    assert referenced and all(ref.startswith("/") and not ref.startswith("//") for ref in referenced), referenced
    for ref in referenced:
        if ref != "/docs":
            assert api.get(ref).status_code == 200, ref
    for name, media in ASSETS.items():
        served: Any = api.get(f"/dashboard/{name}")
        assert served.headers["content-type"] == media
        assert "http://" not in served.text.replace("http://www.w3.org/2000/svg", "") and "https://" not in served.text
    # a name that is not one of the page's files is behind the token like any unknown path (401 first)
    read_status(api.get("/dashboard/x.js").json(), 401)
    missing = read_status(api.get("/dashboard/x.js", headers={"Authorization": "Bearer secret"}).json(), 404)
    assert missing.details.kind == "Asset"
    assert api.get("/queues").status_code == 401  # the data stays behind the token
