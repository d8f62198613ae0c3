"""Link outages on hand-checkable scenarios: pending burst jobs go home, prefetches stall for exactly
the cut, nothing is dispatched to (or bought in) the cloud while it lasts.

Columns: job_id,user,vc,gpu_num,cpu_num,node_num,state,submit,start,end,duration,queue
"""

from __future__ import annotations

from pathlib import Path

from sim_builders import write_data_sim, write_sim

from tidegate.sim.loader import load_simulation
from tidegate.sim.run import build_simulation, run_simulation

HOG = "hog,u,vc1,8,8,1,COMPLETED,0,0,10000,10000,0\n"


def test_a_cut_moves_pending_burst_jobs_home_and_stalls_a_prefetch_for_exactly_the_cut(tmp_path: Path) -> None:
    # hog fills the IDC node and dev's 8-GPU capability. p (dev) arrives at 1, overflows at once (dev
    # at capability) and binds on the one cloud node at 2; its 10 GB prefetch at 8 Gbit/s would end at
    # 12. q (dev) arrives at 3, overflows, and pends in burst-cloud (the cloud node is p's). The link
    # is cut from 5 to 105: q goes back to dev; p's prefetch stalls 100 s: its data is there at 112,
    # it runs 100 s to 212. r (dev) arrives at 50, inside the cut: it does not overflow until 105.
    # At 105 q and r overflow again; q takes the node when p leaves (212; d is there: no prefetch).
    jobs = (
        HOG
        + "p,u,vc1,8,8,1,COMPLETED,1,0,0,100,0\n"
        + "q,u,vc1,8,8,1,COMPLETED,3,0,0,100,0\n"
        + "r,u,vc1,8,8,1,COMPLETED,50,0,0,100,0\n"
    )
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=", linkOutages: [{start: 5, durationSeconds: 100}]")
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    by_name = {j.name: j for j in result.simulation.jobs}
    p, q, r = by_name["p"], by_name["q"], by_name["r"]
    assert (p.started, p.prefetch_s, p.finished) == (2.0, 110.0, 212.0)
    assert (q.started, q.prefetch_s, q.finished, q.queue) == (212.0, 0.0, 312.0, "burst-cloud")
    assert (r.started, r.finished) == (312.0, 412.0)
    events = result.simulation.events
    assert events[:6] == [
        (1.0, "p: overflowed from dev to burst-cloud"),
        (3.0, "q: overflowed from dev to burst-cloud"),
        (5.0, "link to aliyun cut for 100 s (cloud pods: keepRunning)"),
        (5.0, "p: prefetch stalled (link to aliyun cut)"),
        (5.0, "q: moved back from burst-cloud to dev (link cut)"),
        (105.0, "link to aliyun restored"),
    ]
    assert {text for t, text in events if t == 105.0 and "overflowed" in text} == {
        "q: overflowed from dev to burst-cloud",
        "r: overflowed from dev to burst-cloud",
    }
    assert result.summary["outage_affected_jobs"] == 2 and result.summary["link_cut_s"] == 100.0


def test_no_cloud_node_is_bought_or_used_while_the_link_is_cut(tmp_path: Path) -> None:
    # The HPA example of test_sim_engine: b (8 GPUs, 100 s) overflows at 0 behind a (8 GPUs, 1000 s)
    # and the HPA would buy a node at 15. The link is cut from 10 to 1000: b goes back to dev at 10,
    # the HPA buys nothing, and at 1000 a leaves and b takes the IDC node (1000..1100).
    folder = write_sim(tmp_path / "sim", "", ["burst-cut"])
    (folder / "jobs.csv").write_text(
        (folder / "jobs.csv").read_text()
        + "a,u,vc1,8,8,1,COMPLETED,0,0,1000,1000,0\nb,u,vc1,8,8,1,COMPLETED,0,0,100,100,0\n"
    )
    (folder / "cut.yaml").write_text(
        "apiVersion: tidegate.io/v1alpha1\nkind: Scenario\nmetadata: {name: burst-cut}\n"
        "spec: {burst: {enabled: true, afterSeconds: 300}, linkOutages: [{start: 10, durationSeconds: 990}]}\n"
    )
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    b = next(j for j in result.simulation.jobs if j.name == "b")
    assert (b.queue, b.started, b.finished) == ("dev", 1000.0, 1100.0)
    assert result.summary["cloud_cost"] == 0 and result.summary["cloud_peak_nodes"] == 0
    assert (10.0, "b: moved back from burst-cloud to dev (link cut)") in result.simulation.events


