"""Turn a `CompileConfig` and a `WorkloadSummary` into the source of a standalone `apply_compilation.py`.

That source is the one apply path: the worker measures a trial by executing it, the
export writes it, and `autotune.load(...).apply(...)` executes it again. Values enter it
only as literals of validated data, and the result is checked with `ast.parse`.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import threading
import types
from collections.abc import Mapping
from typing import Any

from autotune.errors import ConfigError
from autotune.runtime import allocator, batching, compile_cache, device
from autotune.runtime.config import CompileConfig, validate_input_key, validate_module_path
from autotune.runtime.features import torch_lacks
from autotune.runtime.knobs import APPLIES_ONLY_WITH, ProcessSetting, knob
from autotune.runtime.summary import WorkloadSummary

__all__ = ["generate", "load_module"]

_HELPERS = (batching.padded_length, batching.pad_axis, batching.prepare_inputs)
_CACHE_HELPERS = (compile_cache.load_compile_cache, compile_cache.running_fingerprint, device.device_name)

_COMPILE_IN_PLACE = '''
def compile_in_place(module, kwargs):
    """Compile `module` so that its state_dict keys stay the same.

    nn.Module.compile() compiles nothing for torch's own modules (nn.Sequential, nn.Linear,
    nn.TransformerEncoderLayer...): dynamo does not trace their code as a top-level frame.
    For those, the module's forward is compiled instead.
    """
    if (getattr(type(module).forward, "__module__", None) or "").startswith("torch."):
        module.forward = torch.compile(module.forward, **kwargs)
    else:
        module.compile(**kwargs)
'''
_LINE = 96
_PARSING = threading.Lock()
"""Python 3.11's AST constructor keeps its recursion depth per interpreter, not per thread: two threads parsing at
once (a search's workers generating their trials' code) can fail with "AST constructor recursion depth mismatch"
(CPython gh-106905). One parse at a time."""


def generate(config: CompileConfig, workload: WorkloadSummary, *, created: str, version: str) -> str:
    """The source of `apply_compilation.py` for `config` applied to `workload`."""
    _check_fits(config, workload)
    _check_torch(config)
    imports = "import functools\n\nimport torch" if config.compile_optimizer else "import torch"
    # The modules of the registered knobs' process-wide settings, each a validated dotted name under torch.
    modules = {s.module for s in [*config.process_settings(), *config.after_warmup_settings()]} - {"torch"}
    imports += "".join(f"\nimport {module}" for module in sorted(modules))
    preamble = [_header(config, workload, created, version), imports, _settings(config, workload)]
    functions = [
        _apply_function(config),
        _optimizer_function(config),
        _COMPILE_IN_PLACE,
        _prepare_function(),
        _finish_warmup_function(config),
        _backward_function(config),
        "# Batch preparation, shared with autotune's own measurements.\n\n\n" + inspect.getsource(_HELPERS[0]),
        *(inspect.getsource(helper) for helper in _HELPERS[1:]),
        "# Optional: start compiling warm from the artifacts autotune saved (compile_cache.bin).\n\n\n"
        + inspect.getsource(_CACHE_HELPERS[0]),
        *(inspect.getsource(helper) for helper in _CACHE_HELPERS[1:]),
        "# The host allocator autotune measured with (see autotune.runtime.allocator).\n\n\n"
        + inspect.getsource(allocator.steady_malloc),
    ]
    # PEP 8 layout (two blank lines around functions), so the file reads like hand-written code.
    source = "\n\n".join(part.strip("\n") for part in preamble)
    source += "".join("\n\n\n" + part.strip("\n") for part in functions) + "\n"
    try:
        with _PARSING:
            ast.parse(source)
    except SyntaxError as exc:  # pragma: no cover - a bug in this module, never user input
        raise ConfigError(f"generated code does not parse: {exc}") from exc
    return source


def load_module(source: str, filename: str = "apply_compilation.py") -> types.ModuleType:
    """Execute generated source as a fresh module named `apply_compilation` and return it."""
    with _PARSING:
        ast.parse(source, filename)
        code = compile(source, filename, "exec")
    module = types.ModuleType("apply_compilation")
    module.__file__ = filename
    # Registering the lines lets tracebacks (and dynamo's messages) quote the generated code.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(code, module.__dict__)
    return module


def _check_torch(config: CompileConfig) -> None:
    """Refuse a configuration the installed torch cannot apply (made with a newer one), naming what it lacks."""
    missing = torch_lacks(config)
    if missing:
        import torch

        raise ConfigError(
            f"this configuration needs what torch {torch.__version__} lacks: {'; '.join(missing)}. "
            "Search again with this torch, or run it where its torch has them."
        )


def _check_fits(config: CompileConfig, workload: WorkloadSummary) -> None:
    if config.scope == "modular" and not workload.modules:
        raise ConfigError("scope: 'modular' needs the workload's modules, but it has none.")
    if config.scope == "regional" and not workload.blocks:
        raise ConfigError("scope: 'regional' needs repeated blocks, but none were found; set Workload.blocks.")
    unknown = sorted(set(config.module_settings) - set(workload.modules))
    if unknown:
        raise ConfigError(f"module_settings: {unknown} are not among the workload's modules {list(workload.modules)}.")
    if config.compile_optimizer and not workload.trains:
        raise ConfigError(f"compile_optimizer: true needs a train workload, but the task is {workload.task!r}.")
    for name, value in config.knobs.items():
        needs = knob(name).needs
        if needs in APPLIES_ONLY_WITH and not workload.meets(needs):
            raise ConfigError(
                f"{name}: {value!r} needs {needs}, which this {workload.task} workload lacks "
                f"(dynamic_dims {dict(workload.dynamic_dims)}, own step {workload.own_step})."
            )
    for key, axis in config.mark_dynamic:
        if axis not in workload.dynamic_dims.get(key, ()):
            declared = {k: list(v) for k, v in workload.dynamic_dims.items()}
            raise ConfigError(f"mark_dynamic: ({key!r}, {axis}) is not a declared dynamic axis; declared: {declared}.")
    for key, axes in config.padding_buckets.items():
        undeclared = sorted(a for a in axes if a not in workload.dynamic_dims.get(key, ()))
        if undeclared:
            declared = {k: list(v) for k, v in workload.dynamic_dims.items()}
            raise ConfigError(
                f"padding_buckets: {key!r} axes {undeclared} are not declared dynamic; declared: {declared}."
            )
    if config.padding_alignment is not None and not workload.dynamic_dims:
        raise ConfigError(
            f"padding_alignment: {config.padding_alignment!r} needs declared dynamic_dims, but the workload has none."
        )


def _header(config: CompileConfig, workload: WorkloadSummary, created: str, version: str) -> str:
    lines = [
        f"Compile settings for {_docline(workload.spec)}, tuned by autotune.",
        "",
        f"Generated by autotune {_docline(version)} on {_docline(created)} for a {workload.task} workload "
        f"({_docline(workload.model_class) or 'model'}).",
        f"Configuration: {_docline(config.describe())}.",
        "",
        "This file needs only torch. Import it, or paste it into your script:",
        "",
        "    from apply_compilation import apply_compilation, prepare_batch",
        "",
        "    model, optimizer = apply_compilation(model, optimizer)   # in place; state_dict keys unchanged",
        "    for batch in loader:",
        "        batch = prepare_batch(batch)   # after moving the batch to the device",
        "        ...",
        "",
        "To compile faster, call load_compile_cache() before the first step: it loads the compile",
        "artifacts autotune saved next to this file (compile_cache.bin), if torch and the device are the same.",
        "",
        "apply_compilation also fixes glibc malloc's thresholds for the process, as they were in every",
        "process autotune measured (steady_malloc), unless the environment already set an allocator's.",
    ]
    if config.uses_cuda_graphs:
        lines += [
            "",
            "This configuration replays CUDA graphs: call torch.compiler.cudagraph_mark_step_begin()",
            "at the start of every step, and read (or clone) what a step returns before the next",
            "step runs, since the next replay overwrites it.",
        ]
    for setting in config.after_warmup_settings():
        lines += [
            "",
            "Call finish_warmup() once the usual input shapes have run. From then on:",
            *setting.comment.splitlines(),
        ]
    for wrapper in config.backward_wrappers():
        lines += ["", wrapper.header]
    if config.changes_precision:
        lines += [
            "",
            "This configuration changes numerics (float32 matmul precision or unsafe math): results may",
            "differ from eager by more than rounding. It was accepted within a looser accuracy tolerance.",
        ]
    if config.compile_optimizer:
        lines += [
            "",
            "optimizer.step is compiled. A schedule that sets a Python float (a learning rate, betas) may",
            "compile it again at new values: the search counted what compiled over your schedule's values,",
            "and a tensor learning rate (lr=torch.tensor(...)) is read afresh without any.",
        ]
    return '"""' + "\n".join(lines) + '\n"""\n'


def _docline(text: str) -> str:
    # Values shown in the docstring must not end it early, smuggle in escapes, or hold characters
    # that Python source cannot contain (null bytes) or UTF-8 cannot encode (lone surrogates).
    text = "".join(c if c.isprintable() else " " for c in text)
    return text.replace("\\", "/").replace('"""', "'''")


