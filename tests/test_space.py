"""Search spaces: validation of the files, adaptation to workload and device, sampling."""

from __future__ import annotations

import optuna
import pytest

from autotune.errors import SpaceError
from autotune.runtime.summary import WorkloadSummary
from autotune.study.space import bundled_spaces, load_space

TOY_LIKE = WorkloadSummary(
    spec="examples.toy:model",
    task="train",
    modules=("embed", "encoder", "head"),
    blocks=("encoder.blocks",),
    dynamic_dims={"input_ids": (1,), "attention_mask": (1,), "labels": (1,)},
    pad_values={"labels": -100},
)
SHARED = [[("input_ids", 1), ("attention_mask", 1), ("labels", 1)]]
STATIC_INFER = WorkloadSummary(spec="m:f", task="infer", modules=("body",), blocks=())


def _sample(space, count=60):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    configs = []
    for _ in range(count):
        trial = study.ask()
        configs.append(space.suggest(trial))
        study.tell(trial, 0.0)
    return configs


@pytest.fixture(autouse=True)
def quiet_optuna():
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_bundled_spaces_exist_with_descriptions() -> None:
    spaces = bundled_spaces()
    assert {"default", "quick", "inference"} <= set(spaces)
    for path in spaces.values():
        assert load_space(str(path)).description


def test_cpu_never_offers_cuda_graph_modes() -> None:
    space = load_space("default").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert "reduce-overhead" not in space.mode and "max-autotune" not in space.mode
    configs = _sample(space)
    assert not any(c.uses_cuda_graphs for c in configs)
    on_gpu = load_space("default").adapt(TOY_LIKE, "cuda", shared_lengths=SHARED)
    assert "reduce-overhead" in on_gpu.mode


def test_dimensions_that_do_not_apply_are_dropped() -> None:
    space = load_space("inference").adapt(STATIC_INFER, "cpu")
    dims = space.dimensions()
    assert "padding_alignment" not in dims  # no dynamic inputs
    assert not any(k.startswith("mark_dynamic") for k in dims)
    assert "compile_optimizer" not in dims  # inference
    assert space.scope == ("whole",)  # no blocks, fewer than two modules
    assert "options.freezing" in dims  # inference-only option kept for inference
    for config in _sample(space, 30):
        assert config.padding_alignment is None and not config.mark_dynamic and not config.compile_optimizer


def test_train_workloads_do_not_get_inference_only_options() -> None:
    space = load_space("inference").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert "freezing" not in space.options
    assert any("freezing" in d for d in space.dropped)


def test_mark_dynamic_is_asked_once_per_group_and_only_where_it_means_something() -> None:
    space = load_space("default").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert len(space.mark_groups) == 1 and len(space.mark_groups[0]) == 3
    configs = _sample(space, 80)
    marked = [c for c in configs if c.mark_dynamic]
    assert marked, "some sampled configs mark the group dynamic"
    for config in marked:
        assert config.dynamic is None and config.padding_alignment != "max"
        assert {k for k, _ in config.mark_dynamic} == {"input_ids", "attention_mask", "labels"}


def test_fullgraph_is_dropped_when_plain_compile_saw_graph_breaks() -> None:
    space = load_space("default").adapt(TOY_LIKE, "cpu", graph_breaks=2, shared_lengths=SHARED)
    assert space.fullgraph == (False,)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("description: x\nmodes: [default]\n", "modes"),
        ("description: x\nmode: [turbo]\n", "turbo"),
        ("description: x\nscope: [everything]\n", "everything"),
        ("description: x\noptions:\n  shape_pading: [true]\n", "shape_pading"),
        ("description: x\npadding_alignment: [1]\n", "padding_alignment"),
        ("mode: [default]\n", "description"),
        ("description: x\nmode: !!python/object/apply:os.system [echo]\n", "YAML"),
    ],
)
def test_bad_space_files_name_the_file_key_and_value(tmp_path, text, named) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(SpaceError) as error:
        load_space(str(path))
    assert str(path) in str(error.value) and named in str(error.value)


def test_a_sampled_option_equal_to_its_default_stays_in_the_configuration(tmp_path) -> None:
    # max-autotune turns coordinate descent on; a trial that sampled it off must get it off, not the mode's on.
    path = tmp_path / "cdt.yaml"
    path.write_text(
        "description: coordinate descent under max-autotune\n"
        "mode: [max-autotune-no-cudagraphs]\n"
        "options:\n  coordinate_descent_tuning: [false, true]\n"
    )
    space = load_space(str(path)).adapt(STATIC_INFER, "cpu")
    off = space.suggest(optuna.trial.FixedTrial({"options.coordinate_descent_tuning": False}))
    on = space.suggest(optuna.trial.FixedTrial({"options.coordinate_descent_tuning": True}))
    assert off.options["coordinate_descent_tuning"] is False and on.options["coordinate_descent_tuning"] is True
    assert off != on, "two answers, two configurations: not one configuration measured twice"


def test_max_padding_is_offered_only_for_declared_longest_lengths() -> None:
    undeclared = load_space("default").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert "max" not in undeclared.padding_alignment
    assert any("declares no max_lengths" in note for note in undeclared.dropped)
    lengths = {key: {1: 64} for key in ("input_ids", "attention_mask", "labels")}
    declared = WorkloadSummary(
        **{**TOY_LIKE.to_dict(), "max_lengths": lengths, "modules": TOY_LIKE.modules, "blocks": TOY_LIKE.blocks}
    )
    assert "max" in load_space("default").adapt(declared, "cpu", shared_lengths=SHARED).padding_alignment
