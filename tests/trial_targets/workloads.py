"""Tiny workloads that misbehave on purpose, to show how trials fail and how the search records it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch._functorch.config
from torch import nn

from autotune import Workload


class TinyMLP(nn.Module):
    """Linear layers only, so that Inductor compiles its inference in a second or two.

    Inductor calls matrix products out of line; a pointwise activation between them would be
    a generated C++ kernel, and g++ takes most of ten seconds over one on a small machine.
    These workloads test how trials run and fail, not code generation (the examples do that).
    Training takes `bias=False`: a bias's gradient is a sum over the batch, another C++ kernel.
    """

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32, bias=bias), nn.Identity(), nn.Linear(32, 16, bias=bias))
        self.head = nn.Linear(16, 4, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _batches(lengths: tuple[int, ...] = (6, 6, 6, 6)) -> list[torch.Tensor]:
    return [torch.randn(lengths[i % len(lengths)], 16) for i in range(4)]


def tiny(task: str = "infer", batches=_batches, **extra) -> Workload:
    """A well-behaved tiny workload (inference: no optimizer to compile)."""
    model = extra.pop("model", None) or TinyMLP(bias=task != "train")
    if task == "train":
        extra.setdefault("optimizer", lambda params: torch.optim.SGD(params, lr=0.01))
        extra.setdefault("loss", lambda output, batch: output.pow(2).mean())
    extra.setdefault("num_batches", 4)
    return Workload(model=model, batches=batches, task=task, **extra)


def tiny_infer() -> Workload:
    return tiny("infer")


def crowded_infer() -> Workload:
    """tiny_infer, except in a worker given a share of its device's memory: there it runs out of memory while it
    builds, as a model that fits a GPU alone but not beside other workers would."""
    if os.environ.get("AUTOTUNE_EVENT_FD") and len(sys.argv) > 1:  # a worker: its request is its first argument
        with open(sys.argv[1]) as request:
            share = json.load(request).get("memory_share")
        if share:
            raise torch.OutOfMemoryError(f"out of memory: the model does not fit {share:.0%} of the device")
    return tiny("infer")


def tiny_train() -> Workload:
    return tiny("train")


class Hangs(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A grandchild in the same process group, which the runner must kill too.
        with open(os.environ["AUTOTUNE_TEST_PIDFILE"], "w") as out:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            out.write(f"{os.getpid()} {child.pid}")
        time.sleep(600)
        return super().forward(x)


def hangs() -> Workload:
    return tiny(model=Hangs())


class SlowSteps(TinyMLP):
    """Each step takes AUTOTUNE_TEST_STEP_SECONDS in a worker."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(float(os.environ.get("AUTOTUNE_TEST_STEP_SECONDS", "0")))
        return super().forward(x)


def slow_to_build() -> Workload:
    """Takes AUTOTUNE_TEST_BUILD_SECONDS to build and AUTOTUNE_TEST_STEP_SECONDS a step in a worker (nothing in the
    test process, which only resolves it)."""
    if "AUTOTUNE_EVENT_FD" not in os.environ:
        return tiny()
    time.sleep(float(os.environ.get("AUTOTUNE_TEST_BUILD_SECONDS", "0")))
    return tiny(model=SlowSteps())


class Segfaults(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGSEGV)
        return super().forward(x)


def segfaults() -> Workload:
    return tiny(model=Segfaults())


