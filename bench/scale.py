"""A simulation folder scaled by k: `examples/hybrid-idc/` with every absolute figure of its fleet and work
times k, so that a run at k = 25 is the seed's platform (5,000 GPU jobs a day) and its cost per job can be
compared with k = 1's.

Scaled by k: the jobs a day and the users submitting them; the IDC pools' node counts; every queue's
capability, deserved and guarantee (each resource); the cloud pools' counts and their HPAs' min and max
replicas; the burst budget's `perPeriod` and its thresholds' `maxReplicas`; each cloud link's bandwidth.
Left as they are, because they are figures of one job, node, pod or dataset: GPU counts, durations and
their tide, node shapes, prices, provisioning delays, the HPA's per-node target (300 s of waiting a node:
the metric grows with the backlog, so the node count it asks for grows with k already) and its
percentage policies, the per-pod link cap, checkpoint sizes, the datasets and the IDC cache that holds
them (the same datasets read by more jobs), the scheduling period and the month. The Sweep grid is left
out. Relative paths (the Helios tide, the Spot Advisor data) are rewritten for the new folder.

python -m bench.scale 25 examples/seed-scale     # what examples/seed-scale/ holds (tests check it is current)
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "examples" / "hybrid-idc"
SEED_SCALE = ROOT / "examples" / "seed-scale"
#: The seed's scale: 5,000 jobs a day against the example's 200.
SEED_K = 25
SKIPPED_KINDS = ("Sweep",)

Doc = dict[str, Any]


def scale_quantity(value: object, k: int) -> object:
    """A Kubernetes quantity (or number) times k, in the same unit: "768" -> "19200", "32768Gi" -> "819200Gi"."""
    if isinstance(value, bool) or k == 1:
        return value
    if isinstance(value, int | float):
        return value * k
    text = str(value)
    digits = len(text) - len(text.lstrip("0123456789.+-"))
    number, suffix = text[:digits], text[digits:]
    scaled = Decimal(number) * k
    out = format(scaled.normalize(), "f") if scaled != scaled.to_integral() else str(int(scaled))
    return out + suffix


def _scale_list(resources: Mapping[str, object] | None, k: int) -> dict[str, object] | None:
    if resources is None:
        return None
    return {name: scale_quantity(v, k) for name, v in resources.items()}


def _relocate(path: str, source_dir: Path, target_dir: Path) -> str:
    """A path relative to a manifest in `source_dir`, made relative to one in `target_dir` (absolute stays)."""
    if not path or os.path.isabs(path):
        return path
    return os.path.relpath(os.path.normpath(source_dir / path), target_dir)


def _queue(doc: Doc, k: int, _: Callable[[str], str]) -> None:
    spec = doc.setdefault("spec", {})
    for key in ("capability", "deserved"):
        if key in spec:
            spec[key] = _scale_list(spec[key], k)
    guarantee = spec.get("guarantee")
    if isinstance(guarantee, dict) and "resource" in guarantee:
        guarantee["resource"] = _scale_list(guarantee["resource"], k)


def _cluster(doc: Doc, k: int, _: Callable[[str], str]) -> None:
    link = doc.get("spec", {}).get("link")
    if isinstance(link, dict) and "bandwidthGbps" in link:
        link["bandwidthGbps"] = scale_quantity(link["bandwidthGbps"], k)


def _node_pool(doc: Doc, k: int, relocate: Callable[[str], str]) -> None:
    spec = doc["spec"]
    for key in ("count", "minCount", "maxCount"):
        if key in spec:
            spec[key] = spec[key] * k
    interruption = spec.get("interruption")
    if isinstance(interruption, dict) and interruption.get("advisorData"):
        interruption["advisorData"] = relocate(interruption["advisorData"])


def _hpa(doc: Doc, k: int, _: Callable[[str], str]) -> None:
    spec = doc["spec"]
    for key in ("minReplicas", "maxReplicas"):
        if key in spec:
            spec[key] = spec[key] * k


def _workload(doc: Doc, k: int, relocate: Callable[[str], str]) -> None:
    spec = doc["spec"]
    if spec.get("path"):
        spec["path"] = relocate(spec["path"])
    synthetic = spec.get("synthetic")
    if isinstance(synthetic, dict):
        if "jobsPerDay" in synthetic:
            synthetic["jobsPerDay"] = scale_quantity(synthetic["jobsPerDay"], k)
        synthetic["tideFrom"] = [relocate(p) for p in synthetic.get("tideFrom", [])]
    for queue in spec.get("queues", []):
        if "users" in queue:
            queue["users"] = queue["users"] * k


def _scenario(doc: Doc, k: int, _: Callable[[str], str]) -> None:
    spec = doc.get("spec", {})
    budget = spec.get("budget")
    if not isinstance(budget, dict):
        return
    if "perPeriod" in budget:
        budget["perPeriod"] = scale_quantity(budget["perPeriod"], k)
    for threshold in budget.get("thresholds", []):
        if "maxReplicas" in threshold:
            threshold["maxReplicas"] = threshold["maxReplicas"] * k
    if isinstance(spec.get("description"), str):  # its figures said in words: "a daily cloud budget of 1,500"
        spec["description"] = _scaled_words(spec["description"], k)


def _scaled_words(text: str, k: int) -> str:
    """The budget and node figures a scenario's description gives in words, times k."""

    def times_k(match: re.Match[str]) -> str:
        return f"{match.group(1)}{int(match.group(2).replace(',', '')) * k:,}{match.group(3)}"

    text = re.sub(r"(budget of )([\d,]+)()", times_k, text)
    return re.sub(r"(at most )([\d,]+)( nodes)", times_k, text)


