"""What eager computes, kept to check a compiled configuration against: the outputs of inference
(`EagerReference`) or a few whole training steps (`WholeStepReference`). Both run the trial's own
`Step` (`autotune.workload.steps`), eager and then compiled, so that what is checked is what is timed."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from torch import nn
from torch.utils import _pytree as pytree

from autotune.trial.accuracy import compare, tensor_leaves, tolerance_for, working_dtype
from autotune.trial.compile_counts import (
    frames_compiled,
)
from autotune.trial.failure import TrialFailure, classify
from autotune.workload import Workload, has_dropout
from autotune.workload.steps import StepRunner

__all__ = [
    "CHECK_SEED",
    "CHECKED_STEPS",
    "CHECKED_STEPS_UNDER_CUDA_GRAPHS",
    "TRACED_STEPS",
    "EagerReference",
    "StepFigures",
    "WholeStepReference",
    "same_shapes",
]


def same_shapes(a: Any, b: Any) -> bool:
    """Whether two batches hold tensors of the same shapes and dtypes in the same places."""
    # Mappings the tree utilities do not know (a tokenizer's BatchEncoding) are read as dicts.
    leaves_a, spec_a = pytree.tree_flatten(dict(a) if isinstance(a, Mapping) else a)
    leaves_b, spec_b = pytree.tree_flatten(dict(b) if isinstance(b, Mapping) else b)
    if spec_a != spec_b:
        return False
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
    return True


@dataclass
class EagerReference:
    """What eager inference computes on one batch (every floating-point output), kept on the CPU.

    With dropout in the model it runs in eval mode, as inference does anyway. Training is checked
    by `WholeStepReference`.
    """

    workload: Workload
    batch: Any
    step: StepRunner
    tolerance: float
    expected: list[tuple[str, torch.Tensor | None]]
    why: str = ""
    """Said after a failed comparison when the tolerance is not the dtype's own."""
    other: Any = None
    """Another batch of the same shapes, which CUDA-graph configurations warm up and record on before the check."""

    @classmethod
    def of(cls, workload: Workload, model: nn.Module, batch: Any, step: StepRunner) -> EagerReference:
        model.eval()
        tolerance = tolerance_for(working_dtype(workload.autocast, model))
        reference = cls(workload, batch, step, tolerance, [])
        reference.expected = [(w, t.detach().cpu()) for w, t in reference._compute(model, batch)]
        return reference

    def _compute(self, model: nn.Module, batch: Any) -> list[tuple[str, torch.Tensor]]:
        # The trial's own step, as it is timed (each call marks a CUDA-graph step where graphs are replayed).
        return [(f"output {i}", t) for i, t in enumerate(tensor_leaves(self.step(model, None, batch)))]

    def check(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, prepare: Callable[[Any], Any]) -> float:
        """Compare the compiled model with the reference; returns the seconds to leave out of the compile time (none:
        the compared call is the compile). Inference has no `optimizer`.

        Under CUDA graphs the compared call is a replay: CUDA-graph trees run a function's first
        call as a warm-up and record on the second, so two calls on another batch of the same
        shapes come first. A replay that reads stale inputs (an address captured at recording, a
        CPU scalar baked in) then returns that batch's figures, not the reference batch's.
        """
        model.eval()
        if self.step.cuda_graphs:
            for _ in range(2):
                self._compute(model, prepare(self.other if self.other is not None else self.batch))
        actual = self._compute(model, prepare(self.batch))
        if len(actual) != len(self.expected):
            raise TrialFailure(
                "accuracy", f"the compiled model returns {len(actual)} outputs, eager {len(self.expected)}"
            )
        for (what, want), (_, got) in zip(self.expected, actual, strict=True):
            if want is None:
                continue
            error = compare(want, got.detach().cpu(), self.tolerance)
            if error is not None:
                raise TrialFailure(
                    "accuracy", f"{what} differs from eager: relative error {error:.3g} > tolerance{self.why}"
                )
        return 0.0


