"""A scheduler configuration's plugin arguments are checked before anything runs, and each bad one is named
by file, document, object and field, through every entry point that reads a configuration."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sim_builders import write_sim
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import load_manifests, load_text
from tidegate.scheduler.admission import admission_errors
from tidegate.sim.loader import load_simulation

ROOT = Path(__file__).resolve().parents[1]
CONF = """apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {{name: tuned}}
actions: "enqueue, allocate"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
- plugins:
  - {{name: predicates}}
  - {{name: nodeorder, arguments: {{leastrequested.weight: 2}}}}
  - {{name: {plugin}, arguments: {{{arguments}}}}}
"""


@pytest.mark.parametrize(
    ("plugin", "arguments", "field", "message"),
    [
        ("binpack", "binpack.weight: heavy", "binpack.weight", "'heavy' is not a number"),
        (
            "binpack",
            "binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: lots",
            "binpack.resources.nvidia.com/gpu",
            "'lots' is not a number",
        ),
        ("nodeorder", "tainttoleration.weight: [3]", "tainttoleration.weight", "[3] is not a number"),
        ("gpushare", "gpushare.policy: tightest", "gpushare.policy", "'tightest': use one of first-fit, best-fit"),
        ("gpushare", "gpushare.cardPolicy: worst-fit", "gpushare.cardPolicy", "'worst-fit': use one of first-fit"),
        ("gpushare", "gpushare.mixRefresh: -1", "gpushare.mixRefresh", "-1: must be >= 0"),
        ("gpushare", "gpushare.seed: 1.5", "gpushare.seed", "1.5 is not an integer"),
    ],
)
def test_a_bad_plugin_argument_is_named_by_its_field(plugin: str, arguments: str, field: str, message: str) -> None:
    ms = load_text(CONF.format(plugin=plugin, arguments=arguments), "scheduler.yaml")
    (error,) = admission_errors(ms)
    assert (error.source.file, error.kind, error.name) == ("scheduler.yaml", "SchedulerConfiguration", "tuned")
    assert error.field == f"tiers[1].plugins[2].arguments.{field}"
    assert error.message.startswith(message)


def test_good_arguments_pass_and_unknown_plugins_are_validation_s_to_name() -> None:
    fine = CONF.format(plugin="gpushare", arguments="gpushare.policy: frag-aware, gpushare.seed: '7'")
    assert admission_errors(load_text(fine, "scheduler.yaml")) == []
    (unknown,) = admission_errors(load_text(CONF.format(plugin="tdm", arguments="x: 1"), "scheduler.yaml"))
    assert unknown.field == "tiers[1].plugins[2].name" and "unknown plugin 'tdm'" in unknown.message


def _folder_with_bad_binpack(tmp_path: Path, source: Path) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    conf = folder / "scheduler.yaml"
    text = conf.read_text()
    assert "binpack.weight: 10" in text
    conf.write_text(text.replace("binpack.weight: 10", "binpack.weight: heavy"))
    return folder


EXPECTED = "scheduler.yaml: document 0: SchedulerConfiguration/seed field tiers[1].plugins[4].arguments.binpack.weight"


def test_validate_and_schedule_refuse_a_bad_argument_naming_it(tmp_path: Path) -> None:
    folder = _folder_with_bad_binpack(tmp_path, ROOT / "examples" / "seed")
    runner = CliRunner()
    for command in ("validate", "schedule"):
        result = runner.invoke(app, [command, "-f", str(folder)])
        assert result.exit_code == 1, result.output
        assert EXPECTED in " ".join(result.output.split())
        assert "Traceback" not in result.output


def test_serve_and_kube_refuse_a_bad_argument_before_starting(tmp_path: Path) -> None:
    folder = _folder_with_bad_binpack(tmp_path, ROOT / "examples" / "seed")
    with pytest.raises(ManifestErrors, match=r"arguments\.binpack\.weight: 'heavy' is not a number"):
        ControlPlane.from_manifests(load_manifests([str(folder)]), SimClock())
    result = CliRunner().invoke(
        app, ["kube", "--kubeconfig", str(tmp_path / "none"), "--config", str(folder / "scheduler.yaml")]
    )
    assert result.exit_code == 1 and EXPECTED in " ".join(result.output.split())


def test_simulate_refuses_a_bad_argument_naming_it(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", "a,u,vc1,1,4,1,COMPLETED,0,0,60,60,0\n", ["idc-only"])
    (conf,) = [path for path in folder.iterdir() if "name: binpack" in path.read_text()]
    conf.write_text(conf.read_text().replace("{name: binpack}", "{name: binpack, arguments: {binpack.cpu: lots}}"))
    with pytest.raises(ManifestErrors) as refused:
        load_simulation([str(folder)])
    (error,) = refused.value.errors
    assert error.field.endswith("arguments.binpack.cpu") and error.message == "'lots' is not a number"