def test_overlapping_cuts_restore_the_link_when_the_last_one_ends(tmp_path: Path) -> None:
    # Cuts [5, 55) and [30, 105) overlap: the prefetch (2..12 without cuts, 3 s done by 5) stalls
    # from 5 to 105 and ends at 112.
    jobs = HOG + "p,u,vc2,8,8,1,COMPLETED,2,0,0,100,0\n"
    outages = ", linkOutages: [{start: 5, durationSeconds: 50}, {start: 30, durationSeconds: 75}]"
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=outages)
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "s")
    sim.run()
    p = next(j for j in sim.jobs if j.name == "p")
    assert (p.prefetch_s, p.finished) == (110.0, 212.0)
    assert [text for _, text in sim.events if "restored" in text] == ["link to aliyun restored"]
    assert sim.meter["link_cut_clouds"].integral(sim.end) == 100.0


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_example_is_one_aws_cloud_and_loads_without_a_warning() -> None:
    """It named its cloud aliyun while pricing and interrupting it as AWS, and its 300 s grace period
    outlasted AWS's 120 s notice: `make demo` warned about its own example."""
    for paths in (["hybrid-idc"], ["hybrid-idc", "hybrid-idc-mechanisms"]):
        inp = load_simulation([str(EXAMPLES / path) for path in paths])
        assert inp.warnings == []
        (cloud,) = (name for name, cluster in inp.clusters.items() if cluster.type == "cloud")
        assert (cloud, inp.clusters[cloud].provider, inp.clusters[cloud].region) == (
            "aws-us-east-1",
            "aws",
            "us-east-1",
        )
        pool = inp.pools["aws-p4d-spot"]
        assert pool.cluster == cloud and pool.interruption is not None and pool.interruption.region == "us-east-1"
        assert inp.interruptions["aws-p4d-spot"].notice_s == 120.0
        assert inp.policies["tidal-month"].grace_s <= 120.0


def test_the_mechanisms_folder_turns_each_mechanism_off_in_turn() -> None:
    default = load_simulation([str(EXAMPLES / "hybrid-idc")])
    assert list(default.simulations) == ["hybrid-idc"]
    assert not any(default.scenarios[s].link_outages for s in default.simulations["hybrid-idc"].scenarios)
    assert default.datasets and default.workloads["tidal-month"].datasets
    both = load_simulation([str(EXAMPLES / "hybrid-idc"), str(EXAMPLES / "hybrid-idc-mechanisms")])
    mechanisms = both.simulations["hybrid-idc-mechanisms"]
    assert mechanisms.until_seconds == both.simulations["hybrid-idc"].until_seconds  # the same month
    all_on = both.scenarios["all-on"]
    assert all_on.interruptions and all_on.data_gravity.enabled and all_on.link_outages and all_on.budget
    off = {
        "on-demand": {"cloud_pricing": "on-demand"},
        "no-interruptions": {"interruptions": False},
        "no-data-gravity": {"data_gravity": all_on.data_gravity.model_copy(update={"enabled": False})},
        "no-link-cuts": {"link_outages": []},
        "no-budget": {"budget": None},
    }
    for name, changed in off.items():
        expected = all_on.model_copy(update={**changed, "description": both.scenarios[name].description})
        assert both.scenarios[name] == expected, name