def _settings(config: CompileConfig, workload: WorkloadSummary) -> str:
    blocks: list[str] = []
    if config.scope == "none":
        blocks.append("# Nothing is compiled: autotune measured eager fastest for this workload on this machine.")
    elif config.scope == "whole":
        blocks.append(
            _assign("# torch.compile arguments for the whole model.", "COMPILE_KWARGS", config.compile_kwargs())
        )
    elif config.scope == "modular":
        kwargs = {validate_module_path(p, "modules"): config.compile_kwargs(p) for p in workload.modules}
        blocks.append(
            _assign("# Submodules compiled separately, each with its torch.compile arguments.", "MODULE_KWARGS", kwargs)
        )
    else:
        paths = tuple(validate_module_path(p, "blocks") for p in workload.blocks)
        blocks.append(_assign("# Lists of repeated blocks: every block is compiled in place.", "BLOCKS", paths))
        blocks.append(_assign("# torch.compile arguments for each block.", "COMPILE_KWARGS", config.compile_kwargs()))
    if config.compile_optimizer:
        blocks.append(
            _assign(
                "# torch.compile arguments for optimizer.step.", "OPTIMIZER_COMPILE_KWARGS", config.optimizer_kwargs()
            )
        )
    for wrapper in config.backward_wrappers():
        blocks.append(_assign(f"# {wrapper.constant_comment}", wrapper.constant, dict(wrapper.value)))
    dims = {validate_input_key(k, "dynamic_dims"): tuple(v) for k, v in workload.dynamic_dims.items()}
    needed_lengths = config.padding_alignment in ("max", "buckets")
    blocks += [
        _assign("# Inputs whose length varies between batches: input -> axes.", "DYNAMIC_DIMS", dims),
        _assign(
            "# Padding value per input (others: 0, or False for bool tensors).", "PAD_VALUES", dict(workload.pad_values)
        ),
        _assign(
            "# None: as given; an int: pad to a multiple; 'pow2'; 'max': the longest length tuned on;\n"
            "# 'buckets': the smallest of PADDING_BUCKETS that fits.",
            "PADDING_ALIGNMENT",
            config.padding_alignment,
        ),
        _assign(
            "# Longest length seen while tuning, per input and axis ('max' padding, and above the last bucket).",
            "MAX_LENGTHS",
            {k: dict(v) for k, v in workload.max_lengths.items()} if needed_lengths else {},
        ),
        _assign(_buckets_comment(config, workload), "PADDING_BUCKETS", _bucket_literal(config)),
        _assign(
            "# (input, axis) pairs passed to torch._dynamo.mark_dynamic.", "MARK_DYNAMIC", tuple(config.mark_dynamic)
        ),
        _assign(
            "# 'dynamic': torch._dynamo.mark_dynamic; 'unbacked': mark_unbacked (no 0/1 specialization);\n"
            "# 'sources': by input name while compiling (DYNAMIC_SOURCES), nothing done per batch.",
            "MARK_AS",
            config.mark_as,
        ),
    ]
    if config.mark_as == "sources":
        blocks.append(
            _assign(
                "# torch.compiler.config.dynamic_sources entries: a regex on dynamo's name for an input\n"
                "# (L['input_ids'], or L['kwargs']['input_ids'] under **kwargs), then ':' and the axis.",
                "DYNAMIC_SOURCES",
                config.dynamic_sources(),
            )
        )
    return "\n\n".join(blocks)


