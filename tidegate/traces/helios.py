"""SenseTime Helios traces (SC'21, S-Lab-System-Group/HeliosData and HeliosArtifact).

Three shapes:

- Job logs (`cluster_log.csv`, also Acme-style exports): `job_id,user,vc,gpu_num,cpu_num,node_num,
  state,submit_time,start_time,end_time,duration,queue`. Times are datetimes ("2020-05-01 00:00:00")
  or plain seconds, `duration` is end - start in seconds and `queue` is start - submit in seconds (the
  time the job waited, not a queue name: the Volcano queue is the virtual cluster `vc`).
- Per-minute VC sequences (HeliosArtifact `vc*_sequence.csv`): `time` and job/GPU counts
  (total/running/pending jobs and GPUs, idle GPUs, gpu_utilization, splits below/at least 8 GPUs).
- Per-day VC sizes (`*_gpu_number.csv`): `date`, one column of GPUs per VC, `total`.

Timestamps are kept as the wall clock written in the file (the cluster's local time): that clock is
what carries the daily tide.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from tidegate.model.manifests import MAX_GPU_CARDS, MAX_JOB_PODS
from tidegate.traces.records import (
    DEFAULT_MEMORY_MIB_PER_GPU,
    MAX_CPU_MILLI,
    MAX_TIME_S,
    MISSING,
    CsvTable,
    TraceJob,
    read_text,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
TimeArray = npt.NDArray[np.datetime64]

#: GPUs a VC (or the `total`) may count in a `*_gpu_number.csv`: far above any cluster, far below 64 bits.
MAX_VC_GPUS = 10**9

JOB_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time")


# -- job logs ------------------------------------------------------------------------------------


def _parse_time(table: CsvTable, line: int, row: list[str], column: str, kinds: set[str]) -> float | None:
    """Seconds: a number as written, or a datetime as POSIX seconds (naive = UTC, since only
    differences matter). `kinds` collects which of the two a file uses; mixing them is an error."""
    if column not in table.col:
        return None
    cell = row[table.col[column]].strip()
    if cell in MISSING:
        return None
    try:
        value = float(cell)
        kind = "seconds"
    except ValueError:
        try:
            stamp = datetime.fromisoformat(cell)
        except ValueError:
            raise table.error(line, f"{column}: {cell!r} is neither a datetime nor a number of seconds") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        value = stamp.timestamp()
        kind = "datetime"
    if not math.isfinite(value):
        raise table.error(line, f"{column}: {cell!r} is not a finite time")
    if kind == "seconds" and value < 0:
        raise table.error(line, f"{column}: {value:g} is negative")
    kinds.add(kind)
    if len(kinds) > 1:
        raise table.error(line, f"{column}: {cell!r} mixes plain seconds and datetimes in one file")
    return value


def read_helios_jobs(
    path: str | os.PathLike[str],
    *,
    memory_mib_per_gpu: int = DEFAULT_MEMORY_MIB_PER_GPU,
    states: Collection[str] | None = None,
) -> list[TraceJob]:
    """Read a Helios/Acme job log into `TraceJob`s, in file order (Slurm job ids follow submission).

    - queue = `vc`; user and state kept; `submit_s` is seconds after the earliest submit_time in
      the file (over all rows, so filtering by `states` does not move the clock).
    - `gpu_num` GPUs over `node_num` pods (0 counts as 1): each pod takes ceil(gpu_num / pods) whole
      cards and ceil(cpu_num / pods) cores. Memory is not in the log: `memory_mib_per_gpu` per card.
    - `duration_s` is the `duration` column, else end - start, else 0 (a job cancelled before it
      started never ran); `wait_s` is the `queue` column, else start - submit, else None.
    - `states`, when given, keeps only jobs whose state is listed (e.g. {"COMPLETED"}).

    Raises TraceError (file:line) for missing columns, wrong column counts, non-numeric or negative
    counts, unreadable or mixed time formats, end before start, or a duplicate job_id (among the jobs
    kept).
    """
    table = CsvTable(path, JOB_COLUMNS)
    kinds: set[str] = set()
    parsed: list[tuple[int, list[str], float, float, float | None]] = []
    for line, row in table.rows:
        submit = _parse_time(table, line, row, "submit_time", kinds)
        if submit is None:
            raise table.error(line, "submit_time: empty")
        start = _parse_time(table, line, row, "start_time", kinds)
        end = _parse_time(table, line, row, "end_time", kinds)
        duration = table.optional_number(line, row, "duration", maximum=MAX_TIME_S)
        if duration is None:
            if start is not None and end is not None:
                if end < start:
                    raise table.error(line, "end_time: before start_time")
                duration = end - start
                if duration > MAX_TIME_S:
                    raise table.error(line, "end_time: more than 100 years after start_time")
            else:
                duration = 0.0
        wait = table.optional_number(line, row, "queue", maximum=MAX_TIME_S)
        if wait is None and start is not None:
            if start < submit:
                raise table.error(line, "start_time: before submit_time")
            wait = start - submit
            if wait > MAX_TIME_S:
                raise table.error(line, "start_time: more than 100 years after submit_time")
        parsed.append((line, row, submit, duration, wait))
    origin = min((submit for _, _, submit, _, _ in parsed), default=0.0)
    for line, _, submit, _, _ in parsed:
        if submit - origin > MAX_TIME_S:
            raise table.error(line, "submit_time: more than 100 years after the file's first submit_time")
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for line, row, submit, duration, wait in parsed:
        state = table.text(row, "state")
        if states is not None and state not in states:
            continue
        job_id = table.text(row, "job_id")
        if not job_id:
            raise table.error(line, "job_id: empty")
        if job_id in seen:
            raise table.error(line, f"job_id: duplicate {job_id!r}")
        seen.add(job_id)
        pods = max(1, table.integer(line, row, "node_num", maximum=MAX_JOB_PODS, what="pods a job"))
        gpus = table.integer(line, row, "gpu_num", maximum=pods * MAX_GPU_CARDS, what=f"{MAX_GPU_CARDS} GPUs a node")
        if 0 < gpus < pods:
            raise table.error(line, f"node_num: {pods} nodes for {gpus} GPUs (a node without a GPU in a GPU job)")
        cores = MAX_CPU_MILLI // 1000
        cpus = table.integer(line, row, "cpu_num", maximum=pods * cores, what=f"{cores:,} cores a node")
        per_pod = -(-gpus // pods)
        jobs.append(
            TraceJob(
                job_id=job_id,
                user=table.text(row, "user"),
                queue=table.text(row, "vc"),
                gpus_per_pod=per_pod,
                gpu_milli=1000 if per_pod else 0,
                pods=pods,
                cpu_milli=-(-cpus // pods) * 1000,
                memory_mib=memory_mib_per_gpu * per_pod,
                submit_s=submit - origin,
                duration_s=duration,
                state=state,
                wait_s=wait,
            )
        )
    return jobs


# -- per-minute VC sequences -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class HeliosSequence:
    """A VC's per-minute demand, as read-only numpy columns.

    `time` is the file's wall clock (datetime64[s], strictly increasing); `columns` maps every other
    header name to float64 values (counts are whole numbers; gpu_utilization is 0..1). The properties
    name the columns a tide needs; `column(name)` reaches the rest.
    """

    time: TimeArray
    columns: Mapping[str, FloatArray]

    def __len__(self) -> int:
        return len(self.time)

    def column(self, name: str) -> FloatArray:
        """One column by header name; KeyError listing the available names."""
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; the sequence has {', '.join(self.columns)}") from None

    @property
    def t_s(self) -> FloatArray:
        """Seconds since the first row."""
        if len(self.time) == 0:
            return np.zeros(0, dtype=np.float64)
        out: FloatArray = (self.time - self.time[0]).astype("timedelta64[s]").astype(np.float64)
        return out

    @property
    def date(self) -> TimeArray:
        """The calendar day of each row (datetime64[D])."""
        out: TimeArray = self.time.astype("datetime64[D]")
        return out

    @property
    def hour_of_day(self) -> IntArray:
        """0..23 on the file's wall clock."""
        seconds = (self.time - self.date).astype("timedelta64[s]").astype(np.int64)
        out: IntArray = seconds // 3600
        return out

    @property
    def weekday(self) -> IntArray:
        """0 = Monday .. 6 = Sunday (1970-01-01, day 0 of datetime64, was a Thursday)."""
        out: IntArray = (self.date.astype(np.int64) + 3) % 7
        return out

    @property
    def running_jobs(self) -> FloatArray:
        return self.column("running_job_num")

    @property
    def pending_jobs(self) -> FloatArray:
        return self.column("pending_job_num")

    @property
    def total_gpu_jobs(self) -> FloatArray:
        """GPU jobs present (running + pending) each minute."""
        return self.column("total_gpujob_num")

    @property
    def running_gpus(self) -> FloatArray:
        return self.column("running_gpu_num")

    @property
    def pending_gpus(self) -> FloatArray:
        return self.column("pending_gpu_num")

    @property
    def capacity_gpus(self) -> FloatArray:
        """The VC's GPUs (`total_gpu_num`: its size, not its demand)."""
        return self.column("total_gpu_num")

    @property
    def demand_gpus(self) -> FloatArray:
        """GPUs asked for: running + pending."""
        out: FloatArray = self.running_gpus + self.pending_gpus
        return out

    @property
    def gpu_utilization(self) -> FloatArray:
        return self.column("gpu_utilization")