CHECKED_STEPS = 2
"""Whole optimizer steps after which a training configuration's gradients, updates and optimizer state must match
eager's before its speed counts."""
TRACED_STEPS = 8
"""Consecutive optimizer steps, from the same weights and batches, whose every loss must match eager's: a fault that
appears from a later step on (a value gone stale after a recompile, a schedule whose effect starts later) shows there,
and the first step that differs is named."""
CHECKED_STEPS_UNDER_CUDA_GRAPHS = 3
"""Under CUDA graphs: their trees warm up on a function's first call and record on its second, so that the third
step replays a recording, on another batch than the one it was recorded on."""
CHECK_SEED = 20_240
"""torch's generator is seeded with this before the check's eager steps and before its compiled ones (a later run's
too), so that whatever the step draws from it (dropout's masks, in train mode) is drawn alike."""
NOISE = 1e-3
"""An element whose eager gradient is below this share of the gradients' root mean square holds rounding noise: its
update is not compared (Adam-like optimizers turn noise into a full step, of either sign)."""


@dataclass
class StepFigures:
    """What a few whole training steps computed, kept on the CPU."""

    losses: list[torch.Tensor]
    """Every micro-batch's loss, in order."""
    grads: dict[str, torch.Tensor | None]
    """Each trainable parameter's gradient just before the first optimizer step (a whole accumulation cycle's)."""
    first_updates: dict[str, torch.Tensor]
    """Each trainable parameter after the first step, less what it was before it."""
    updates: dict[str, torch.Tensor]
    """Each trainable parameter after the last step, less what it was before the first."""
    state: tuple[str, torch.Tensor] | None
    """One piece of the optimizer's state after the last step (name, tensor), where it keeps any."""
    compiling_seconds: float
    """Seconds of the micro-batches that compiled (or recorded) something: compile time, as in a warm-up."""
    compiles: list[int] = field(default_factory=list)
    """Frames compiled during each optimizer step (its whole accumulation cycle), in order."""
    changed: list[str] = field(default_factory=list)
    """The optimizer's settings held as Python floats that the steps changed ('lr', 'betas', ...), in group order."""


