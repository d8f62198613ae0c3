"""Tide profiles fitted from Helios and the seeded non-homogeneous Poisson workload generator."""

from __future__ import annotations

import hashlib
import math
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from tidegate.traces import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_DURATION_MEDIAN_S,
    DEFAULT_GPU_COUNTS,
    DEFAULT_SHARED_GPU_MILLI,
    HeliosSequence,
    QueueShare,
    SyntheticWorkload,
    TideProfile,
    TraceError,
    expected_jobs,
    generate,
    read_helios_sequence,
    tide_from_helios,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "helios-earth"
SEQUENCES = [DATA / "vc6YE_sequence.csv", DATA / "vchbv_sequence.csv"]

#: A tide with a strong day (x3 from 08:00 to 20:00) and quiet weekends, for generator tests.
DAY_TIDE = TideProfile(hourly=(1.0,) * 8 + (3.0,) * 12 + (1.0,) * 4, weekday=(1.0,) * 5 + (0.25,) * 2)


# -- tide profiles ---------------------------------------------------------------------------------


def test_profiles_are_normalised_and_validated() -> None:
    tide = TideProfile(hourly=(2.0,) * 12 + (6.0,) * 12, weekday=(3.0,) * 7)
    assert tide.hourly == (0.5,) * 12 + (1.5,) * 12
    assert tide.weekday == (1.0,) * 7
    assert tide.peak == 1.5
    assert TideProfile.flat().peak == 1.0
    with pytest.raises(ValueError, match="hourly: expected 24 weights, got 23"):
        TideProfile(hourly=(1.0,) * 23, weekday=(1.0,) * 7)
    with pytest.raises(ValueError, match="weekday: weights must be finite and >= 0"):
        TideProfile(hourly=(1.0,) * 24, weekday=(1.0,) * 6 + (-1.0,))
    with pytest.raises(ValueError, match="at least one weight must be positive"):
        TideProfile(hourly=(0.0,) * 24, weekday=(1.0,) * 7)


def test_factor_and_integral_follow_the_clock() -> None:
    tide = TideProfile(hourly=tuple(range(1, 25)), weekday=(1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0))
    hour = tide.hourly
    day = tide.weekday
    t = np.array([0.0, 3599.0, 3600.0, 86400.0 + 7200.0, 6 * 86400.0, 7 * 86400.0 + 1.0])
    assert tide.factor(t).tolist() == pytest.approx(
        [hour[0] * day[0], hour[0] * day[0], hour[1] * day[0], hour[2] * day[1], hour[0] * day[6], hour[0] * day[0]]
    )
    assert tide.factor(np.array([0.0]), start_weekday=1).tolist() == pytest.approx([hour[0] * day[1]])
    assert tide.integral(7 * 86400.0) == pytest.approx(7 * 86400.0)
    assert tide.integral(5400.0) == pytest.approx((3600.0 * hour[0] + 1800.0 * hour[1]) * day[0])
    assert tide.integral(0.0) == 0.0


def test_tide_from_a_hand_written_sequence(tmp_path: Path) -> None:
    # Monday 4 May 2020: two GPU jobs arrive each minute of 10:00-10:02, none otherwise; jobs also leave.
    rows = ["time,total_gpujob_num,running_gpu_num,pending_gpu_num"]
    jobs = 0
    for minute in range(24 * 60):
        hour, mm = divmod(minute, 60)
        if hour == 10 and mm < 3:
            jobs += 2
        elif hour == 11 and mm < 3:
            jobs -= 2
        rows.append(f"2020-05-04 {hour:02d}:{mm:02d}:00,{jobs},{jobs * 4},0")
    path = tmp_path / "vcT_sequence.csv"
    path.write_text("\n".join(rows) + "\n")
    tide = tide_from_helios(path, exclude_dates=())
    # Every arrival is in hour 10, so that hour holds all the weight; departures never count.
    assert tide.hourly[10] == pytest.approx(24.0)
    assert sum(tide.hourly) == pytest.approx(24.0)
    # Only Monday has data: the other days get the mean, so the week stays flat.
    assert tide.weekday == pytest.approx((1.0,) * 7)
    demand = tide_from_helios([path], signal="demand", exclude_dates=())
    assert demand.hourly[10] > 1.0 and demand.hourly[0] == 0.0
    with pytest.raises(ValueError, match="zero or empty"):
        tide_from_helios(path, exclude_dates=[date(2020, 5, 4)])
    with pytest.raises(ValueError, match="no sequence files"):
        tide_from_helios([])


