"""A seeded generator of tidal GPU workloads, shaped by real demand (Helios Earth, May 2020).

Arrivals are a non-homogeneous Poisson process with rate

    jobs_per_day / 86400 * hourly[hour of day] * weekday[day of week]        (jobs a second)

where both weight vectors average 1, so a whole number of weeks holds `jobs_per_day` jobs a day on
average. It is sampled exactly by thinning: a homogeneous process at the peak rate, each point kept
with probability rate(t) / peak. All draws come from one `numpy.random.Generator` seeded from the
config, in a fixed order, so the same config gives the same jobs.

Job shapes default to published figures, each documented where it is defined: GPU counts
(`DEFAULT_GPU_COUNTS`), log-normal durations fitted to the Alibaba openb trace
(`DEFAULT_DURATION_MEDIAN_S`, `DEFAULT_DURATION_SIGMA`), and card slices for GPU-sharing jobs
(`DEFAULT_SHARED_GPU_MILLI`). Jobs above one server's GPUs become gangs of pods (records.split_gang).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

import numpy as np
import numpy.typing as npt

from tidegate.model.manifests import MAX_JOB_PODS
from tidegate.traces.helios import HeliosSequence, read_helios_sequence
from tidegate.traces.records import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_MEMORY_MIB_PER_GPU,
    GPUS_PER_NODE,
    TraceError,
    TraceJob,
    split_gang,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DAY_S = 86400.0
HOUR_S = 3600.0
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

#: Days of the Helios Earth sequences (May 2020, China) that are not ordinary for their weekday:
#: the Labour Day holiday, Friday 1 to Tuesday 5 May, and Saturday 9 May, an official make-up
#: working day. Left in, they make Monday and Tuesday look like a weekend and Saturday like a weekday.
HELIOS_IRREGULAR_DAYS: tuple[date, ...] = (
    date(2020, 5, 1),
    date(2020, 5, 2),
    date(2020, 5, 3),
    date(2020, 5, 4),
    date(2020, 5, 5),
    date(2020, 5, 9),
)

#: Probability of each GPU count per job. Rounded, not fitted: the public traces agree that jobs
#: ask for powers of two and that single-GPU jobs are the large majority (Philly, Jeon et al.,
#: USENIX ATC'19; Helios, Hu et al., SC'21; 30 of the 60 Tiresias jobs and 98% of openb GPU pods
#: use one card), with a few percent of gangs beyond one 8-GPU server. Mean 3.0 GPUs a job.
DEFAULT_GPU_COUNTS: tuple[tuple[int, float], ...] = (
    (1, 0.70),
    (2, 0.10),
    (4, 0.08),
    (8, 0.08),
    (16, 0.02),
    (32, 0.015),
    (64, 0.005),
)

#: Log-normal job durations fitted to the GPU pods of the openb default pod list (ATC'23; running
#: time = deletion - scheduled, 6,203 pods): median 655 s, sigma of ln(duration) 1.91 (1.81 from
#: the 16th-84th percentiles). So 10% of jobs run over about 2 hours and 1% over about 20 hours.
DEFAULT_DURATION_MEDIAN_S = 655.0
DEFAULT_DURATION_SIGMA = 1.9
#: Durations are clipped to [1 s, 7 days]: nothing runs for no time, and real clusters cap runs.
DEFAULT_DURATION_MIN_S = 1.0
DEFAULT_DURATION_MAX_S = 7 * DAY_S

#: Thousandths of a card asked by GPU-sharing pods: the twelve most common values among the
#: 3,078 fractional pods of the openb default pod list, with their shares (99.1% of those pods).
DEFAULT_SHARED_GPU_MILLI: tuple[tuple[int, float], ...] = (
    (810, 0.350),
    (470, 0.244),
    (320, 0.107),
    (650, 0.082),
    (230, 0.045),
    (460, 0.042),
    (160, 0.024),
    (590, 0.024),
    (550, 0.023),
    (220, 0.020),
    (370, 0.015),
    (110, 0.008),
)


def _normalised(values: Sequence[float], size: int, name: str) -> tuple[float, ...]:
    if len(values) != size:
        raise ValueError(f"{name}: expected {size} weights, got {len(values)}")
    array = np.asarray(values, dtype=np.float64)
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{name}: weights must be finite and >= 0")
    mean = float(array.mean())
    if mean <= 0:
        raise ValueError(f"{name}: at least one weight must be positive")
    return tuple(float(v) for v in array / mean)


@dataclass(frozen=True, slots=True)
class TideProfile:
    """Relative arrival intensity by hour of day (24, hour 0 = 00:00-01:00) and day of week (7,
    Monday first). Stored normalised to mean 1, whatever scale it is given in."""

    hourly: tuple[float, ...]
    weekday: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hourly", _normalised(self.hourly, 24, "hourly"))
        object.__setattr__(self, "weekday", _normalised(self.weekday, 7, "weekday"))

    @classmethod
    def flat(cls) -> TideProfile:
        """No tide: the same rate at every hour of every day."""
        return cls(hourly=(1.0,) * 24, weekday=(1.0,) * 7)

    @property
    def peak(self) -> float:
        """The largest factor any hour can have (the thinning bound)."""
        return max(self.hourly) * max(self.weekday)

    def factor(self, t_s: FloatArray, start_weekday: int = 0) -> FloatArray:
        """hourly[h] * weekday[d] at each time, counted in seconds from midnight of a day that is
        weekday `start_weekday` (0 = Monday)."""
        t = np.asarray(t_s, dtype=np.float64)
        hour = (t // HOUR_S).astype(np.int64) % 24
        day = (start_weekday + (t // DAY_S).astype(np.int64)) % 7
        out: FloatArray = np.asarray(self.hourly)[hour] * np.asarray(self.weekday)[day]
        return out

    def integral(self, duration_s: float, start_weekday: int = 0) -> float:
        """The factor integrated over [0, duration_s), in seconds (exact: it is constant an hour)."""
        if duration_s <= 0:
            return 0.0
        starts = np.arange(math.ceil(duration_s / HOUR_S), dtype=np.float64) * HOUR_S
        widths = np.minimum(HOUR_S, duration_s - starts)
        return float((self.factor(starts, start_weekday) * widths).sum())


def _arrival_signal(sequence: HeliosSequence) -> FloatArray:
    """GPU-job arrivals a second, per row: the rise of `total_gpujob_num` since the previous row
    (never below 0) over the time between rows; the first row has no previous and gets NaN."""
    jobs = sequence.total_gpu_jobs
    out = np.full(len(jobs), np.nan)
    if len(jobs) > 1:
        rises = np.maximum(np.diff(jobs), 0.0)
        out[1:] = rises / np.diff(sequence.t_s)
    return out


def tide_from_helios(
    sources: str | os.PathLike[str] | HeliosSequence | Iterable[str | os.PathLike[str] | HeliosSequence],
    *,
    signal: Literal["arrivals", "demand"] = "arrivals",
    exclude_dates: Collection[date] = HELIOS_IRREGULAR_DAYS,
) -> TideProfile:
    """Fit a `TideProfile` to Helios per-minute VC sequences (`vc*_sequence.csv` paths, or sequences
    already read with `read_helios_sequence`), pooling them.

    Each weight is the mean of the signal over the rows in that hour of day (or day of week) on the
    file's wall clock, then normalised to mean 1; a bin without rows gets the mean weight.

    Signal (default "arrivals"): the generator drives a Poisson *arrival* process, and the sequences
    hold no submission counts, so arrivals are estimated from the rise of `total_gpujob_num`
    (running + pending GPU jobs) between minutes. This undercounts minutes where jobs also finish,
    roughly in proportion to activity, so the shape survives. The alternative "demand" (running +
    pending GPUs) is a stock, not a rate: it lags arrivals by job durations, is smoothed by them and
    is flattened by capacity where a VC stays full (vc6YE's demand sits at its 208 GPUs all month),
    so it understates the tide; it is offered for load-shaped experiments.

    `exclude_dates` drops days that are not ordinary for their weekday (the May 2020 holiday by
    default; pass () to keep every day). Pooling sums the VCs, so a busy VC (vchbv, ~1,000 GPU jobs
    a day) weighs more than a quiet one (vc6YE, ~50).

    On the two Earth VCs in ../shared/data the defaults give an hourly peak/trough of 2.9 (trough
    07:00, peak 21:00) and weekend weights near 0.5. One bursty month (daily GPU-job arrivals range
    from 0 to 3,400) makes the weekday weights noisy: Monday comes out as low as a weekend day.
    """
    items = [sources] if isinstance(sources, str | os.PathLike | HeliosSequence) else list(sources)
    if not items:
        raise ValueError("tide_from_helios: no sequence files given")
    excluded = np.array(sorted(exclude_dates), dtype="datetime64[D]")
    values: list[FloatArray] = []
    hours: list[IntArray] = []
    weekdays: list[IntArray] = []
    for item in items:
        sequence = item if isinstance(item, HeliosSequence) else read_helios_sequence(item)
        try:
            series = _arrival_signal(sequence) if signal == "arrivals" else sequence.demand_gpus
        except KeyError as exc:
            message = f"the {signal} signal needs a column the file lacks ({exc.args[0]})"
            if isinstance(item, HeliosSequence):
                raise ValueError(f"tide_from_helios: {message}") from None
            raise TraceError(item, 1, message) from None
        keep = np.isfinite(series) & ~np.isin(sequence.date, excluded)
        values.append(series[keep])
        hours.append(sequence.hour_of_day[keep])
        weekdays.append(sequence.weekday[keep])
    value = np.concatenate(values)
    if value.size == 0 or not (value > 0).any():
        raise ValueError(f"tide_from_helios: the {signal} signal is zero or empty in every row kept")
    return TideProfile(
        hourly=_bin_means(value, np.concatenate(hours), 24),
        weekday=_bin_means(value, np.concatenate(weekdays), 7),
    )


def _bin_means(value: FloatArray, bins: IntArray, size: int) -> tuple[float, ...]:
    sums = np.bincount(bins, weights=value, minlength=size)
    counts = np.bincount(bins, minlength=size)
    means = np.divide(sums, counts, out=np.zeros(size), where=counts > 0)
    means[counts == 0] = means[counts > 0].mean()
    return tuple(float(v) for v in means)


@dataclass(frozen=True, slots=True)
class QueueShare:
    """A queue that receives `share` of the jobs (shares are relative), submitted by its `users`
    (each job picks one uniformly)."""

    name: str
    share: float
    users: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("queue name must not be empty")
        if not (math.isfinite(self.share) and self.share > 0):
            raise ValueError(f"queue {self.name}: share {self.share!r} must be a positive number")
        if not self.users or any(not user for user in self.users):
            raise ValueError(f"queue {self.name}: users must be non-empty names")


def _default_queues() -> tuple[QueueShare, ...]:
    return (QueueShare("default", 1.0, tuple(f"user-{i:02d}" for i in range(10))),)


def _probabilities(pairs: Sequence[tuple[int, float]], name: str) -> tuple[IntArray, FloatArray]:
    if not pairs:
        raise ValueError(f"{name}: empty distribution")
    values = np.array([value for value, _ in pairs], dtype=np.int64)
    weights = np.array([weight for _, weight in pairs], dtype=np.float64)
    if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"{name}: weights must be finite, >= 0 and not all 0")
    if len(set(values.tolist())) != len(values):
        raise ValueError(f"{name}: repeated value")
    return values, weights / weights.sum()


@dataclass(frozen=True, slots=True)
class SyntheticWorkload:
    """What to generate. Times in seconds from midnight of day 0, which is weekday `start_weekday`
    (0 = Monday). `gpu_counts` and `shared_gpu_milli` are (value, weight) pairs, weights relative.
    `shared_fraction` of the single-GPU jobs ask a slice of one card instead (drawn from
    `shared_gpu_milli`); CPU and memory come per GPU (scaled by the slice for shared jobs)."""

    days: float = 7.0
    jobs_per_day: float = 1000.0
    seed: int = 0
    start_weekday: int = 0
    queues: tuple[QueueShare, ...] = field(default_factory=_default_queues)
    gpu_counts: tuple[tuple[int, float], ...] = DEFAULT_GPU_COUNTS
    shared_fraction: float = 0.0
    shared_gpu_milli: tuple[tuple[int, float], ...] = DEFAULT_SHARED_GPU_MILLI
    duration_median_s: float = DEFAULT_DURATION_MEDIAN_S
    duration_sigma: float = DEFAULT_DURATION_SIGMA
    duration_min_s: float = DEFAULT_DURATION_MIN_S
    duration_max_s: float = DEFAULT_DURATION_MAX_S
    gpus_per_node: int = GPUS_PER_NODE
    cpu_milli_per_gpu: int = DEFAULT_CPU_MILLI_PER_GPU
    memory_mib_per_gpu: int = DEFAULT_MEMORY_MIB_PER_GPU
    job_prefix: str = "syn"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.days) and self.days > 0):
            raise ValueError(f"days: {self.days!r} must be a positive number")
        if not (math.isfinite(self.jobs_per_day) and self.jobs_per_day >= 0):
            raise ValueError(f"jobs_per_day: {self.jobs_per_day!r} must be a number >= 0")
        if not 0 <= self.start_weekday <= 6:
            raise ValueError(f"start_weekday: {self.start_weekday} is not 0 (Monday) .. 6 (Sunday)")
        if not self.queues:
            raise ValueError("queues: at least one queue is needed")
        if len({queue.name for queue in self.queues}) != len(self.queues):
            raise ValueError("queues: repeated queue name")
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node: {self.gpus_per_node} is below 1")
        largest = self.gpus_per_node * MAX_JOB_PODS
        for count, _ in self.gpu_counts:
            if not 1 <= count <= largest:
                pods = f"{MAX_JOB_PODS:,} pods of {self.gpus_per_node}"
                raise ValueError(f"gpu_counts: {count} GPUs is outside 1..{largest:,} ({pods})")
        _probabilities(self.gpu_counts, "gpu_counts")
        millis, _ = _probabilities(self.shared_gpu_milli, "shared_gpu_milli")
        if ((millis < 1) | (millis > 999)).any():
            raise ValueError("shared_gpu_milli: slices must be 1..999 thousandths of a card")
        if not 0.0 <= self.shared_fraction <= 1.0:
            raise ValueError(f"shared_fraction: {self.shared_fraction!r} is outside 0..1")
        if not (self.duration_median_s > 0 and self.duration_sigma >= 0):
            raise ValueError("duration: median must be > 0 and sigma >= 0")
        if not 0 <= self.duration_min_s <= self.duration_max_s < math.inf:
            raise ValueError("duration: need 0 <= duration_min_s <= duration_max_s < inf")
        if self.cpu_milli_per_gpu < 0 or self.memory_mib_per_gpu < 0:
            raise ValueError("cpu_milli_per_gpu and memory_mib_per_gpu must be >= 0")


def expected_jobs(config: SyntheticWorkload, tide: TideProfile | None = None) -> float:
    """The mean number of jobs `generate` produces: the rate integrated over the whole span."""
    profile = TideProfile.flat() if tide is None else tide
    return config.jobs_per_day / DAY_S * profile.integral(config.days * DAY_S, config.start_weekday)


def generate(config: SyntheticWorkload, tide: TideProfile | None = None) -> list[TraceJob]:
    """Draw the workload: jobs sorted by submit time, ids `<prefix>-000000`, `<prefix>-000001`, ...

    `tide` None means no tide (a homogeneous Poisson process). The same config and tide always
    give the same jobs (for a given numpy version); a different seed gives a different workload.
    """
    profile = TideProfile.flat() if tide is None else tide
    rng = np.random.default_rng(config.seed)
    span = config.days * DAY_S
    peak_rate = config.jobs_per_day / DAY_S * profile.peak
    candidates = int(rng.poisson(peak_rate * span))
    times = np.sort(rng.uniform(0.0, span, candidates))
    kept = rng.uniform(0.0, profile.peak, candidates) < profile.factor(times, config.start_weekday)
    times = times[kept]
    n = len(times)

    shares = np.array([queue.share for queue in config.queues], dtype=np.float64)
    queue_ix = rng.choice(len(config.queues), size=n, p=shares / shares.sum())
    user_draw = rng.random(n)
    gpu_values, gpu_p = _probabilities(config.gpu_counts, "gpu_counts")
    gpus = rng.choice(gpu_values, size=n, p=gpu_p)
    milli_values, milli_p = _probabilities(config.shared_gpu_milli, "shared_gpu_milli")
    shared = (gpus == 1) & (rng.random(n) < config.shared_fraction)
    millis = rng.choice(milli_values, size=n, p=milli_p)
    log_durations = rng.normal(math.log(config.duration_median_s), config.duration_sigma, n)
    durations = np.clip(np.exp(log_durations), config.duration_min_s, config.duration_max_s)

    # The loop reads Python lists: the same numbers (float64 and int64 as float and int) without a numpy
    # scalar made for each read (the seed-scale month's workload drawn in 0.56 CPU s instead of 0.61).
    queue_at, user_at, gpus_at, shared_at = queue_ix.tolist(), user_draw.tolist(), gpus.tolist(), shared.tolist()
    millis_at, times_at, durations_at = millis.tolist(), times.tolist(), durations.tolist()
    jobs: list[TraceJob] = []
    for i in range(n):
        queue = config.queues[queue_at[i]]
        user = queue.users[min(int(user_at[i] * len(queue.users)), len(queue.users) - 1)]
        if shared_at[i]:
            milli = millis_at[i]
            pods, per_pod = 1, 1
            cpu = -(-config.cpu_milli_per_gpu * milli // 1000)
            memory = -(-config.memory_mib_per_gpu * milli // 1000)
        else:
            milli = 1000
            pods, per_pod = split_gang(gpus_at[i], config.gpus_per_node)
            cpu = config.cpu_milli_per_gpu * per_pod
            memory = config.memory_mib_per_gpu * per_pod
        jobs.append(
            TraceJob(
                job_id=f"{config.job_prefix}-{i:06d}",
                user=user,
                queue=queue.name,
                gpus_per_pod=per_pod,
                gpu_milli=milli,
                pods=pods,
                cpu_milli=cpu,
                memory_mib=memory,
                submit_s=times_at[i],
                duration_s=durations_at[i],
            )
        )
    return jobs