class Raises(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the model refuses this batch")


def raises() -> Workload:
    """Builds, then raises whenever the model runs (`targets.workloads:raises_in_factory` raises while building)."""
    return tiny(model=Raises())


class WrongWhenCompiled(TinyMLP):
    """Correct eagerly, wrong under torch.compile (its head is skipped): the accuracy check must catch it.

    The wrong output is a view of a matrix product, so that, like the right one, it needs no C++ kernel.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return self.body(x)[:, :4]
        return super().forward(x)


def wrong_when_compiled() -> Workload:
    return tiny(model=WrongWhenCompiled())


class DropoutMLP(TinyMLP):
    """TinyMLP with dropout at 0.1 between its layers, as a GPT-style model has after attention and the MLP."""

    def __init__(self) -> None:
        super().__init__(bias=False)
        self.body[1] = nn.Dropout(0.1)


class DropsMoreWhenCompiled(DropoutMLP):
    """Right eagerly; compiled, its dropout drops three times as much: only a check in train mode can see it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dropout = self.body[1]
        p = 3 * dropout.p if torch.compiler.is_compiling() else dropout.p
        hidden = nn.functional.dropout(self.body[0](x), p, self.training)
        return self.head(self.body[2](hidden))


def dropout_train() -> Workload:
    return tiny("train", model=DropoutMLP())


def drops_more_when_compiled() -> Workload:
    return tiny("train", model=DropsMoreWhenCompiled())


def recompiles() -> Workload:
    """Four batch sizes under dynamic=False and a recompile limit of 2: dynamo falls back to eager.

    The limit is dynamo's, for the whole process: it is set in a worker only, never in the test process that
    builds this workload to read its summary, where every later test would inherit it."""
    if "AUTOTUNE_EVENT_FD" in os.environ:
        torch._dynamo.config.recompile_limit = 2
    return tiny(batches=lambda: _batches((3, 5, 7, 9)))


class IgnoresItsLearningRateWhenCompiled(torch.optim.SGD):
    """Plain SGD eagerly; compiled, its step reads a learning rate baked in (0.1) instead of its group's (0.01)."""

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        for group in self.param_groups:
            lr = 0.1 if torch.compiler.is_compiling() else group["lr"]
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.sub_(parameter.grad * lr)


class SkipsItsUpdateWhenCompiled(torch.optim.SGD):
    """Plain SGD eagerly; compiled, its step returns at once: the parameters silently stay as they were."""

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        if torch.compiler.is_compiling():
            return None
        return super().step(closure)


def skips_its_update_when_compiled() -> Workload:
    """Training whose optimizer step, once compiled, updates nothing."""
    return tiny("train", optimizer=lambda params: SkipsItsUpdateWhenCompiled(params, lr=0.01))


@torch.compiler.disable
def _off_under_two_settings(y: torch.Tensor) -> torch.Tensor:
    """`y`, or half of it again where float32 matmuls may be less exact and the activations' budget is below 1."""
    precision = torch.get_float32_matmul_precision() != "highest"
    budget = torch._functorch.config.activation_memory_budget < 1.0
    return y * 1.5 if precision and budget else y


class WrongUnderTwoSettings(TinyMLP):
    """Right eagerly, and compiled under either setting alone; compiled under both, its output is 50% off."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return _off_under_two_settings(y) if torch.compiler.is_compiling() else y


def wrong_under_two_settings() -> Workload:
    """Training that fails its check only where two process-wide settings are made together."""
    return tiny("train", model=WrongUnderTwoSettings(bias=False))


class WrongFromTheThirdCall(TinyMLP):
    """Right eagerly; compiled, its output is 10% off from its third call on (a counter in a buffer, so no guard and no
    recompile: what a value gone stale after the first steps looks like)."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__(bias=bias)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        y = super().forward(x)
        if torch.compiler.is_compiling():
            y = torch.where(self.calls >= 3, y * 1.1, y)
        return y


def wrong_from_the_third_step() -> Workload:
    """Training whose compiled model goes wrong from its third step on."""
    return tiny("train", model=WrongFromTheThirdCall(bias=False))


class WrongWhenWarm(TinyMLP):
    """Right eagerly and in its configuration's first run; compiled in a later run from the same cache folder (as a
    cache entry loaded wrong would be), its output is 10% off."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__(bias=bias)
        folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR") if "AUTOTUNE_EVENT_FD" in os.environ else None
        marker = Path(folder).parent / "built-before" if folder else None
        self.warm = bool(marker and marker.exists())
        if marker is not None:  # a worker's, in its run's cache folder
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y * 1.1 if self.warm and torch.compiler.is_compiling() else y


def wrong_when_warm_train() -> Workload:
    return tiny("train", model=WrongWhenWarm(bias=False))


def wrong_when_warm_infer() -> Workload:
    return tiny("infer", model=WrongWhenWarm())


class ScalesItsUpdateWhenCompiled(torch.optim.SGD):
    """Plain SGD eagerly; compiled, its step updates by `factor` times its learning rate."""

    factor = 1.0

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        for group in self.param_groups:
            lr = group["lr"] * (self.factor if torch.compiler.is_compiling() else 1.0)
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.sub_(parameter.grad * lr)


def _bfloat16_scaled(factor: float) -> Workload:
    optimizer = type(f"Scales{factor}", (ScalesItsUpdateWhenCompiled,), {"factor": factor})
    return tiny("train", autocast=torch.bfloat16, optimizer=lambda params: optimizer(params, lr=0.05))


def bfloat16_half_update_when_compiled() -> Workload:
    """Training under bfloat16 autocast, whose compiled optimizer step updates half as much as eager's."""
    return _bfloat16_scaled(0.5)


def bfloat16_tenth_too_large_update_when_compiled() -> Workload:
    """Training under bfloat16 autocast, whose compiled optimizer step updates 10% more than eager's."""
    return _bfloat16_scaled(1.1)


def bfloat16_train() -> Workload:
    """Training under bfloat16 autocast, right eagerly and compiled."""
    return _bfloat16_scaled(1.0)


class SkipsAGroupWhenCompiled(torch.optim.SGD):
    """Plain SGD eagerly over its two parameter groups; compiled, its step updates the first group only."""

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        groups = self.param_groups[:1] if torch.compiler.is_compiling() else self.param_groups
        for group in groups:
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.sub_(parameter.grad * group["lr"])


def _two_groups(optimizer: type[torch.optim.Optimizer]) -> Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]:
    """A factory of `optimizer` over two parameter groups: the body's parameters, then the head's."""

    def build(parameters: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        every = list(parameters)
        return optimizer([{"params": every[:-1]}, {"params": every[-1:], "lr": 0.02}], lr=0.01)

    return build


def adamw_train() -> Workload:
    """Training with AdamW over two parameter groups, right eagerly and compiled."""
    return tiny("train", optimizer=_two_groups(torch.optim.AdamW))


def ignores_its_learning_rate_when_compiled() -> Workload:
    """Training whose optimizer step, once compiled, updates with another learning rate than eager's."""
    return tiny("train", optimizer=_two_groups(IgnoresItsLearningRateWhenCompiled))


def skips_a_group_when_compiled() -> Workload:
    """Training whose optimizer step, once compiled, leaves the head's parameter group as it was."""
    return tiny("train", optimizer=_two_groups(SkipsAGroupWhenCompiled))


@torch.compiler.disable
def _forget_gradients(module: nn.Module) -> None:
    for parameter in module.parameters():
        parameter.grad = None


class OverwritesAccumulatedGradients(TinyMLP):
    """Compiled, each forward drops the gradients accumulated so far: the second micro-batch overwrites the first."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            _forget_gradients(self)
        return super().forward(x)


def overwrites_accumulated_gradients() -> Workload:
    """Training with two micro-batches a step, whose compiled model keeps only the last one's gradients."""
    return tiny("train", model=OverwritesAccumulatedGradients(bias=False), accumulation_steps=2)


def _own_setup(optimizer: type[torch.optim.Optimizer], lr: float | torch.Tensor) -> Callable[[nn.Module], Any]:
    """A script's setup: `optimizer` over two parameter groups (decay on the body only) and a warm-up schedule."""

    def setup(model: nn.Module) -> tuple[torch.optim.Optimizer, Any]:
        every = list(model.parameters())
        groups = [{"params": every[:-1], "weight_decay": 0.1}, {"params": every[-1:], "weight_decay": 0.0}]
        built = optimizer(groups, lr=lr)
        return built, torch.optim.lr_scheduler.LambdaLR(built, lambda step: min(1.0, 0.5 + 0.25 * step))

    return setup


def _own_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor, schedule: Any) -> torch.Tensor:
    """A script's train_step: forward, loss, backward, clipping, the optimizer's and the schedule's steps, zeroing."""
    loss = model(batch).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def _own_step_workload(setup: Callable[[nn.Module], Any]) -> Workload:
    return Workload(model=TinyMLP(bias=False), batches=_batches, step=_own_step, setup=setup, num_batches=4)


