"""`tidegate kube`'s metrics port: Volcano's queue metrics and cycle latency, its own HTTP request metrics, and
the dashboard read-only with the views it reads, in the shapes `tidegate serve` answers (a fake API server:
the real one is tests/test_kube_apiserver.py's)."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, require_browser
from test_kube_scheduler import CLUSTER, FakeApi, group, pod

from tidegate.kube.metrics import CycleLatency, Heartbeat, serve_metrics
from tidegate.kube.scheduler import ClusterScheduler
from tidegate.kube.views import ClusterViews
from tidegate.server.dashboard import CONTENT_SECURITY_POLICY, static_page


def get(base: str, path: str) -> tuple[int, str, Any]:
    try:
        with urllib.request.urlopen(f"{base}{path}", timeout=5) as answer:
            text = answer.read().decode()
            kind = answer.headers.get("content-type", "")
            return answer.status, kind, json.loads(text) if kind == "application/json" else text
    except urllib.error.HTTPError as error:
        body = json.loads(error.read())
        error.close()
        return error.code, "application/json", body


@pytest.fixture
def port_served() -> Iterator[tuple[str, ClusterScheduler]]:
    """A scheduler that bound a gang of two and left one pod waiting, its port serving metrics and the page."""
    api = FakeApi(CLUSTER + "---" + group("train", 2) + "---" + pod("w0", 2, "train") + "---" + pod("w1", 2, "train"))
    api.add(pod("big", 8))  # no node has 8 GPUs: it waits, saying why
    scheduler = ClusterScheduler(api)
    latency, views = CycleLatency(), ClusterViews()
    scheduler.step(100.0)
    latency.observe(scheduler.last_step_s)
    views.refresh(scheduler, 100.0, force=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve_metrics(scheduler, port, Heartbeat(60.0), "127.0.0.1", latency, views, static_page)
    try:
        yield f"http://127.0.0.1:{port}", scheduler
    finally:
        server.shutdown()
        server.server_close()


def test_the_port_serves_the_views_the_dashboard_reads(port_served: tuple[str, ClusterScheduler]) -> None:
    base, _ = port_served
    code, _, queues = get(base, "/queues")
    assert code == 200 and [q["name"] for q in queues] == ["default"]
    (default,) = queues
    assert default["allocated"]["nvidia.com/gpu"] == "4" and default["jobs"]["Running"] == 1
    ((why, count),) = default["waiting"].items()
    assert count == 1 and "nvidia.com/gpu" in why
    code, _, page = get(base, "/jobs?limit=500")
    assert page["kind"] == "JobList" and page["metadata"] == {}
    jobs = {job["key"]: job for job in page["items"]}
    assert jobs["default/train"]["phase"] == "Running"
    assert sorted(p["node"] for p in jobs["default/train"]["pods"]) == ["idc-0", "idc-0"]
    assert [job["key"] for job in get(base, "/jobs?phase=Running")[2]] == ["default/train"]
    code, _, nodes = get(base, "/nodes")
    idc = next(node for node in nodes if node["name"] == "idc-0")
    assert idc["type"] == "idc" and sum(1 for card in idc["gpu_cards"] if card["pods"]) == 4
    assert get(base, "/whoami")[2] == {"user": "", "rights": ["view"], "namespaces": None}
    code, _, status = get(base, "/budget")
    assert code == 404 and status["kind"] == "Status" and status["reason"] == "NotFound"
    code, kind, html = get(base, "/")
    assert code == 200 and kind.startswith("text/html") and 'data-mode="read-only"' in html
    with urllib.request.urlopen(f"{base}/dashboard/dashboard.js", timeout=5) as answer:
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    code, _, text = get(base, "/healthz")
    assert (code, text) == (200, "ok\n")


def test_the_port_exports_volcano_s_queue_metrics_the_cycle_latency_and_its_requests(
    port_served: tuple[str, ClusterScheduler],
) -> None:
    base, scheduler = port_served
    get(base, "/queues")
    _, _, metrics = get(base, "/metrics")
    assert 'volcano_queue_allocated_scalar_resources{queue_name="default",resource="nvidia.com/gpu"} 4000.0' in metrics
    assert 'volcano_queue_allocated_milli_cpu{queue_name="default"} 2000.0' in metrics
    assert 'volcano_queue_pod_group_running_count{queue_name="default"} 1.0' in metrics
    assert 'volcano_queue_pod_group_inqueue_count{queue_name="default"} 1.0' in metrics
    assert 'volcano_queue_weight{queue_name="default"} 1.0' in metrics
    assert "volcano_e2e_scheduling_latency_milliseconds_count 1.0" in metrics
    assert re.search(r'tidegate_http_requests_total\{code="200",method="GET",route="/queues"\} 1\.0', metrics)
    assert scheduler.cycles == 1


def test_the_views_are_taken_only_while_the_dashboard_is_watched() -> None:
    api = FakeApi(CLUSTER + "---" + pod("a", 2))
    scheduler = ClusterScheduler(api)
    now = [0.0]
    views = ClusterViews(clock=lambda: now[0] + 1000.0)
    scheduler.step(0.0)
    views.refresh(scheduler, 0.0)
    assert views.get("jobs") == []  # nobody looked: no snapshot taken (the look is this call)
    views.refresh(scheduler, 1.0)
    assert [job["key"] for job in views.get("jobs")] == ["default/podgroup-a"]
    now[0] = 100.0  # a minute and more without a look
    api.add(pod("b", 2))
    scheduler.step(2.0)
    views.refresh(scheduler, 2.0)
    assert views.watched is False
    assert [job["key"] for job in views.get("jobs")] == ["default/podgroup-a"]  # the last snapshot, without b
    assert static_page("/nope") is None and static_page("/dashboard/../app.py") is None


def test_the_dashboard_reads_tidegate_kube_read_only(port_served: tuple[str, ClusterScheduler], tmp_path: Path) -> None:
    from playwright.sync_api import expect

    require_browser()
    base, _ = port_served
    with chromium(tmp_path / "profile") as browser:
        page = browser.context.new_page()  # type: ignore[attr-defined]
        page.goto(f"{base}/")
        expect(page.locator('tr[data-queue="default"]')).to_contain_text("4 GPU")
        expect(page.locator('tr[data-job="default/train"] .phase')).to_have_text("Running")
        expect(page.locator("#weight-hint")).to_have_text("Read-only: this server takes no changes.")
        expect(page.locator("#user")).to_have_text("read-only view")
        assert page.locator("button.write:visible").count() == 0 and not page.locator("#sign-in").is_visible()
        page.locator('tr[data-job="default/podgroup-big"]').click()
        expect(page.locator("#job-detail")).to_be_visible()
        assert page.locator("#job-detail button.danger:visible").count() == 0
        expect(page.locator("#budget-body")).to_contain_text("No budget is served")
    assert all(url.startswith(base) for url in browser.requests)