def _bucket_literal(config: CompileConfig) -> dict[Any, dict[int, tuple[int, ...]]]:
    return {validate_input_key(k, "padding_buckets"): dict(axes) for k, axes in config.padding_buckets.items()}


def _buckets_comment(config: CompileConfig, workload: WorkloadSummary) -> str:
    """What the buckets are, and what happens to a length above the last one: padded to a maximum, or a new shape."""
    if config.padding_alignment != "buckets":
        return "# 'buckets' padding only: the lengths each input's axis is padded up to (none here)."
    declared = all(
        axis in workload.max_lengths.get(k, {}) for k, axes in config.padding_buckets.items() for axis in axes
    )
    above = (
        "a longer batch is padded to the declared maximum (MAX_LENGTHS)"
        if declared
        else "a longer batch is left as it is, a new shape that compiles (no maximum was declared)"
    )
    return (
        "# Padding buckets learned from the workload's lengths: a batch is padded to the smallest that fits;\n"
        f"# {above}."
    )


def _apply_function(config: CompileConfig) -> str:
    body = {
        "none": ["# Eager was measured fastest: the model is returned as it is."],
        "whole": ["compile_in_place(model, COMPILE_KWARGS)"],
        "modular": [
            "for path, kwargs in MODULE_KWARGS.items():",
            "    compile_in_place(model.get_submodule(path), kwargs)",
        ],
        "regional": [
            "for path in BLOCKS:",
            "    for block in model.get_submodule(path):",
            "        compile_in_place(block, COMPILE_KWARGS)",
        ],
    }[config.scope]
    if config.mark_as == "sources":
        body = [
            "# Mark the chosen axes dynamic by input name in every compiled frame: the model's forward,",
            "# the frame that resumes after a graph break, a submodule that takes the same argument.",
            "# The setting is process-wide, so it is added to whatever sources are set already.",
            "known = torch.compiler.config.dynamic_sources",
            "if DYNAMIC_SOURCES not in known:",
            '    torch.compiler.config.dynamic_sources = ",".join(s for s in (known, DYNAMIC_SOURCES) if s)',
            *body,
        ]
    body = [*_setting_lines(config.process_settings()), *body]
    if config.compile_optimizer:
        body += ["if optimizer is not None:", "    compile_optimizer(optimizer)"]
    body = [
        "# Every process autotune measured ran glibc's malloc with fixed thresholds, which keeps a",
        "# training step from faulting its memory in anew each time; set them here too, unless the",
        "# environment already chose an allocator or its settings (steady_malloc, below).",
        "steady_malloc()",
        *body,
    ]
    lines = [
        "def apply_compilation(model, optimizer=None):",
        '    """Compile `model` in place, so its state_dict keys stay the same; returns (model, optimizer)."""',
        *("    " + line for line in body),
        "    return model, optimizer",
    ]
    return "\n".join(lines)