def own_step_train() -> Workload:
    """Training by its own step (clipping, a schedule, AdamW over two groups, a tensor learning rate): right eagerly
    and compiled."""
    return _own_step_workload(_own_setup(torch.optim.AdamW, torch.tensor(0.01)))


def own_step_ignores_its_learning_rate_when_compiled() -> Workload:
    """Training by its own step, whose optimizer step, once compiled, updates with another learning rate."""
    return _own_step_workload(_own_setup(IgnoresItsLearningRateWhenCompiled, torch.tensor(0.01)))


def own_step_float_schedule() -> Workload:
    """Training by its own step whose schedule sets a Python float learning rate every step."""
    return _own_step_workload(_own_setup(torch.optim.AdamW, 0.01))


def own_step_one_cycle() -> Workload:
    """Training by its own step with AdamW under torch's OneCycleLR, which sets the learning rate and the first beta
    as Python floats every step."""

    def setup(model: nn.Module) -> tuple[torch.optim.Optimizer, Any]:
        built = torch.optim.AdamW(model.parameters(), lr=torch.tensor(0.01))
        return built, torch.optim.lr_scheduler.OneCycleLR(built, max_lr=0.01, total_steps=1000)

    return _own_step_workload(setup)


class CountsItsLearningRate(torch.optim.SGD):
    """Plain SGD, whose step counts its learning rate out in thousandths with a Python loop. Traced, the loop's length
    guards on the rate's value, so a compiled step compiles again at every new rate: a stand-in, on any backend, for
    a step that Inductor specialises on a float a schedule changes (OneCycleLR's betas)."""

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        for group in self.param_groups:
            thousandths = sum(1 for _ in range(round(group["lr"] * 1000)))
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.sub_(parameter.grad * (thousandths / 1000))


