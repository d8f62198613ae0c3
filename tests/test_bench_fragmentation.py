"""Smoke test of bench/fragmentation.py on a tiny cluster: the report and the block rewriting, no timing."""

from __future__ import annotations

from pathlib import Path

from bench.fragmentation import NODE_LIST, acceptance, replace_block, report, run

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,2,T4\nn1,32000,131072,4,T4\nn2,64000,262144,8,G2\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "a,2000,4096,1,1000\nb,4000,8192,1,500\nc,1000,2048,1,250\nd,8000,16384,2,1000\ne,1000,1024,0,0\nf,6000,8192,1,810\n"
)


def test_the_report_covers_allocation_acceptance_and_timing(tmp_path: Path) -> None:
    (tmp_path / NODE_LIST).write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    runs = run(["default"], ["best-fit", "gpu-packing", "frag-aware"], [1, 2], 130, data=tmp_path, log=False)
    assert [len(r.results) for r in runs] == [6] and runs[0].gpus == 14
    margins = acceptance(runs, 130)
    assert {(m.baseline, m.point) for m in margins} == {(b, p) for b in ("best-fit", "gpu-packing") for p in (100, 130)}
    assert all(m.seeds == 2 for m in margins)
    text = report(runs, 130, [1, 2], "python -m bench.fragmentation", "0.1, 0.1, 0.1")
    assert "| frag-aware |" in text and "alloc @ 130%" in text
    assert "seeds won" in text and "slowest run" in text and "published ~600 s" in text


def test_blocks_are_inserted_once_then_replaced(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("# Doc\n")
    replace_block(path, "x", "first\n", "## Results")
    replace_block(path, "x", "second\n", "## Results")
    assert path.read_text() == "# Doc\n\n## Results\n\n<!-- x:start -->\nsecond\n<!-- x:end -->\n"
