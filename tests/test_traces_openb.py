"""openb (Alibaba ATC'23) readers, their Kubernetes form, and the shared TraceJob record."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.model.objects import GPU_PRODUCT_LABEL
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_MILLI, GPU_NUMBER, MEMORY, NVIDIA_GPU
from tidegate.traces import (
    GPU_MEMORY_MIB_BY_MODEL,
    QOS_ANNOTATION,
    OpenbNode,
    OpenbPod,
    TraceError,
    TraceJob,
    openb_nodes_to_k8s,
    openb_pod_to_k8s,
    openb_pods_to_jobs,
    read_openb_jobs,
    read_openb_nodes,
    read_openb_pods,
    read_openb_pods_arrays,
    split_gang,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-openb"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared trace data not found at {DATA}")

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
MIB = 2**20


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- records ---------------------------------------------------------------------------------------


def make_job(**changes: object) -> TraceJob:
    fields: dict[str, object] = {
        "job_id": "j",
        "user": "u",
        "queue": "q",
        "gpus_per_pod": 1,
        "gpu_milli": 1000,
        "pods": 1,
        "cpu_milli": 1000,
        "memory_mib": 1024,
        "submit_s": 0.0,
        "duration_s": 10.0,
    }
    fields.update(changes)
    return TraceJob(**fields)  # type: ignore[arg-type]


def test_trace_job_gpu_totals_follow_the_per_card_convention() -> None:
    whole = make_job(gpus_per_pod=4, gpu_milli=1000, pods=2)
    assert (whole.gpu_milli_per_pod, whole.total_gpu_milli, whole.shared) == (4000, 8000, False)
    half = make_job(gpus_per_pod=1, gpu_milli=500)
    assert (half.gpu_milli_per_pod, half.total_gpu_milli, half.shared) == (500, 500, True)
    cpu = make_job(gpus_per_pod=0, gpu_milli=0)
    assert (cpu.total_gpu_milli, cpu.shared) == (0, False)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"job_id": ""}, "job_id"),
        ({"pods": 0}, "pods: 0 is below 1"),
        ({"gpus_per_pod": 2, "gpu_milli": 500}, "must be 1000 when gpus_per_pod is 2"),
        ({"gpus_per_pod": 0, "gpu_milli": 300}, "must be 0 when gpus_per_pod is 0"),
        ({"gpus_per_pod": 1, "gpu_milli": 0}, "gpu_milli: 0 but gpus_per_pod is 1"),
        ({"gpu_milli": 1001}, "outside 0..1000"),
        ({"cpu_milli": -1}, "cpu_milli"),
        ({"duration_s": math.inf}, "duration_s"),
        ({"submit_s": -1.0}, "submit_s"),
        ({"wait_s": -2.0}, "wait_s"),
    ],
)
def test_trace_job_rejects_values_outside_the_convention(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_job(**changes)


def test_trace_error_names_file_and_line() -> None:
    error = TraceError("/some/dir/openb_pod_list_default.csv", 17, "num_gpu: 'x' is not an integer")
    assert str(error) == "openb_pod_list_default.csv:17: num_gpu: 'x' is not an integer"
    assert (error.path, error.line) == ("/some/dir/openb_pod_list_default.csv", 17)
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(0, (1, 0)), (1, (1, 1)), (8, (1, 8)), (9, (2, 5)), (12, (2, 6)), (16, (2, 8)), (64, (8, 8))],
)
def test_split_gang_makes_equal_pods_of_at_most_a_server(gpus: int, expected: tuple[int, int]) -> None:
    assert split_gang(gpus, 8) == expected


# -- nodes -----------------------------------------------------------------------------------------


def test_read_nodes_and_convert_to_k8s(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nodes.csv",
        NODE_HEADER + "n0,64000,262144,2,P100\nn1,96000,393216,8,G2\ncpu0,32000,131072,0,\n",
    )
    nodes = read_openb_nodes(path)
    assert nodes == [
        OpenbNode("n0", 64000, 262144, 2, "P100"),
        OpenbNode("n1", 96000, 393216, 8, "G2"),
        OpenbNode("cpu0", 32000, 131072, 0, ""),
    ]
    p100, g2, cpu = openb_nodes_to_k8s(nodes)
    assert p100.name == "n0"
    assert dict(p100.allocatable) == {
        CPU: 64000,
        MEMORY: 262144 * MIB,
        NVIDIA_GPU: 2000,
        GPU_NUMBER: 2000,
        GPU_MEMORY: 2 * 16280 * 1000,
        GPU_MILLI: 2 * 1000 * 1000,
    }
    assert p100.allocatable.to_dict()[GPU_MEMORY] == "32560"
    assert p100.capacity == p100.allocatable
    assert p100.gpu_memory_mib == (16280, 16280)
    assert p100.labels == {"kubernetes.io/hostname": "n0", GPU_PRODUCT_LABEL: "P100"}
    assert g2.gpu_memory_mib == (20000,) * 8
    assert g2.allocatable[NVIDIA_GPU] == 8000
    assert dict(cpu.allocatable) == {CPU: 32000, MEMORY: 131072 * MIB}
    assert cpu.gpu_memory_mib == ()
    assert GPU_PRODUCT_LABEL not in cpu.labels


def test_node_conversion_takes_a_custom_memory_table_and_rejects_unknown_models() -> None:
    node = OpenbNode("n", 8000, 32768, 1, "H100")
    with pytest.raises(ValueError, match="'H100' has no memory size"):
        openb_nodes_to_k8s([node])
    (k8s,) = openb_nodes_to_k8s([node], {"H100": 81559})
    assert k8s.gpu_memory_mib == (81559,)
    assert k8s.allocatable[GPU_MEMORY] == 81559 * 1000
    assert GPU_MEMORY_MIB_BY_MODEL["T4"] == 15109


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("n0,64000,262144,x,P100\n", 2, "gpu: 'x' is not an integer"),
        ("n0,64000,262144,2,P100\nn1,-5,1,0,\n", 3, "cpu_milli: -5 is negative"),
        ("n0,64000,262144,2\n", 2, "expected 5 columns, got 4"),
        ("n0,64000,262144,2,\n", 2, "model: empty for a node with 2 GPUs"),
        ("n0,1,1,0,\nn0,1,1,0,\n", 3, "duplicate node name"),
        (",1,1,0,\n", 2, "sn: empty"),
        ("n0,1,1,100000,T4\n", 2, "gpu: 100000 is above the maximum 256"),
        ("n0,1,17592186044416,0,\n", 2, "memory_mib: 17592186044416 is above the maximum"),
    ],
)
def test_malformed_node_rows_name_file_and_line(tmp_path: Path, body: str, where: int, message: str) -> None:
    path = write(tmp_path, "nodes.csv", NODE_HEADER + body)
    with pytest.raises(TraceError, match=message) as info:
        read_openb_nodes(path)
    assert str(info.value).startswith(f"nodes.csv:{where}: ")
    assert info.value.line == where


def test_node_file_without_a_needed_column_or_header(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nodes.csv:1: missing column\(s\) model"):
        read_openb_nodes(write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu\nn0,1,1,0\n"))
    with pytest.raises(TraceError, match=r"empty\.csv:1: empty file"):
        read_openb_nodes(write(tmp_path, "empty.csv", ""))


# -- pods ------------------------------------------------------------------------------------------

PODS = POD_HEADER + (
    "p-whole,12000,16384,1,1000,,LS,Running,0,100,0\n"
    "p-half,6000,12288,1,460,,BE,Running,10,70,15\n"
    "p-four,32000,131072,4,1000,V100M16|V100M32,Burstable,Succeeded,20,400,25\n"
    "\n"
    "p-cpu,4000,8192,0,0,,LS,Failed,30,31,30\n"
    "p-pending,8000,30517,1,320,T4,BE,Pending,40,90,\n"
)


def test_read_pods_full_columns(tmp_path: Path) -> None:
    pods = read_openb_pods(write(tmp_path, "pods.csv", PODS))
    assert [pod.name for pod in pods] == ["p-whole", "p-half", "p-four", "p-cpu", "p-pending"]
    assert pods[1] == OpenbPod("p-half", 6000, 12288, 1, 460, (), "BE", "Running", 10.0, 70.0, 15.0)
    assert pods[2].gpu_spec == ("V100M16", "V100M32")
    assert pods[4].scheduled_time is None
    assert pods[4].gpu_spec == ("T4",)


def test_read_pods_five_column_variant_defaults_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, "multigpu.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,88000,327680,8,1000\n")
    (pod,) = read_openb_pods(path)
    assert pod == OpenbPod("p", 88000, 327680, 8, 1000)
    assert (pod.gpu_spec, pod.qos, pod.creation_time, pod.deletion_time, pod.scheduled_time) == (
        (),
        "",
        None,
        None,
        None,
    )
    assert openb_pods_to_jobs([pod]) == []


def test_pods_to_k8s_requests_and_affinity(tmp_path: Path) -> None:
    whole, half, four, cpu, pending = (openb_pod_to_k8s(p) for p in read_openb_pods(write(tmp_path, "p.csv", PODS)))
    assert dict(whole.requests) == {CPU: 12000, MEMORY: 16384 * MIB, NVIDIA_GPU: 1000}
    assert dict(half.requests) == {CPU: 6000, MEMORY: 12288 * MIB, GPU_MILLI: 460_000}
    assert half.requests.to_dict()[GPU_MILLI] == "460"
    assert dict(four.requests) == {CPU: 32000, MEMORY: 131072 * MIB, NVIDIA_GPU: 4000}
    assert dict(cpu.requests) == {CPU: 4000, MEMORY: 8192 * MIB}
    assert whole.affinity is None and cpu.affinity is None
    assert four.affinity is not None and four.affinity.required is not None
    (term,) = four.affinity.required
    (requirement,) = term.match_expressions
    assert (requirement.key, requirement.operator, requirement.values) == (
        GPU_PRODUCT_LABEL,
        "In",
        ("V100M16", "V100M32"),
    )
    assert four.affinity.required_matches({GPU_PRODUCT_LABEL: "V100M32"})
    assert not four.affinity.required_matches({GPU_PRODUCT_LABEL: "T4"})
    assert pending.affinity is not None and pending.affinity.required_matches({GPU_PRODUCT_LABEL: "T4"})
    assert (half.created, half.annotations, half.name) == (10.0, {QOS_ANNOTATION: "BE"}, "p-half")
    assert half.phase.value == "Pending"


def test_pods_to_jobs_durations_and_waits(tmp_path: Path) -> None:
    jobs = openb_pods_to_jobs(read_openb_pods(write(tmp_path, "p.csv", PODS)))
    by_id = {job.job_id: job for job in jobs}
    assert len(jobs) == 5
    half = by_id["p-half"]
    assert (half.submit_s, half.duration_s, half.wait_s) == (10.0, 55.0, 5.0)
    assert (half.gpus_per_pod, half.gpu_milli, half.pods, half.state, half.qos) == (1, 460, 1, "Running", "BE")
    assert (half.user, half.queue) == ("", "")
    four = by_id["p-four"]
    assert (four.gpus_per_pod, four.gpu_milli, four.total_gpu_milli, four.gpu_spec) == (
        4,
        1000,
        4000,
        ("V100M16", "V100M32"),
    )
    pending = by_id["p-pending"]  # never placed: its lifetime until deletion stands in for a run
    assert (pending.duration_s, pending.wait_s) == (50.0, None)
    assert by_id["p-cpu"].gpus_per_pod == 0
    assert read_openb_jobs(write(tmp_path, "p.csv", PODS)) == jobs  # the same without OpenbPods in between


@pytest.mark.parametrize(
    "row",
    [
        " p-padded , 1 , 2 , 1 , 1000 , T4 | A10 , LS , Running , 0 , 5 , 1 ",  # every cell padded
        "p-nan,1,2,1,1000,,LS,Running,0,nan,NaN",  # missing times spelled out
        "p-blank,1,2,1,1000,,LS,Running, ,5,None",
        "p-underscore,1_000,2,1,1000,,LS,Running,1e1,2_0,10",  # what int() and float() accept
    ],
)
def test_unusual_but_valid_cells_read_as_row_by_row(tmp_path: Path, row: str) -> None:
    # A whole column is converted at once only when every cell is plain; one unusual cell sends the file
    # through the row-by-row reader, whose values these are.
    path = write(tmp_path, "pods.csv", PODS + row + "\n")
    plain = read_openb_pods(write(tmp_path, "plain.csv", PODS))
    pods = read_openb_pods(path)
    assert pods[:-1] == plain
    cells = [cell.strip() for cell in row.split(",")]
    missing = {"", "nan", "NaN", "None"}
    times = [None if cell in missing else float(cell) for cell in cells[8:]]
    spec = tuple(model.strip() for model in cells[5].split("|")) if cells[5] else ()
    ints = [int(cell) for cell in cells[1:5]]
    assert pods[-1] == OpenbPod(cells[0], *ints, spec, cells[6], cells[7], *times)  # type: ignore[arg-type]
    assert read_openb_jobs(path) == openb_pods_to_jobs(pods)


def test_pod_arrays_match_the_records(tmp_path: Path) -> None:
    arrays = read_openb_pods_arrays(write(tmp_path, "p.csv", PODS))
    assert len(arrays) == 5
    assert arrays.names == ("p-whole", "p-half", "p-four", "p-cpu", "p-pending")
    assert arrays.cpu_milli.dtype == np.int64
    assert arrays.num_gpu.tolist() == [1, 1, 4, 0, 1]
    assert arrays.gpu_milli.tolist() == [1000, 460, 1000, 0, 320]
    assert arrays.gpu_milli_per_pod.tolist() == [1000, 460, 4000, 0, 320]
    assert arrays.specs == ((), ("V100M16", "V100M32"), ("T4",))
    assert arrays.gpu_spec.tolist() == [0, 0, 1, 0, 2]
    assert arrays.creation.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert math.isnan(arrays.scheduled[4])
    with pytest.raises(ValueError):
        arrays.cpu_milli[0] = 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p,1,1,x,1000,,LS,Running,0,1,0", "num_gpu: 'x' is not an integer"),
        ("p,1,1,1,1200,,LS,Running,0,1,0", "gpu_milli: 1200 is outside 0..1000"),
        ("p,1,1,2,500,,LS,Running,0,1,0", "gpu_milli: 500 must be 1000 when num_gpu is 2"),
        ("p,1,1,0,300,,LS,Running,0,1,0", "gpu_milli: 300 must be 0 when num_gpu is 0"),
        ("p,1,1,1,0,,LS,Running,0,1,0", "gpu_milli: 0 but num_gpu is 1"),
        ("p,1,-4,1,1000,,LS,Running,0,1,0", "memory_mib: -4 is negative"),
        ("p,1,1,1,1000,,LS,Running,0,1", "expected 11 columns, got 10"),
        ("p,1,1,1,1000,,LS,Running,5,1,5", "deletion_time: 1 is before creation_time 5"),
        ("p,1,1,1,1000,,LS,Running,5,9,4", "scheduled_time: 4 is before creation_time 5"),
        ("p,1,1,1,1000,,LS,Running,5,9,12", "scheduled_time: 12 is after deletion_time 9"),
        ("p,1,1,1,1000,,LS,Running,,9,12", "scheduled_time: 12 is after deletion_time 9"),
        ("p,1,1,1,1000,,LS,Running,zero,1,0", "creation_time: 'zero' is not a number"),
        ("p,1,1,1,1000,A||B,LS,Running,0,1,0", "gpu_spec: 'A||B' has an empty model name"),
        ("p,1,1,0,0,T4,LS,Running,0,1,0", "gpu_spec: 'T4' given for a pod without GPUs"),
        ("p0,1,1,1,1000,,LS,Running,0,1,0", "duplicate pod name 'p0'"),
        ("p,1,17592186044416,1,1000,,LS,Running,0,1,0", "memory_mib: 17592186044416 is above the maximum 33,554,432"),
        ("p,10000000000,1,1,1000,,LS,Running,0,1,0", "cpu_milli: 10000000000 is above the maximum 1,000,000,000"),
        ("p,1,1,1099511627776,1000,,LS,Running,0,1,0", "num_gpu: 1099511627776 is above the maximum 256"),
        ("p,1,1,1,1000,,LS,Running,0,1e308,0", r"deletion_time: 1e\+308 is above the maximum"),
        ("p,1,1,1,1000,,LS,Running,1e308,,", r"creation_time: 1e\+308 is above the maximum"),
    ],
)
def test_malformed_pod_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "openb_pod_list_default.csv", POD_HEADER + "p0,1,1,1,1000,,LS,Running,0,1,0\n" + row + "\n")
    for reader in (read_openb_pods, read_openb_pods_arrays, read_openb_jobs):
        with pytest.raises(TraceError, match=message) as info:
            reader(path)
        assert str(info.value).startswith("openb_pod_list_default.csv:3: ")


def test_bytes_that_are_not_utf8_are_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "openb_pod_list_default.csv"
    path.write_bytes(
        (POD_HEADER + "p0,1,1,1,1000,,LS,Running,0,1,0\n").encode() + b"p1,\xff\xfe,1,1,1000,,LS,Running,0,1,0\n"
    )
    for reader in (read_openb_pods, read_openb_pods_arrays, read_openb_jobs):
        with pytest.raises(TraceError, match=r"^openb_pod_list_default.csv:3: byte 0xff at column 4 is not UTF-8"):
            reader(path)


@pytest.mark.parametrize("rows", [3, 3000])
def test_a_stray_quote_is_reported_where_it_starts(tmp_path: Path, rows: int) -> None:
    """A quote never closed swallows the rest of the file: a short file's last record has too few columns,
    a long one's overflows the csv module's field limit. Either way the error points at the quote's line."""
    body = "".join(f"p{i},1,1,1,1000,,LS,Running,0,1,0\n" for i in range(1, rows))
    path = write(tmp_path, "openb_pod_list_default.csv", POD_HEADER + "p0,1,1,1,1000,,LS,Running,0,1,0\n" + '"' + body)
    for reader in (read_openb_pods, read_openb_pods_arrays, read_openb_jobs):
        with pytest.raises(TraceError, match=r"^openb_pod_list_default.csv:3: .*unterminated quote starting at line 3"):
            reader(path)