def own_step_rising_schedule() -> Workload:
    """Training by its own step with `CountsItsLearningRate`, whose rate a schedule raises by 0.01 every step."""

    def setup(model: nn.Module) -> tuple[torch.optim.Optimizer, Any]:
        built = CountsItsLearningRate(model.parameters(), lr=0.01)
        return built, torch.optim.lr_scheduler.LambdaLR(built, lambda step: 1.0 + step)

    return _own_step_workload(setup)


class DetourBlock(nn.Module):
    def __init__(self, broken: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.broken = broken

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y + 1.0 if self.broken and torch.compiler.is_compiling() else y


@torch.compiler.disable
def _pause(seconds: float) -> None:
    """A pause that compiled code takes too: dynamo leaves this function to Python."""
    time.sleep(seconds)


class SlowWhenCompiled(TinyMLP):
    """Correct under torch.compile, but every compiled step pauses: compiling never pays off."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            _pause(0.004)
        return super().forward(x)


def slow_when_compiled() -> Workload:
    return tiny(model=SlowWhenCompiled())


class Detour(nn.Module):
    """Two repeated linear blocks behind a pause that only eager Python takes.

    Compiled whole, its pause is twenty times shorter, so it runs far faster than
    eager or than compiling each block (regional scope), whose caller stays eager Python: a
    configuration that is truly faster than another, for retuning to find. Linear layers
    alone make Inductor emit no C++ kernels, so each compile takes seconds on a CPU.
    With AUTOTUNE_TEST_BROKEN set, its blocks go wrong under torch.compile, like a new torch
    that broke the tuned configuration; with AUTOTUNE_TEST_SLOW set, a compiled step does more
    work than before (ten times eager's pause), like a change that slows the tuned model down.
    """

    def __init__(self) -> None:
        super().__init__()
        broken = bool(os.environ.get("AUTOTUNE_TEST_BROKEN"))
        self.blocks = nn.ModuleList(DetourBlock(broken) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            time.sleep(0.002)
        else:
            # Compiled, a pause twenty times shorter: without one, a compiled step is microseconds of Python
            # and two tiny kernels, whose rate differed twofold between two processes of one confirmation. Slowed,
            # ten times eager's pause: about 0.1x eager, far below what any tuning on a busy machine recorded (a
            # pause twice eager's read 0.49x [0.36, 0.66] beside a neighbour, within what the search had recorded).
            _pause(0.02 if os.environ.get("AUTOTUNE_TEST_SLOW") else 0.0001)
        for block in self.blocks:
            x = block(x)
        return x


def detour_infer() -> Workload:
    return tiny(model=Detour())


class Pointwise(TinyMLP):
    """TinyMLP with a ReLU between its body and its head: one generated C++ kernel, which Inductor compiles against
    its precompiled header (built once for every later process of the environment)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def pointwise_infer() -> Workload:
    return tiny(model=Pointwise())


class Wide(nn.Module):
    """One 4096x4096 linear layer: 64 MiB of weights, so a second copy of them shows in peak memory."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4096, 4096)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def wide_infer() -> Workload:
    return Workload(model=Wide(), batches=lambda: [torch.randn(4, 4096) for _ in range(2)], task="infer", num_batches=2)


class KeepsCompiling(TinyMLP):
    """Every call changes a Python int the compiled code specialises on: it compiles again on every pass."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return super().forward(x) * self.calls / self.calls


def keeps_compiling() -> Workload:
    return tiny(model=KeepsCompiling(), batches=lambda: [torch.randn(6, 16)], num_batches=1)


class SlowEagerStep(nn.Module):
    """An eager step pauses for seconds; a compiled one does not (dynamo leaves the pause out).

    Linear layers only: Inductor builds no C++ kernel for them, so compiling takes a second or two.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            time.sleep(float(os.environ.get("AUTOTUNE_TEST_PAUSE", "6")))
        return self.layers(x)


def slow_eager_step() -> Workload:
    return tiny(model=SlowEagerStep())


def _long_tailed(count: int = 4) -> list[torch.Tensor]:
    """Batches whose row count varies widely: every fresh draw brings lengths the fixed batches did not have."""
    lengths = torch.randint(3, 64, (count,))
    return [torch.randn(int(length), 16) for length in lengths]


def long_tailed() -> Workload:
    # The recompile limit is dynamo's default: a static configuration hits it on the fresh stream or pays for each shape.
    return tiny(batches=_long_tailed, dynamic_dims={0: [0]})


class HogsWhileMeasuring(TinyMLP):
    """Starts busy processes (one per core) during its 40th step, once per marker file.

    They spin until the worker that started them exits (30 s at most), so the rest of that
    run sees a busy machine and the next run, in a new worker, a quiet one.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        marker = os.environ.get("AUTOTUNE_TEST_HOG_MARKER")
        if self.calls == 40 and marker and not os.path.exists(marker):
            open(marker, "w").close()
            spin = (
                "import os, time\nend = time.time() + 30\n"
                f"while os.getppid() == {os.getpid()} and time.time() < end:\n    pass\n"
            )
            for _ in range(max(2, os.cpu_count() or 2)):
                subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
        return super().forward(x)


def hogs_while_measuring() -> Workload:
    return tiny(model=HogsWhileMeasuring())


class AllocatesTooMuch(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # 64 TiB: the CPU allocator refuses at once ("DefaultCPUAllocator: can't allocate memory").
        torch.empty(1 << 46, dtype=torch.uint8)
        return super().forward(x)


def oom_on_cpu() -> Workload:
    return tiny(model=AllocatesTooMuch())


class KilledFromOutside(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # What the kernel's out-of-memory killer does: SIGKILL, no exception, no last words.
        os.kill(os.getpid(), signal.SIGKILL)
        return super().forward(x)


def killed_from_outside() -> Workload:
    return tiny(model=KilledFromOutside())


def exits_in_factory() -> Workload:
    sys.exit(0)


def aborts_in_factory() -> Workload:
    os.abort()


def loss_is_none() -> Workload:
    """Training whose loss function forgets to return the loss."""
    return tiny("train", loss=lambda output, batch: None)


def own_step_returns_none() -> Workload:
    """Training by its own step, which forgets to return the loss."""

    def step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> None:
        model(batch).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    optimizer = lambda params: torch.optim.SGD(params, lr=0.01)  # noqa: E731
    return Workload(model=TinyMLP(bias=False), batches=_batches, step=step, optimizer=optimizer, num_batches=4)


def loss_is_nan() -> Workload:
    """Training on a broken data pipeline: every batch is NaN, so eager's own loss is NaN from the first step."""
    return tiny("train", batches=lambda: [torch.full((6, 16), float("nan")) for _ in range(4)])


def outputs_are_infinite() -> Workload:
    """Inference on batches that overflow: eager's own outputs are not finite."""
    return tiny("infer", batches=lambda: [torch.full((6, 16), float("inf")) for _ in range(4)])


def quits_in_factory() -> Workload:
    """Ends its process with status 0 and no word, as a library that calls os._exit(0) would."""
    os._exit(0)


def interrupted_in_factory() -> Workload:
    raise KeyboardInterrupt


def loss_is_a_vector() -> Workload:
    """Training whose loss function forgets to reduce: one loss per sample."""
    return tiny("train", loss=lambda output, batch: output.sum(dim=1))


def leaves_a_process_in_factory() -> Workload:
    """Starts a helper process and returns without ending it, as a factory that spawns a data server would."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # left-behind helper"])
    return tiny_infer()


DAEMON_SECONDS = {
    "new_session": "3137",
    "double_fork": "3138",
    "in_every_build": "3139",
    "killed_with_its_worker": "3140",
}
"""How long each detached `sleep` of the daemon factories sleeps: an argument no other process has, to find it by."""


def starts_a_daemon_in_factory() -> Workload:
    """Starts a `sleep` in a session of its own (as a logging or data-loading helper starts its daemon) and returns
    without ending it: it leaves the process group of the process that built the workload."""
    _sleep_detached(DAEMON_SECONDS["new_session"])
    return tiny_infer()


def double_forks_a_daemon_in_factory() -> Workload:
    """Starts a `sleep` the way a Unix daemon does, by a double fork: a child starts a new session, forks the `sleep`
    and ends at once, so the `sleep` has neither the builder's group nor the builder as its parent."""
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            _sleep_detached(DAEMON_SECONDS["double_fork"])
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    return tiny_infer()


def starts_a_daemon_in_every_build() -> Workload:
    """starts_a_daemon_in_factory, with a `sleep` of its own to look for."""
    _sleep_detached(DAEMON_SECONDS["in_every_build"])
    return tiny_infer()


class HangsWhenRun(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(600)
        return super().forward(x)


def hangs_beside_a_daemon() -> Workload:
    """Starts a detached `sleep` when built, then hangs: its worker is killed at its time limit while it lives."""
    _sleep_detached(DAEMON_SECONDS["killed_with_its_worker"])
    return tiny(model=HangsWhenRun())


def _sleep_detached(seconds: str) -> None:
    subprocess.Popen(
        ["sleep", seconds],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class FailsLater(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.broken:
            raise RuntimeError("the model broke after the search")
        return super().forward(x)


def fails_after_the_baselines() -> Workload:
    """Runs in the first four worker processes (the two baselines, cold and then warm, whose compile run a plain
    trial reuses), fails in every later one."""
    model = FailsLater()
    model.broken = False
    if "AUTOTUNE_EVENT_FD" in os.environ:  # inside a worker, not the search process
        counter = os.environ["AUTOTUNE_TEST_COUNTER"]
        with open(counter, "a") as out:
            out.write("run\n")
        with open(counter) as runs:
            model.broken = len(runs.readlines()) > 4
    return tiny(model=model)


SPIN_SECONDS = 0.001
"""A spinning step's work: a millisecond of this thread's CPU time."""
SPIN_FACTORS = {"highest": 1.00, "high": 0.95, "medium": 1.05}
"""How much of that work a step does under each float32 matmul precision a configuration may set."""


@torch.compiler.disable
def _spin(factors: dict[str, float]) -> None:
    """CPU-bound work of an exactly known amount, read from the process's float32 matmul precision when it runs.

    The step spins until its thread has used its share of CPU time, so its cost does not depend
    on where the process's memory landed or on how fast the machine runs at the moment: two
    processes of one configuration cost the same, and a busy machine stretches the step's wall
    time by the CPU it takes away, as it does any step. Dynamo leaves this function to Python,
    so eager and compiled steps spin alike; `factors` says how much each precision a configuration
    may set spins (SPIN_FACTORS: 'high' 5% less, 'medium' 5% more).
    """
    end = time.thread_time() + SPIN_SECONDS * factors[torch.get_float32_matmul_precision()]
    while time.thread_time() < end:
        pass


class Spins(TinyMLP):
    """A step whose cost is known: the spin, and a tiny MLP. A busy machine slows the spin like any CPU work."""

    factors = SPIN_FACTORS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _spin(self.factors)
        return super().forward(x)


def spins() -> Workload:
    return tiny(model=Spins())


class SpinsLess(Spins):
    """The spinning step, 30% less of it under the 'high' precision: a gain a busy machine's noise cannot hide.

    Beside two busy processes on two cores, a paired window's log-ratio ranged from -0.02 to 0.49 (AMD EPYC),
    and 15% less (log 0.16) was left undecided after six replicates on another machine; 30% (log 0.36) is
    still far less than the busy processes' halving (log 0.69), which swamps it without pairing.
    """

    factors = {**SPIN_FACTORS, "high": 0.70}


def spins_less() -> Workload:
    return tiny(model=SpinsLess())


class SpinsApart(Spins):
    """The spinning step, 15% less of it under 'high' and 15% more under 'medium': a gain and a loss to tell apart."""

    factors = {**SPIN_FACTORS, "high": 0.85, "medium": 1.15}


def spins_apart() -> Workload:
    return tiny(model=SpinsApart())


class SpinsHalf(Spins):
    """The spinning step, half of it under the 'high' precision: a gain three replicates decide on any machine."""

    factors = {**SPIN_FACTORS, "high": 0.50}


def spins_half_train() -> Workload:
    """Training with the spinning step: plain compile, and twice as fast under 'high' precision."""
    return tiny("train", model=SpinsHalf(bias=False))


@torch.compiler.disable
def _phase(calls: list[int]) -> int:
    """1 for the first 39 calls, 2 from then on; counted outside the compiled code, so only the result is guarded."""
    calls[0] += 1
    return 1 if calls[0] < 40 else 2


class RecompilesOnce(TinyMLP):
    """From its 40th call on, a Python int the compiled code specialises on changes once: one recompile, then none."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = [0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        phase = _phase(self.calls)
        return super().forward(x) * phase / phase


def recompiles_once() -> Workload:
    return tiny(model=RecompilesOnce())


class SpinsAndHogsWhenFaster(SpinsLess):
    """The spinning step, 30% less of it under the 'high' precision, which also starts two busy processes per core
    on its first call.

    They spin until the worker that started them is gone, in sessions of their own (so a pause of
    the worker does not pause them): its windows and the windows of whatever is measured beside
    it all see a busy machine. Two per core leave any other process about a third of a core, far below
    what 30% less work gains alone; paired with plain compile it is 1.4 times as fast, a margin that
    the busy processes' noise between paired windows (log-ratios up to 0.49 seen) does not close.
    """

    started = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.started and torch.get_float32_matmul_precision() == "high":
            type(self).started = True
            spin = (
                "import os, time\nend = time.time() + 300\n"
                f"while os.getppid() == {os.getpid()} and time.time() < end:\n    pass\n"
            )
            # Two per core it may run on (four on the 2-core machine): on more cores, fewer would leave it a quiet one.
            for _ in range(2 * max(2, len(os.sched_getaffinity(0)))):
                subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
        return super().forward(x)


def spins_and_hogs_when_faster() -> Workload:
    return tiny(model=SpinsAndHogsWhenFaster())


def _cold_process() -> bool:
    """Whether this worker started with an empty Inductor cache folder: a first run, which compiles cold."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return "AUTOTUNE_EVENT_FD" in os.environ and bool(folder) and not any(Path(folder).glob("*"))


class SlowerInItsFirstRun(Spins):
    """The spinning step, except that under 'high' precision it spins 1.5 times as long in its first, cold run.

    Warm from its cache it does 5% less work than plain compile (SPIN_FACTORS); in the process
    that compiled it, 0.95 x 1.5: a configuration whose first run is slower than its warm restarts.
    Plain compile ('highest') spins the same in every process.
    """

    def __init__(self) -> None:
        super().__init__()
        slower = 1.5 if _cold_process() else 1.0
        self.factors = {name: factor * (slower if name == "high" else 1.0) for name, factor in SPIN_FACTORS.items()}


def slower_in_its_first_run() -> Workload:
    return tiny(model=SlowerInItsFirstRun())


class SlowerInTheReference(Spins):
    """The spinning step; plain compile's first warm process, a search's live reference, spins 1.25 times as long.

    Plain compile's later warm processes (a search's anchors, the confirmation's replicates) and
    every other configuration spin as `Spins` does: the reference sits at a level of its own, a
    fresh plain compile running 1.25 times its rate, and under 'high' precision a trial is 5%
    faster than plain compile but about 1.3 times the reference.
    """

    def __init__(self) -> None:
        super().__init__()
        folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        cache = Path(folder).parent if folder else None
        if cache is not None and cache.name == "compile" and not _cold_process() and "AUTOTUNE_EVENT_FD" in os.environ:
            marker = cache.parent / "reference-started"
            if not marker.exists():
                marker.touch()
                self.factors = {**SPIN_FACTORS, "highest": 1.25}


def slower_in_the_reference() -> Workload:
    return tiny(model=SlowerInTheReference())


def records_its_process() -> Workload:
    """tiny_infer, after writing what its process looks like (pid, parent, group, caches, random draw, threads)
    as JSON into the folder AUTOTUNE_TEST_RECORDS names: how a worker was started, seen from inside."""
    import random
    import threading

    folder = Path(os.environ["AUTOTUNE_TEST_RECORDS"])
    record = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pgid": os.getpgrp(),
        "sid": os.getsid(0),
        "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "event_fd": os.environ.get("AUTOTUNE_EVENT_FD"),
        "draw": random.random(),
        "numpy_draw": __import__("numpy").random.random(),
        "threads": [t.name for t in threading.enumerate()],
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "bad_fork": torch.cuda._is_in_bad_fork(),
    }
    (folder / f"process-{os.getpid()}.json").write_text(json.dumps(record))
    return tiny("infer")
