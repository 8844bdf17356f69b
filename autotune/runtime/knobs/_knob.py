"""`Knob`: one search dimension declared in one module, and the registry that finds every such module.

A knob says everything about itself: its name (the space file's key, the configuration's
key in best.yaml and the Optuna parameter), the values a space may list (the first changes
nothing), what it needs of the workload, the torch feature it probes, where on a device it
exists, when it applies to the rest of a configuration, and what it changes in the generated
code: keyword arguments of `torch.compile`, and a process-wide setting that `apply_compilation`
assigns. `CompileConfig`, the search space, codegen, the feature probes and the docs' table
read it from here; adding a knob is adding a module to this package (docs/developing.md).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from autotune.runtime.registry import declared_in

__all__ = [
    "APPLIES_ONLY_WITH",
    "BackwardWrapper",
    "ConfigView",
    "Knob",
    "Need",
    "ProcessSetting",
    "knob",
    "registered",
    "same_value",
]

Need = Literal[
    "training", "autotune's backward", "dynamic inputs", "precision changes", "one graph", "dropout in training"
]
"""What a dimension may need of the workload or the search; without it only its neutral choice stays."""

APPLIES_ONLY_WITH: frozenset[Need] = frozenset({"training", "autotune's backward"})
"""The needs without which a setting cannot apply at all, so that generating code for it is refused. The others
only make a setting worth searching: shapes can vary without declared dynamic inputs (a recompile limit still
applies), precision changes are the search's to allow, and one graph (no graph break where plain torch.compile
ran) is what the search saw first."""


class ConfigView(Protocol):
    """What a knob reads of the configuration it is part of; `autotune.runtime.config.CompileConfig` is one.

    The configuration imports the registry to check and apply its knobs, so a knob names this
    instead of the configuration's class: the registry stays below the configuration.
    """

    @property
    def compile_optimizer(self) -> bool:
        """Whether `optimizer.step` is compiled too."""
        ...

    @property
    def padding_alignment(self) -> object:
        """How dynamic inputs are padded: None, a multiple, 'pow2', 'max' or 'buckets'."""
        ...

    @property
    def padding_buckets(self) -> Mapping[Any, Mapping[int, tuple[int, ...]]]:
        """Under 'buckets' padding, the lengths each input's axis is padded up to."""
        ...

    @property
    def uses_cuda_graphs(self) -> bool:
        """Whether any compiled region replays CUDA graphs."""
        ...

    def compile_kwargs(self, module_path: str | None = None) -> dict[str, Any]:
        """Keyword arguments for `torch.compile`, for the whole model or one module."""
        ...


_TARGET = re.compile(r"torch(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")


@dataclass(frozen=True)
class ProcessSetting:
    """A process-wide setting the generated file makes, before compiling (`apply_compilation`) or after the warm-up
    (`finish_warmup`): `target = value`, or `target(value)` where torch sets it through a function."""

    comment: str
    """Why, for the reader of the generated file (one or more lines, without '#')."""
    target: str
    """A dotted attribute of torch, e.g. 'torch._functorch.config.activation_memory_budget', or with `call` a
    function of torch, e.g. 'torch.set_float32_matmul_precision'."""
    value: Any
    """A validated plain value, written as a literal."""
    call: bool = False
    """Whether `target` is a function called with `value` rather than an attribute assigned it."""

    def __post_init__(self) -> None:
        if not _TARGET.match(self.target):
            raise ValueError(f"ProcessSetting.target: {self.target!r} is not a dotted attribute of torch.")

    @property
    def module(self) -> str:
        """The module to import before assigning (the target without its attribute)."""
        return self.target.rpartition(".")[0]


_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*\Z")


@dataclass(frozen=True)
class BackwardWrapper:
    """A context the generated `backward(loss)` runs the backward pass in, with the one constant it reads."""

    header: str
    """What it does and what the user must call, for the generated file's docstring."""
    comment: str
    """Why, for the reader of `backward` (one or more lines, without '#')."""
    constant: str
    """The module-level name of `value` in the generated file, upper case."""
    constant_comment: str
    """What `constant` holds, one line without '#'."""
    value: Mapping[str, Any]
    """A validated plain mapping, written as a literal."""
    context: str
    """The context manager: an expression of torch and `constant` only, e.g.
    'torch._dynamo.compiled_autograd._enable(torch.compile(**BACKWARD_COMPILE_KWARGS))'."""

    def __post_init__(self) -> None:
        if not _CONSTANT.match(self.constant):
            raise ValueError(f"BackwardWrapper.constant: {self.constant!r} is not an upper-case name.")
        try:
            tree = ast.parse(self.context, mode="eval")
        except SyntaxError:
            raise ValueError(f"BackwardWrapper.context: {self.context!r} is not an expression.") from None
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        if not names <= {"torch", self.constant}:
            raise ValueError(
                f"BackwardWrapper.context: {self.context!r} names {sorted(names)}; only torch and "
                f"{self.constant} are defined there."
            )