pod_rows = st.tuples(
    st.integers(0, 128_000),
    st.integers(0, 1_048_576),
    st.sampled_from([(0, 0), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]) | st.integers(1, 999).map(lambda m: (1, m)),
    st.lists(st.sampled_from(["T4", "P100", "V100M16", "G2"]), max_size=3, unique=True),
    st.integers(0, 10**7),
    st.integers(0, 10**6),
)


@given(st.lists(pod_rows, max_size=20))
@settings(max_examples=40, deadline=None)
def test_pod_lists_round_trip(rows: list[tuple[int, int, tuple[int, int], list[str], int, int]]) -> None:
    lines = [POD_HEADER]
    expected = []
    for i, (cpu, mem, (num_gpu, milli), spec, created, lifetime) in enumerate(rows):
        spec = spec if num_gpu else []
        lines.append(
            f"p{i},{cpu},{mem},{num_gpu},{milli},{'|'.join(spec)},LS,Running,{created},{created + lifetime},\n"
        )
        expected.append(
            OpenbPod(f"p{i}", cpu, mem, num_gpu, milli, tuple(spec), "LS", "Running", created, created + lifetime, None)
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pods.csv"
        path.write_text("".join(lines))
        assert read_openb_pods(path) == expected
        arrays = read_openb_pods_arrays(path)
    assert arrays.gpu_milli_per_pod.tolist() == [p.num_gpu * p.gpu_milli for p in expected]
    assert [arrays.specs[i] for i in arrays.gpu_spec.tolist()] == [p.gpu_spec for p in expected]


# -- the real files --------------------------------------------------------------------------------


@needs_data
def test_real_node_lists() -> None:
    gpu_nodes = read_openb_nodes(DATA / "openb_node_list_gpu_node.csv")
    assert len(gpu_nodes) == 1213
    assert sum(node.gpu for node in gpu_nodes) == 6212
    assert {node.model for node in gpu_nodes} == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
    k8s = openb_nodes_to_k8s(gpu_nodes)
    assert sum(node.allocatable[NVIDIA_GPU] for node in k8s) == 6212 * 1000
    assert sum(len(node.gpu_memory_mib) for node in k8s) == 6212
    all_nodes = read_openb_nodes(DATA / "openb_node_list_all_node.csv")
    assert len(all_nodes) == 1523
    assert sum(1 for node in all_nodes if node.gpu == 0) == 310
    assert len(openb_nodes_to_k8s(all_nodes)) == 1523


@needs_data
def test_real_default_pod_list() -> None:
    pods = read_openb_pods(DATA / "openb_pod_list_default.csv")
    assert len(pods) == 8152
    counts: dict[int, int] = {}
    for pod in pods:
        counts[pod.num_gpu] = counts.get(pod.num_gpu, 0) + 1
    assert counts == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    assert sum(1 for pod in pods if 0 < pod.gpu_milli < 1000) == 3078
    assert sum(1 for pod in pods if pod.scheduled_time is None) == 897
    creation = [pod.creation_time for pod in pods]
    assert creation == sorted(creation)  # type: ignore[type-var]
    jobs = openb_pods_to_jobs(pods)
    assert len(jobs) == 8152
    assert all(job.duration_s >= 0 for job in jobs)
    arrays = read_openb_pods_arrays(DATA / "openb_pod_list_default.csv")
    assert len(arrays) == 8152
    assert arrays.specs == ((),)
    assert int(arrays.gpu_milli_per_pod.sum()) == sum(p.num_gpu * p.gpu_milli for p in pods)
    requests = [openb_pod_to_k8s(pod).requests for pod in pods]
    # Whole cards (canonical x1000) plus slices (thousandths, canonical x1000) add up to the trace's GPU.
    asked = sum(r[NVIDIA_GPU] + r[GPU_MILLI] // 1000 for r in requests)
    assert asked == int(arrays.gpu_milli_per_pod.sum())


@needs_data
def test_real_variant_pod_lists() -> None:
    assert len(read_openb_pods(DATA / "openb_pod_list_gpushare20.csv")) == 8152
    multigpu = read_openb_pods(DATA / "openb_pod_list_multigpu20.csv")
    assert len(multigpu) == 8324
    assert all(pod.creation_time is None and pod.gpu_spec == () for pod in multigpu)
    assert sum(1 for pod in multigpu if pod.num_gpu == 8) == 141


def _mostly(valid: list[str], odd: list[str]) -> st.SearchStrategy[str]:
    """A cell that is plain about nine draws in ten, else unusual (padded, `1_000`, "nan") or wrong."""
    return st.sampled_from(valid * (9 * len(odd) // len(valid) + 1) + odd)


_POD_CELLS = st.tuples(
    _mostly([""], [" p9 ", "p0", " "]),  # "": the row's own unique name
    _mostly(["0", "1", "7"], ["-1", " 2 ", "1_000", "1.5", "x", ""]),
    _mostly(["0", "1", "7"], ["-1", " 2 ", "1_000", "1.5", "x", ""]),
    st.sampled_from(
        [("0", "0", "")] * 3
        + [("1", "1000", "T4"), ("1", "500", "")] * 3
        + [("8", "1000", "T4|A10")] * 3
        + [(" 1 ", " 500 ", " T4 | T4 "), ("-1", "0", ""), ("1", "1500", ""), ("0", "0", "T4"), ("1", "500", "T4||A10")]
    ),
    _mostly(["LS", ""], [" BE "]),
    _mostly(["Running", ""], [" Failed "]),
    st.sampled_from(
        [("", "", "")] * 3
        + [("0", "5", "0"), ("5", "12", "5")] * 3
        + [
            (" 3 ", "1e1", "None"),
            ("nan", "2_0", "NaN"),
            ("5", "0", ""),
            ("0", "5", "9"),
            ("inf", "5", ""),
            ("x", "", ""),
            ("-1", "", ""),
        ]
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_POD_CELLS, min_size=1, max_size=4))
def test_the_column_reader_accepts_only_what_the_row_reader_reads_the_same(rows: list[tuple[Any, ...]]) -> None:
    # The pod list is converted a column at a time unless a cell is unusual or wrong (openb's
    # _clean_pod_columns); whatever it accepts, the checked row-by-row reader must read to the same values.
    from tidegate.traces.openb import _checked_pod_columns, _clean_pod_columns
    from tidegate.traces.records import CsvTable

    lines = [
        ",".join((name or f"p{i}", cpu, memory, *gpu, qos, phase, *times))
        for i, (name, cpu, memory, gpu, qos, phase, times) in enumerate(rows, start=1)
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pods.csv"
        path.write_text(POD_HEADER + "".join(line + "\n" for line in lines))
        table = CsvTable(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))
        fast = _clean_pod_columns(table)
        try:
            checked = _checked_pod_columns(table)
        except TraceError:
            assert fast is None
            return
        assert fast is None or fast == checked
