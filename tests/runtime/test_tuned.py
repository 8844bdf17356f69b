"""best.yaml: round trips, validation of every section, hostile files, environment warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

import autotune
from autotune import CompileConfig, ConfigError, ModuleSettings, TunedConfig
from autotune.runtime import environment
from autotune.runtime.summary import WorkloadSummary
from autotune.runtime.tuned import SCHEMA_VERSION, EnvironmentMismatchWarning, read, write_atomic
from tests.best_yaml import tuned_config

pytestmark = pytest.mark.parallel

SUMMARY = WorkloadSummary(
    spec="tests.targets.workloads:workload",
    task="train",
    model_class="TinyLM",
    modules=("embed", "head"),
    blocks=("layers",),
    dynamic_dims={"input_ids": (1,), "labels": (1,)},
    pad_values={"labels": -100},
    max_lengths={"input_ids": {1: 7}, "labels": {1: 7}},
    samples_per_batch=2,
)
CONFIG = CompileConfig(
    scope="modular",
    dynamic=False,
    padding_alignment=8,
    compile_optimizer=True,
    module_settings={"head": ModuleSettings(mode=None, options={"shape_padding": True})},
)


def make_tuned(**fields: object) -> TunedConfig:
    """A best.yaml's content with every section filled; `fields` replace any of them."""
    values = {
        "workload": SUMMARY,
        "config": CONFIG,
        "created": "2026-01-02T03:04:05Z",
        "metrics": {"throughput": 1234.5, "compile_s": 12.0, "windows": [1200.0, 1250.5]},
        "baselines": {"eager": {"throughput": 800.0}, "torch.compile": {"throughput": 1000.0}},
        "study": {"name": "toy", "trials": 8, "pruned": 2},
        **fields,
    }
    return tuned_config(**values)  # type: ignore[arg-type]