def test_a_failed_cloud_job_goes_back_to_its_home_queue_and_bursts_again_after_the_cut(tmp_path: Path) -> None:
    # p (dev) overflows at 1, binds on the cloud node at 2, prefetches until 12 and works from 12. The
    # cut at 50 (cloudPods: fail) restarts it without checkpoints: 38 s x 8 GPUs lost; it goes back to
    # dev (at capability behind hog) until the link is back at 150, overflows again at 150, binds at
    # 151 on the same node (the dataset is still there: no prefetch) and runs its 100 s: 151..251.
    jobs = HOG + "p,u,vc1,8,8,1,COMPLETED,1,0,0,100,0\n"
    outage = ", linkOutages: [{start: 50, durationSeconds: 100, cloudPods: fail}]"
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=outage)
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    p = next(j for j in result.simulation.jobs if j.name == "p")
    assert (p.restarts, p.prefetch_s, p.finished, p.queue) == (1, 10.0, 251.0, "burst-cloud")
    assert result.simulation.meter["lost_gpu_seconds"].value == 38 * 8
    assert [(t, text) for t, text in result.simulation.events if text.startswith("p:")] == [
        (1.0, "p: overflowed from dev to burst-cloud"),
        (50.0, "p: lost its data path (link to aliyun cut); restarting"),
        (50.0, "p: restarted (link outage)"),
        (50.0, "p: back to dev (link cut)"),
        (150.0, "p: overflowed from dev to burst-cloud"),
    ]


def test_a_job_on_a_node_cordoned_for_scale_in_is_touched_by_the_cut_too(tmp_path: Path) -> None:
    # p binds on the cloud node at 2; at 3 the node is cordoned to leave once p is done (drain-aware
    # scale-in). The cut (5..105) still stalls p's prefetch and says so; the restore leaves the node
    # cordoned; p's data arrives at 112, it runs to 212 and the node leaves with it.
    jobs = HOG + "p,u,vc2,8,8,1,COMPLETED,2,0,0,100,0\n"
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=", linkOutages: [{start: 5, durationSeconds: 100}]")
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "s")
    pool = sim.pools["cloud-a100"]

    def cordon_for_scale_in() -> None:
        pool.draining.append(pool.nodes[0])
        sim.core.set_schedulable(pool.nodes[0], False)

    sim.clock.call_at(3, cordon_for_scale_in)
    uncordoned: list[str] = []
    set_schedulable = sim.core.set_schedulable
    sim.core.set_schedulable = lambda node, on: (uncordoned.append(node) if on else None, set_schedulable(node, on))  # type: ignore[method-assign]
    sim.run()
    p = next(j for j in sim.jobs if j.name == "p")
    assert (p.prefetch_s, p.finished) == (110.0, 212.0)
    assert (5.0, "p: prefetch stalled (link to aliyun cut)") in sim.events
    assert uncordoned == [] and pool.nodes == []


def test_the_same_folder_gives_the_same_figures_and_events_twice(tmp_path: Path) -> None:
    # Data gravity, checkpoint uploads and a failing cut over a dozen jobs: nothing depends on
    # anything but the inputs (the link's rates, the cache, the outage order are all deterministic).
    rows = "".join(
        f"j{i},u,vc{1 + i % 2},{(1, 2, 4, 8)[i % 4]},4,1,COMPLETED,{i * 150},0,0,{400 + (i * 337) % 1500},0\n"
        for i in range(12)
    )
    outage = ", linkOutages: [{start: 700, durationSeconds: 400, cloudPods: fail}]"
    workload = {"checkpointEverySeconds": 300, "checkpointSize": "2G"}
    folder = write_data_sim(tmp_path / "sim", HOG + rows, cloud_nodes=2, scenario=outage, workload=workload)
    first, second = (run_simulation(load_simulation([str(folder)]), workers=1)[0] for _ in range(2))
    assert first.summary == second.summary
    assert first.simulation.events == second.simulation.events
    assert first.summary["outage_affected_jobs"] > 0 and first.summary["prefetches"] > 0