def _setting_lines(settings: list[ProcessSetting]) -> list[str]:
    """Each setting as its comment and one statement, from its validated target and literal value."""
    lines: list[str] = []
    for setting in settings:
        value = _literal(setting.value)
        lines += [f"# {line}" for line in setting.comment.splitlines()]
        lines.append(f"{setting.target}({value})" if setting.call else f"{setting.target} = {value}")
    return lines


def _optimizer_function(config: CompileConfig) -> str:
    if config.compile_optimizer:
        body = [
            "eager_step = optimizer.step",
            "compiled_step = torch.compile(eager_step, **OPTIMIZER_COMPILE_KWARGS)",
            "",
            "# functools.wraps keeps what a learning-rate scheduler marked the step with: it checks the mark.",
            "@functools.wraps(eager_step)",
            "def step(*args, **kwargs):",
            "    # torch's compiled Adam-family step writes NaN where a gradient is zero when the learning",
            "    # rate is 0 (pytorch#126514), as on the first step of a warm-up from 0: such a step runs eagerly.",
            '    if any(_is_zero(group["lr"]) for group in optimizer.param_groups):',
            "        return eager_step(*args, **kwargs)",
            "    return compiled_step(*args, **kwargs)",
            "",
            "optimizer.step = step",
        ]
    else:
        body = ["# Nothing to do: this configuration leaves optimizer.step as it is."]
    lines = [
        "def compile_optimizer(optimizer):",
        '    """Compile `optimizer.step` as configured (apply_compilation calls it; a loop that creates the',
        '    optimizer later, such as a Trainer\'s, calls it once the optimizer exists)."""',
        *("    " + line if line else "" for line in body),
        "    return optimizer",
    ]
    if config.compile_optimizer:
        lines += [
            "",
            "",
            "def _is_zero(lr):",
            '    """Whether a learning rate is 0; a device tensor is not read (that would wait for the device)."""',
            "    if isinstance(lr, torch.Tensor):",
            '        return lr.device.type == "cpu" and lr.numel() == 1 and float(lr) == 0.0',
            "    return lr == 0",
        ]
    return "\n".join(lines)