def test_write_safe_load_validate_round_trip(tmp_path: Path) -> None:
    tuned = make_tuned()
    path = tuned.write(tmp_path / "study" / "best.yaml")
    data = yaml.safe_load(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    sections = {
        "schema_version",
        "created",
        "autotune_version",
        "workload",
        "config",
        "metrics",
        "baselines",
        "environment",
        "study",
    }
    assert sections <= set(data)
    assert data["config"]["module_settings"] == {"head": {"mode": None, "options": {"shape_padding": True}}}
    again = read(path)
    assert again == tuned
    assert again.to_dict() == tuned.to_dict()
    assert again.source == tuned.source  # the same file is generated from what was read back


def test_created_stays_text_through_yaml(tmp_path: Path) -> None:
    # An unquoted timestamp would come back as a datetime.
    path = make_tuned().write(tmp_path / "best.yaml")
    assert "created: '2026-01-02T03:04:05Z'" in path.read_text()


def test_load_applies_the_generated_source(tmp_path: Path) -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(3, 3)
            self.head = nn.Linear(3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(x))

    summary = WorkloadSummary(spec="m:net", task="infer", modules=("embed", "head"), dynamic_dims={0: (0,)})
    config = CompileConfig(scope="modular", backend="eager", padding_alignment=4)
    path = make_tuned(workload=summary, config=config).write(tmp_path / "best.yaml")
    tuned = autotune.load(path)
    net = Net()
    keys = list(net.state_dict())
    expected = net(torch.ones(3, 3))
    model, optimizer = tuned.apply(net)
    assert model is net and optimizer is None
    assert list(net.state_dict()) == keys
    # torch's own modules get their forward compiled: Module.compile() would compile nothing for them.
    assert "forward" in vars(net.embed) and "forward" in vars(net.head)
    assert net._compiled_call_impl is None and "forward" not in vars(net)
    batch = tuned.prepare_batch(torch.ones(3, 3))
    assert batch.shape == (4, 3)
    torch.testing.assert_close(model(batch)[:3], expected)
    assert tuned.module is tuned.module  # executed once


def test_load_warns_when_tuned_elsewhere(tmp_path: Path) -> None:
    here = environment.fingerprint("cpu")
    path = make_tuned(environment={**here, "torch": "1.0.0", "device_name": "Some Other CPU"}).write(
        tmp_path / "best.yaml"
    )
    with pytest.warns(EnvironmentMismatchWarning) as caught:
        autotune.load(path)
    message = str(caught[0].message)
    assert f"torch: 1.0.0 -> {torch.__version__}" in message
    assert "device_name: Some Other CPU ->" in message
    assert "autotune retune" in message


def test_load_is_quiet_on_the_same_machine(tmp_path: Path) -> None:
    path = make_tuned().write(tmp_path / "best.yaml")
    # A different python or autotune version alone is not worth a warning.
    quiet = make_tuned(environment={**environment.fingerprint("cpu"), "python": "3.0.0", "autotune": "0.0.1"})
    quiet_path = quiet.write(tmp_path / "quiet.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autotune.load(path)
        autotune.load(quiet_path)
        autotune.load(make_tuned(environment={}).write(tmp_path / "none.yaml"))


HOSTILE = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "schema_version: 1\ncreated: !!python/object/apply:os.system ['touch {marker}']\nworkload: {{}}\nconfig: {{}}\n",
    "schema_version: 1\ncreated: x\nworkload: {{spec: 'm:w', task: train}}\nconfig: {{}}\n"
    "metrics: {{x: !!python/object/apply:subprocess.check_output [['touch', '{marker}']]}}\n",
    "schema_version: 1\ncreated: x\nworkload: {{spec: 'm:w', task: train}}\nconfig: !!python/object/new:os.system ['touch {marker}']\n",
    "schema_version: 1\ncreated: x\nworkload: {{spec: 'm:w', task: train}}\nconfig: {{mode: !!python/name:os.system }}\n",
    "schema_version: 1\ncreated: x\nworkload: {{spec: !!python/module:os , task: train}}\nconfig: {{}}\n",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_python_tags_are_refused(text: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "best.yaml"
    path.write_text(text.format(marker=marker))
    with pytest.raises(ConfigError, match="not a valid plain YAML file"):
        autotune.load(path)
    assert not marker.exists()


def test_injection_through_yaml_values_is_refused(tmp_path: Path) -> None:
    data = make_tuned().to_dict()
    attempts = [
        ("workload", "modules", ["embed'); __import__('os').system('id'); ('"]),
        ("workload", "blocks", ["layers\nimport os"]),
        ("workload", "dynamic_dims", {"input_ids'] or __import__('os') or ['": [1]}),
        ("config", "mark_dynamic", {"input_ids, 1)); import os; ((": [1]}),
        ("config", "module_settings", {"head')\nimport os\n('": {"mode": "default"}}),
        ("config", "options", {"__import__('os').system('id')": True}),
        ("config", "mode", "default'); import os; ('"),
    ]
    for section, key, value in attempts:
        hostile = {**data, section: {**data[section], key: value}}
        path = tmp_path / "best.yaml"
        path.write_text(yaml.safe_dump(hostile))
        with pytest.raises(ConfigError, match=f"{path}: "):
            read(path)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported; expected 1"),
        ({"schema_version": None}, "schema_version None is not supported"),
        ({"extra": 1}, "unknown key(s) ['extra']"),
        ({"workload": None}, "workload: expected a mapping"),
        ({"config": {"mode": "fastest"}}, "mode: 'fastest' is not a torch.compile mode"),
        ({"config": {"speed": 1}}, "unknown setting(s) ['speed']"),
        ({"created": 5}, "created/autotune_version: expected strings"),
        ({"metrics": [1, 2]}, "metrics: expected a mapping"),
        ({"metrics": {"throughput": float("nan")}}, "metrics.throughput: nan is not a finite number"),
        ({"study": {"started": __import__("datetime").date(2026, 1, 1)}}, "study.started: date values are not allowed"),
        ({"baselines": {"eager": {1.5: 2}}}, "baselines.eager: key 1.5 must be a string"),
    ],
)
def test_invalid_sections_name_the_key(change: dict, named: str, tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump({**make_tuned().to_dict(), **change}))
    with pytest.raises(ConfigError) as raised:
        read(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert named in str(raised.value)


@pytest.mark.parametrize("missing", ["workload", "config", "created"])
def test_required_sections(missing: str, tmp_path: Path) -> None:
    data = make_tuned().to_dict()
    del data[missing]
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=f"the required key '{missing}' is missing"):
        read(path)


def test_optional_sections_may_be_absent_or_empty(tmp_path: Path) -> None:
    data = make_tuned().to_dict()
    for name in ("metrics", "baselines", "environment", "study", "autotune_version"):
        del data[name]
    data["study"] = None
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(data))
    tuned = read(path)
    assert tuned.metrics == {} and tuned.study == {} and tuned.autotune_version == "0+unknown"


def test_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text(make_tuned().to_yaml().replace("study:\n", "study:\n  loop: &loop [*loop]\n"))
    with pytest.raises(ConfigError, match="study.loop.*refers to itself"):
        read(path)


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # Nine levels of nine aliases: 387 million values if expanded.
    lines = ["  l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    for section in ("metrics", "config", "workload"):
        path = tmp_path / f"{section}.yaml"
        path.write_text(
            make_tuned().to_yaml().replace(f"\n{section}:\n", f"\n{section}:\n" + "\n".join(lines) + "\n", 1)
        )
        with pytest.raises(ConfigError, match="more than 100000 values once its aliases are expanded"):
            read(path)


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text(make_tuned().to_yaml().replace("study:\n", "study:\n  deep: " + "[" * 5000 + "]" * 5000 + "\n"))
    with pytest.raises(ConfigError, match="refused as .*nested more than 64 levels deep"):
        read(path)


@pytest.mark.parametrize("content", [b"schema_version: [1\n", b"\xff\xfe\x00", b"- just\n- a list\n", b""])
def test_unreadable_files(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=str(path)):
        read(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        autotune.load(tmp_path / "nope.yaml")


def test_write_atomic_replaces_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "best.yaml"
    write_atomic(target, "first\n")
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["best.yaml"]
