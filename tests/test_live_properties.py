"""Properties of `tidegate serve` over a simulation folder's fleet, under random sequences of what users,
agents, probes and providers do (hypothesis), on simulated time with a SQLite store:

- no node holds more pods than it has room for (GPUs, CPU), and the scheduler's own count of each
  node's GPUs is the control plane's (nothing bound twice, even across a restart);
- a job pinned to the IDC never runs on a cloud node;
- gangs are whole: a running job has every pod that has not finished bound, a waiting job none;
- the dev queue never runs more GPUs than its capability;
- a node cordoned for scale-in is gone once its last pod has (unless a spot notice holds it);
- a restart at the same instant shows exactly what was shown before it (jobs, queues, nodes, pools,
  links, budget).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_live_fleet import BUDGETED, FOLDER, serve_folder
from test_live_fleet import job as vcjob
from test_store import LAST_CYCLE

from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import JobPhase
from tidegate.model.objects import NODE_TYPE_LABEL, PodPhase
from tidegate.model.resources import CPU, NVIDIA_GPU
from tidegate.store.sql import Store

#: Two IDC nodes, the cloud pool behind its HPA, dev capped at 16 GPUs, a budget of 2 an hour.
TWO_IDC_NODES = FOLDER.replace("DEV_CAP", "16").replace("count: 1, gpu", "count: 2, gpu") + BUDGETED
DEV_CAPABILITY = 16_000  # canonical units: 16 GPUs

submit = st.tuples(
    st.just("submit"),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["dev", "prod"]),
    st.booleans(),
    st.integers(1, 2),
)
operation = st.one_of(
    submit,
    st.tuples(st.just("wait"), st.sampled_from([1.0, 30.0, 130.0, 400.0, 700.0])),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("fail"), st.integers(0, 50)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("link"), st.booleans()),
    st.tuples(st.just("notice"), st.integers(0, 5)),
    st.tuples(st.just("patch"), st.integers(1, 10)),
    st.tuples(st.just("restart")),
)


@dataclass
class Served:
    folder: Path
    store: Store
    clock: SimClock
    plane: ControlPlane
    made: int = 0
    stores: list[Store] = field(default_factory=list)

    def restart(self) -> None:
        """A new process on the same store at the same instant."""
        before = shown(self.plane)
        self.plane.stop()
        self.store = Store(self.store.url)
        self.stores.append(self.store)
        self.clock = SimClock(start=self.clock.now())
        self.plane = serve_folder(self.folder, self.clock, self.store, "budgeted")
        assert shown(self.plane) == before

    def do(self, op: tuple[Any, ...]) -> None:
        plane, clock = self.plane, self.clock
        kind = op[0]
        running = sorted(key for key, job in plane.jobs.items() if job.phase is JobPhase.RUNNING)
        live = sorted(key for key, job in plane.jobs.items() if job.phase not in (JobPhase.COMPLETED, JobPhase.FAILED))
        if kind == "submit":
            self.made += 1
            _, gpus, queue, pinned, replicas = op
            plane.submit(vcjob(f"j{self.made}", gpus, pinned, queue, replicas))
        elif kind == "wait":
            clock.run(until=clock.now() + op[1])
        elif kind in ("finish", "fail") and running:
            job = plane.jobs[running[op[1] % len(running)]]
            pod = next(p for p in job.pods if p.phase is PodPhase.RUNNING)
            plane.report_pod(pod.key, PodPhase.SUCCEEDED if kind == "finish" else PodPhase.FAILED, "boom")
        elif kind == "delete" and live:
            plane.delete_job(live[op[1] % len(live)])
        elif kind == "link":
            plane.set_link("aliyun", op[1], "property test")
        elif kind == "notice":
            cloud = plane.fleet.pools["cloud-a100"].nodes
            if cloud:
                plane.spot_notice(cloud[op[1] % len(cloud)], 30.0)
        elif kind == "patch":
            plane.patch_queue("burst-cloud", {"spec": {"weight": op[1]}})
        elif kind == "restart":
            self.restart()
        self.plane.cycle()


def shown(plane: ControlPlane) -> dict[str, Any]:
    """Everything the API shows but the recent scaling events (kept in memory only) and the queues' figures
    the last cycle computed (a restarted control plane computes them again at its first: test_store.py)."""
    pools = [{k: v for k, v in pool.items() if k != "events"} for pool in plane.views.pools_view()]
    budget = {k: v for k, v in plane.views.budget_view().items() if k != "events"}
    return {
        "jobs": [{k: v for k, v in job.items() if k != "events"} for job in plane.views.jobs_view()],
        "queues": [{k: v for k, v in q.items() if k not in LAST_CYCLE} for q in plane.views.queues_view()],
        "nodes": plane.views.nodes_view(),
        "pools": pools,
        "links": plane.views.links_view(),
        "budget": budget,
    }


def check(plane: ControlPlane) -> None:
    gpu_col = plane.core.ssn.index.col[NVIDIA_GPU]
    table = plane.core.ssn.table
    for name, node in plane.nodes.items():
        pods = plane.bound[name].values()
        gpus = sum(pod.requests.get(NVIDIA_GPU, 0) for pod in pods)
        assert gpus <= node.allocatable[NVIDIA_GPU], f"{name} holds {gpus} GPUs"
        assert sum(pod.requests.get(CPU, 0) for pod in pods) <= node.allocatable[CPU]
        if not plane.core._nodes_changed and name in table.row:  # the scheduler's count is the plane's
            assert int(table.used[table.row[name]][gpu_col]) == gpus, f"{name}: scheduler and plane disagree"
    for pool in plane.fleet.pools.values():  # a node cordoned for scale-in leaves with its last pod
        for name in pool.draining:
            assert plane.bound[name] or name in plane.notices, f"{name} drained but kept"
    dev = 0
    for job in plane.jobs.values():
        bound = [pod for pod in job.pods if pod.node_name]
        if any(pod.node_selector.get(NODE_TYPE_LABEL) == "idc" for pod in job.template):
            assert all(plane.nodes[pod.node_name].labels[NODE_TYPE_LABEL] == "idc" for pod in bound), job.key
        if job.waiting:
            assert not bound, f"{job.key} waits with pods bound"
        elif job.phase is JobPhase.RUNNING:
            assert all(pod.node_name for pod in job.pods if pod.phase is not PodPhase.SUCCEEDED), job.key
            if job.group.queue == "dev":
                dev += sum(pod.requests.get(NVIDIA_GPU, 0) for pod in job.pods if pod.phase is PodPhase.RUNNING)
    assert dev <= DEV_CAPABILITY


@contextmanager
def served() -> Iterator[Served]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "fleet"
        folder.mkdir()
        (folder / "fleet.yaml").write_text(TWO_IDC_NODES)
        store = Store(f"sqlite:///{Path(tmp) / 'state.db'}")
        clock = SimClock()
        run = Served(folder, store, clock, serve_folder(folder, clock, store, "budgeted"), stores=[store])
        try:
            yield run
        finally:
            run.plane.stop()
            for opened in run.stores:
                opened.close()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=30))
def test_what_serve_shows_holds_under_any_sequence_of_events(operations: list[tuple[Any, ...]]) -> None:
    with served() as run:
        for op in operations:
            run.do(op)
            check(run.plane)