@dataclass
class WholeStepReference:
    """What eager training computes over a few whole optimizer steps on fixed batches, kept on the CPU.

    Both runs are the trial's own step (`StepRunner`: whatever kind the workload runs), eagerly
    and then compiled. The compiled configuration runs the same micro-batches from the same
    weights and a freshly built optimizer: its loss at every micro-batch, its gradients before the first optimizer step (a whole
    accumulation cycle), every parameter's update after the last step and one piece of the
    optimizer's state must match eager's. A compiled optimizer step that skips a parameter group,
    reads a learning rate baked in as a constant, or does nothing, and accumulation whose second
    micro-batch overwrites the first, all change what is compared. The eager steps run before
    the compile clock starts; the model's weights are put back afterwards and the optimizer is
    built afresh, so the compiled steps start where eager's did. Both start from the same seed
    (`CHECK_SEED`). With dropout in the model, both run in train mode where the configuration draws
    random numbers as eager does (`random_as_eager`), its masks compared too; otherwise in eval mode,
    since compiled and eager dropout draw different random numbers, and training compiles again.
    """

    workload: Workload
    step: StepRunner
    micro_batches: list[Any]
    eval_mode: bool
    tolerance: float
    before: dict[str, torch.Tensor]
    compared: int = CHECKED_STEPS
    """The optimizer steps after which the updates and the optimizer's state are compared; the losses of all
    `TRACED_STEPS` are."""
    expected: StepFigures | None = None
    why: str = ""
    """Said after a failed comparison when the tolerance is not the dtype's own."""
    optimizer_compiled: bool = False
    """Whether the configuration compiles optimizer.step."""
    notes: list[str] = field(default_factory=list)
    """What the check found that passes but is worth saying (a recompile when the schedule first changed a float)."""
    _compiles: list[int] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        workload: Workload,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        batches: list[Any],
        step: StepRunner,
        random_as_eager: bool = False,
    ) -> WholeStepReference:
        """Run eager's steps and keep what they computed; the model's weights are put back afterwards. The optimizer
        (and what the workload's `setup` built beside it) has moved on: the caller builds them afresh."""
        # Compiled dropout draws other masks than eager's unless the configuration draws random numbers as eager does.
        eval_mode = has_dropout(model) and not random_as_eager
        first = batches[0]
        other = next((b for b in batches[1:] if same_shapes(b, first)), first)
        compared = CHECKED_STEPS_UNDER_CUDA_GRAPHS if step.cuda_graphs else CHECKED_STEPS
        micro_batches = [(first, other)[i % 2] for i in range(TRACED_STEPS * workload.accumulation_steps)]
        weights = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
        before = {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}
        tolerance = tolerance_for(working_dtype(workload.autocast, model))
        reference = cls(workload, step, micro_batches, eval_mode, tolerance, before, compared)
        # The same kind of step, run eagerly: eager's own backward, since the configuration's (compiled autograd)
        # is what is being checked.
        reference.expected = reference._run(model, optimizer, step.eager(), lambda batch: batch)
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                tensor.copy_(weights[name])
        model.zero_grad(set_to_none=True)
        return reference

    def _run(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, step: StepRunner, prepare: Callable[[Any], Any]
    ) -> StepFigures:
        """The step over the micro-batches, as the trial runs it: every loss it returns, the gradients of its first
        optimizer step (each parameter's as last accumulated, a whole cycle's, before the step clips or applies
        them), the weights after its first and last optimizer steps, and one piece of the optimizer's state."""
        model.train(not self.eval_mode)
        torch.manual_seed(CHECK_SEED)  # eager's steps and the compiled ones draw the same dropout masks
        accumulation = self.workload.accumulation_steps
        losses: list[torch.Tensor] = []
        grads: dict[str, torch.Tensor | None] = {n: None for n, p in model.named_parameters() if p.requires_grad}
        first_updates: dict[str, torch.Tensor] = {}
        updates: dict[str, torch.Tensor] = {}
        state: tuple[str, torch.Tensor] | None = None
        compiling = 0.0

        def keep(name: str) -> Callable[[torch.Tensor], None]:
            def hook(parameter: torch.Tensor) -> None:
                if parameter.grad is not None:
                    grads[name] = parameter.grad.detach().cpu().clone()

            return hook

        settings = float_settings(optimizer)
        compiles: list[int] = []
        self._compiles = compiles  # read where the recompile limit ends the run early
        for index, batch in enumerate(self.micro_batches):
            if index % accumulation == 0:
                compiles.append(0)
            hooks = (
                [p.register_post_accumulate_grad_hook(keep(n)) for n, p in model.named_parameters() if p.requires_grad]
                if index < accumulation
                else []
            )
            frames, started = frames_compiled(), time.perf_counter()
            try:
                losses.append(step(model, optimizer, prepare(batch)).detach().cpu())
            finally:
                for hook in hooks:
                    hook.remove()
            if index + 1 == accumulation:
                first_updates = self._updates(model)
            if index + 1 == self.compared * accumulation:
                updates, state = self._updates(model), _state_piece(model, optimizer)
            if frames_compiled() != frames:
                compiling += time.perf_counter() - started
                compiles[-1] += frames_compiled() - frames
        changed = changed_settings(settings, float_settings(optimizer))
        return StepFigures(losses, grads, first_updates, updates, state, compiling, compiles, changed)

    def _updates(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Each trainable parameter now, less what it was before the first step."""
        parameters = dict(model.named_parameters())
        return {name: parameters[name].detach().cpu() - value for name, value in self.before.items()}

    def check(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, prepare: Callable[[Any], Any]) -> float:
        """Run the same steps compiled and compare; returns the seconds to leave out of the compile time: the
        steps that compiled nothing, or all of them in eval mode (a mode training does not use), and the comparing."""
        assert self.expected is not None and optimizer is not None, "a training reference checks a training step"
        started = time.perf_counter()
        judging = bool(self.expected.changed) and self.optimizer_compiled
        try:
            actual = self._run(model, optimizer, self.step, prepare)
        except Exception as exc:
            if judging and classify(exc, "compile") == "recompile_limit":
                self._judge_schedule([*self._compiles, -1])
            raise
        if judging:
            self._judge_schedule(actual.compiles)
        # In the order they were computed, so that the first difference is the one named: the first step's losses,
        # its gradients and its updates, then the later losses, the last updates and the optimizer's state.
        # Then the losses of the steps after those, each named against all the steps traced.
        expected, steps = self.expected, self.compared
        first, traced = self.workload.accumulation_steps, len(self.micro_batches) // self.workload.accumulation_steps
        self._compare_losses(expected, actual, traced, range(first))
        self._compare_grads(expected, actual, steps)
        self._compare_updates(expected.first_updates, actual.first_updates, expected, f"after step 1 of {steps}")
        self._compare_losses(expected, actual, traced, range(first, steps * first))
        self._compare_updates(expected.updates, actual.updates, expected, f"after step {steps} of {steps}")
        self._compare_state(expected, actual, steps)
        self._compare_losses(expected, actual, traced, range(steps * first, len(self.micro_batches)))
        model.zero_grad(set_to_none=True)
        spent = time.perf_counter() - started
        return spent if self.eval_mode else max(spent - actual.compiling_seconds, 0.0)

    def _judge_schedule(self, counts: list[int]) -> None:
        """The step changed some of the optimizer's settings as Python floats, and optimizer.step is compiled: judge
        the frames compiled at each traced step (`counts`; -1 where the recompile limit stopped the trace).

        Whether a new float value compiles the step again depends on the release, the backend and
        the setting: on some, the step compiles once more at the first change and reads every later
        value; on others each new value compiles again until the recompile limit. Compiles at each
        of the last `SCHEDULE_VALUES` steps (or the limit reached) refuse the configuration, saying
        how many; otherwise what compiled after the first step is noted.
        """
        later = counts[1:]
        what = _settings_in_words(self.expected.changed if self.expected else [])
        limit = bool(later) and later[-1] < 0
        if limit or (len(later) >= SCHEDULE_VALUES and all(count > 0 for count in later[-SCHEDULE_VALUES:])):
            made = sum(count for count in later if count > 0)
            raise TrialFailure(
                "invalid_config",
                f"your step changes {what} as Python floats, and this configuration compiles optimizer.step: it "
                f"compiled again at every new value, {made} recompile(s) over {len(later)} steps after the first"
                + (", up to the recompile limit" if limit else "")
                + ". Compile the model without the optimizer step, or keep these settings tensors "
                "(lr=torch.tensor(...)) where the optimizer takes them.",
            )
        recompiles = sum(later)
        if recompiles:
            quiet = len(later) - max(index for index, count in enumerate(later) if count) - 1
            self.notes.append(
                f"{'one recompile' if recompiles == 1 else f'{recompiles} recompiles'} of the step when {what} first "
                f"changed; none in the {quiet} steps after"
            )

    def _compare_losses(self, expected: StepFigures, actual: StepFigures, steps: int, indices: range) -> None:
        for index in indices:
            error = compare(expected.losses[index], actual.losses[index], self.tolerance)
            if error is not None:
                self._fail(f"{self._micro_batch(index, steps)}: the loss differs from eager", error)

    def _compare_grads(self, expected: StepFigures, actual: StepFigures, steps: int) -> None:
        # A gradient is judged against its own size, but never against less than a small share of a typical
        # gradient's: some are zero in exact arithmetic and hold only rounding noise.
        scale = _typical(expected.grads.values())
        for name, want in expected.grads.items():
            got = actual.grads.get(name)
            if want is None:
                continue
            if got is None:
                self._fail(f"step 1 of {steps}: the gradient of {name} was computed by eager, not by the compiled step")
            error = compare(want, got, 10 * self.tolerance, scale)
            if error is not None:
                self._fail(f"step 1 of {steps}: the gradient of {name} differs from eager", error)

    def _compare_updates(
        self, wanted: dict[str, torch.Tensor], got: dict[str, torch.Tensor], expected: StepFigures, when: str
    ) -> None:
        # Where eager's gradient is rounding noise, an Adam-like step is a full step of either sign: such elements
        # are left out, and an update is judged against its size like a gradient.
        noise = NOISE * _root_mean_square(expected.grads.values())
        kept = {}
        for name, want in wanted.items():
            grad = expected.grads.get(name)
            kept[name] = grad.abs() > noise if grad is not None else torch.ones_like(want, dtype=torch.bool)
        scale = _typical(want * kept[name] for name, want in wanted.items())
        for name, want in wanted.items():
            error = compare(want * kept[name], got[name] * kept[name], 10 * self.tolerance, scale)
            if error is not None:
                self._fail(f"{when}: the update of {name} differs from eager", error)
        # Then the whole update's size. Rounding changes an update element by element, and its size hardly at all
        # (bfloat16 training measured within 2% for single tensors, 0.01% for the whole update); an update of the
        # wrong size, which a low precision's tolerance lets through element by element, changes the whole size.
        size = math.sqrt(sum(float((want * kept[name]).double().square().sum()) for name, want in wanted.items()))
        if size > 0:
            ratio = math.sqrt(sum(float((got[name] * kept[name]).double().square().sum()) for name in wanted)) / size
            if abs(ratio - 1.0) > UPDATE_SIZE_LIMIT:
                raise TrialFailure(
                    "accuracy",
                    f"{when}: the whole update is {ratio:.3g}x the size of eager's (at most {UPDATE_SIZE_LIMIT:.0%} "
                    "off under any precision)",
                )

    def _compare_state(self, expected: StepFigures, actual: StepFigures, steps: int) -> None:
        if expected.state is None:
            return
        what, want = expected.state
        if actual.state is None or actual.state[0] != what:
            self._fail(f"after step {steps} of {steps}: the optimizer keeps no {what}, as it does eagerly")
        scale = 1e-2 * float(torch.linalg.vector_norm(want.double()))
        error = compare(want, actual.state[1], 10 * self.tolerance, scale)
        if error is not None:
            self._fail(f"after step {steps} of {steps}: the optimizer's {what} differs from eager", error)

    def _micro_batch(self, index: int, steps: int) -> str:
        accumulation = self.workload.accumulation_steps
        if accumulation == 1:
            return f"step {index + 1} of {steps}"
        return f"step {index // accumulation + 1} of {steps}, micro-batch {index % accumulation + 1} of {accumulation}"

    def _fail(self, what: str, error: float | None = None) -> NoReturn:
        said = f": relative error {error:.3g} > tolerance{self.why}" if error is not None else ""
        raise TrialFailure("accuracy", what + said)


UPDATE_SIZE_LIMIT = 0.05
"""How far the size (norm) of a compiled step's whole update may be from eager's, under every precision: a step that
updates 10% too much or too little fails even where the element-wise tolerance is loose (bfloat16's)."""

SCHEDULE_VALUES = 3
"""Where the step changes a float setting of the optimizer and optimizer.step is compiled: compiles at each of the last
this many traced steps, each a new value, are compiles that keep coming."""

_SETTING_WORDS = {"lr": "the learning rate", "betas": "betas", "momentum": "the momentum"}


def float_settings(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each parameter group's settings held as Python floats (or tuples of them): what a compiled step may specialise
    on. Tensors, which a compiled step reads afresh, and the parameters themselves are left out."""
    found = []
    for group in optimizer.param_groups:
        kept = {}
        for key, value in group.items():
            if isinstance(value, float) or (
                isinstance(value, tuple) and value and all(isinstance(v, float) for v in value)
            ):
                kept[key] = value
        found.append(kept)
    return found


def changed_settings(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The settings whose float value differs between two readings of `float_settings`, each named once."""
    changed: list[str] = []
    for old, new in zip(before, after, strict=False):
        for key, value in old.items():
            if key in new and new[key] != value and key not in changed:
                changed.append(key)
    return changed


def _settings_in_words(keys: list[str]) -> str:
    named = [_SETTING_WORDS.get(key, f"`{key}`") for key in keys] or ["a setting"]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _typical(tensors: Iterable[torch.Tensor | None]) -> float:
    """A small share (1%) of the median norm of `tensors`: the least a tensor is judged against."""
    norms = sorted(float(torch.linalg.vector_norm(t.double())) for t in tensors if t is not None)
    return 1e-2 * norms[len(norms) // 2] if norms else 0.0


def _root_mean_square(tensors: Iterable[torch.Tensor | None]) -> float:
    present = [t.double() for t in tensors if t is not None]
    count = sum(t.numel() for t in present)
    return math.sqrt(sum(float((t * t).sum()) for t in present) / count) if count else 0.0


def _state_piece(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[str, torch.Tensor] | None:
    """The first floating-point tensor of the optimizer's state, of the first parameter that has any: ('exp_avg of
    NAME', its value on the CPU)."""
    for name, parameter in model.named_parameters():
        state = optimizer.state.get(parameter) if parameter.requires_grad else None
        for key, value in (state or {}).items():
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.shape == parameter.shape:
                return f"{key} of {name}", value.detach().cpu().clone()
    return None