def _wall_clock(table: CsvTable, line: int, cell: str, column: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(cell)
    except ValueError:
        raise table.error(line, f"{column}: {cell!r} is not a datetime") from None
    return stamp.replace(tzinfo=None)


def _readonly(array: npt.NDArray[np.generic]) -> None:
    array.setflags(write=False)


def _sequence(time: TimeArray, names: list[str], values: FloatArray) -> HeliosSequence:
    columns = {name: values[:, j].copy() for j, name in enumerate(names)}
    for array in columns.values():
        _readonly(array)
    _readonly(time)
    return HeliosSequence(time=time, columns=MappingProxyType(columns))


def _read_sequence_fast(path: str) -> HeliosSequence | None:
    """numpy's C parser on a well-formed file, each distinct row parsed once; None on any doubt (quoted
    cells, a row of the wrong width, ...), and the checked reader then finds and names the problem.

    A per-minute sequence repeats itself: a VC's counts hold for minutes at a time (the two Earth VCs have
    1,194 and 2,511 distinct rows, times aside, in 44,640), so parsing only the distinct rows and indexing
    is about 4x faster than parsing every row, itself about 3x faster than the checked reader."""
    text = read_text(path).replace("\r\n", "\n")
    if '"' in text or "\r" in text:
        return None  # quoting or bare CR line ends: left to the csv module
    header_line, _, body = text.partition("\n")
    header = [name.strip() for name in header_line.split(",")]
    if "time" not in header or len(set(header)) != len(header) or len(header) < 2:
        return None
    time_col = header.index("time")
    stamps: list[str] = []
    distinct: dict[str, int] = {}  # a row's values (its cells but the time) -> its index among them
    rows: list[int] = []
    try:
        for line in body.split("\n"):
            if not line:
                continue  # blank lines are skipped, as both other readers do
            cells = line.split(",", time_col + 1)  # the cells before the time, the time, the rest of the row
            stamps.append(cells.pop(time_col).strip())
            rows.append(distinct.setdefault(",".join(cells), len(distinct)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            time: TimeArray = np.array(stamps, dtype="datetime64[s]")
            distinct_rows = io.StringIO("\n".join(distinct))
            parsed = np.loadtxt(distinct_rows, dtype=np.float64, delimiter=",", comments=None, ndmin=2)
    except (IndexError, ValueError, UserWarning):
        return None
    if parsed.shape != (len(distinct), len(header) - 1):
        return None  # a row of another width (or an empty one, which loadtxt skips)
    values: FloatArray = parsed[np.array(rows, dtype=np.intp)]
    if len(time) == 0 or not (np.diff(time) > np.timedelta64(0, "s")).all() or not np.isfinite(values).all():
        return None
    return _sequence(time, [name for name in header if name != "time"], values)


def read_helios_sequence(path: str | os.PathLike[str]) -> HeliosSequence:
    """Read a HeliosArtifact `vc*_sequence.csv` (a `time` column, then numeric columns).

    Raises TraceError (file:line) for a missing `time` column, wrong column counts, an unreadable
    or non-increasing time, or a cell that is not a finite number.
    """
    fast = _read_sequence_fast(os.fspath(path))
    if fast is not None:
        return fast
    table = CsvTable(path, ("time",))
    names = [name for name in table.header if name != "time"]
    time_col = table.col["time"]
    value_cols = [i for i, name in enumerate(table.header) if name != "time"]
    stamps: list[datetime] = []
    previous: datetime | None = None
    for line, row in table.rows:
        stamp = _wall_clock(table, line, row[time_col].strip(), "time")
        if previous is not None and stamp <= previous:
            raise table.error(line, f"time: {stamp} does not follow {previous}")
        stamps.append(stamp)
        previous = stamp
    time: TimeArray = np.array(stamps, dtype="datetime64[s]")
    cells = [[row[i] for i in value_cols] for _, row in table.rows]
    try:
        values = np.array(cells, dtype=np.float64).reshape(len(cells), len(value_cols))
    except ValueError:
        values = np.full((len(cells), len(value_cols)), np.nan)
    if not np.isfinite(values).all():
        # The fast path failed: find the first bad cell to name its line and column.
        for line, row in table.rows:
            for i in value_cols:
                table.number(line, row, table.header[i], minimum=None)
        raise table.error(1, "a value is not a finite number")
    return _sequence(time, names, values)


# -- per-day VC sizes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class EarthGpuNumber:
    """GPUs assigned to each virtual cluster, per day (read-only numpy arrays).

    `gpus[d, v]` is the size of VC `vcs[v]` on `dates[d]`; `total[d]` is the file's `total` column
    (the sum over VCs when the file has none).
    """

    dates: TimeArray
    vcs: tuple[str, ...]
    gpus: IntArray
    total: IntArray

    def of(self, vc: str) -> IntArray:
        """One VC's GPUs per day; KeyError listing the known VCs."""
        if vc not in self.vcs:
            raise KeyError(f"no VC {vc!r}; the file has {', '.join(self.vcs)}")
        out: IntArray = self.gpus[:, self.vcs.index(vc)]
        return out


def read_earth_gpu_number(path: str | os.PathLike[str]) -> EarthGpuNumber:
    """Read a Helios `*_gpu_number.csv` (`date`, one integer column per VC, optional `total`).

    Raises TraceError (file:line) for a missing `date` column, an unreadable or repeated date, or a
    count that is not a non-negative integer.
    """
    table = CsvTable(path, ("date",))
    vcs = tuple(name for name in table.header if name not in ("date", "total"))
    vc_cols = [table.header.index(name) for name in vcs]
    days: list[datetime] = []
    matrix: list[list[int]] = []
    totals: list[int] = []
    seen: set[datetime] = set()
    for line, row in table.rows:
        day = _wall_clock(table, line, table.text(row, "date"), "date")
        if day in seen:
            raise table.error(line, f"date: {day.date()} repeated")
        seen.add(day)
        counts = [table.integer(line, row, table.header[i], maximum=MAX_VC_GPUS) for i in vc_cols]
        days.append(day)
        matrix.append(counts)
        totals.append(table.integer(line, row, "total", maximum=MAX_VC_GPUS) if table.has("total") else sum(counts))
    dates: TimeArray = np.array(days, dtype="datetime64[D]")
    gpus: IntArray = np.array(matrix, dtype=np.int64).reshape(len(matrix), len(vcs))
    total: IntArray = np.array(totals, dtype=np.int64)
    for array in (dates, gpus, total):
        _readonly(array)
    return EarthGpuNumber(dates=dates, vcs=vcs, gpus=gpus, total=total)
