"""The live control plane under concurrent use: request threads submit, patch and report while the clock's
thread runs cycles, as under `tidegate serve`."""

from __future__ import annotations

import threading
import time

from test_live import CLUSTER, vcjob

from tidegate.clock import WallClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import JobPhase
from tidegate.model.manifests import load_text
from tidegate.model.objects import PodPhase


def test_threads_submitting_reporting_and_patching_while_cycles_run_lose_nothing() -> None:
    clock = WallClock(start=0.0, speed=50.0)  # a cycle every 0.02 s of wall time
    plane = ControlPlane.from_manifests(load_text(CLUSTER, "cluster.yaml"), clock)
    plane.start(clock, period=1.0)
    loop = threading.Thread(target=clock.run, daemon=True)
    loop.start()
    errors: list[BaseException] = []

    def client(worker: int) -> None:
        try:
            for i in range(15):
                key = plane.submit(vcjob(f"w{worker}-{i}"), f"worker {worker}")[0]
                deadline = time.monotonic() + 20
                while plane.jobs[key].phase is not JobPhase.RUNNING:  # 8 GPUs for 4 workers' one-GPU jobs
                    assert time.monotonic() < deadline, f"{key} never ran"
                    time.sleep(0.005)
                plane.report_pod(f"default/w{worker}-{i}-worker-0", PodPhase.SUCCEEDED)
                plane.patch_queue("dev", {"spec": {"weight": 1 + (worker + i) % 5}})
        except BaseException as exc:  # reported below: an assertion in a thread would be lost
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(w,)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    plane.stop()
    loop.join(timeout=10)
    assert not errors, errors
    assert len(plane.jobs) == 60 and all(job.phase is JobPhase.COMPLETED for job in plane.jobs.values())
    assert plane.failed_cycles == 0 and plane.cycles > 0
    assert all(not plane.views.node_pods(node) for node in plane.nodes)
    assert plane.core.ssn.table.used.sum() == 0  # every pod's share given back
