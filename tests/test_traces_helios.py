"""Helios job logs (hand-written: none ships in ../shared/data), per-minute VC sequences and VC sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tidegate.traces import (
    DEFAULT_MEMORY_MIB_PER_GPU,
    TraceError,
    helios,
    read_earth_gpu_number,
    read_helios_jobs,
    read_helios_sequence,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "helios-earth"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared trace data not found at {DATA}")

JOB_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def write(tmp_path: Path, text: str, name: str = "cluster_log.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- job logs --------------------------------------------------------------------------------------


def test_job_log_with_datetimes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        JOB_HEADER
        + "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
        + "1425512,uVMrF,vchbv,16,64,2,FAILED,2020-06-09 18:41:27,2020-06-09 18:42:27,2020-06-09 18:45:36,189,60\n"
        + "1425513,uzqls,vcpDC,0,4,1,CANCELLED,2020-06-09 18:40:28,,,,\n",
    )
    first, gang, cpu = read_helios_jobs(path)
    # submit_s counts from the earliest submit in the file (the third row, 33 s before the first).
    assert (first.job_id, first.user, first.queue, first.state) == ("1425511", "uXBbc", "vcJkd", "COMPLETED")
    assert (first.submit_s, first.duration_s, first.wait_s) == (33.0, 36848.0, 0.0)
    assert (first.pods, first.gpus_per_pod, first.gpu_milli, first.cpu_milli) == (1, 1, 1000, 1000)
    assert first.memory_mib == DEFAULT_MEMORY_MIB_PER_GPU
    assert (gang.pods, gang.gpus_per_pod, gang.cpu_milli, gang.total_gpu_milli) == (2, 8, 32000, 16000)
    assert (gang.submit_s, gang.duration_s, gang.wait_s) == (59.0, 189.0, 60.0)
    assert (cpu.gpus_per_pod, cpu.gpu_milli, cpu.memory_mib, cpu.cpu_milli) == (0, 0, 0, 4000)
    assert (cpu.submit_s, cpu.duration_s, cpu.wait_s) == (0.0, 0.0, None)


def test_job_log_in_seconds_derives_duration_and_wait(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time\n"
        "a,u1,vc1,train,4,8,1,COMPLETED,1000,1010,1110\n"
        "b,u2,vc1,eval,3,6,2,TIMEOUT,1005,NaN,NaN\n",
    )
    a, b = read_helios_jobs(path, memory_mib_per_gpu=1000)
    assert (a.submit_s, a.duration_s, a.wait_s, a.memory_mib) == (0.0, 100.0, 10.0, 4000)
    # 3 GPUs over 2 nodes: equal pods, so each gets ceil(3 / 2) = 2.
    assert (b.pods, b.gpus_per_pod, b.cpu_milli, b.duration_s, b.wait_s) == (2, 2, 3000, 0.0, None)


def test_state_filter_keeps_the_clock(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        JOB_HEADER + "1,u,vc,1,1,1,CANCELLED,0,,,,\n2,u,vc,1,1,1,COMPLETED,50,60,100,40,10\n",
    )
    (job,) = read_helios_jobs(path, states={"COMPLETED"})
    assert (job.job_id, job.submit_s) == ("2", 50.0)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2,u,vc,x,1,1,COMPLETED,10,,,,", "gpu_num: 'x' is not an integer"),
        ("2,u,vc,1,-1,1,COMPLETED,10,,,,", "cpu_num: -1 is negative"),
        ("2,u,vc,1,1,1,COMPLETED,yesterday,,,,", "submit_time: 'yesterday' is neither a datetime nor a number"),
        ("2,u,vc,1,1,1,COMPLETED,2020-05-01 00:00:00,,,,", "mixes plain seconds and datetimes"),
        ("2,u,vc,1,1,1,COMPLETED,,,,,", "submit_time: empty"),
        ("2,u,vc,1,1,1,COMPLETED,10,20,15,,", "end_time: before start_time"),
        ("2,u,vc,1,1,1,COMPLETED,10,5,15,,", "start_time: before submit_time"),
        ("2,u,vc,1,1,1,COMPLETED,10,,,-3,", "duration: -3 is negative"),
        ("2,u,vc,1,1,1,COMPLETED,10,,,", "expected 12 columns, got 11"),
        (",u,vc,1,1,1,COMPLETED,10,,,,", "job_id: empty"),
        ("1,u,vc,1,1,1,COMPLETED,10,,,,", "job_id: duplicate '1'"),
        ("2,u,vc,8,1,1099511627776,COMPLETED,10,,,,", "node_num: 1099511627776 is above the maximum 10,000"),
        ("2,u,vc,9223372036854775808,1,1,COMPLETED,10,,,,", "gpu_num: 9223372036854775808 is above the maximum 256"),
        (
            "2,u,vc,8,9223372036854775808,2,COMPLETED,10,,,,",
            "cpu_num: 9223372036854775808 is above the maximum 2,000,000",
        ),
        ("2,u,vc,1,1,1,COMPLETED,-5,,,,", "submit_time: -5 is negative"),
        ("2,u,vc,1,8,8,COMPLETED,10,,,,", "node_num: 8 nodes for 1 GPUs"),
        ("2,u,vc,1,1,1,COMPLETED,1e308,,,,", "submit_time: more than 100 years after the file's first submit_time"),
        ("2,u,vc,1,1,1,COMPLETED,10,,,1e308,", r"duration: 1e\+308 is above the maximum"),
        ("2,u,vc,1,1,1,COMPLETED,10,10,1e308,,", "end_time: more than 100 years after start_time"),
        ("2,u,vc,1,1,1,COMPLETED,10,,,,1e308", r"queue: 1e\+308 is above the maximum"),
    ],
)
def test_malformed_job_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, JOB_HEADER + "1,u,vc,1,1,1,COMPLETED,0,0,5,5,0\n" + row + "\n")
    with pytest.raises(TraceError, match=message) as info:
        read_helios_jobs(path)
    assert str(info.value).startswith("cluster_log.csv:3: ")


def test_job_log_missing_columns(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cluster_log.csv:1: missing column\(s\) vc"):
        read_helios_jobs(write(tmp_path, "job_id,user,gpu_num,cpu_num,node_num,state,submit_time\n"))


# -- sequences -------------------------------------------------------------------------------------

SEQ_HEADER = (
    "time,total_job_num,running_job_num,pending_job_num,total_gpujob_num,"
    "running_gpu_num,pending_gpu_num,total_gpu_num,gpu_utilization\n"
)


def test_sequence_columns_and_clock(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        SEQ_HEADER
        + "2020-05-03 23:59:00,7,7,0,6,162,0,208,0.779\n"
        + "2020-05-04 00:00:00,8,7,1,7,170,8,208,0.817\n"
        + "2020-05-04 01:30:00,8,8,0,7,178,0,208,0.856\n",
        name="vcX_sequence.csv",
    )
    seq = read_helios_sequence(path)
    assert len(seq) == 3
    assert seq.time.dtype == np.dtype("datetime64[s]")
    assert seq.t_s.tolist() == [0.0, 60.0, 5460.0]
    assert seq.hour_of_day.tolist() == [23, 0, 1]
    assert seq.weekday.tolist() == [6, 0, 0]  # 3 May 2020 was a Sunday
    assert seq.date.astype(str).tolist() == ["2020-05-03", "2020-05-04", "2020-05-04"]
    assert seq.demand_gpus.tolist() == [162.0, 178.0, 178.0]
    assert seq.pending_jobs.tolist() == [0.0, 1.0, 0.0]
    assert seq.capacity_gpus.tolist() == [208.0] * 3
    assert seq.gpu_utilization[1] == pytest.approx(0.817)
    assert seq.column("total_job_num").tolist() == [7.0, 8.0, 8.0]
    with pytest.raises(KeyError, match="no column 'idle_gpu_num'"):
        seq.column("idle_gpu_num")
    with pytest.raises(ValueError):
        seq.running_gpus[0] = 1.0


@pytest.mark.parametrize(
    "text",
    [
        # rows repeating (read once each), a fraction, a padded time
        "time,a,b\n2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1,2\n 2020-05-01 00:02:00 ,3,0.5\n"
        "2020-05-01 00:03:00,1,2\n",
        # the time not first, CRLF line ends and a blank line
        "a,time,b\r\n1,2020-05-01 00:00:00,2\r\n\r\n1,2020-05-01 00:01:00,2e3\r\n",
    ],
)
def test_the_fast_sequence_reader_reads_what_the_checked_reader_reads(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, text, name="vcX_sequence.csv")
    fast = helios._read_sequence_fast(str(path))
    assert fast is not None
    monkeypatch.setattr(helios, "_read_sequence_fast", lambda _: None)
    checked = read_helios_sequence(path)
    assert fast.time.tolist() == checked.time.tolist()
    assert {k: v.tolist() for k, v in fast.columns.items()} == {k: v.tolist() for k, v in checked.columns.items()}


@pytest.mark.parametrize(
    "text",
    [
        'time,a\n2020-05-01 00:00:00,"1"\n',  # quoted: left to the csv module
        "time,a,b\n2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1\n",  # ragged
        "time,a\n2020-05-01 00:00:00,1\n2020-05-01 00:01:00\n",  # a row without values
        "time,a\n2020-05-01 00:00:00,1 # two\n",  # not a number ('#' is no comment)
    ],
)
def test_the_fast_sequence_reader_leaves_any_doubt_to_the_checked_reader(tmp_path: Path, text: str) -> None:
    assert helios._read_sequence_fast(str(write(tmp_path, text, name="vcX_sequence.csv"))) is None


def test_sequence_keeps_the_written_wall_clock_when_times_carry_an_offset(tmp_path: Path) -> None:
    path = write(tmp_path, "time,x\n2020-05-01 08:00:00+08:00,1\n2020-05-01 09:00:00+08:00,2\n")
    seq = read_helios_sequence(path)
    assert seq.hour_of_day.tolist() == [8, 9]


@pytest.mark.parametrize(
    ("rows", "line", "message"),
    [
        ("2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1,x\n", 3, "b: 'x' is not a number"),
        ("2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1,inf\n", 3, "b: 'inf' is not a finite number"),
        ("2020-05-01 00:00:00,1,2\n2020-05-01 00:00:00,1,2\n", 3, "time: .* does not follow"),
        ("2020-05-01 00:00:00,1,2\nMay 2nd,1,2\n", 3, "time: 'May 2nd' is not a datetime"),
        ("2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1\n", 3, "expected 3 columns, got 2"),
    ],
)
def test_malformed_sequences_name_file_and_line(tmp_path: Path, rows: str, line: int, message: str) -> None:
    path = write(tmp_path, "time,a,b\n" + rows, name="vcX_sequence.csv")
    with pytest.raises(TraceError, match=message) as info:
        read_helios_sequence(path)
    assert str(info.value).startswith(f"vcX_sequence.csv:{line}: ")


def test_sequence_bytes_that_are_not_utf8_are_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "vcX_sequence.csv"
    path.write_bytes(b"time,a,b\n2020-05-01 00:00:00,1,2\n2020-05-01 00:01:00,1,\xff\n")
    with pytest.raises(TraceError, match=r"^vcX_sequence.csv:3: byte 0xff at column 23 is not UTF-8"):
        read_helios_sequence(path)
    with pytest.raises(TraceError, match=r"^vcX_sequence.csv:3: byte 0xff"):
        read_helios_jobs(path)


def test_header_only_sequence_is_empty(tmp_path: Path) -> None:
    seq = read_helios_sequence(write(tmp_path, "time,a\n"))
    assert len(seq) == 0 and seq.t_s.size == 0


def test_gpu_number_file(tmp_path: Path) -> None:
    path = write(tmp_path, "date,vcA,vcB,total\n2020-04-01,8,16,24\n2020-04-02,8,0,8\n", name="Earth_gpu_number.csv")
    sizes = read_earth_gpu_number(path)
    assert sizes.vcs == ("vcA", "vcB")
    assert sizes.dates.astype(str).tolist() == ["2020-04-01", "2020-04-02"]
    assert sizes.gpus.tolist() == [[8, 16], [8, 0]]
    assert sizes.total.tolist() == [24, 8]
    assert sizes.of("vcB").tolist() == [16, 0]
    with pytest.raises(KeyError, match="no VC 'vcC'"):
        sizes.of("vcC")
    no_total = read_earth_gpu_number(write(tmp_path, "date,vcA,vcB\n2020-04-01,8,16\n", name="g.csv"))
    assert no_total.total.tolist() == [24]
    with pytest.raises(TraceError, match=r"Earth_gpu_number\.csv:3: vcB: -1 is negative"):
        read_earth_gpu_number(
            write(tmp_path, "date,vcA,vcB\n2020-04-01,8,16\n2020-04-02,8,-1\n", "Earth_gpu_number.csv")
        )
    with pytest.raises(TraceError, match=r"g\.csv:3: vcA: 9223372036854775808 is above the maximum"):
        read_earth_gpu_number(write(tmp_path, "date,vcA\n2020-04-01,8\n2020-04-02,9223372036854775808\n", "g.csv"))
    with pytest.raises(TraceError, match=r"g\.csv:3: date: 2020-04-01 repeated"):
        read_earth_gpu_number(write(tmp_path, "date,vcA\n2020-04-01,8\n2020-04-01,8\n", "g.csv"))


@needs_data
@pytest.mark.parametrize(("vc", "capacity"), [("vc6YE", 208), ("vchbv", 64)])
def test_real_sequences(vc: str, capacity: int) -> None:
    seq = read_helios_sequence(DATA / f"{vc}_sequence.csv")
    assert len(seq) == 44640  # 31 days of minutes
    assert str(seq.time[0]) == "2020-05-01T00:00:00"
    assert str(seq.time[-1]) == "2020-05-31T23:59:00"
    assert (np.diff(seq.t_s) == 60.0).all()
    assert len(seq.columns) == 23
    assert (seq.capacity_gpus == capacity).all()
    assert (seq.demand_gpus >= 0).all()
    assert seq.weekday[0] == 4  # 1 May 2020 was a Friday


@needs_data
def test_real_earth_gpu_number() -> None:
    sizes = read_earth_gpu_number(DATA / "Earth_gpu_number.csv")
    assert sizes.gpus.shape == (181, 25)
    assert (sizes.gpus.sum(axis=1) == sizes.total).all()
    assert str(sizes.dates[0]) == "2020-04-01" and str(sizes.dates[-1]) == "2020-09-28"
    assert sizes.of("vc6YE")[0] == 128 and sizes.total[-1] == 1208