def _prepare_function() -> str:
    return "\n".join(
        [
            "def prepare_batch(batch):",
            '    """Pad the dynamic inputs as configured and mark the chosen axes dynamic; returns the batch."""',
            "    return prepare_inputs(",
            "        batch, DYNAMIC_DIMS, PAD_VALUES, PADDING_ALIGNMENT, MAX_LENGTHS, MARK_DYNAMIC, MARK_AS, PADDING_BUCKETS",
            "    )",
        ]
    )


def _finish_warmup_function(config: CompileConfig) -> str:
    body = _setting_lines(config.after_warmup_settings()) or [
        "# Nothing to do: this configuration makes no setting for after the warm-up."
    ]
    lines = [
        "def finish_warmup():",
        '    """Call once the usual input shapes have each run a step (autotune measured it that way)."""',
        *("    " + line for line in body),
    ]
    return "\n".join(lines)


def _backward_function(config: CompileConfig) -> str:
    body = ["if run is None:", "    loss.backward()", "else:", "    run(loss)"]
    for wrapper in reversed(config.backward_wrappers()):
        # Each context is a checked expression of torch and its own constant (`BackwardWrapper`).
        body = [*(f"# {line}" for line in wrapper.comment.splitlines()), f"with {wrapper.context}:"] + [
            "    " + line for line in body
        ]
    lines = [
        "def backward(loss, run=None):",
        '    """Run the backward pass of `loss` the way autotune measured it.',
        "",
        "    `run(loss)` replaces loss.backward() when given: a training library's own backward",
        '    (accelerate\'s, which scales the loss) then runs inside the same setting."""',
        *("    " + line for line in body),
    ]
    return "\n".join(lines)


def _assign(comment: str, name: str, value: Any) -> str:
    text = _literal(value)
    if len(name) + 3 + len(text) > _LINE and isinstance(value, Mapping) and value:
        items = ",\n".join(f"    {_literal(k)}: {_literal(v)}" for k, v in value.items())
        text = "{\n" + items + ",\n}"
    return f"{comment}\n{name} = {text}"


def _literal(value: Any) -> str:
    """`repr` of plain data only: anything else is refused rather than written into code."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"generated code: {value!r} is not a finite number.")
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"generated code: {type(value).__name__} values cannot be written as literals.")