def test_a_sequence_without_the_signal_column_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vcX_sequence.csv"
    path.write_text("time,running_job_num\n2020-05-04 00:00:00,1\n2020-05-04 00:01:00,2\n")
    with pytest.raises(TraceError, match=r"^vcX_sequence.csv:1: the arrivals signal needs .*total_gpujob_num"):
        tide_from_helios(path)


@pytest.fixture(scope="module")
def sequences() -> list[HeliosSequence]:
    if not DATA.is_dir():
        pytest.skip(f"shared trace data not found at {DATA}")
    return [read_helios_sequence(path) for path in SEQUENCES]


def test_helios_tide_has_a_daily_and_weekly_cycle(sequences: list[HeliosSequence]) -> None:
    tide = tide_from_helios(sequences)
    # Measured: 2.9 (trough 07:00, peak 21:00). Asserted loosely.
    assert max(tide.hourly) / min(tide.hourly) > 2.0
    night = np.mean(tide.hourly[5:9])
    evening = np.mean(tide.hourly[19:24])
    assert evening > 1.5 * night
    # Measured: Saturday 0.47, Sunday 0.51, Tuesday-Friday 1.0-1.8.
    assert np.mean(tide.weekday[5:]) < 0.8 < np.mean(tide.weekday[1:5])
    for sequence in sequences:  # each VC alone has a tide too (measured 2.8, and 40 for quiet vc6YE)
        alone = tide_from_helios(sequence)
        assert max(alone.hourly) / min(alone.hourly) > 2.0
    # Demand (a stock, capped by vc6YE's full capacity) is much flatter than arrivals (measured 1.16).
    demand = tide_from_helios(sequences, signal="demand")
    assert max(demand.hourly) / min(demand.hourly) < max(tide.hourly) / min(tide.hourly)


# -- the generator ---------------------------------------------------------------------------------


def test_same_seed_same_jobs_other_seed_other_jobs() -> None:
    config = SyntheticWorkload(days=3, jobs_per_day=300, seed=7, shared_fraction=0.3)
    first = generate(config, DAY_TIDE)
    assert first == generate(config, DAY_TIDE)
    assert len(first) > 0
    other = generate(SyntheticWorkload(days=3, jobs_per_day=300, seed=8, shared_fraction=0.3), DAY_TIDE)
    assert [job.submit_s for job in other] != [job.submit_s for job in first]


def test_the_same_jobs_as_drawn_before_as_python_numbers() -> None:
    """`generate` reads its draws as Python lists: the jobs are the ones it drew reading numpy scalars (their
    repr pinned when it did), every number a plain int or float (a numpy scalar's repr would differ)."""
    config = SyntheticWorkload(
        days=3,
        jobs_per_day=400,
        seed=5,
        shared_fraction=0.4,
        queues=(QueueShare("research", 3.0, ("ana", "bo", "di")), QueueShare("prod", 1.0, ("cy",))),
        gpu_counts=((1, 0.5), (4, 0.2), (12, 0.2), (16, 0.1)),
    )
    jobs = generate(config, DAY_TIDE)
    assert len(jobs) == 1614
    assert hashlib.sha256(repr(jobs).encode()).hexdigest()[:16] == "ba5273ef0b3a677e"
    numbers = {type(getattr(job, f)) for job in jobs for f in ("gpus_per_pod", "gpu_milli", "pods", "cpu_milli")}
    assert numbers == {int}
    assert {type(job.submit_s) for job in jobs} | {type(job.duration_s) for job in jobs} == {float}


