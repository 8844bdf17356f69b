"""One run of one configuration inside the trial process: build the workload, apply the configuration,
check it against eager, compile and settle (`WorkerRun`), then measure what the parent asks: windows of
the fresh stream (`measure_window`) and the whole stream once (`fresh_stream`)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from autotune.errors import WorkloadError
from autotune.runtime import codegen, compile_cache, environment
from autotune.runtime.device import Peaks, parse_device, to_device
from autotune.trial.accuracy import PRECISION_TOLERANCE, tensor_leaves
from autotune.trial.clocks import Stopwatch, cpu_times, cpu_use, load_average, others_share, steal_share
from autotune.trial.compile_counts import (
    dynamo_counts,
    fail_on_recompile_limit,
    frames_compiled,
    watch_compiles,
)
from autotune.trial.compile_split import compile_split
from autotune.trial.events import (
    MAX_PASSES,
    Events,
    command_channel,
)
from autotune.trial.failure import TrialFailure, classify, one_line, raised_at
from autotune.trial.recorded import RecordedReference, recorded_path
from autotune.trial.records import (
    CacheLoaded,
    CacheSaved,
    Compiled,
    DynamoCounts,
    EndCommand,
    EnvironmentReport,
    FreshPass,
    PhaseChange,
    ReadyReport,
    ResultReport,
    SettleWindow,
    StreamCommand,
    Window,
    WindowCommand,
    WorkerOrder,
)
from autotune.trial.references import EagerReference, WholeStepReference, same_shapes
from autotune.trial.request import RunProtocol, noisy_reason
from autotune.trial.shared_builds import SharedBuilds, check_host_isa, watch_shared_builds
from autotune.workload import resolve, samples_in
from autotune.workload.steps import StepRunner

__all__ = [
    "WorkerRun",
    "eager_is_finite",
    "fresh_stream",
    "measure_window",
    "run_steps",
    "settle_windows",
    "whole_steps",
]


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
            device_figures=self.device.figures(),
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
        # Every run of a study builds the same weights: a later run's first steps are checked against the first's.
        # torch's generator alone: what initialises a module's weights, and nothing else a workload draws.
        torch.manual_seed(self.request.seed)
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

    def _references(self) -> tuple[EagerReference | WholeStepReference | None, RecordedReference | None, float]:
        """What the compiled steps will be checked against: a first run's eager reference, run here before the compile
        clock (the model itself, so no second copy of the weights on the device); or, for a later run of a
        configuration whose first run was checked, what that run recorded. And the seconds eager's reference took."""
        checking = self.generated is not None and self.protocol.check_accuracy
        reference: EagerReference | WholeStepReference | None = None
        began = time.perf_counter()
        if checking and self.step.kind.trains:
            assert self.optimizer is not None, "a training workload builds its optimizer"
            reference = WholeStepReference.of(
                self.workload, self.model, self.optimizer, self.batches, self.step, self.request.random_as_eager
            )
            reference.optimizer_compiled = hasattr(self.generated, "OPTIMIZER_COMPILE_KWARGS")
            # The optimizer and what `setup` built beside it (a scheduler, a scaler) moved on with eager's steps:
            # built afresh, the compiled steps start where eager's did.
            self.optimizer, self.step.extras = self.workload.build_optimizer(self.model)
        elif checking:
            reference = EagerReference.of(self.workload, self.model, self.batches[0], self.step)
            reference.other = next((b for b in self.batches[1:] if same_shapes(b, self.batches[0])), None)
        referencing = time.perf_counter() - began
        later: RecordedReference | None = None
        if reference is None and self.recorded_at is not None and self.recorded_at.exists():
            started_from = (
                "a run started from the saved compile cache"
                if self.request.load_cache_path
                else "a run started from the configuration's warm cache folder"
            )
            later = RecordedReference.load(self.recorded_at, started_from)
        if self.request.changes_precision:
            for checked in (reference, later):
                if checked is not None:
                    checked.tolerance = max(checked.tolerance, PRECISION_TOLERANCE)
            if reference is not None:
                reference.why = f" (a precision-changing configuration: tolerance {reference.tolerance:g})"
        return reference, later, referencing

    def _compile(self) -> None:
        self.recorded_at = recorded_path() if self.generated is not None else None
        reference, later, referencing = self._references()
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
        excluded = 0.0
        if reference is not None:
            excluded = reference.check(self.model, self.optimizer, self.prepare)
            if self.recorded_at is not None:
                RecordedReference.of(reference).save(self.recorded_at)
        elif later is not None:
            excluded = later.check(self.model, self.optimizer, self.step, self.batches, self.prepare)
        check_span = [check_started, check_started + excluded]
        notes = list(getattr(reference, "notes", []))
        del reference, later
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
            check_seconds=referencing + excluded,
            shared_build_spans=built,
            counts=DynamoCounts(**dynamo_counts()),
            notes=notes,
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
    workload's error, naming the batch and the value. A step that raises is the workload's error
    too, with nothing compiled: what raised and where say it, a traceback through autotune's
    frames would only bury that.
    """
    for index, batch in enumerate(trial.batches):
        try:
            returned = trial.step(trial.model, trial.optimizer, trial.prepare(batch))
        except (TrialFailure, WorkloadError):
            raise
        except Exception as exc:
            if classify(exc, "run") == "oom":
                raise
            raise TrialFailure(
                "workload_error",
                f"eager's own step failed on fixed batch {index}: {one_line(exc)} (raised at {raised_at(exc)})",
            ) from exc
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

    Every subject of a turn gets the same slice; a fast one passes over it more often, so
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
