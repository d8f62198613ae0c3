"""Data gravity in the engine on hand-checkable scenarios: prefetch over the shared link, the IDC
cache, dataset reuse on a cloud node, checkpoint uploads, locality, and what the summary reports.

Every folder (tests/sim_builders.py `write_data_sim`): one 8-GPU IDC node, fixed 8-GPU cloud nodes at
36 a node-hour behind a 10 Gbit/s link with an 8 Gbit/s per-pod cap, dataset d of 10 GB (80 Gbit).
A dev job `hog` (8 GPUs) fills the IDC node from t=0, so burst-cloud jobs (vc2) land on cloud nodes.
Columns: job_id,user,vc,gpu_num,cpu_num,node_num,state,submit,start,end,duration,queue
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from sim_builders import write_data_sim

from tidegate.model.errors import ManifestErrors
from tidegate.sim.datasets import assign_datasets, pick_dataset
from tidegate.sim.loader import load_simulation
from tidegate.sim.report import summary_table, write_html, write_summary
from tidegate.sim.run import RunResult, build_simulation, run_simulation
from tidegate.sim.spec import DatasetShare

HOG = "hog,u,vc1,8,8,1,COMPLETED,0,0,10000,10000,0\n"


def run_one(folder: Path) -> RunResult:
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    return result


def jobs_of(result: RunResult) -> dict[str, tuple[float | None, float | None, float]]:
    return {j.name: (j.started, j.finished, j.prefetch_s) for j in result.simulation.jobs}


def test_two_prefetches_sharing_the_link_finish_when_the_arithmetic_says(tmp_path: Path) -> None:
    # c binds on cloud node 0 at t=10, d on node 1 at t=12. c alone runs at its 8 Gbit/s cap for 2 s
    # (16 of 80 Gbit); from 12 both get 5 Gbit/s: c's last 64 Gbit take 12.8 s (data at 24.8); d has
    # moved 64 by then and takes its last 16 at 8 Gbit/s: 2 s (data at 26.8). Each job then runs 100 s.
    jobs = HOG + "c,u,vc2,8,8,1,COMPLETED,10,0,0,100,0\nd,u,vc2,8,8,1,COMPLETED,12,0,0,100,0\n"
    result = run_one(write_data_sim(tmp_path / "sim", jobs, cloud_nodes=2))
    got = jobs_of(result)
    assert got["c"] == (10.0, pytest.approx(124.8), pytest.approx(14.8))
    assert got["d"] == (12.0, pytest.approx(126.8), pytest.approx(14.8))
    summary = result.summary
    assert summary["prefetches"] == 2 and summary["prefetch_jobs"] == 2
    assert summary["prefetch_delay_total_s"] == pytest.approx(29.6)
    assert summary["prefetch_delay_by_job"] == {"c": pytest.approx(14.8), "d": pytest.approx(14.8)}
    assert (summary["cloud_prefetch_delay_total_s"], summary["idc_miss_read_delay_total_s"]) == (29.6, 0)
    # Idle while prefetching: 2 jobs x 8 GPUs x 14.8 s = 236.8 GPU-s; at 36/8 = 4.5 a GPU-hour.
    assert summary["data_idle_gpu_hours"] == pytest.approx(round(236.8 / 3600, 2))
    assert summary["data_idle_cost"] == pytest.approx(round(236.8 / 3600 * 4.5, 2))
    # 20 GB moved over a 10 Gbit/s (1.25 GB/s) link during the run (fixed cloud nodes never leave,
    # so the run lasts until the engine's first 6-hour progress step: 21,600 s).
    assert summary["links"]["aliyun"]["transferred_gb"] == 20.0
    assert summary["links"]["aliyun"]["peak_transfers"] == 2
    assert result.simulation.end == 21600.0
    assert summary["link_utilization"] == pytest.approx(round(20e9 / (1.25e9 * 21600), 4))


def test_a_second_job_on_the_same_cloud_node_does_not_prefetch_again(tmp_path: Path) -> None:
    # c binds at 10, prefetches 80 Gbit at 8 Gbit/s (10 s), runs 20..120. d, also at 10, waits for the
    # node; it binds at 120 where d's dataset already is, and runs at once: 120..220.
    jobs = HOG + "c,u,vc2,8,8,1,COMPLETED,10,0,0,100,0\nd,u,vc2,8,8,1,COMPLETED,10,0,0,100,0\n"
    result = run_one(write_data_sim(tmp_path / "sim", jobs))
    got = jobs_of(result)
    assert got["c"] == (10.0, 120.0, 10.0)
    assert got["d"] == (120.0, 220.0, 0.0)
    assert (result.summary["prefetches"], result.summary["dataset_reuses"]) == (1, 1)


def test_a_cached_dataset_costs_nothing_locally_and_a_miss_reads_from_the_object_store(tmp_path: Path) -> None:
    # The IDC cache holds 50 GB and reads a miss at 8 Gbit/s (1 GB/s). a misses d (10 GB): 10 s idle,
    # runs 10..1010. b hits at 2000 and runs at once. e reads f (60 GB): too big to cache, a miss.
    jobs = "a,u,vc1,8,8,1,COMPLETED,0,0,0,1000,0\nb,u,vc1,8,8,1,COMPLETED,2000,0,0,500,0\n"
    folder = write_data_sim(
        tmp_path / "sim", jobs, cache="{capacity: 50G, missReadGbps: 8}", datasets={"d": "10G"}, link=""
    )
    result = run_one(folder)
    got = jobs_of(result)
    assert got["a"] == (0.0, 1010.0, 10.0)
    assert got["b"] == (2000.0, 2500.0, 0.0)
    summary = result.summary
    assert (summary["idc_cache_hits"], summary["idc_cache_misses"]) == (1, 1)
    assert (summary["cloud_prefetch_delay_total_s"], summary["idc_miss_read_delay_total_s"]) == (0, 10.0)
    assert summary["data_idle_gpu_hours"] == pytest.approx(round(80 / 3600, 2))
    assert summary["data_idle_cost"] == 0  # the IDC's GPUs are owned
    assert summary["links"] == {} and summary["prefetches"] == 0


def test_without_miss_read_rate_a_miss_is_read_through(tmp_path: Path) -> None:
    jobs = "a,u,vc1,8,8,1,COMPLETED,0,0,0,1000,0\n"
    result = run_one(write_data_sim(tmp_path / "sim", jobs, cache="{capacity: 50G}", link=""))
    assert jobs_of(result)["a"] == (0.0, 1000.0, 0.0)
    assert result.summary["idc_cache_misses"] == 1


def test_turning_data_gravity_off_removes_every_delay(tmp_path: Path) -> None:
    jobs = HOG + "c,u,vc2,8,8,1,COMPLETED,10,0,0,100,0\n"
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=", dataGravity: {enabled: false}")
    result = run_one(folder)
    assert jobs_of(result)["c"] == (10.0, 110.0, 0.0)
    assert result.summary["prefetches"] == 0 and result.summary["links"]["aliyun"]["transferred_gb"] == 0


# c (8 GPUs, 4,000 s) binds on the cloud node at 10, prefetches 10 s, works from 20 and checkpoints
# every 600 s of work (at 620, 1220, ...), uploading 5 GB each (40 Gbit at 8 Gbit/s: 5 s).
CHECKPOINTING = HOG + "c,u,vc2,8,8,1,COMPLETED,10,0,0,4000,0\n"
UPLOADS = {"checkpointEverySeconds": 600, "checkpointSize": "5G"}


def test_checkpoints_upload_over_the_link(tmp_path: Path) -> None:
    # Checkpoints at progress 600 .. 3600 (the next, 4200, is past the end): 6 uploads, 30 GB, plus
    # the 10 GB prefetch.
    result = run_one(write_data_sim(tmp_path / "sim", CHECKPOINTING, workload=UPLOADS))
    assert jobs_of(result)["c"] == (10.0, 4020.0, 10.0)
    assert result.summary["checkpoint_uploads"] == 6
    assert result.summary["links"]["aliyun"]["transferred_gb"] == 40.0


def test_a_cut_link_keeps_two_checkpoints_locally_and_uploads_them_when_it_returns(tmp_path: Path) -> None:
    # The link is cut from 1222 to 3000 (keepRunning). The upload of checkpoint 1200 (started at
    # 1220) stalls; 1800 is written at 1820 (two pending); 2400 at 2420 deletes 1200 (superseded).
    # At 3000 the uploads of 1800 and 2400 share the link (5 Gbit/s each, 8 s: done at 3008); then
    # 3000 and 3600 upload normally. Uploaded: 600, 1800, 2400, 3000, 3600.
    outage = ", linkOutages: [{start: 1222, durationSeconds: 1778}]"
    result = run_one(write_data_sim(tmp_path / "sim", CHECKPOINTING, workload=UPLOADS, scenario=outage))
    assert jobs_of(result)["c"] == (10.0, 4020.0, 10.0)
    summary = result.summary
    assert (summary["checkpoint_uploads"], summary["checkpoint_uploads_superseded"]) == (5, 1)
    events = result.simulation.events
    assert (1222.0, "c: keeps running through the link cut; checkpoints kept locally") in events
    assert (3000.0, "link to aliyun restored") in events
    assert summary["link_outages"] == 1 and summary["outage_affected_jobs"] == 1
    assert summary["link_cut_s"] == 1778.0


def test_a_failed_cloud_job_resumes_from_its_uploaded_checkpoint_or_locally_on_the_same_node(
    tmp_path: Path,
) -> None:
    # Cut at 1222 with cloudPods: fail. c has worked 1202 s: checkpoint 1200 is local but its upload
    # (1220..1225) is cut, so only 600 is durable: 602 s x 8 GPUs are lost. c's home is burst-cloud,
    # so it waits there; at 2222 the node is back, c binds on it again (its dataset and its local
    # checkpoint 1200 are there: no prefetch, no download) and runs its last 2800 s: 2222..5022.
    outage = ", linkOutages: [{start: 1222, durationSeconds: 1000, cloudPods: fail}]"
    result = run_one(write_data_sim(tmp_path / "sim", CHECKPOINTING, workload=UPLOADS, scenario=outage))
    job = next(j for j in result.simulation.jobs if j.name == "c")
    assert (job.restarts, job.finished, job.prefetch_s) == (1, 5022.0, 10.0)
    assert result.simulation.meter["lost_gpu_seconds"].value == 602 * 8
    assert result.summary["local_checkpoint_resumes"] == 1
    assert (1222.0, "c: lost its data path (link to aliyun cut); restarting") in result.simulation.events
    assert (1222.0, "c: waits in burst-cloud (link cut, no home queue to fall back to)") in result.simulation.events


def test_a_failed_cloud_job_on_another_node_downloads_its_durable_checkpoint(tmp_path: Path) -> None:
    # As above, but a second cloud job x (8 GPUs) arrives at 1500 during the cut, waits in
    # burst-cloud, and when the link is back at 2222 two nodes are free: c takes node 0 again (it is
    # first in line and its dataset is there), x takes node 1 and prefetches alone (80 Gbit at
    # 8 Gbit/s: 2222..2232) while c resumes from its local checkpoint: no download.
    jobs = CHECKPOINTING + "x,u,vc2,8,8,1,COMPLETED,1500,0,0,100,0\n"
    outage = ", linkOutages: [{start: 1222, durationSeconds: 1000, cloudPods: fail}]"
    folder = write_data_sim(tmp_path / "sim", jobs, cloud_nodes=2, workload=UPLOADS, scenario=outage)
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "s")
    sim.run()
    jobs_by_name = {j.name: j for j in sim.jobs}
    c, x = jobs_by_name["c"], jobs_by_name["x"]
    assert (c.started, c.finished, c.restarts, c.prefetch_s) == (10.0, 5022.0, 1, 10.0)
    assert (x.started, x.finished, x.prefetch_s) == (2222.0, 2332.0, 10.0)


@pytest.mark.parametrize(("weight", "node", "prefetch"), [(50, "cloud-a100-1", 0.0), (0, "cloud-a100-0", 10.0)])
def test_locality_prefers_the_cloud_node_that_holds_the_dataset(
    tmp_path: Path, weight: int, node: str, prefetch: float
) -> None:
    # dev jobs read dataset a, burst-cloud jobs d. e (dev, at capability behind hog) overflows and
    # takes cloud node 0 at 11 (fetching a); c (burst-cloud) takes node 1 at 12 (fetching d). Both are
    # done long before 500, when g (burst-cloud, reads d) finds both nodes free: with the locality
    # preference it takes node 1, where d is, and starts at once; without it the tie goes to node 0,
    # where g first prefetches d (80 Gbit at 8 Gbit/s: 10 s).
    jobs = (
        HOG
        + "e,u,vc1,8,8,1,COMPLETED,10,0,0,50,0\nc,u,vc2,8,8,1,COMPLETED,12,0,0,50,0\n"
        + "g,u,vc2,8,8,1,COMPLETED,500,0,0,100,0\n"
    )
    workload = {"datasets": [{"name": "d"}], "queues": [{"name": "dev", "share": 1, "datasets": [{"name": "a"}]}]}
    folder = write_data_sim(
        tmp_path / "sim",
        jobs,
        cloud_nodes=2,
        datasets={"d": "10G", "a": "10G"},
        workload=workload,
        scenario=f", dataGravity: {{localityWeight: {weight}}}",
    )
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "s")
    placed: dict[str, list[str]] = {}
    start = sim._start
    sim._start = lambda job, key, nodes, now: (placed.setdefault(job.name, nodes), start(job, key, nodes, now))  # type: ignore[method-assign]
    sim.run()
    g = next(j for j in sim.jobs if j.name == "g")
    assert (g.dataset, placed["g"], g.started, g.prefetch_s) == ("d", [node], 500.0, prefetch)
    assert (placed["e"], placed["c"]) == (["cloud-a100-0"], ["cloud-a100-1"])
    assert sim.data is not None and sim.data.data_nodes("d") == tuple(sorted({"cloud-a100-1", node}))


def test_bad_data_fields_name_file_object_and_field(tmp_path: Path) -> None:
    jobs = "a,u,vc1,8,8,1,COMPLETED,0,0,0,1000,0\n"
    folder = write_data_sim(tmp_path / "sim", jobs, datasets={"d": "lots"}, link="{bandwidthGbps: 0}")
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    text = str(info.value)
    assert "Dataset/d field spec.size" in text
    assert "Cluster/aliyun field spec.link.bandwidthGbps" in text
    folder = write_data_sim(
        tmp_path / "sim2", jobs, scenario=", linkOutages: [{start: 5, durationSeconds: 10, cluster: idc}]"
    )
    folder.joinpath("extra.yaml").write_text(
        "apiVersion: tidegate.io/v1alpha1\nkind: Workload\nmetadata: {name: w2}\n"
        "spec: {source: synthetic, datasets: [{name: nope}]}\n"
    )
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    text = str(info.value)
    assert "Scenario/s field spec.linkOutages[0].cluster: 'idc' is not a cloud cluster" in text
    assert "Workload/w2 field spec.datasets[0].name: dataset 'nope' is not defined" in text


def test_the_report_shows_prefetch_delay_idle_gpus_link_and_outages(tmp_path: Path) -> None:
    jobs = HOG + "p,u,vc2,8,8,1,COMPLETED,2,0,0,100,0\n"
    folder = write_data_sim(tmp_path / "sim", jobs, scenario=", linkOutages: [{start: 5, durationSeconds: 100}]")
    results = run_simulation(load_simulation([str(folder)]), workers=1)
    out = tmp_path / "out"
    out.mkdir()
    summary = json.loads(write_summary(results, out).read_text())["runs"][0]
    assert summary["prefetch_delay_by_job"] == {"p": 110.0} and summary["link_outages"] == 1
    assert summary["outage_events"] == [
        [5.0, "link to aliyun cut for 100 s (cloud pods: keepRunning)"],
        [5.0, "p: prefetch stalled (link to aliyun cut)"],
        [105.0, "link to aliyun restored"],
    ]
    page = write_html(results, out, "t").read_text()
    assert "Data gravity: link throughput and prefetch delays" in page
    assert "Link outages (every job they touched)" in page
    assert "GPU-hours idle for data" in page and "p: prefetch stalled (link to aliyun cut)" in page
    console = Console(record=True, width=200)
    console.print(summary_table(results))
    text = console.export_text()
    assert "prefetch delay p95" in text and "1.8 min" in text  # p's 110 s


def test_assigned_datasets_are_picked_by_each_queues_own_shares_and_total() -> None:
    """`assign_datasets` sums each queue's shares once: every job reads the dataset `pick_dataset` picks from its
    queue's shares (or the workload's) summing them itself, with the same draw (fails if one total served all)."""
    workload = [DatasetShare(name="a", weight=1.0), DatasetShare(name="b", weight=3.0)]
    own = {"vision": [DatasetShare(name="img", weight=0.5), DatasetShare(name="vid", weight=9.5)]}
    rng = random.Random(3)
    queues = [rng.choice(["vision", "nlp", "dev"]) for _ in range(400)]
    seed = 11
    draws = np.random.default_rng(seed).random(len(queues)).tolist()
    expected = [pick_dataset(own.get(q) or workload, u) for q, u in zip(queues, draws, strict=True)]
    assert assign_datasets(queues, workload, own, seed) == expected
    assert {"img", "vid", "a", "b"} <= set(expected)
