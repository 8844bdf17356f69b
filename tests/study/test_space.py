"""Search spaces: validation of the files, adaptation to workload and device, sampling."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.errors import SearchError, SpaceError
from autotune.runtime.features import FEATURES, has_feature
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import _dropped, bundled_spaces, load_space, params_for
from autotune.study.search._loop import suggest_in
from tests.study.summaries import SHARED, TOY_LIKE

pytestmark = pytest.mark.parallel

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


def test_a_knob_a_space_pins_to_one_value_other_than_its_neutral_one_is_set_in_every_configuration(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(
        "description: pinned knobs\nfullgraph: [true]\ncompile_optimizer: [true]\n"
        "optimizer_mode: [max-autotune-no-cudagraphs]\nstance_after_warmup: [default]\n"
    )
    space = load_space(str(path)).adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert space.knobs == {"fullgraph": (True,), "optimizer_mode": ("max-autotune-no-cudagraphs",)}
    for config in _sample(space, 5):
        assert config.knobs == {"fullgraph": True, "optimizer_mode": "max-autotune-no-cudagraphs"}


def test_a_cuda_graph_mode_of_the_optimizer_step_is_dropped_on_cpu_and_the_others_kept(tmp_path: Path) -> None:
    path = tmp_path / "optimizer.yaml"
    path.write_text(
        "description: the optimizer step's modes\ncompile_optimizer: [false, true]\n"
        "optimizer_mode: [default, reduce-overhead, max-autotune-no-cudagraphs]\n"
    )
    space = load_space(str(path)).adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert space.knobs["optimizer_mode"] == ("default", "max-autotune-no-cudagraphs")
    assert any(line.startswith("optimizer_mode ['reduce-overhead']: ") for line in space.dropped)
    assert not any(c.uses_cuda_graphs for c in _sample(space))
    on_gpu = load_space(str(path)).adapt(TOY_LIKE, "cuda", shared_lengths=SHARED)
    assert on_gpu.knobs["optimizer_mode"] == ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


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
        assert config.dynamic is None and config.padding_alignment != "max" and config.scope != "regional"
        assert {k for k, _ in config.mark_dynamic} == {"input_ids", "attention_mask", "labels"}
    assert any(c.scope == "regional" for c in configs), "regional is sampled, without marks"


def test_fullgraph_is_dropped_when_plain_compile_saw_graph_breaks() -> None:
    space = load_space("default").adapt(TOY_LIKE, "cpu", graph_breaks=2, shared_lengths=SHARED)
    assert "fullgraph" not in space.knobs
    assert "fullgraph [True]: plain torch.compile saw graph breaks, which it turns into failures" in space.dropped
    assert "fullgraph" in load_space("default").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED).knobs


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


# -- the newer dimensions ------------------------------------------------------------------------

NEWER = ("mark_as", "recompile_limit", "stance_after_warmup", "compiled_autograd")


def test_the_thorough_space_keeps_every_newer_dimension_the_installed_torch_has() -> None:
    # torch 2.13 has them all; torch 2.11 lacks per-axis sources and the recompile_limit keyword
    # (tests/runtime/test_features.py checks which this torch has).
    sources, limit = has_feature("mark_as", "sources"), has_feature("recompile_limit")
    space = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED, allow_precision_changes=True)
    dims = space.dimensions()
    assert "lite" in dims["mode"]
    assert dims["mark_as"] == ("dynamic", "unbacked", *(("sources",) if sources else ()))
    assert dims.get("recompile_limit", (None,)) == ((None, 2) if limit else (None,))
    assert dims["stance_after_warmup"] == ("default", "eager_on_recompile") and dims["compiled_autograd"] == (
        False,
        True,
    )
    assert dims["float32_matmul_precision"] == (None, "high", "medium")
    for option in ("cpp_wrapper", "aggressive_fusion", "cpp.dynamic_threads", "cpp.enable_unsafe_math_opt_flag"):
        assert f"options.{option}" in dims


def test_what_the_installed_torch_lacks_is_dropped_with_a_note_and_never_sampled(monkeypatch) -> None:
    """Probe names this torch does not have, as an older release would answer."""
    modes = tuple(m for m in _dropped.available_modes() if m != "lite")
    monkeypatch.setattr(_dropped, "available_modes", lambda: modes)
    defaults = {k: v for k, v in _dropped.inductor_option_defaults().items() if k != "cpp_wrapper"}
    monkeypatch.setattr(_dropped, "inductor_option_defaults", lambda: defaults)
    monkeypatch.setitem(FEATURES, "mark_as=unbacked", ("torch._dynamo.decorators", "mark_no_such_thing"))
    monkeypatch.setitem(FEATURES, "mark_as=sources", ("torch._dynamo.variables.builder", "_no_such_parser"))
    monkeypatch.setitem(FEATURES, "recompile_limit", ("torch", "compile:no_such_keyword"))
    monkeypatch.setitem(FEATURES, "stance_after_warmup", ("torch.compiler", "set_stance:no_such_stance"))
    monkeypatch.setitem(FEATURES, "compiled_autograd", ("torch._dynamo.no_such_module", "_enable"))

    space = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)

    missing = [note for note in space.dropped if "not in the installed torch" in note]
    for what in ("mode ['lite']", "option cpp_wrapper", "mark_as ['unbacked', 'sources']", "recompile_limit [2]"):
        assert any(note.startswith(what) for note in missing), (what, space.dropped)
    assert any(note.startswith("stance_after_warmup ['eager_on_recompile']") for note in missing)
    assert any(note.startswith("compiled_autograd [True]") for note in missing)
    for config in _sample(space, 80):
        assert config.mode != "lite" and "cpp_wrapper" not in config.options
        assert config.mark_as == "dynamic" and "recompile_limit" not in config.knobs
        assert "stance_after_warmup" not in config.knobs and "compiled_autograd" not in config.knobs


def test_each_choice_of_a_dimension_is_probed_on_its_own(monkeypatch) -> None:
    """A torch with mark_unbacked but without per-axis dynamic sources keeps the one and drops the other."""
    monkeypatch.setitem(FEATURES, "mark_as=sources", ("torch._dynamo.variables.builder", "_no_such_parser"))
    space = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert space.mark_as == ("dynamic", "unbacked")
    assert any(note.startswith("mark_as ['sources']: not in the installed torch") for note in space.dropped)


def test_marking_by_name_is_not_offered_for_positional_inputs() -> None:
    positional = WorkloadSummary(spec="m:f", task="infer", modules=("body",), blocks=(), dynamic_dims={0: (1,)})
    space = load_space("thorough").adapt(positional, "cpu")
    assert space.mark_as == ("dynamic", "unbacked")
    assert "mark_as ['sources']: positional inputs have no name to mark them by" in space.dropped
    assert load_space("thorough").adapt(TOY_LIKE, "cpu").mark_as == ("dynamic", "unbacked", "sources")


def test_a_mistyped_option_is_still_an_error_not_a_note(tmp_path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("description: a typo\noptions:\n  cpp_wraper: [false, true]\n")
    with pytest.raises(SpaceError, match="cpp_wraper"):
        load_space(str(path))


def test_settings_that_change_numerics_need_allow_precision_changes() -> None:
    plain = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    notes = [note for note in plain.dropped if "--allow-precision-changes" in note]
    assert any(n.startswith("float32_matmul_precision") for n in notes)
    assert any(n.startswith("option cpp.enable_unsafe_math_opt_flag") for n in notes)
    assert not any(config.changes_precision for config in _sample(plain, 80))
    allowed = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED, allow_precision_changes=True)
    assert any(config.changes_precision for config in _sample(allowed, 80))


def test_a_question_is_asked_only_where_its_answer_changes_something() -> None:
    space = load_space("default").adapt(TOY_LIKE, "cuda", shared_lengths=SHARED)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(120):
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 0.0)
        asked = set(trial.params)
        autotuned = config.mode is None and config.options.get("max_autotune")
        assert ("options.max_autotune_gemm_backends" in asked) == bool(autotuned)
        graphs = config.mode is None and config.options.get("triton.cudagraphs")
        assert ("options.triton.cudagraph_skip_dynamic_graphs" in asked) == bool(graphs)
        assert ("mark_as" in asked) == bool(config.mark_dynamic)
        assert ("optimizer_mode" in asked) == config.compile_optimizer
        seen.update(asked)
    assert {"mark_as", "optimizer_mode", "options.max_autotune_gemm_backends", "stance_after_warmup"} <= seen


def test_inference_and_static_workloads_are_not_asked_training_or_shape_questions() -> None:
    space = load_space("thorough").adapt(STATIC_INFER, "cpu")
    dims = space.dimensions()
    for name in (*NEWER, "optimizer_mode", "compile_optimizer"):
        assert name not in dims
    assert "options.freezing" in dims and "options.cpp.weight_prepack" in dims


def test_params_for_finds_the_newer_dimensions_again() -> None:
    space = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED, allow_precision_changes=True)
    for config in _sample(space, 25):
        params = params_for(space, config)
        assert params is not None and space.suggest(optuna.trial.FixedTrial(params)) == config


def test_resuming_a_study_with_another_space_s_choices_is_refused_by_name(toy_summary) -> None:
    # A study searched with --effort quick, resumed with --effort default: Optuna keeps each question's choices, and
    # its ValueError ("does not support dynamic value space") ended the search with a traceback.
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    quick = load_space("quick").adapt(toy_summary, "cpu")
    for _ in range(3):
        asked = study.ask()
        suggest_in(quick, asked)
        study.tell(asked, 1.0)
    again = study.ask()
    assert suggest_in(quick, again).scope in ("whole", "regional"), "the same space resumes"
    with pytest.raises(SearchError, match=r"mode \['default', 'max-autotune-no-cudagraphs'\] there, \['default', "):
        suggest_in(load_space("default").adapt(toy_summary, "cpu"), study.ask())
