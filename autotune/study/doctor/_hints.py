"""Known causes of graph breaks and recompiles, and the fix a user can apply for each.

Each rule looks at what torch reported (its reason, the debug context, the stack) and
names the cause in a few words with a fix. A break no rule knows keeps torch's own hints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["BreakCause", "SizeChange", "break_cause", "guard_hint", "guard_text", "size_change", "value_guard"]


@dataclass(frozen=True)
class BreakCause:
    """What broke the graph, in a few words, and how to avoid it."""

    kind: str
    hint: str


@dataclass(frozen=True)
class _Rule:
    kind: str
    hint: str
    matches: Callable[[str, Sequence[str]], bool]
    """(torch's reason and debug context, the functions of the stack) -> whether this rule explains the break."""


def _words(*needles: str) -> Callable[[str, Sequence[str]], bool]:
    return lambda text, functions: any(n.lower() in text.lower() for n in needles)


_RULES = (
    _Rule(
        "transformers loss selection",
        "transformers looks the loss up from the model's `loss_type`, finds none and logs a warning inside forward. "
        'Set it before compiling, e.g. `model.loss_type = "ForCausalLM"` (the loss your head needs), '
        "or assign `model.loss_function`.",
        lambda text, functions: "loss_function" in functions or "loss_type=" in text,
    ),
    _Rule(
        "Python-side randomness",
        "`random` or `numpy.random` cannot be traced: draw with torch (`torch.rand`, `torch.randint`), which "
        "compiles, or draw outside forward and pass the value in.",
        lambda text, functions: (
            bool(re.search(r"\bRandom\.\w+|\brandom\.(random|randint|uniform|choice|gauss)\b", text))
            or "numpy.random" in text
        ),
    ),
    _Rule(
        "tensor value read in Python",
        "`.item()` / `.tolist()` turns a tensor into a Python number, which ends the graph. Move it out of forward "
        "(read it after the step), or set `torch._dynamo.config.capture_scalar_outputs = True` to keep it in the graph.",
        _words("Tensor.item()", "tolist", "capture_scalar_outputs", "Tensor.__bool__", "data-dependent branching"),
    ),
    _Rule(
        "data-dependent shape",
        "an operator's output shape depends on the data (nonzero, unique, boolean masks). Set "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`, mark the size with "
        "`torch._dynamo.mark_unbacked`, or restructure with fixed-shape operations (e.g. `torch.where` with a mask).",
        _words("Dynamic shape operator", "capture_dynamic_output_shape_ops", "data-dependent output shape"),
    ),
    _Rule(
        "print or logging in forward",
        "printing or logging inside forward cannot be traced. Remove it or move it out of forward; or list the "
        "function in `torch._dynamo.config.reorderable_logging_functions` (print) or "
        "`torch._dynamo.config.ignore_logging_functions` (logger methods).",
        _words("builtin operator `print`", "logging.Logger", "reorderable_logging_functions"),
    ),
    _Rule(
        "call dynamo cannot trace",
        "a C extension or a library function dynamo skips. Wrap it in `torch.compiler.disable` so it runs eagerly by "
        "design (the break stays but costs one boundary), or register it as a custom op (`torch.library.custom_op`) "
        "to keep one graph.",
        _words("marked as skipped", "C/C++ Python extension", "skipfiles", "torch.compiler.disable", "non-PyTorch"),
    ),
)


def break_cause(text: str, functions: Sequence[str]) -> BreakCause | None:
    """The known cause of a graph break from torch's reason and context and the stack's functions, or None."""
    for rule in _RULES:
        if rule.matches(text, functions):
            return BreakCause(rule.kind, rule.hint)
    return None


@dataclass(frozen=True)
class SizeChange:
    """One failed size guard: `source` (dynamo's name of the tensor) had `expected` along `axis`, now `actual`."""

    name: str
    axis: int
    expected: int
    actual: int


_SIZE = re.compile(
    r"tensor '(?P<source>.+?)' size mismatch at index (?P<axis>\d+)\. expected (?P<expected>\d+), actual (?P<actual>\d+)"
)


def size_change(reason: str) -> SizeChange | None:
    """The first size-mismatch guard in dynamo's recompile reason, with the tensor's name, or None."""
    match = _SIZE.search(reason)
    if match is None:
        return None
    source = match["source"]
    keys = re.findall(r"\['([^'\]]+)'\]", source)
    name = keys[-1] if keys else source
    return SizeChange(name, int(match["axis"]), int(match["expected"]), int(match["actual"]))


_GUARDS = (
    (
        "problem_type",
        "transformers sets `config.problem_type` from the labels on the first call, which changes a value dynamo "
        'guarded on: set `model.config.problem_type` (e.g. "single_label_classification") before compiling.',
    ),
    ("dtype mismatch", "an input's dtype changes between steps: give it one dtype in the data pipeline."),
    ("requires_grad mismatch", "an input's requires_grad changes between steps: keep it the same."),
    ("stride mismatch", "an input's memory layout changes between steps: make it contiguous before the call."),
    ("device mismatch", "an input arrives on different devices: move every batch to one device."),
    (".training", "the model switches between train() and eval(): each mode compiles once, then no more."),
    ("len(", "a list or tuple argument changes length: keep it fixed, or pass one tensor."),
    ("___check_obj_id", "an object the model reads changes identity between calls: keep it fixed, or pass a tensor."),
)


_VALUE = re.compile(r"^(?P<name>[\w.\[\]'\"]+) == (?P<value>.+)$")
_NUMERIC = re.compile(r"^-?[\d.]+(e[-+]?\d+)?$")


def guard_text(reason: str) -> str:
    """The failed guard of dynamo's recompile reason, without its compile id and the source comment after it."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    guard = first.partition(": ")[2] if re.match(r"^\d+/\d+: ", first) else first
    return guard.partition("  #")[0].strip()


def value_guard(guard: str) -> tuple[str, bool] | None:
    """(name, whether the value is a number) for a guard on a Python value ("scale == 1.75"), else None."""
    match = _VALUE.match(guard)
    return (match["name"], bool(_NUMERIC.match(match["value"]))) if match else None


def guard_hint(reason: str) -> str:
    """What a user can do about a recompile whose failed guard is not a size change."""
    value = value_guard(guard_text(reason))
    if value is not None:
        what = "a Python number" if value[1] else "a Python value (a string, bytes, a constant)"
        return (
            f"{what} whose value changes between calls, and dynamo compiles for each value: keep it a tensor "
            "(`.item()` and `.tolist()` turn tensors into such values), or keep it constant."
        )
    for needle, hint in _GUARDS:
        if needle in reason:
            return hint
    return (
        "a value dynamo guarded on changes between calls: pass it as a tensor, or keep it constant "
        "(`torch._logging.set_logs(recompiles_verbose=True)` shows every guard)."
    )
