"""The common shape every workload takes before the simulator turns it into a vcjob, and CSV helpers.

Every reader in this package (Alibaba openb, Tiresias, Helios, the synthetic generator) produces
`TraceJob` values, so the simulator has one thing to replay whatever the source.

GPU convention (the openb trace's own, kept everywhere so nothing is converted twice):

- `gpus_per_pod` is the number of GPU cards each pod touches;
- `gpu_milli` is the thousandths of *each* of those cards the pod uses:
  1000 for whole cards, 1..999 for a shared slice of one card (then `gpus_per_pod == 1`),
  and 0 exactly when the pod uses no GPU (`gpus_per_pod == 0`).

So a pod holds `gpus_per_pod * gpu_milli` thousandths of a card (`gpu_milli_per_pod`), and a
fractional pod never spans cards. `cpu_milli` and `memory_mib` are per pod, like a pod template.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: GPUs per server when a trace gives a gang size in GPUs only: gangs above this are split into pods.
GPUS_PER_NODE = 8
#: CPU each GPU comes with when a trace records no CPU request (milli-cores).
#: Modest on purpose: GPU, not CPU, should be what limits placement on every openb node type
#: (the smallest openb GPU nodes have 4 cores per card).
DEFAULT_CPU_MILLI_PER_GPU = 4000
#: Memory each GPU comes with when a trace records no memory request (MiB); 16 GiB a card fits every
#: openb GPU node type (the tightest has 30 GiB a card).
DEFAULT_MEMORY_MIB_PER_GPU = 16384

#: Bounds on what a trace may ask, so that a typo or a hostile file is an error naming its cell rather than
#: billions of pods built, or a count that overflows the scheduler's 64-bit resource columns.
#: A job's pods are bounded as a vcjob's (MAX_JOB_PODS), a pod's or node's GPU cards as a node's (MAX_GPU_CARDS).
#: CPU of one pod or node: a million cores.
MAX_CPU_MILLI = 10**9
#: Memory of one pod or node: 32 TiB (10,000 such pods still fit a 64-bit count of bytes many times over).
MAX_MEMORY_MIB = 2**25

#: Times and durations a trace may give, in seconds: 100 years. A run steps through simulated time, so a
#: job submitted or running for longer (a unit mistaken, a corrupt cell) would keep it going for ever.
MAX_TIME_S = 100 * 365.25 * 86400

#: Cells that mean "no value" in optional numeric columns (pandas writes NaN, Slurm exports None).
MISSING = frozenset({"", "nan", "NaN", "NAN", "None", "none", "NaT", "null", "NULL"})


class TraceError(ValueError):
    """A malformed trace file, pointing at the file and the 1-based line to fix.

    `str(error)` reads like a compiler message: ``openb_pod_list_default.csv:17: num_gpu: 'x' is not
    an integer``. The message names the file by its base name; `path` keeps the path as given.
    """

    def __init__(self, path: str | os.PathLike[str], line: int, message: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.message = message
        super().__init__(f"{Path(self.path).name}:{line}: {message}")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a workload trace: a gang of `pods` identical pods, submitted at `submit_s`.

    Units: `cpu_milli` milli-cores per pod, `memory_mib` MiB per pod, `submit_s` seconds from the
    trace's start, `duration_s` seconds of running once placed. `gpu_milli` follows the module's GPU
    convention (thousandths of each card used; 1000 = whole cards, 0 = no GPU). `queue` is the
    Volcano queue (a Helios virtual cluster), "" when the trace has none. `gpu_spec` lists the GPU
    models the job accepts (empty = any). The extras keep what the source recorded: `model_name`
    (the DL model, Tiresias), `state` (final state in the original trace), `qos` (openb QoS class),
    `wait_s` (the time the job queued in the original cluster, when known).
    """

    job_id: str
    user: str
    queue: str
    gpus_per_pod: int
    gpu_milli: int
    pods: int
    cpu_milli: int
    memory_mib: int
    submit_s: float
    duration_s: float
    gpu_spec: tuple[str, ...] = ()
    model_name: str = ""
    state: str = ""
    qos: str = ""
    wait_s: float | None = None

    def __post_init__(self) -> None:
        if not self.job_id:
            raise ValueError("job_id: must not be empty")
        if self.pods < 1:
            raise ValueError(f"pods: {self.pods} is below 1")
        check_gpu_shape(self.gpus_per_pod, self.gpu_milli, "gpus_per_pod", "gpu_milli")
        if self.cpu_milli < 0:
            raise ValueError(f"cpu_milli: {self.cpu_milli} is negative")
        if self.memory_mib < 0:
            raise ValueError(f"memory_mib: {self.memory_mib} is negative")
        for name, value in (("submit_s", self.submit_s), ("duration_s", self.duration_s)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name}: {value!r} is not a finite time >= 0")
        if self.wait_s is not None and (not math.isfinite(self.wait_s) or self.wait_s < 0):
            raise ValueError(f"wait_s: {self.wait_s!r} is not a finite time >= 0")

    @property
    def gpu_milli_per_pod(self) -> int:
        """Thousandths of a card each pod holds (2000 for two whole cards, 500 for half a card)."""
        return self.gpus_per_pod * self.gpu_milli

    @property
    def total_gpu_milli(self) -> int:
        """Thousandths of a card the whole gang holds."""
        return self.pods * self.gpu_milli_per_pod

    @property
    def shared(self) -> bool:
        """True when each pod uses a slice of one card rather than whole cards."""
        return 0 < self.gpu_milli < 1000


