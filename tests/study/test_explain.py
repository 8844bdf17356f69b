"""Narrowing a failed trial to the settings that cause it: delta debugging in fresh worker processes."""

from __future__ import annotations

import pytest

from autotune import CompileConfig
from autotune.measure import Harness
from autotune.study.explain import ProbeOutcome, config_with, narrow, settings_of, short_probe
from autotune.workload import resolve

pytestmark = pytest.mark.parallel

SKIPS = "tests.trial_targets.dynamo_only:skips_its_update_when_compiled"
TWO = "tests.trial_targets.dynamo_only:wrong_under_two_settings"


def harness_for(spec: str) -> Harness:
    workload = resolve(spec)
    return Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()), timeout=120)


def test_a_setting_that_applies_only_with_another_goes_with_it() -> None:
    config = CompileConfig(compile_optimizer=True, dynamic=False, knobs={"optimizer_mode": "max-autotune"})
    names = [s.name for s in settings_of(config)]
    assert names == ["dynamic", "compile_optimizer", "optimizer_mode"]
    assert config_with(config, ["optimizer_mode", "dynamic"]) == CompileConfig(dynamic=False)
    assert config_with(config, names) == config
    assert config_with(config, []) == CompileConfig()


def test_options_beyond_a_mode_are_settings_of_their_own() -> None:
    from autotune.runtime.config import mode_options

    config = CompileConfig(mode=None, options={**mode_options("max-autotune-no-cudagraphs"), "shape_padding": True})
    assert [s.name for s in settings_of(config)] == ["mode", "options.shape_padding"]
    assert config_with(config, ["options.shape_padding"]) == CompileConfig(mode=None, options={"shape_padding": True})
    assert config_with(config, ["mode"]) == CompileConfig(mode="max-autotune-no-cudagraphs")


def test_ddmin_finds_the_pair_among_many_without_a_process() -> None:
    config = CompileConfig(
        compile_optimizer=True,
        dynamic=False,
        knobs={"fullgraph": True, "float32_matmul_precision": "high", "activation_memory_budget": 0.5},
    )
    runs: list[CompileConfig] = []

    def probe(candidate: CompileConfig, seconds: float) -> ProbeOutcome:
        runs.append(candidate)
        both = {"fullgraph", "activation_memory_budget"} <= set(candidate.knobs)
        return ProbeOutcome(both, "accuracy" if both else "", seconds=0.1)

    found = narrow(config, probe, budget=60)
    assert [s.name for s in found.culprit] == ["activation_memory_budget", "fullgraph"]
    assert found.complete and found.against == "plain compile"
    assert len({c.to_dict().__repr__() for c in runs}) == len(runs), "a configuration was probed twice"


def test_a_compiled_optimizer_step_that_skips_its_update_is_narrowed_to_it() -> None:
    config = CompileConfig(
        compile_optimizer=True, dynamic=False, knobs={"optimizer_mode": "max-autotune-no-cudagraphs", "fullgraph": True}
    )
    found = narrow(config, short_probe(harness_for(SKIPS), "accuracy"), budget=240)
    assert [s.name for s in found.culprit] == ["compile_optimizer"]
    assert found.config == CompileConfig(compile_optimizer=True)
    assert found.complete and found.probes >= 2
    assert "update of" in found.messages[-1]


def test_a_failure_that_needs_two_settings_names_both_and_only_them() -> None:
    config = CompileConfig(
        compile_optimizer=True,
        dynamic=False,
        knobs={"float32_matmul_precision": "high", "activation_memory_budget": 0.5},
    )
    found = narrow(config, short_probe(harness_for(TWO), "accuracy"), budget=240)
    assert sorted(s.name for s in found.culprit) == ["activation_memory_budget", "float32_matmul_precision"]
    assert found.complete
    assert found.config == CompileConfig(knobs={"float32_matmul_precision": "high", "activation_memory_budget": 0.5})
