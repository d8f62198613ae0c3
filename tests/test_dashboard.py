"""The dashboard as a platform team uses it, in a real browser (Debian's Chromium driven by Playwright) against a
real `tidegate serve examples/hybrid-idc/`: the page asks for a token, shows the queue tree, sees a job
submitted with `tidegate apply` bind, edits a weight as an admin and is refused as a viewer (saying why),
and deletes a job; and the simulation report: events collapsed and filterable, no sideways scrolling at
1,280 px. Every request the page makes is checked: one for another host fails the test (tests/browser.py).

With TIDEGATE_UPDATE_SCREENSHOTS=1 the screenshots are written to docs/ (docs/dashboard-*.png, docs/report.png)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, require_browser, screenshot_folder
from test_cli_client import free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "hybrid-idc"
TOKENS = 'admin-token,ops,1,"tidegate:admin"\nview-token,grafana,2,"tidegate:view"\n'
#: A gang of 96 pods of 8 GPUs fills dev's capability (768 GPUs); the next dev job overflows to the cloud at once.
BIG = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  queue: dev
  minAvailable: {replicas}
  tasks:
  - name: worker
    replicas: {replicas}
    template:
      metadata: {{labels: {{team: llm}}}}
      spec:
        containers:
        - name: main
          image: trainer
          resources:
            requests: {{nvidia.com/gpu: "8", cpu: "32", memory: 256Gi}}
            limits: {{nvidia.com/gpu: "8"}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`tidegate serve examples/hybrid-idc/` (its budgeted scenario) behind an admin's and a viewer's token."""
    require_browser()
    tmp = tmp_path_factory.mktemp("dashboard")
    (tmp / "tokens").write_text(TOKENS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "serve.log"
    command = [sys.executable, "-m", "tidegate.cli.main", "serve", str(FOLDER), "--scenario", "burst-budget"]
    command += ["--port", str(port), "--store", "memory", "--period", "0.5", "--token-file", str(tmp / "tokens")]
    with log.open("wb") as output:
        process = subprocess.Popen([*command, "--audit-log", str(tmp / "audit.log")], stdout=output, stderr=output)
    try:
        wait_until_up(base, process, log)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def cli(base: str, token: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidegate.cli.main", *args, "--server", base, "--token", token]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def api(base: str, path: str, token: str = "admin-token") -> Any:
    request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def sign_in(page: Any, token: str) -> None:
    page.locator("#token-dialog").wait_for(state="visible")  # the API answered 401: the page asks
    page.fill("#token-input", token)
    page.click("#token-save")


def test_the_dashboard_shows_the_cluster_binds_a_job_and_lets_only_an_admin_edit(served: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = screenshot_folder(tmp_path)
    with chromium(tmp_path / "profile") as browser:
        page = browser.context.new_page()  # type: ignore[attr-defined]
        page.goto(f"{served}/")
        sign_in(page, "admin-token")
        expect(page.locator("#user")).to_have_text("ops (admin, report, submit, view)")
        # the queue tree: the parent first, its children under it
        rows = page.locator("#queue-table tbody tr")
        expect(rows).to_have_count(4)
        expect(rows.nth(0)).to_contain_text("hybrid-gpu-pool")
        for child in ("dev", "prod", "burst-cloud"):
            expect(page.locator(f'tr[data-queue="{child}"] .branch')).to_have_text("└ ")
        expect(page.locator('tr[data-queue="dev"]')).to_contain_text("384 GPU")  # deserved
        expect(page.locator('tr[data-queue="dev"]')).to_contain_text("768 GPU · 4096 CPU · 32768Gi mem")  # capability
        expect(page.locator("#node-summary")).to_contain_text("IDC nodes")
        expect(page.locator(".node.idc")).to_have_count(128)
        expect(page.locator("#budget-body")).to_contain_text("of $1,500.00")
        expect(page.locator("#link-body")).to_contain_text("aws-us-east-1")

        # jobs submitted with the CLI bind, and the page shows them, their pods' nodes and GPU cards: dev at its
        # capability (768 GPUs), prod on the rest of the IDC's 1,024
        jobs = BIG.format(name="pretrain", namespace="team-a", replicas=96).replace("queue: dev", "queue: dev")
        jobs += "---" + BIG.format(name="serving", namespace="team-b", replicas=32).replace("queue: dev", "queue: prod")
        done = cli(served, "admin-token", "apply", "-f", "-", stdin=jobs)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "job.batch.volcano.sh/pretrain created",
            "job.batch.volcano.sh/serving created",
        ]
        job = page.locator('tr[data-job="team-a/pretrain"]')
        expect(job.locator(".phase")).to_have_text("Running", timeout=30_000)
        expect(job).to_contain_text("96/96")
        expect(page.locator('tr[data-job="team-b/serving"] .phase')).to_have_text("Running", timeout=30_000)
        expect(page.locator("#node-summary")).to_contain_text("1024 / 1024")
        expect(page.locator('tr[data-queue="dev"]')).to_contain_text("768 GPU · 3072 CPU · 24Ti mem")  # allocated
        # the next dev job overflows to the cloud at once (dev is at capability), and the HPA asks for a node
        more = cli(
            served, "admin-token", "apply", "-f", "-", stdin=BIG.format(name="finetune", namespace="team-b", replicas=2)
        )
        assert more.returncode == 0, more.stderr
        waiting = page.locator('tr[data-job="team-b/finetune"]')
        expect(waiting).to_contain_text("burst-cloud", timeout=30_000)
        expect(page.locator('#pool-charts .pool[data-pool="aws-p4d-spot"]')).to_contain_text(
            "1 provisioning", timeout=60_000
        )
        waiting.click()
        expect(page.locator("#job-detail")).to_contain_text("overflowed from dev to burst-cloud")
        page.select_option("#filter-namespace", "team-a")
        expect(page.locator("#job-table tbody tr")).to_have_count(1)
        expect(page.locator("#job-table tbody tr")).to_contain_text("pretrain")
        page.select_option("#filter-namespace", "")
        page.locator("#queues").screenshot(path=str(shots / "dashboard-queues.png"))
        page.locator("#jobs").screenshot(path=str(shots / "dashboard-jobs.png"))
        page.locator("#nodes").screenshot(path=str(shots / "dashboard-nodes.png"))
        page.locator("#cloud").screenshot(path=str(shots / "dashboard-cloud.png"))
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / "dashboard.png"))

        # an admin edits dev's weight
        page.click('button[aria-label="edit weight of dev"]')
        page.fill('input[aria-label="weight of dev"]', "10")
        page.click('tr[data-queue="dev"] button[type="submit"]')
        expect(page.locator('tr[data-queue="dev"] .weight')).to_have_text("10")
        assert api(served, "/queues/dev")["spec"]["weight"] == 10
        # and deletes a job (still the one shown)
        expect(page.locator("#job-detail")).to_contain_text("team-b/finetune")
        page.click("#job-detail button.danger")
        page.click("text=Delete team-b/finetune now")
        expect(page.locator('tr[data-job="team-b/finetune"]')).to_have_count(0)
        assert sorted(j["key"] for j in api(served, "/jobs")) == ["team-a/pretrain", "team-b/serving"]

        # a viewer, in a tab of its own (sessionStorage is a tab's), reads but is refused the edit, and told why
        viewer = browser.context.new_page()  # type: ignore[attr-defined]
        viewer.goto(f"{served}/")
        sign_in(viewer, "view-token")
        expect(viewer.locator("#user")).to_have_text("grafana (view)")
        expect(viewer.locator("#weight-hint")).to_contain_text("may not edit queues")
        viewer.click('button[aria-label="edit weight of prod"]')
        viewer.fill('input[aria-label="weight of prod"]', "1")
        viewer.click('tr[data-queue="prod"] button[type="submit"]')
        refusal = (
            "Error from server (Forbidden): user grafana may not edit queues (needs group tidegate:admin) "
            "(its token's groups do not allow it)"
        )
        expect(viewer.locator("#banner")).to_have_text(refusal)
        expect(viewer.locator("#queue-table .row-error")).to_have_text(refusal)
        assert api(served, "/queues/prod")["spec"]["weight"] == 100  # unchanged
        viewer.locator("#queues").screenshot(path=str(shots / "dashboard-viewer-refused.png"))
        # the token lives in the tab's sessionStorage, and in no URL
        assert viewer.evaluate("sessionStorage.getItem('tidegate.token')") == "view-token"
        assert page.evaluate("sessionStorage.getItem('tidegate.token')") == "admin-token"
        assert viewer.evaluate("localStorage.length") == 0
    assert browser.requests and not any("token" in url for url in browser.requests)
    assert all(url.startswith(served) for url in browser.requests), set(browser.requests)
    for name in ("queues", "jobs", "nodes", "cloud", "viewer-refused"):
        assert (shots / f"dashboard-{name}.png").stat().st_size > 10_000