def test_jobs_are_sorted_named_and_inside_the_span() -> None:
    config = SyntheticWorkload(days=2, jobs_per_day=500, seed=1, job_prefix="tide")
    jobs = generate(config)
    assert [job.job_id for job in jobs[:2]] == ["tide-000000", "tide-000001"]
    submits = [job.submit_s for job in jobs]
    assert submits == sorted(submits)
    assert submits[0] >= 0.0 and submits[-1] < 2 * 86400.0


@pytest.mark.parametrize("tide", [None, DAY_TIDE], ids=["flat", "day-tide"])
def test_job_count_over_four_weeks_matches_the_rate(tide: TideProfile | None) -> None:
    config = SyntheticWorkload(days=28, jobs_per_day=1000, seed=3)
    expected = expected_jobs(config, tide)
    assert expected == pytest.approx(28_000)  # whole weeks: the weights average 1
    count = len(generate(config, tide))
    assert abs(count - expected) < 0.03 * expected  # Poisson: sd = sqrt(28,000) = 0.6%


def test_expected_jobs_over_part_of_a_week() -> None:
    config = SyntheticWorkload(days=1.5, jobs_per_day=100, start_weekday=5)
    # All of Saturday (the hourly weights average 1 over a day) then the first 12 hours of Sunday.
    weekend = DAY_TIDE.weekday[5]
    first_half = sum(DAY_TIDE.hourly[:12]) * 3600.0
    assert expected_jobs(config, DAY_TIDE) == pytest.approx(100 / 86400 * weekend * (86400.0 + first_half))


