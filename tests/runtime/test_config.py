"""CompileConfig and ModuleSettings: validation of every field, dict round trips, compile arguments."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from autotune import CompileConfig, ConfigError, ModuleSettings
from autotune.runtime.config import (
    available_modes,
    inductor_option_defaults,
    is_plain_compile,
    mode_options,
    parse_input_key,
    validate_input_key,
    validate_module_path,
)

pytestmark = pytest.mark.parallel

MARKS = (("attention_mask", 1), ("input_ids", 1))


def test_defaults_are_plain_torch_compile() -> None:
    config = CompileConfig()
    assert config.compile_kwargs() == {"backend": "inductor", "fullgraph": False, "dynamic": None}
    assert (config.scope, config.padding_alignment, config.mark_dynamic, config.compile_optimizer) == (
        "whole",
        None,
        (),
        False,
    )


def test_plain_compile_spelled_as_default_options_is_plain_compile() -> None:
    defaults = inductor_option_defaults()
    flags = ["epilogue_fusion", "shape_padding", "coordinate_descent_tuning"]  # what the default space samples
    at_defaults = {name: defaults[name] for name in flags}
    assert is_plain_compile(CompileConfig())
    assert is_plain_compile(CompileConfig(mode=None, options=at_defaults))
    # One option off its default, another mode, or anything beyond the options: not plain compile.
    changed = {**at_defaults, flags[0]: not defaults[flags[0]]}
    assert not is_plain_compile(CompileConfig(mode=None, options=changed))
    assert not is_plain_compile(CompileConfig(mode="max-autotune-no-cudagraphs"))
    assert not is_plain_compile(CompileConfig(mode=None, options=at_defaults, scope="regional"))
    assert not is_plain_compile(CompileConfig(mode=None, options=at_defaults, compile_optimizer=True))
    assert not is_plain_compile(CompileConfig(scope="none"))


def test_is_frozen_and_keyword_only() -> None:
    config = CompileConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.mode = "max-autotune"  # type: ignore[misc]
    with pytest.raises(TypeError):
        CompileConfig("default")  # type: ignore[misc]


def test_every_installed_mode_is_accepted() -> None:
    modes = available_modes()
    assert {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"} <= set(modes)
    for mode in modes:
        assert CompileConfig(mode=mode).mode == mode


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"mode": "fastest"}, "mode: 'fastest'"),
        ({"mode": 3}, "mode: 3"),
        ({"dynamic": "yes"}, "dynamic: 'yes'"),
        ({"dynamic": 1.0}, "dynamic: 1.0"),
        ({"knobs": {"fullgraph": 1}}, "fullgraph: 1 is not allowed; use true or false"),
        ({"knobs": {"fullgraph": None}}, "fullgraph: None is not allowed; use true or false"),
        ({"compile_optimizer": "true"}, "compile_optimizer: 'true'"),
        ({"backend": "not_a_backend"}, "backend: 'not_a_backend'"),
        ({"scope": "layers"}, "scope: 'layers'"),
        ({"padding_alignment": 1}, "padding_alignment: 1"),
        ({"padding_alignment": 0}, "padding_alignment: 0"),
        ({"padding_alignment": -8}, "padding_alignment: -8"),
        ({"padding_alignment": 8.0}, "padding_alignment: 8.0"),
        ({"padding_alignment": True}, "padding_alignment: True"),
        ({"padding_alignment": "pow3"}, "padding_alignment: 'pow3'"),
        ({"mark_dynamic": "input_ids"}, "mark_dynamic: expected (input, axis) pairs"),
        ({"mark_dynamic": (("input_ids",),)}, "not an (input, axis) pair"),
        ({"mark_dynamic": (("input_ids", -1),)}, "mark_dynamic.input_ids: axis -1"),
        ({"mark_dynamic": (("input_ids", "1"),)}, "mark_dynamic.input_ids: axis '1'"),
        ({"mark_dynamic": (("input_ids", True),)}, "axis True"),
        ({"mark_dynamic": ((-1, 1),)}, "tuple position -1"),
        ({"mark_dynamic": ((1.5, 1),)}, "1.5 is not an input name"),
        ({"options": ["shape_padding"]}, "options: expected a mapping"),
        ({"options": {"shape_padding": "yes"}, "mode": None}, "options.shape_padding: 'yes' must be true or false"),
        ({"options": {"shape_padding": 3}, "mode": None}, "options.shape_padding: 3 must be true or false"),
        ({"options": {"shape_padding": [True]}, "mode": None}, "options.shape_padding: [True]"),
        ({"options": {"cpp.cxx": "/bin/sh"}, "mode": None}, "options.cpp.cxx: takes a tuple"),
        ({"module_settings": {"head": ModuleSettings()}}, "only the modular scope"),
        ({"scope": "modular", "module_settings": {"head": {"mode": "default"}}}, "expected ModuleSettings"),
        ({"scope": "modular", "module_settings": ["head"]}, "module_settings: expected a mapping"),
        ({"mark_as": "unbacked"}, "mark_as: 'unbacked' says how marked axes are marked, but none are marked"),
        ({"mark_as": "static", "mark_dynamic": MARKS}, "mark_as: 'static' is not allowed"),
        ({"mark_as": "sources", "mark_dynamic": ((0, 1),)}, "tuple position(s) [0] have none"),
        (
            {"knobs": {"recompile_limit": 0}},
            "recompile_limit: 0 is not allowed; use null (torch's default) or an integer >= 1",
        ),
        ({"knobs": {"recompile_limit": True}}, "recompile_limit: True is not allowed"),
        ({"knobs": {"stance_after_warmup": "force_eager"}}, "stance_after_warmup: 'force_eager' is not allowed"),
        ({"knobs": {"compiled_autograd": "yes"}}, "compiled_autograd: 'yes' is not allowed; use true or false"),
        (
            {"knobs": {"float32_matmul_precision": "highest"}},
            "float32_matmul_precision: 'highest' is not allowed; use null (torch's default), 'high' or 'medium'",
        ),
        ({"knobs": {"optimizer_mode": "max-autotune-no-cudagraphs"}}, "but compile_optimizer is false"),
        ({"knobs": {"optimizer_fullgraph": True}}, "but compile_optimizer is false"),
        (
            {"compile_optimizer": True, "knobs": {"optimizer_mode": "fastest"}},
            "optimizer_mode: 'fastest' is not allowed",
        ),
    ],
)
def test_invalid_field_is_named_with_its_value(fields: dict, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CompileConfig(**fields)
    assert named in str(raised.value)


def test_numeric_option_refuses_bool_and_text() -> None:
    numeric = next(k for k, v in _defaults().items() if isinstance(v, int) and not isinstance(v, bool))
    for value in (True, "many"):
        with pytest.raises(ConfigError) as raised:
            CompileConfig(mode=None, options={numeric: value})
        assert f"options.{numeric}: {value!r} must be a number" in str(raised.value)
    assert CompileConfig(mode=None, options={numeric: 3}).options == {numeric: 3}


def _defaults() -> dict:
    from autotune.runtime.config import inductor_option_defaults

    return dict(inductor_option_defaults())


def test_unknown_inductor_option_is_named_with_suggestions() -> None:
    with pytest.raises(ConfigError) as raised:
        CompileConfig(mode=None, options={"shape_paddin": True})
    message = str(raised.value)
    assert "'shape_paddin' is not an option of torch._inductor.config" in message
    assert "shape_padding" in message  # the suggestion


def test_mode_and_options_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="accepts only one of them") as raised:
        CompileConfig(mode="max-autotune-no-cudagraphs", options={"shape_padding": True})
    assert "mode_options('max-autotune-no-cudagraphs')" in str(raised.value)
    # `default` is a mode too: torch.compile refuses mode='default' with options.
    with pytest.raises(ConfigError, match="accepts only one of them"):
        CompileConfig(mode="default", options={"shape_padding": True})


def test_options_with_mode_none_carry_the_mode() -> None:
    options = {**mode_options("max-autotune-no-cudagraphs"), "shape_padding": True}
    config = CompileConfig(mode=None, options=options)
    kwargs = config.compile_kwargs()
    assert "mode" not in kwargs
    assert kwargs["options"] == {"coordinate_descent_tuning": True, "max_autotune": True, "shape_padding": True}


def test_options_need_the_inductor_backend() -> None:
    with pytest.raises(ConfigError, match="need backend 'inductor', not 'eager'"):
        CompileConfig(mode=None, backend="eager", options={"shape_padding": True})


def test_mark_dynamic_conflicts_with_static_shapes() -> None:
    with pytest.raises(ConfigError, match="conflicts with dynamic=False"):
        CompileConfig(dynamic=False, mark_dynamic=MARKS)
    assert CompileConfig(dynamic=True, mark_dynamic=MARKS).mark_dynamic == MARKS


def test_mark_dynamic_is_deduplicated_and_ordered() -> None:
    config = CompileConfig(mark_dynamic=[["input_ids", 1], ("attention_mask", 1), ("input_ids", 1), (0, 2)])
    assert config.mark_dynamic == ((0, 2), ("attention_mask", 1), ("input_ids", 1))
    assert CompileConfig(mark_dynamic=list(reversed(config.mark_dynamic))) == config


@pytest.mark.parametrize("padding", [None, 2, 8, 32, 64, 24, "pow2", "max"])
def test_padding_choices(padding: object) -> None:
    assert CompileConfig(padding_alignment=padding).padding_alignment == padding


def test_module_settings_validate_their_own_fields() -> None:
    with pytest.raises(ConfigError, match="module_settings.mode: 'fast'"):
        ModuleSettings(mode="fast")
    with pytest.raises(ConfigError, match="module_settings.options: 'nope'"):
        ModuleSettings(mode=None, options={"nope": 1})
    with pytest.raises(ConfigError, match="module_settings: mode='default'"):
        ModuleSettings(options={"shape_padding": True})
    with pytest.raises(ConfigError, match="not a submodule path"):
        CompileConfig(scope="modular", module_settings={"head; import os": ModuleSettings()})


def test_compile_kwargs_per_module() -> None:
    config = CompileConfig(
        scope="modular",
        mode="max-autotune-no-cudagraphs",
        knobs={"fullgraph": True},
        dynamic=False,
        module_settings={"head": ModuleSettings(mode=None, options={"shape_padding": True})},
    )
    base = {"backend": "inductor", "fullgraph": True, "dynamic": False}
    assert config.compile_kwargs() == {**base, "mode": "max-autotune-no-cudagraphs"}
    assert config.compile_kwargs("encoder") == {**base, "mode": "max-autotune-no-cudagraphs"}
    assert config.compile_kwargs("head") == {**base, "options": {"shape_padding": True}}


def test_uses_cuda_graphs() -> None:
    assert CompileConfig(mode="reduce-overhead").uses_cuda_graphs
    assert CompileConfig(mode="max-autotune").uses_cuda_graphs
    assert not CompileConfig(mode="max-autotune-no-cudagraphs").uses_cuda_graphs
    assert CompileConfig(mode=None, options={"triton.cudagraphs": True}).uses_cuda_graphs
    modular = CompileConfig(scope="modular", module_settings={"head": ModuleSettings(mode="reduce-overhead")})
    assert modular.uses_cuda_graphs
    # The compiled optimizer step's own mode counts: its graphs replay too, and the step must be marked.
    optimizer = CompileConfig(compile_optimizer=True, knobs={"optimizer_mode": "reduce-overhead"})
    assert optimizer.uses_cuda_graphs
    no_graphs = CompileConfig(compile_optimizer=True, knobs={"optimizer_mode": "max-autotune-no-cudagraphs"})
    assert not no_graphs.uses_cuda_graphs


NEWER = {
    "mark_dynamic": MARKS,
    "mark_as": "unbacked",
    "knobs": {
        "recompile_limit": 2,
        "float32_matmul_precision": "high",
        "stance_after_warmup": "eager_on_recompile",
        "compiled_autograd": True,
        "optimizer_fullgraph": True,
        "optimizer_mode": "max-autotune-no-cudagraphs",
    },
    "compile_optimizer": True,
}
"""Every setting added after the first release, each away from its default."""

ROUND_TRIPS = [
    CompileConfig(),
    CompileConfig(mode="max-autotune-no-cudagraphs", dynamic=False, knobs={"fullgraph": True}, padding_alignment="max"),
    CompileConfig(mode=None, options={"shape_padding": True, "epilogue_fusion": False}, padding_alignment=16),
    CompileConfig(dynamic=True, mark_dynamic=(*MARKS, (0, 1)), padding_alignment="pow2", scope="regional"),
    CompileConfig(
        scope="modular",
        compile_optimizer=True,
        module_settings={
            "encoder": ModuleSettings(mode="max-autotune-no-cudagraphs"),
            "head": ModuleSettings(mode=None, options={"coordinate_descent_tuning": True}),
        },
    ),
    CompileConfig(mode="lite", **NEWER),
    CompileConfig(mark_dynamic=MARKS, mark_as="sources"),
]


def test_inputs_marked_by_name_become_one_dynamic_source_per_axis() -> None:
    """Each entry matches the input under dynamo's name for it, as a frame's own argument or in **kwargs."""
    import re

    config = CompileConfig(mark_dynamic=(("input_ids", 1), ("input_ids", 2)), mark_as="sources")
    entries = config.dynamic_sources().split(",")
    assert [entry.rsplit(":", 1)[1] for entry in entries] == ["1", "2"]
    pattern = entries[0].rsplit(":", 1)[0]
    for name in ("L['input_ids']", "L['kwargs']['input_ids']"):
        assert re.match(pattern, name), name
    for name in ("L['input_ids_2']", "L['attention_mask']", "L['input_ids'].grad"):
        assert not re.match(pattern, name), name
    assert CompileConfig(mark_dynamic=MARKS).dynamic_sources() == ""


@pytest.mark.parametrize("config", ROUND_TRIPS, ids=lambda c: c.describe())
def test_dict_and_yaml_round_trip(config: CompileConfig) -> None:
    data = config.to_dict()
    assert CompileConfig.from_dict(data) == config
    text = yaml.safe_dump(data)
    assert CompileConfig.from_dict(yaml.safe_load(text)) == config


def test_from_dict_reads_tuple_positions_written_as_text() -> None:
    # JSON has only string keys: a tuple position comes back as "0".
    config = CompileConfig.from_dict({"mark_dynamic": {"0": [1], "input_ids": [1, 2]}})
    assert config.mark_dynamic == ((0, 1), ("input_ids", 1), ("input_ids", 2))


def test_from_dict_module_settings_with_options_only_has_no_mode() -> None:
    config = CompileConfig.from_dict(
        {"scope": "modular", "module_settings": {"head": {"options": {"shape_padding": True}}}}
    )
    assert config.module_settings["head"] == ModuleSettings(mode=None, options={"shape_padding": True})


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (["mode", "default"], "config: expected a mapping"),
        ({"mode": "default", "speed": "max"}, "unknown setting(s) ['speed']"),
        ({"mark_dynamic": [["input_ids", 1]]}, "mark_dynamic: expected a mapping of input to axes"),
        ({"mark_dynamic": {"input_ids": 1}}, "mark_dynamic.input_ids: expected a list of axes"),
        ({"mark_dynamic": {"input ids": [1]}}, "'input ids' is not a valid input name"),
        ({"module_settings": ["head"], "scope": "modular"}, "module_settings: expected a mapping"),
        (
            {"module_settings": {"head": {"mode": "default", "fullgraph": True}}, "scope": "modular"},
            "module_settings.head",
        ),
        ({"options": {"shape_padding": True}}, "accepts only one of them"),
    ],
)
def test_from_dict_errors_name_the_key(data: object, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CompileConfig.from_dict(data)
    assert named in str(raised.value)


def test_describe_mentions_what_differs_from_default() -> None:
    line = ROUND_TRIPS[3].describe()
    assert line.startswith("scope=regional mode=default dynamic=True")
    assert "mark_dynamic=0:1,attention_mask:1,input_ids:1" in line
    assert "pad=pow2" in line
    assert "compiled optimizer" in ROUND_TRIPS[4].describe()


def test_describe_names_the_mode_that_options_spell_out() -> None:
    """A sampled configuration carries its mode as options: the description names the mode again."""
    lite = {**mode_options("lite"), "shape_padding": True}
    line = CompileConfig(mode=None, options=lite).describe()
    assert "mode=lite+options" in line and line.endswith("shape_padding=True")
    assert "fallback_by_default" not in line, "the mode's own options are not listed one by one"
    autotuned = {**mode_options("max-autotune-no-cudagraphs"), "epilogue_fusion": True}
    assert (
        "mode=max-autotune-no-cudagraphs+options dynamic=None epilogue_fusion=True"
        in CompileConfig(mode=None, options=autotuned).describe()
    )
    # An option that overrides one of the mode's is no longer that mode: every option is listed.
    changed = {**mode_options("max-autotune-no-cudagraphs"), "coordinate_descent_tuning": False}
    line = CompileConfig(mode=None, options=changed).describe()
    assert "mode=" not in line and "coordinate_descent_tuning=False max_autotune=True" in line
    modular = CompileConfig(scope="modular", module_settings={"head": ModuleSettings(mode=None, options=lite)})
    assert "head:mode=lite+options,shape_padding=True" in modular.describe()


@pytest.mark.parametrize("path", ["encoder", "encoder.layer", "encoder.layer.0", "0", "0.attn", "_private.x"])
def test_module_paths_accepted(path: str) -> None:
    assert validate_module_path(path, "modules") == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        ".encoder",
        "encoder.",
        "encoder..layer",
        "encoder layer",
        "encoder-layer",
        "x'); import os; ('",
        "a\nb",
        3,
        None,
    ],
)
def test_module_paths_refused(path: object) -> None:
    with pytest.raises(ConfigError, match="modules: .* is not a submodule path"):
        validate_module_path(path, "modules")


@pytest.mark.parametrize("key", ["input_ids", "_x", 0, 3])
def test_input_keys_accepted(key: object) -> None:
    assert validate_input_key(key, "dynamic_dims") == key


@pytest.mark.parametrize("key", ["input-ids", "1abc", "x']; import os; y=['", "", True, 1.0, -1, None, ("a",)])
def test_input_keys_refused(key: object) -> None:
    with pytest.raises(ConfigError, match="dynamic_dims: "):
        validate_input_key(key, "dynamic_dims")


def test_parse_input_key_reads_digits_as_positions() -> None:
    assert parse_input_key("2", "k") == 2
    assert parse_input_key("labels", "k") == "labels"


def test_free_form_string_options_cannot_point_the_compiler_elsewhere() -> None:
    with pytest.raises(ConfigError, match="free-form string"):
        CompileConfig(mode=None, options={"cutlass.cutlass_dir": "/tmp/evil"})
    with pytest.raises(ConfigError, match="free-form string"):
        CompileConfig(mode=None, options={"autoheuristic_log_path": "/etc/passwd"})
    assert (
        CompileConfig(mode=None, options={"max_autotune_gemm_backends": "ATEN"}).options["max_autotune_gemm_backends"]
        == "ATEN"
    )


def test_describe_shows_each_modules_own_settings() -> None:
    config = CompileConfig.from_dict(
        {
            "scope": "modular",
            "module_settings": {"encoder": {"options": {"max_autotune": True}}, "head": {"mode": "max-autotune"}},
        }
    )
    described = config.describe()
    assert "encoder:max_autotune=True" in described and "encoder:mode=None" not in described
    assert "head:mode=max-autotune" in described
    assert "mode=None" not in CompileConfig(mode=None, options={"max_autotune": True}).describe()


def test_the_newer_settings_are_described_and_passed_to_torch_compile() -> None:
    config = CompileConfig(**NEWER)
    text = config.describe()
    for part in (
        "mark_as=unbacked",
        "recompile_limit=2",
        "then eager_on_recompile",
        "compiled autograd",
        "fullgraph optimizer step",
    ):
        assert part in text
    assert (
        "compiled optimizer" in text
        and "optimizer mode=max-autotune-no-cudagraphs" in text
        and "float32 matmul high" in text
    )
    assert config.compile_kwargs()["recompile_limit"] == 2
    assert config.optimizer_kwargs() == {"fullgraph": True, "mode": "max-autotune-no-cudagraphs"}
    assert CompileConfig(compile_optimizer=True).optimizer_kwargs() == {"fullgraph": False}
    assert config.changes_precision and config.falls_back_to_eager
    assert not CompileConfig().changes_precision and not CompileConfig().falls_back_to_eager
    unsafe = CompileConfig(mode=None, options={"cpp.enable_unsafe_math_opt_flag": True})
    assert unsafe.changes_precision
