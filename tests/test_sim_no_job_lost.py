"""Property: no job is ever lost, whatever disruptions happen.

Random small workloads (gangs of 1..8 GPUs, some in dev, some straight to burst-cloud; a dev job
fills the IDC for the first 3,000 s so that many land on the cloud) run on one IDC node and two cloud
nodes behind a shared link, with data gravity and checkpoint uploads on, under random disruptions.
At the end every submitted job is exactly one of: completed, failed with a reason, or still in the
engine (pending in a queue, or placed); and since the run has no horizon and every disruption ends,
none is left pending or placed either. Every job a disruption restarted has an event naming it, and
every job on the cloud or waiting to burst when the link is cut has an event at that instant.

Disruptions are one strategy, `disruptions()`, turned into Scenario fields by `scenario_with()`: today
link outages (`linkOutages`, both cloud-pod policies) and spot notices to the cloud pool. To add another kind,
add a key to the dictionary `disruptions()` draws and map it to its Scenario (or pool) field in
`scenario_with()`; the property needs no other change.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sim_builders import HELIOS_HEADER, write_data_sim

from tidegate.sim.loader import SimulationInput, load_simulation
from tidegate.sim.run import build_simulation
from tidegate.sim.spec import ScenarioSpec
from tidegate.sim.spot import Interruptions

BASE_DIR = Path(tempfile.mkdtemp(prefix="tidegate-no-job-lost-"))
BASE = load_simulation(
    [
        str(
            write_data_sim(
                BASE_DIR / "sim",
                "",
                cloud_nodes=2,
                cache="{capacity: 15G, missReadGbps: 8}",
                datasets={"d": "10G", "e": "4G"},
                workload={"checkpointEverySeconds": 300, "checkpointSize": "2G"},
            )
        )
    ]
)

job_rows = st.lists(
    st.tuples(
        st.sampled_from(["vc1", "vc2", "vc2"]),  # dev (may overflow), burst-cloud
        st.sampled_from([1, 2, 4, 8]),
        st.integers(0, 3000),  # submitted
        st.integers(1, 2500),  # duration
    ),
    min_size=1,
    max_size=10,
)

outages = st.lists(
    st.fixed_dictionaries(
        {
            "start": st.integers(0, 2500),
            "durationSeconds": st.integers(1, 2000),
            "cloudPods": st.sampled_from(["keepRunning", "fail"]),
        }
    ),
    min_size=1,
    max_size=3,
)


def disruptions() -> st.SearchStrategy[dict[str, Any]]:
    """What can go wrong during a run; one key per kind of disruption (see the module docstring)."""
    notices = st.lists(st.floats(min_value=0, max_value=20_000, allow_nan=False), max_size=3)
    return st.fixed_dictionaries({"link_outages": outages, "spot_notices": notices})


def scenario_with(base: ScenarioSpec, drawn: dict[str, Any]) -> ScenarioSpec:
    """The scenario with the drawn disruptions as its fields."""
    return ScenarioSpec.model_validate({**base.model_dump(by_alias=True), "linkOutages": drawn["link_outages"]})


def with_jobs(inp: SimulationInput, rows: list[tuple[str, int, int, int]], folder: Path) -> SimulationInput:
    csv = folder / "jobs.csv"
    csv.write_text(
        HELIOS_HEADER
        + "hog,u,vc1,8,8,1,COMPLETED,0,0,0,3000,0\n"  # fills the IDC for a while: jobs go to the cloud
        + "".join(f"j{i},u,{vc},{gpus},4,1,COMPLETED,{t},0,0,{d},0\n" for i, (vc, gpus, t, d) in enumerate(rows))
    )
    workload = inp.workloads["w"].model_copy(update={"path": str(csv)})
    return SimulationInput(
        queues=inp.queues,
        config=inp.config,
        clusters=inp.clusters,
        pools=inp.pools,
        datasets=inp.datasets,
        workloads={"w": workload},
        scenarios=inp.scenarios,
        simulations=inp.simulations,
    )


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=job_rows, drawn=disruptions())
def test_no_job_is_ever_lost(rows: list[tuple[str, int, int, int]], drawn: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        inp = with_jobs(BASE, rows, Path(folder))
        inp.scenarios = {"s": scenario_with(BASE.scenarios["s"], drawn)}
        # spot notices at the drawn instants to the cloud pool's oldest node (AWS's 120 s notice)
        notices = tuple(sorted(drawn["spot_notices"]))
        inp.interruptions = {"cloud-a100": Interruptions(0.0, 120.0, "aws", at_seconds=notices)} if notices else {}
        sim, _ = build_simulation(inp, "s", "s")
        touched: list[tuple[float, set[str]]] = []  # at each cut: jobs on cloud nodes or pending to burst
        outages = sim.outages
        if outages is not None:
            cut = outages._cut

            def watched_cut(*args: Any) -> None:
                on_cloud = {r.job.name for r in sim.running.values() if any(sim.node_pool[n].is_cloud for n in r.nodes)}
                bursting = {j.name for j in sim.pending.values() if j.queue == "burst-cloud"}
                fresh = not any(outages.cut.values())
                cut(*args)
                if fresh:  # the link was up: every job on the cloud or waiting to burst is touched
                    touched.append((sim.clock.now(), on_cloud | bursting))

            outages._cut = watched_cut  # type: ignore[method-assign]
        sim.run()
    pending = {job.name for job in sim.pending.values()}
    running = {run.job.name for run in sim.running.values()}
    assert not pending & running
    for job in sim.jobs:
        states = [job.finished is not None, bool(job.failed_reason), job.name in pending, job.name in running]
        assert sum(states) == 1, (job.name, states)
        if job.restarts:
            assert any(text.startswith(f"{job.name}: restarted") for _, text in sim.events)
    for at, names in touched:  # nothing is touched silently
        told = {text.split(":")[0] for t, text in sim.events if t == at}
        assert names <= told, (at, names - told)
    # The run has no horizon and every disruption ends: nothing stays stuck either, and every
    # transfer has ended (or was cancelled with its pod).
    assert not pending and not running
    assert all(not link.active for link in sim.links.values())
    event(f"restarts: {min(sum(j.restarts for j in sim.jobs), 3)}")
    event(f"spot notices: {len(notices)}")
    event(f"jobs touched by an outage: {min(int(sim.meter['outage_affected_jobs'].value), 3)}")