def check_gpu_shape(gpus: int, milli: int, gpus_name: str, milli_name: str) -> None:
    """Enforce the module's GPU convention; raise ValueError naming the offending column."""
    if gpus < 0:
        raise ValueError(f"{gpus_name}: {gpus} is negative")
    if not 0 <= milli <= 1000:
        raise ValueError(f"{milli_name}: {milli} is outside 0..1000")
    if gpus == 0 and milli != 0:
        raise ValueError(f"{milli_name}: {milli} must be 0 when {gpus_name} is 0")
    if gpus == 1 and milli == 0:
        raise ValueError(f"{milli_name}: 0 but {gpus_name} is 1 (give the thousandths of the card used)")
    if gpus > 1 and milli != 1000:
        raise ValueError(f"{milli_name}: {milli} must be 1000 when {gpus_name} is {gpus} (only one card is shared)")


def split_gang(gpus: int, gpus_per_node: int = GPUS_PER_NODE) -> tuple[int, int]:
    """Split a job of `gpus` whole GPUs into (pods, gpus_per_pod) for servers of `gpus_per_node`.

    Up to one server's worth stays one pod; beyond that the job becomes ceil(gpus / gpus_per_node)
    equal pods of ceil(gpus / pods) GPUs: 16 -> 2 x 8, 12 -> 2 x 6, 9 -> 2 x 5 (a gang's pods share
    one template, so an uneven count is rounded up to the next multiple of the pod count).
    A job without GPUs is one pod of 0.
    """
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node: {gpus_per_node} is below 1")
    if gpus <= 0:
        return 1, 0
    pods = -(-gpus // gpus_per_node)
    return pods, -(-gpus // pods)


def read_text(path: str | os.PathLike[str]) -> str:
    """A trace file's text (UTF-8, an optional byte-order mark skipped); a TraceError naming the line and
    column of the first byte that is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return codecs.decode(data, "utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start]
        raise TraceError(
            path, line, f"byte 0x{byte:02x} at column {column} is not UTF-8 (save the file as UTF-8)"
        ) from None


def _filled(record: list[str]) -> bool:
    """False for a blank line (the csv module reads it as [] or a single blank cell)."""
    return len(record) > 1 or (len(record) == 1 and bool(record[0].strip()))


class CsvTable:
    """A CSV file read whole, with its header checked and each row's physical line number.

    The shared front half of every reader here: it rejects a missing header, missing or duplicate
    columns and rows with the wrong number of cells, and its `integer`/`number`/... methods turn a cell
    into a value or raise a `TraceError` naming the file, line and column. Blank lines are skipped.
    """

    def __init__(self, path: str | os.PathLike[str], required: Sequence[str]) -> None:
        self.path = os.fspath(path)
        reader = csv.reader(io.StringIO(read_text(self.path), newline=""))
        header: list[str] | None = None
        header_line = 1
        rows: list[tuple[int, list[str]]] = []
        last_line = 0  # the last line of the record read before
        try:
            for record in reader:
                start, last_line = last_line + 1, reader.line_num
                if not _filled(record):
                    continue
                if header is None:
                    header = [name.strip() for name in record]
                    header_line = start
                else:
                    rows.append((start, record))
        except csv.Error as exc:
            start = last_line + 1
            if reader.line_num > start:
                raise TraceError(self.path, start, f"unterminated quote starting at line {start} ({exc})") from None
            raise TraceError(self.path, start, f"unreadable CSV: {exc}") from None
        if header is None:
            raise TraceError(self.path, 1, f"empty file; expected a header with {', '.join(required)}")
        self.header: tuple[str, ...] = tuple(header)
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise TraceError(self.path, header_line, f"duplicate column(s) {', '.join(duplicates)}")
        missing = [name for name in required if name not in header]
        if missing:
            raise TraceError(
                self.path,
                header_line,
                f"missing column(s) {', '.join(missing)}; the header has {', '.join(header)}",
            )
        self.col: dict[str, int] = {name: i for i, name in enumerate(header)}
        width = len(header)
        for line, record in rows:
            if len(record) != width:
                problem = f"expected {width} columns, got {len(record)}"
                if any("\n" in cell or "\r" in cell for cell in record):
                    problem += f": unterminated quote starting at line {line}"
                raise TraceError(self.path, line, problem)
        self.rows = rows

    def has(self, column: str) -> bool:
        return column in self.col

    def columns(self) -> dict[str, tuple[str, ...]]:
        """Every column's cells as read (not stripped), in row order, by name: for readers that convert a
        whole column at once."""
        if not self.rows:
            return {name: () for name in self.header}
        return dict(zip(self.header, zip(*(row for _, row in self.rows), strict=True), strict=True))

    def error(self, line: int, message: str) -> TraceError:
        return TraceError(self.path, line, message)

    def text(self, row: list[str], column: str) -> str:
        return row[self.col[column]].strip()

    def integer(
        self, line: int, row: list[str], column: str, minimum: int = 0, maximum: int | None = None, what: str = ""
    ) -> int:
        """The cell as an integer in minimum..maximum; `what` says what the maximum bounds ("GPUs a pod")."""
        cell = row[self.col[column]].strip()
        try:
            value = int(cell)
        except ValueError:
            raise TraceError(self.path, line, f"{column}: {cell!r} is not an integer") from None
        if value < minimum:
            below = "negative" if minimum == 0 else f"below {minimum}"
            raise TraceError(self.path, line, f"{column}: {value} is {below}")
        if maximum is not None and value > maximum:
            bound = f" ({what})" if what else ""
            raise TraceError(self.path, line, f"{column}: {value} is above the maximum {maximum:,}{bound}")
        return value

    def number(
        self, line: int, row: list[str], column: str, minimum: float | None = 0.0, maximum: float | None = None
    ) -> float:
        cell = row[self.col[column]].strip()
        try:
            value = float(cell)
        except ValueError:
            raise TraceError(self.path, line, f"{column}: {cell!r} is not a number") from None
        if not math.isfinite(value):
            raise TraceError(self.path, line, f"{column}: {cell!r} is not a finite number")
        if minimum is not None and value < minimum:
            what = "negative" if minimum == 0 else f"below {minimum:g}"
            raise TraceError(self.path, line, f"{column}: {value:g} is {what}")
        if maximum is not None and value > maximum:
            raise TraceError(self.path, line, f"{column}: {value:g} is above the maximum {maximum:g}{_unit(maximum)}")
        return value

    def time(self, line: int, row: list[str], column: str) -> float:
        """Seconds, 0..MAX_TIME_S (100 years)."""
        return self.number(line, row, column, maximum=MAX_TIME_S)

    def optional_number(self, line: int, row: list[str], column: str, maximum: float | None = None) -> float | None:
        """A number >= 0 (and <= maximum), or None when the column is absent or the cell is empty/NaN."""
        if column not in self.col or row[self.col[column]].strip() in MISSING:
            return None
        return self.number(line, row, column, maximum=maximum)


def _unit(maximum: float) -> str:
    return " (100 years in seconds)" if maximum == MAX_TIME_S else ""