def test_arrivals_follow_the_tide() -> None:
    config = SyntheticWorkload(days=28, jobs_per_day=1000, seed=11)
    jobs = generate(config, DAY_TIDE)
    t = np.array([job.submit_s for job in jobs])
    hourly = np.bincount((t // 3600).astype(int) % 24, minlength=24)
    day_hours = hourly[8:20].mean()
    night_hours = np.concatenate([hourly[:8], hourly[20:]]).mean()
    assert day_hours / night_hours == pytest.approx(3.0, rel=0.08)
    weekday = np.bincount((t // 86400).astype(int) % 7, minlength=7)
    assert weekday[5:].mean() / weekday[:5].mean() == pytest.approx(0.25, rel=0.1)
    # start_weekday shifts the week: starting on Saturday puts the quiet days first.
    late = generate(SyntheticWorkload(days=7, jobs_per_day=1000, seed=11, start_weekday=5), DAY_TIDE)
    first_two_days = sum(1 for job in late if job.submit_s < 2 * 86400)
    assert first_two_days < 0.15 * len(late)


def test_default_shape_distributions() -> None:
    jobs = generate(SyntheticWorkload(days=28, jobs_per_day=1000, seed=5))
    n = len(jobs)
    gpus = np.array([job.pods * job.gpus_per_pod for job in jobs])
    for count, probability in DEFAULT_GPU_COUNTS:
        assert np.mean(gpus == count) == pytest.approx(probability, abs=0.01)
    durations = np.array([job.duration_s for job in jobs])
    assert np.median(durations) == pytest.approx(DEFAULT_DURATION_MEDIAN_S, rel=0.05)
    assert np.std(np.log(durations)) == pytest.approx(1.9, rel=0.05)
    assert durations.min() >= 1.0 and durations.max() <= 7 * 86400.0
    assert all(job.gpu_milli == 1000 for job in jobs)  # no sharing unless asked
    gangs = [job for job in jobs if job.pods * job.gpus_per_pod > 8]
    assert gangs and all(job.gpus_per_pod == 8 and job.pods in (2, 4, 8) for job in gangs)
    assert all(job.cpu_milli == DEFAULT_CPU_MILLI_PER_GPU * job.gpus_per_pod for job in jobs)
    assert {job.queue for job in jobs} == {"default"}
    assert len({job.user for job in jobs}) == 10
    assert n > 0


def test_queues_users_and_gpu_sharing() -> None:
    config = SyntheticWorkload(
        days=14,
        jobs_per_day=1000,
        seed=2,
        queues=(QueueShare("research", 3.0, ("ana", "bo")), QueueShare("prod", 1.0, ("cy",))),
        gpu_counts=((1, 1.0),),
        shared_fraction=0.5,
        cpu_milli_per_gpu=8000,
        memory_mib_per_gpu=10000,
    )
    jobs = generate(config)
    research = [job for job in jobs if job.queue == "research"]
    assert len(research) / len(jobs) == pytest.approx(0.75, abs=0.02)
    assert {job.user for job in research} == {"ana", "bo"}
    assert {job.user for job in jobs if job.queue == "prod"} == {"cy"}
    shared = [job for job in jobs if job.shared]
    assert len(shared) / len(jobs) == pytest.approx(0.5, abs=0.02)
    allowed = {milli for milli, _ in DEFAULT_SHARED_GPU_MILLI}
    assert {job.gpu_milli for job in shared} <= allowed
    top = sum(1 for job in shared if job.gpu_milli == 810) / len(shared)
    assert top == pytest.approx(0.35 / sum(p for _, p in DEFAULT_SHARED_GPU_MILLI), abs=0.03)
    half = next(job for job in shared if job.gpu_milli == 470)
    assert (half.gpus_per_pod, half.pods, half.cpu_milli, half.memory_mib) == (1, 1, 3760, 4700)


def test_uneven_gangs_and_empty_workloads() -> None:
    jobs = generate(SyntheticWorkload(days=1, jobs_per_day=200, gpu_counts=((12, 1.0),), gpus_per_node=8))
    assert {(job.pods, job.gpus_per_pod) for job in jobs} == {(2, 6)}
    assert generate(SyntheticWorkload(days=1, jobs_per_day=0)) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"days": 0}, "days"),
        ({"jobs_per_day": -1.0}, "jobs_per_day"),
        ({"start_weekday": 7}, "start_weekday"),
        ({"queues": ()}, "at least one queue"),
        ({"gpu_counts": ((0, 1.0),)}, r"gpu_counts: 0 GPUs is outside 1\.\.80,000"),
        ({"gpu_counts": ((2**70, 1.0),)}, r"gpu_counts: 1180591620717411303424 GPUs is outside 1\.\.80,000"),
        ({"gpu_counts": ((1, 0.0),)}, "not all 0"),
        ({"shared_gpu_milli": ((1000, 1.0),)}, "1..999"),
        ({"shared_fraction": 1.5}, "shared_fraction"),
        ({"duration_min_s": 10.0, "duration_max_s": 5.0}, "duration"),
        ({"gpus_per_node": 0}, "gpus_per_node"),
    ],
)
def test_config_validation(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticWorkload(**changes)  # type: ignore[arg-type]


def test_queue_share_validation() -> None:
    with pytest.raises(ValueError, match="share"):
        QueueShare("q", 0.0, ("u",))
    with pytest.raises(ValueError, match="users"):
        QueueShare("q", 1.0, ())
    assert math.isclose(QueueShare("q", 2.5, ("u",)).share, 2.5)


def test_tide_from_paths_equals_tide_from_sequences(sequences: list[HeliosSequence]) -> None:
    assert tide_from_helios(SEQUENCES[1]) == tide_from_helios(sequences[1])


def test_generate_with_the_helios_tide(sequences: list[HeliosSequence]) -> None:
    tide = tide_from_helios(sequences)
    config = SyntheticWorkload(days=28, jobs_per_day=1000, seed=1)
    jobs = generate(config, tide)
    assert abs(len(jobs) - 28_000) < 0.03 * 28_000
    t = np.array([job.submit_s for job in jobs])
    hourly = np.bincount((t // 3600).astype(int) % 24, minlength=24)
    assert np.corrcoef(hourly, tide.hourly)[0, 1] > 0.95
