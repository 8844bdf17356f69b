"""The trial process: `python -m autotune.trial.worker REQUEST.json`.

It builds the workload, applies the configuration by executing the generated
`apply_compilation.py` (none for the eager baseline), checks it against eager, and gets ready:

1. compile time: applying the configuration and warming up on the fixed batches until a
   pass compiles nothing new (the eager reference of the accuracy check is not in it);
2. settle windows on the fixed batches: a window in which anything compiled is measured
   again, so a ready worker has stopped compiling on what it has seen.

Started beside other subjects (AUTOTUNE_HOLD set), it first imports, says "held" and waits for
its parent's go (`hold`). Then it says "ready" and does what its parent asks, one command per
line on the descriptor named by AUTOTUNE_COMMAND_FD (without one, it ends at once), each a typed
record of `autotune.trial.records`:

* `WindowCommand(index=k, start=s, count=n)`: time batches s .. s+n-1 of the fresh
  stream (modulo its length), each once, with the calibration probe just before; the steps
  that compiled a new shape are timed apart and counted. The parent gives every subject of a
  block the same slice, and stops the others (SIGSTOP) while one measures;
* `StreamCommand()`: one timed pass over the whole stream, the compiles of new shapes
  included and counted (a first run's figure); it also fills the subject's cache with every
  shape the stream holds, for its later, warm runs;
* `EndCommand(stream=True)`: optionally that pass, then the result: peak memory,
  dynamo's counters, the load and CPU steal.

It streams JSON-lines events to the parent on the file descriptor named by
AUTOTUNE_EVENT_FD, exits when its parent dies, and never imports Optuna. Given a pause
descriptor (AUTOTUNE_PAUSE_FD), it answers SIGTSTP there once it has gone quiet: on a GPU, its
queued work finished and the allocator's cached blocks released, so that the worker its parent
stops next does not run on, or hold memory from, another worker's measurement.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from torch import nn
from torch.utils import _pytree as pytree

from autotune.errors import WorkloadError
from autotune.runtime import codegen, compile_cache, environment
from autotune.runtime.device import Device, Peaks, parse_device
from autotune.trial.accuracy import PRECISION_TOLERANCE, compare, tensor_leaves, tolerance_for, working_dtype
from autotune.trial.clocks import Stopwatch, cpu_times, cpu_use, load_average, others_share, steal_share
from autotune.trial.compile_counts import (
    dynamo_counts,
    fail_on_recompile_limit,
    frames_compiled,
    watch_compiles,
)
from autotune.trial.compile_split import compile_split
from autotune.trial.events import (
    COMMAND_FD_VARIABLE,
    HOLD_VARIABLE,
    MAX_PASSES,
    PAUSE_FD_VARIABLE,
    Events,
    command_channel,
    open_request,
    wait_for_go,
)
from autotune.trial.records import (
    CacheLoaded,
    CacheSaved,
    Compiled,
    DynamoCounts,
    EndCommand,
    EnvironmentReport,
    Failure,
    FreshPass,
    Held,
    Pausable,
    PhaseChange,
    ReadyReport,
    ResultReport,
    SettleWindow,
    StreamCommand,
    Window,
    WindowCommand,
    WorkerOrder,
)
from autotune.trial.request import RunProtocol, noisy_reason
from autotune.trial.shared_builds import SharedBuilds, check_host_isa, watch_shared_builds
from autotune.workload import Workload, preimport, resolve, samples_in
from autotune.workload.steps import StepState, step_of

__all__ = [
    "EagerReference",
    "StepRunner",
    "TrialFailure",
    "WholeStepReference",
    "answer_pauses",
    "classify",
    "exit_now",
    "hold",
    "main",
    "to_device",
]


class TrialFailure(Exception):
    """A trial failed for a reason the parent records (accuracy, recompile_limit, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def main(argv: list[str] | None = None) -> int:
    """Run the trial described by the request file; returns 0 when it completed, 1 when it failed."""
    request, events = open_request(argv)
    if answer_pauses(parse_device(request.device)):
        events.emit(Pausable())
    if not hold(request, events):
        return 1
    trial = WorkerRun(request, events)
    try:
        trial.run()
    except TrialFailure as failure:
        events.emit(Failure(reason=failure.reason, message=str(failure), phase=trial.phase))
        return 1
    except WorkloadError as exc:
        # The workload's own code said what is wrong with it: the message is the whole story, no traceback.
        events.emit(Failure(reason=classify(exc, trial.phase), message=str(exc), phase=trial.phase))
        return 1
    except Exception as exc:
        traceback.print_exc()
        events.emit(Failure(reason=classify(exc, trial.phase), message=_one_line(exc), phase=trial.phase))
        return 1
    return 0


def hold(request: WorkerOrder, events: Events) -> bool:
    """Started beside other subjects (HOLD_VARIABLE set): import the workload's module, say "held", wait for the go.

    Starting Python, importing torch and the workload's module take one core each, so subjects
    started together share those seconds; building, compiling and settling, which use every
    core, wait for the parent's go, given to one subject at a time. False when the parent
    asked for anything else (it ends the worker) or closed the channel.
    """
    if not os.environ.get(HOLD_VARIABLE) or not os.environ.get(COMMAND_FD_VARIABLE):
        return True
    preimport(request.spec)  # a module that fails to import fails again, and is classified, in build
    events.emit(PhaseChange(phase="held"))
    events.emit(Held())
    return wait_for_go()


@dataclass
class WorkerRun:
    """One run of one configuration (or eager), from building the workload to the result event."""

    request: WorkerOrder
    events: Events
    phase: str = "build"

    def run(self) -> None:
        """Build, check, compile, settle; say ready; then measure windows until told to end."""
        self._build()
        self._compile()
        self._settle()
        self.load_before, self.cpu_before = load_average(), cpu_times()
        # The phase first: the parent may stop the worker as soon as it reads "ready", and a phase
        # said after that stop would count the stop as settling.
        self._set_phase("ready")
        self.events.emit(self.ready)
        commands = command_channel()
        if commands is None:  # nobody to command it: a one-shot run, which ends with its stream
            self._end(stream=True)
            return
        for command in commands:
            if isinstance(command, WindowCommand):
                self._set_phase("measure")
                measure_window(self, command.index, (command.start, command.count), command.passes)
            elif isinstance(command, StreamCommand):
                fresh_stream(self)
            elif isinstance(command, EndCommand):
                self._end(stream=command.stream)
                return
        # The channel closed without an end: the parent is done with this worker.

    def _settle(self) -> None:
        """Windows on the fixed batches until `settle_windows` of them compiled nothing; the ready event's figures."""
        self._set_phase("settle")
        settle, redone = settle_windows(self)
        rates = [w.samples_per_second for w in settle]
        self.ready = ReadyReport(
            settle_windows=rates,
            settle_passes=settle[0].passes,
            windows_redone=redone,
            steady_samples_per_second=statistics.median(rates),
            samples_per_second=statistics.median(rates),
            batches_per_second=statistics.median(w.batches_per_second for w in settle),
            stream_samples=sum(samples_in(b) for b in self.stream),
            stream_batches=len(self.stream),
            threads=torch.get_num_threads(),
            device_free_mb=self.device.free_memory_mb(),
            counts=DynamoCounts(**dynamo_counts()),
        )

    def _end(self, *, stream: bool) -> None:
        """Optionally one pass over the whole stream, save the compile cache if asked, and send the result."""
        probe_before = self.peaks.probe()
        fresh = fresh_stream(self) if stream and self.fresh else None
        probe_after = self.peaks.probe()
        load_after, cpu_after = load_average(), cpu_times()
        if self.generated is not None and self.request.save_cache_path:
            saved = compile_cache.save_compile_cache(self.request.save_cache_path, str(self.device))
            self.events.emit(CacheSaved(**saved))
        # The stream pass's rate is the run's; without one, the settle windows' (the fresh_* figures are in its event).
        rates = fresh if fresh is not None else self.ready
        held, kind = self._held()
        self.events.emit(
            ResultReport(
                samples_per_second=rates.samples_per_second,
                batches_per_second=rates.batches_per_second,
                counts=DynamoCounts(**dynamo_counts()),
                peak_memory_mb=held,
                peak_reserved_mb=self.peaks.read()[1],
                memory_kind=kind,
                probe_seconds=[probe_before, probe_after],
                load=[v for v in (self.load_before, load_after) if v is not None],
                steal=steal_share(self.cpu_before, cpu_after),
                noisy=noisy_reason([probe_before, probe_after], self.ready.settle_windows),
            )
        )

    def _held(self) -> tuple[float, str]:
        """The peak memory this run held since the last reset, and what it counts (`Device.held_memory`): under CUDA
        graphs the reserved peak, which holds the graphs' pools."""
        allocated, reserved = self.peaks.read()
        return self.device.held_memory(allocated, reserved, self.request.uses_cuda_graphs)

    # -- building -------------------------------------------------------------------------------

    def _build(self) -> None:
        self.protocol = RunProtocol.from_dict(self.request.protocol)
        self.device = parse_device(self.request.device)
        self.peaks = Peaks(self.device)  # the calibration probes left out
        # Workers that share a GPU are held to a share of its memory (`Device.memory_share`).
        self.device.prepare(self.request.memory_share)
        if self.protocol.threads:
            torch.set_num_threads(self.protocol.threads)
        self._set_phase("build")
        self.workload = resolve(self.request.spec)
        seed = self.request.seed
        self.batches = [to_device(b, self.device.torch_device) for b in self.workload.draw_batches(seed=seed)]
        drawn = self.workload.fresh_batches(seed=seed, count=self.protocol.fresh_batches)
        self.fresh = [to_device(b, self.device.torch_device) for b in drawn]
        # Windows take slices of the fresh stream; without one, of the fixed batches.
        self.stream = self.fresh or self.batches
        self.model = self.workload.model.to(self.device.torch_device)
        self.events.emit(EnvironmentReport(environment=environment.fingerprint(str(self.device))))
        source = self.request.source
        path = self.request.source_path
        self.generated = codegen.load_module(source, path) if source else None
        self.prepare: Callable[[Any], Any] = self.generated.prepare_batch if self.generated else (lambda b: b)
        self.step = StepRunner(self.workload, self.device.torch_device, self.request.uses_cuda_graphs)
        if self.generated is not None:
            # The generated backward(loss): plain loss.backward(), or the compiled autograd the configuration chose.
            self.step.backward = self.generated.backward
        self.optimizer, self.step.extras = self.workload.build_optimizer(self.model)
        if self.generated is not None and self.device.torch_device.type == "cpu":
            check_host_isa()  # the host's, not the configuration's: before the compile clock (forked: asked already)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.events.emit(PhaseChange(phase=phase))

    # -- compiling ------------------------------------------------------------------------------

    def _compile(self) -> None:
        checking = self.generated is not None and self.protocol.check_accuracy
        # The reference is the model itself, run eagerly before it is compiled: no second copy
        # of the weights on the device, and its time is not part of the compile time.
        reference: EagerReference | WholeStepReference | None = None
        if checking and self.optimizer is not None:
            reference = WholeStepReference.of(self.workload, self.model, self.optimizer, self.batches, self.step)
            reference.optimizer_compiled = hasattr(self.generated, "OPTIMIZER_COMPILE_KWARGS")
            if self.workload.step is not None:
                # Your own step's extras (a scheduler, a scaler) moved on with eager's steps: build them afresh,
                # so that the compiled steps start where eager's did.
                self.optimizer, self.step.extras = self.workload.build_optimizer(self.model)
        elif checking:
            reference = EagerReference.of(self.workload, self.model, self.batches[0], self.step)
            reference.other = next((b for b in self.batches[1:] if same_shapes(b, self.batches[0])), None)
        if reference is not None and self.request.changes_precision:
            reference.tolerance = max(reference.tolerance, PRECISION_TOLERANCE)
            reference.why = f" (a precision-changing configuration: tolerance {reference.tolerance:g})"
        if not self.request.falls_back_to_eager:
            fail_on_recompile_limit()
        watch_compiles()
        self._set_phase("compile")
        started, started_epoch = time.perf_counter(), time.time()
        # Imports Inductor's code cache, as the compile below would (an eager subject imports nothing of Inductor's).
        shared = watch_shared_builds() if self.generated is not None else SharedBuilds()
        if self.generated is not None and self.request.load_cache_path:
            # Loading the artifacts is part of what a warm start costs, so it is inside the compile clock.
            loaded = self.generated.load_compile_cache(self.request.load_cache_path)
            self.events.emit(CacheLoaded(loaded=dict(loaded), load_seconds=time.perf_counter() - started))
        if self.generated is not None:
            self.model, self.optimizer = self.generated.apply_compilation(self.model, self.optimizer)
        check_started = time.time()
        excluded = reference.check(self.model, self.optimizer, self.prepare) if reference is not None else 0.0
        check_span = [check_started, check_started + excluded]
        del reference
        self.model.train(self.step.kind.trains)
        if self.generated is None:
            eager_is_finite(self)
        # Peak memory from here on: the compiled steps, not the accuracy check's tensors.
        self.peaks.reset()
        self.device.synchronize()
        settled_at, passes = self._warm_up()
        if self.generated is not None:
            self.generated.finish_warmup()
        ended_epoch = started_epoch + settled_at - started
        # A header every later process of the environment reuses is the environment's cost, not this configuration's.
        built = shared.within(started_epoch, ended_epoch)
        building = sum(end - start for start, end in built)
        compile_seconds = max(settled_at - started - excluded - building, 0.0) if self.generated is not None else 0.0
        split = compile_split()
        if building and "inductor" in split:
            split["inductor"] = max(split["inductor"] - building, 0.0)
        compiled = Compiled(
            compile_seconds=compile_seconds,
            warmup_passes=passes,
            # Compiling (max-autotune's benchmark buffers, CUDA-graph recording) may need more than the steps
            # do: its peak is kept apart, and the steady peak counts from here on.
            compile_peak_memory_mb=self._held()[0],
            compile_peak_reserved_mb=self.peaks.read()[1],
            compile_split=split,
            # Wall-clock spans, so that a parent that stopped this process for a while can leave that out.
            compile_span=[started_epoch, ended_epoch],
            check_span=check_span,
            shared_build_spans=built,
            counts=DynamoCounts(**dynamo_counts()),
        )
        self.peaks.reset()
        self.events.emit(compiled)

    def _warm_up(self) -> tuple[float, int]:
        """Passes over the fixed batches until one compiles nothing; (clock when the last compiling pass ended, passes)."""
        settled_at = time.perf_counter()
        for index in range(1, self.protocol.max_warmup_passes + 1):
            before = frames_compiled()
            self.run_pass(self.batches)
            self.device.synchronize()
            if frames_compiled() == before:
                return settled_at, index
            settled_at = time.perf_counter()
        raise TrialFailure(
            "unsettled",
            f"still compiling after {self.protocol.max_warmup_passes} warm-up passes over the same batches: "
            "something other than the input shapes changes every step",
        )

    # -- measuring ------------------------------------------------------------------------------

    def run_pass(self, batches: list[Any]) -> None:
        for batch in batches:
            self.step(self.model, self.optimizer, self.prepare(batch))


def eager_is_finite(trial: WorkerRun) -> None:
    """One eager pass over the fixed batches, whose every loss (or output) must be finite.

    A broken data pipeline or a diverged model makes eager's own figures NaN or infinite: then no
    speed figure of the workload means anything, and every compiled configuration would fail the
    accuracy check as if the compiler were wrong. The eager subject says so first, as the
    workload's error, naming the batch and the value.
    """
    for index, batch in enumerate(trial.batches):
        returned = trial.step(trial.model, trial.optimizer, trial.prepare(batch))
        for tensor in tensor_leaves(returned):
            if not bool(torch.isfinite(tensor).all()):
                bad = tensor[~torch.isfinite(tensor)].flatten()[0].item()
                what = trial.step.kind.checks
                raise TrialFailure(
                    "workload_error",
                    f"eager's own {what} is {bad} on fixed batch {index}: the workload does not compute finite "
                    "numbers without compiling (check its data and its loss), so no speed of it means anything",
                )


def settle_windows(trial: WorkerRun) -> tuple[list[SettleWindow], int]:
    """Windows on the fixed batches until `settle_windows` compiled nothing; (those windows, how many were redone).

    A window in which anything compiled is measured again: a ready subject has stopped
    compiling on the batches it has seen. One that keeps compiling fails the run.
    """
    samples = sum(samples_in(b) for b in trial.batches)
    clock = Stopwatch(trial.device)
    clock.start()
    trial.run_pass(trial.batches)
    passes = min(MAX_PASSES, max(1, math.ceil(trial.protocol.window_seconds / max(clock.elapsed(), 1e-6))))
    windows: list[SettleWindow] = []
    redone = 0
    while len(windows) < trial.protocol.settle_windows:
        frames = frames_compiled()
        clock.start()
        for _ in range(passes):
            trial.run_pass(trial.batches)
        seconds = clock.elapsed()
        if frames_compiled() != frames:
            redone += 1
            if redone > trial.protocol.settle_windows + 2:
                raise TrialFailure("unsettled", "kept compiling while measuring the same batches")
            continue
        window = SettleWindow(
            index=len(windows),
            seconds=seconds,
            passes=passes,
            samples_per_second=samples * passes / seconds,
            batches_per_second=len(trial.batches) * passes / seconds,
        )
        windows.append(window)
        trial.events.emit(window)
    return windows, redone


def measure_window(trial: WorkerRun, index: int, slice_: tuple[int, int], passes: int = 1) -> Window:
    """Time `passes` passes over a slice (start, count) of the stream (modulo its length); the probe just before.

    Every subject of a block gets the same slice; a fast one passes over it more often, so
    that each window lasts about as long. The steps that compiled something (a shape this
    run had not seen, in its first pass) are timed apart, so that the parent can count them
    once and tell the steady rate from the cost of new shapes.
    """
    stream, (start, count) = trial.stream, slice_
    batches = whole_steps([stream[(start + offset) % len(stream)] for offset in range(count)] * max(passes, 1), trial)
    probe = trial.peaks.probe()
    frames_before, use_before = frames_compiled(), cpu_use()
    trial.device.synchronize()
    started = time.perf_counter()
    compile_seconds, compile_samples, compile_batches = run_steps(trial, batches)
    window = Window(
        index=index,
        seconds=time.perf_counter() - started,
        samples=sum(samples_in(b) for b in batches),
        batches=len(batches),
        recompiles=frames_compiled() - frames_before,
        compile_seconds=compile_seconds,
        compile_samples=compile_samples,
        compile_batches=compile_batches,
        probe_seconds=probe,
        others=others_share(use_before, cpu_use()),
        load=load_average(),
    )
    trial.events.emit(window)
    return window


def whole_steps(batches: list[Any], trial: WorkerRun) -> list[Any]:
    """`batches`, continued from their start up to a whole number of optimizer steps (gradient accumulation).

    Every subject gets the same list, and each timed span then begins and ends between two
    optimizer steps: none times another's micro-batches without the step they lead to.
    """
    steps = trial.workload.accumulation_steps
    short = -len(batches) % steps
    return batches + [batches[i % len(batches)] for i in range(short)] if batches and short else batches


def run_steps(trial: WorkerRun, batches: list[Any]) -> tuple[float, int, int]:
    """Run one step per batch, the steps that compiled (or recorded) something timed apart; synchronised at the end.

    Returns (seconds, samples, batches) of those compiling steps.
    """
    seconds, samples, count = 0.0, 0, 0
    for batch in batches:
        frames = frames_compiled()
        step_started = time.perf_counter()
        trial.step(trial.model, trial.optimizer, trial.prepare(batch))
        if frames_compiled() != frames:
            trial.device.synchronize()
            seconds += time.perf_counter() - step_started
            samples += samples_in(batch)
            count += 1
    trial.device.synchronize()
    return seconds, samples, count


def fresh_stream(trial: WorkerRun) -> FreshPass:
    """One pass over the fresh batches, timed as a whole: a first run's figure, the compiles of new shapes included."""
    frames_before = frames_compiled()
    fresh = whole_steps(trial.fresh, trial)
    samples = sum(samples_in(b) for b in fresh)
    trial.device.synchronize()
    started = time.perf_counter()
    compiling_seconds, _, _ = run_steps(trial, fresh)
    elapsed = time.perf_counter() - started
    figures = FreshPass(
        samples_per_second=samples / elapsed,
        batches_per_second=len(fresh) / elapsed,
        fresh_batches=len(fresh),
        fresh_recompiles=frames_compiled() - frames_before,
        fresh_compile_seconds=compiling_seconds,
    )
    trial.events.emit(figures)
    return figures


class StepRunner:
    """One step the way a user's loop runs it under this configuration: the workload's kind of step
    (`autotune.workload.steps`), with what it carries from call to call."""

    def __init__(self, workload: Workload, device: torch.device, cuda_graphs: bool) -> None:
        self.workload = workload
        self.kind = step_of(workload)
        autocast = torch.autocast(device.type, dtype=workload.autocast) if workload.autocast else None
        self.state = StepState(autocast=autocast or contextlib.nullcontext(), cuda_graphs=cuda_graphs)

    @property
    def cuda_graphs(self) -> bool:
        return self.state.cuda_graphs

    @property
    def backward(self) -> Callable[[torch.Tensor], None]:
        return self.state.backward

    @backward.setter
    def backward(self, backward: Callable[[torch.Tensor], None]) -> None:
        self.state.backward = backward

    @property
    def extras(self) -> Any:
        return self.state.extras

    @extras.setter
    def extras(self, extras: Any) -> None:
        self.state.extras = extras

    def forward(self, model: nn.Module, batch: Any) -> Any:
        return self.kind.forward(self.state, model, batch)

    def __call__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        if self.state.cuda_graphs:
            # Replayed graphs reuse their output buffers: mark each step and read what it returns before the next.
            torch.compiler.cudagraph_mark_step_begin()
        return self.kind.run(self.state, model, optimizer, batch)


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
        with torch.no_grad():
            return [(f"output {i}", t) for i, t in enumerate(tensor_leaves(self.step.forward(model, batch)))]

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
                torch.compiler.cudagraph_mark_step_begin()
                self._compute(model, prepare(self.other if self.other is not None else self.batch))
            torch.compiler.cudagraph_mark_step_begin()
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
"""Whole optimizer steps a training configuration runs on the same batches as eager before its speed counts."""
CHECKED_STEPS_UNDER_CUDA_GRAPHS = 3
"""Under CUDA graphs: their trees warm up on a function's first call and record on its second, so that the third
step replays a recording, on another batch than the one it was recorded on."""
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
    float_rates: list[tuple[int, float, float]] = field(default_factory=list)
    """Parameter groups whose learning rate is a Python float that the steps changed: (group, first, last)."""


@dataclass
class WholeStepReference:
    """What eager training computes over a few whole optimizer steps on fixed batches, kept on the CPU.

    The compiled configuration then runs the same micro-batches from the same weights and optimizer
    state: its loss at every micro-batch, its gradients before the first optimizer step (a whole
    accumulation cycle), every parameter's update after the last step and one piece of the
    optimizer's state must match eager's. A compiled optimizer step that skips a parameter group,
    reads a learning rate baked in as a constant, or does nothing, and accumulation whose second
    micro-batch overwrites the first, all change what is compared. The eager steps run before
    the compile clock starts; the model's weights and the optimizer are put back afterwards, so
    the compiled steps start where eager's did. With dropout in the model, both run in eval
    mode, since compiled and eager dropout draw different random numbers.
    """

    workload: Workload
    step: StepRunner
    micro_batches: list[Any]
    eval_mode: bool
    tolerance: float
    before: dict[str, torch.Tensor]
    expected: StepFigures | None = None
    why: str = ""
    """Said after a failed comparison when the tolerance is not the dtype's own."""
    optimizer_compiled: bool = False
    """Whether the configuration compiles optimizer.step."""

    @classmethod
    def of(
        cls,
        workload: Workload,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        batches: list[Any],
        step: StepRunner,
    ) -> WholeStepReference:
        eval_mode = _has_dropout(model)
        first = batches[0]
        other = next((b for b in batches[1:] if same_shapes(b, first)), first)
        steps = CHECKED_STEPS_UNDER_CUDA_GRAPHS if step.cuda_graphs else CHECKED_STEPS
        micro_batches = [(first, other)[i % 2] for i in range(steps * workload.accumulation_steps)]
        weights = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
        before = {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}
        tolerance = tolerance_for(working_dtype(workload.autocast, model))
        saved = optimizer.state_dict()
        reference = cls(workload, step, micro_batches, eval_mode, tolerance, before)
        # Eager's own backward: the configuration's (compiled autograd) is what is being checked.
        reference.expected = reference._run(model, optimizer, torch.Tensor.backward, lambda batch: batch)
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                tensor.copy_(weights[name])
        optimizer.load_state_dict(saved)
        model.zero_grad(set_to_none=True)
        return reference

    def _run(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        backward: Callable[[torch.Tensor], None],
        prepare: Callable[[Any], Any],
    ) -> StepFigures:
        if self.workload.step is not None:
            return self._run_own_step(model, optimizer, prepare)
        model.train(not self.eval_mode)
        accumulation = self.workload.accumulation_steps
        losses: list[torch.Tensor] = []
        grads: dict[str, torch.Tensor | None] = {}
        first_updates: dict[str, torch.Tensor] = {}
        compiling = 0.0
        for index, batch in enumerate(self.micro_batches):
            frames, started = frames_compiled(), time.perf_counter()
            if self.step.cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()
            loss = self.workload.compute_loss(self.step.forward(model, prepare(batch)), batch)
            backward(loss / accumulation if accumulation > 1 else loss)
            losses.append(loss.detach().cpu())
            if (index + 1) % accumulation == 0:
                if index + 1 == accumulation:
                    grads = {
                        name: None if p.grad is None else p.grad.detach().cpu().clone()
                        for name, p in model.named_parameters()
                        if p.requires_grad
                    }
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if index + 1 == accumulation:
                    first_updates = self._updates(model)
            if frames_compiled() != frames:
                compiling += time.perf_counter() - started
        return StepFigures(
            losses, grads, first_updates, self._updates(model), _state_piece(model, optimizer), compiling
        )

    def _run_own_step(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, prepare: Callable[[Any], Any]
    ) -> StepFigures:
        """The workload's own step over the micro-batches, each one optimizer step: its losses, the gradients its
        first step computed (as each parameter's gradient was accumulated, before the step clips or applies them)
        and the updates."""
        model.train(not self.eval_mode)
        losses: list[torch.Tensor] = []
        grads: dict[str, torch.Tensor | None] = {n: None for n, p in model.named_parameters() if p.requires_grad}
        first_updates: dict[str, torch.Tensor] = {}
        compiling = 0.0

        def keep(name: str) -> Callable[[torch.Tensor], None]:
            def hook(parameter: torch.Tensor) -> None:
                if parameter.grad is not None:
                    grads[name] = parameter.grad.detach().cpu().clone()

            return hook

        rates = [group["lr"] for group in optimizer.param_groups]
        for index, batch in enumerate(self.micro_batches):
            hooks = (
                [p.register_post_accumulate_grad_hook(keep(n)) for n, p in model.named_parameters() if p.requires_grad]
                if index == 0
                else []
            )
            frames, started = frames_compiled(), time.perf_counter()
            try:
                losses.append(self.step(model, optimizer, prepare(batch)).cpu())
            finally:
                for hook in hooks:
                    hook.remove()
            if index == 0:
                first_updates = self._updates(model)
            if frames_compiled() != frames:
                compiling += time.perf_counter() - started
        floats = [
            (index, float(rate), float(group["lr"]))
            for index, (rate, group) in enumerate(zip(rates, optimizer.param_groups, strict=True))
            if not isinstance(group["lr"], torch.Tensor) and group["lr"] != rate
        ]
        return StepFigures(
            losses, grads, first_updates, self._updates(model), _state_piece(model, optimizer), compiling, floats
        )

    def _updates(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Each trainable parameter now, less what it was before the first step."""
        parameters = dict(model.named_parameters())
        return {name: parameters[name].detach().cpu() - value for name, value in self.before.items()}

    def check(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, prepare: Callable[[Any], Any]) -> float:
        """Run the same steps compiled and compare; returns the seconds to leave out of the compile time: the
        steps that compiled nothing, or all of them in eval mode (a mode training does not use), and the comparing."""
        assert self.expected is not None and optimizer is not None, "a training reference checks a training step"
        if self.expected.float_rates and self.optimizer_compiled:
            # A float rate that the step changes is a constant to the compiled optimizer step, and every new value
            # compiles it again.
            group, first, last = self.expected.float_rates[0]
            raise TrialFailure(
                "invalid_config",
                f"your step changes the learning rate of parameter group {group} as a Python float ({first:g} -> "
                f"{last:g} over {len(self.micro_batches)} steps), and this configuration compiles optimizer.step: "
                "every new value would compile the step again. Build the optimizer with a tensor learning rate "
                "(lr=torch.tensor(...)); torch's schedulers then update it in place.",
            )
        started = time.perf_counter()
        actual = self._run(model, optimizer, self.step.backward, prepare)
        # In the order they were computed, so that the first difference is the one named: the first step's losses,
        # its gradients and its updates, then the later losses, the last updates and the optimizer's state.
        expected, steps = self.expected, len(self.micro_batches) // self.workload.accumulation_steps
        first = self.workload.accumulation_steps
        self._compare_losses(expected, actual, steps, range(first))
        self._compare_grads(expected, actual, steps)
        self._compare_updates(expected.first_updates, actual.first_updates, expected, f"after step 1 of {steps}")
        self._compare_losses(expected, actual, steps, range(first, len(self.micro_batches)))
        self._compare_updates(expected.updates, actual.updates, expected, f"after step {steps} of {steps}")
        self._compare_state(expected, actual, steps)
        model.zero_grad(set_to_none=True)
        spent = time.perf_counter() - started
        return spent if self.eval_mode else max(spent - actual.compiling_seconds, 0.0)

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


def answer_pauses(device: Device) -> bool:
    """Handle SIGTSTP by going quiet on `device` (`Device.go_quiet`) and answering on the pause descriptor; False
    without one (nothing installed).

    Python runs the handler between two bytecodes of the main thread: never inside a kernel
    launch or an allocation. While a CUDA graph is being recorded, synchronising would break
    the recording, so then the handler only answers.
    """
    fd = os.environ.get(PAUSE_FD_VARIABLE)
    if not fd:
        return False
    answer = int(fd)

    def go_quiet(signum: int, frame: object) -> None:
        with contextlib.suppress(Exception):
            device.go_quiet()
        with contextlib.suppress(OSError):
            os.write(answer, b".")

    signal.signal(signal.SIGTSTP, go_quiet)
    return True


def classify(exc: BaseException, phase: str) -> str:
    """The FAIL reason for an exception raised in `phase`."""
    text = f"{type(exc).__name__}: {exc}".lower()
    name = type(exc).__name__
    if (
        isinstance(exc, (torch.OutOfMemoryError, MemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
    ):
        return "oom"  # building the workload included: beside other workers of a device, it may be run again alone
    if isinstance(exc, WorkloadError):
        return "workload_error"  # the user's code said what is wrong with it, in whichever phase it ran
    if name == "FailOnRecompileLimitHit" or "recompile limit" in text or "recompile_limit" in text:
        return "recompile_limit"
    if name in ("Unsupported", "UserError") or "graph break" in text:
        return "graph_break"
    if phase == "compile" or "torch._dynamo" in type(exc).__module__ or "torch._inductor" in type(exc).__module__:
        return "compile_error"
    if phase == "build":
        return "workload_error"
    return "runtime_error"


def _has_dropout(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


def to_device(batch: Any, device: torch.device) -> Any:
    """The batch with every tensor in it moved to `device` (dicts, tuples and lists kept)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def _one_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    detail = " ".join(lines[:3])[:600]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def exit_now(code: int) -> None:
    """End the worker without the interpreter's teardown.

    Once the result is sent there is nothing left to do, yet finalising what dynamo and
    Inductor built takes about a second after a compile, in every run. The parent removes
    the run's caches and ends its process group; only the output streams need flushing.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