class Knob:
    """One search dimension. Subclass it in a module of `autotune.runtime.knobs` and set the class variables;
    override the methods whose default does not fit."""

    name: ClassVar[str]
    """The space file's key, best.yaml's `config:` key and the Optuna parameter: a lower-case identifier."""
    choices: ClassVar[tuple[Any, ...]]
    """The values a space may list, the neutral one (which changes nothing) first."""
    summary: ClassVar[str]
    """What it does, in a sentence or two, for the docs' table."""
    needs: ClassVar[Need | None] = None
    feature: ClassVar[tuple[str, str] | None] = None
    """(module, name) of what the installed torch must have for the non-neutral values, as
    `autotune.runtime.features` probes it: a function or attribute, or 'function:keyword'."""
    falls_back_to_eager: ClassVar[bool] = False
    """Whether a non-neutral value lets some shapes run eagerly after warm-up (the worker then allows it)."""
    random_as_eager: ClassVar[bool] = False
    """Whether a non-neutral value makes the compiled code draw random numbers as eager does: the worker then checks a
    training step with dropout in train mode, its masks compared too, and the model compiles once."""
    changes_numerics: ClassVar[bool] = False
    """Whether a non-neutral value lets results differ from eager beyond rounding: the worker then checks its
    outputs within a looser tolerance, and the generated file says so."""
    device_setting: ClassVar[str | None] = None
    """An Inductor option or compile mode whose existence on the device the knob needs (see `Device.why_not`)."""
    example: ClassVar[tuple[Mapping[str, Any], Any]]
    """The other settings of a configuration it applies to (`CompileConfig`'s keyword arguments) and a value
    other than the neutral one: what the registry's own tests generate, ask and read back for every knob."""
    offered: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    """The bundled spaces that search it, each with the values it lists there (a space file that names the knob
    lists its own)."""
    neutral_offered: ClassVar[bool] = True
    """Whether the bundled spaces list its neutral value first among those they offer. False where the neutral value
    only costs and finds nothing the baselines do not measure (`random_as_eager`: a second compile per trial)."""

    @property
    def neutral(self) -> Any:
        """The value that changes nothing."""
        return self.choices[0]

    def allows(self, value: Any) -> bool:
        """Whether `value` is one a configuration may hold (types compared too: 1 is not True)."""
        return any(same_value(value, choice) for choice in self.choices)

    def allowed_text(self) -> str:
        """What `allows` accepts, in words for an error."""
        return f"one of {list(self.choices)}"

    def device_setting_for(self, value: Any) -> str | None:
        """The Inductor option or compile mode a non-neutral `value` needs on the device (`Device.why_not`): by
        default `device_setting`, for every value alike."""
        return self.device_setting

    def why_not(self, config: ConfigView) -> str | None:
        """Why a non-neutral value cannot go with the rest of `config`, or None where it can; a search asks the
        knob only where this is None."""
        return None

    def compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        """`torch.compile`'s keyword arguments for a region, with this knob's non-neutral `value` applied."""
        return kwargs

    def optimizer_compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        """`torch.compile`'s keyword arguments for the compiled `optimizer.step`, with this knob's non-neutral `value`
        applied (asked only where the configuration compiles the step)."""
        return kwargs

    def process_setting(self, value: Any) -> ProcessSetting | None:
        """The process-wide setting `apply_compilation` makes for a non-neutral `value`, or None."""
        return None

    def after_warmup(self, value: Any) -> ProcessSetting | None:
        """The process-wide setting the generated `finish_warmup()` makes for a non-neutral `value` once the usual
        input shapes have each run a step (the worker calls it after its warm-up, the integrations after theirs),
        or None."""
        return None

    def backward_wrapper(self, value: Any, config: ConfigView) -> BackwardWrapper | None:
        """The context the generated `backward(loss)` runs the backward pass in for a non-neutral `value` (the
        worker and the integrations call that function instead of loss.backward()), or None."""
        return None

    def describe(self, value: Any) -> str:
        """A non-neutral `value` in a configuration's one-line description."""
        return f"{self.name}={value}"


def same_value(a: object, b: object) -> bool:
    """Equal and of the same type: True == 1 in Python, but a setting of 1 is not a setting of True."""
    return type(a) is type(b) and a == b


@functools.cache
def registered() -> Mapping[str, Knob]:
    """Every knob, by name, in the order of its module's name: the `KNOB` of each module of this package."""
    found: dict[str, Knob] = {}
    for module, entry in declared_in("autotune.runtime.knobs", "KNOB", Knob):
        if entry.name in found or not re.fullmatch(r"[a-z][a-z0-9_]*", entry.name):
            raise TypeError(f"autotune.runtime.knobs.{module}: {entry.name!r} is taken or not a lower-case name.")
        if len(entry.choices) < 2:
            raise TypeError(f"autotune.runtime.knobs.{module}: a knob lists its neutral value and at least one more.")
        found[entry.name] = entry
    return found


def knob(name: str) -> Knob:
    """The knob called `name`; KeyError for a name that is not one."""
    return registered()[name]