def test_a_request_for_another_host_is_refused_and_fails_the_test(served: str, tmp_path: Path) -> None:
    """The checks themselves: the page's own policy keeps a script's call from even being made, and a request
    that does get made for another host is refused by the route, which then fails the test."""
    from playwright.sync_api import Error

    with pytest.raises(AssertionError, match="would have left this machine"), chromium(tmp_path / "p") as browser:
        page = browser.context.new_page()  # type: ignore[attr-defined]
        page.goto(f"{served}/")
        blocked = page.evaluate("fetch('https://cdn.example.com/x.js').then(() => 'fetched', (e) => String(e))")
        assert "Failed to fetch" in blocked  # Content-Security-Policy: connect-src 'self'
        assert not browser.refused  # so nothing was even asked for
        with pytest.raises(Error):
            page.goto("https://cdn.example.com/x.js")
        assert browser.refused == ["https://cdn.example.com/x.js"]


REPORT_SIMULATION = """
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: six-days}
spec:
  workload: tidal-month
  scenarios: [static-quotas, elastic-burst, burst-budget]
  schedulingPeriodSeconds: 1
  untilSeconds: 518400
"""


def test_the_report_collapses_its_events_filters_them_and_fits_1280_px(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    require_browser()
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "simulation.yaml").write_text(REPORT_SIMULATION)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tidegate.cli.main", "simulate", str(FOLDER), str(tmp_path / "short")]
    done = subprocess.run([*command, "--name", "six-days", "--out", str(out), "--workers", "1"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    with chromium(tmp_path / "profile", width=1280) as browser:
        page = browser.context.new_page()  # type: ignore[attr-defined]
        page.goto((out / "report.html").as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # nothing scrolls sideways
        expect(page.locator("dl.scenarios")).to_contain_text("elastic quotas plus cloud burst behind the HPA")
        expect(page.locator("table").first).to_contain_text("$")  # money with its currency
        runs = page.locator("details.run-events")
        expect(runs).to_have_count(3)
        for i in range(3):
            assert runs.nth(i).get_attribute("open") is None  # collapsed
        burst = page.locator('details.run-events[data-scenario="elastic-burst"]')
        total = burst.locator("li").count()
        assert total > 20 and not burst.locator("li").first.is_visible()
        page.select_option("#event-kind", "scaling")
        assert burst.get_attribute("open") is not None  # opened on a match
        scaling = int(burst.locator(".shown").inner_text())
        assert 0 < scaling < total
        assert all("nodes (" in t or ": HPA " in t or "-> " in t for t in burst.locator("li:visible").all_inner_texts())
        page.select_option("#event-kind", "")
        page.fill("#event-filter", "overflowed")
        shown = burst.locator("li:visible").all_inner_texts()
        assert shown and all("overflowed" in t for t in shown)
        assert int(page.locator("#event-count").inner_text()) == sum(
            int(runs.nth(i).locator(".shown").inner_text()) for i in range(3)
        )
        page.fill("#event-filter", "no such event at all")
        expect(page.locator("#event-count")).to_have_text("0")
        page.fill("#event-filter", "")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(path=str(screenshot_folder(tmp_path) / "report.png"))
    assert all(url.startswith("file://") or url.startswith("data:") for url in browser.requests), browser.requests
    assert json.loads((out / "summary.json").read_text())["runs"][0]["name"] == "static-quotas"