SCALERS: dict[str, Callable[[Doc, int, Callable[[str], str]], None]] = {
    "Queue": _queue,
    "Cluster": _cluster,
    "NodePool": _node_pool,
    "HorizontalPodAutoscaler": _hpa,
    "Workload": _workload,
    "Scenario": _scenario,
}


def scaled_documents(text: str, k: int, source_dir: Path, target_dir: Path) -> list[Doc]:
    """The YAML documents of one manifest file, scaled by k (Sweep documents left out)."""
    out = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") in SKIPPED_KINDS:
            continue
        scaler = SCALERS.get(str(doc.get("kind")))
        if scaler is not None:
            scaler(doc, k, lambda p: _relocate(p, source_dir, target_dir))
        out.append(doc)
    return out


def header(k: int, source: Path, target: Path) -> str:
    origin = os.path.relpath(source, ROOT) if source.is_relative_to(ROOT) else str(source)
    where = os.path.relpath(target, ROOT) if target.is_relative_to(ROOT) else str(target)
    return (
        f"# Generated by `python -m bench.scale {k} {where}` from {origin} (k = {k}): every absolute\n"
        "# figure of the fleet and the work times k (see bench/scale.py and README.md). Do not edit by hand.\n"
    )


def render(k: int, source: Path = SOURCE, target: Path = SEED_SCALE) -> dict[str, str]:
    """The scaled folder's files (name -> text), without writing them."""
    files: dict[str, str] = {}
    for path in sorted(source.glob("*.yaml")):
        docs = scaled_documents(path.read_text(), k, source.resolve(), target.resolve())
        if not docs:
            continue
        body = yaml.safe_dump_all(docs, sort_keys=False, width=120, default_flow_style=None)
        files[path.name] = header(k, source.resolve(), target.resolve()) + body
    return files


def write_folder(k: int, target: Path, source: Path = SOURCE) -> Path:
    """Write the folder scaled by k into `target` (its *.yaml files replaced); returns `target`."""
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.yaml"):
        old.unlink()
    for name, text in render(k, source, target).items():
        (target / name).write_text(text)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("k", type=int, help="the factor (1 copies the folder)")
    parser.add_argument("target", type=Path, help="the folder to write")
    parser.add_argument("--source", type=Path, default=SOURCE)
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error("k must be at least 1")
    write_folder(args.k, args.target, args.source)


if __name__ == "__main__":
    main()
