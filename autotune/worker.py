"""The trial process: `python -m autotune.worker REQUEST.json`.

It builds the workload, applies the configuration by executing the generated
`apply_compilation.py` (none for the eager baseline), checks it against eager, measures
compile time and steady-state throughput, and streams JSON-lines events to the parent on
the file descriptor named by AUTOTUNE_EVENT_FD. On request it first loads a compile cache
through the generated `load_compile_cache`, or saves what it compiled to one at the end.
It never imports Optuna.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import torch
from torch import nn

from autotune import codegen, compile_cache, environment
from autotune.measure import (
    DynamoWatch,
    Protocol,
    Stopwatch,
    compare,
    dynamo_counts,
    peak_memory_mb,
    reset_peak_memory,
    synchronize,
    tensor_leaves,
    tolerance_for,
)
from autotune.workload import Workload, resolve, samples_in

__all__ = ["EVENT_FD_VARIABLE", "TrialFailure", "main"]

EVENT_FD_VARIABLE = "AUTOTUNE_EVENT_FD"
MIN_WINDOW_SECONDS = 0.5
MAX_PASSES_PER_WINDOW = 64


class TrialFailure(Exception):
    """A trial failed for a reason the parent records (accuracy, recompile_limit, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Events:
    """JSON-lines events to the parent; one flush per line so the parent sees them as they happen."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def emit(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")
        self.stream.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the trial described by the request file; returns 0 when it completed, 1 when it failed."""
    args = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(args[0]).read_text())
    fd = os.environ.get(EVENT_FD_VARIABLE)
    stream = os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout
    events = Events(stream)
    phase = ["build"]
    try:
        run_trial(request, events, phase)
    except TrialFailure as failure:
        events.emit("failed", reason=failure.reason, message=str(failure), phase=phase[0])
        return 1
    except Exception as exc:
        traceback.print_exc()
        events.emit("failed", reason=classify(exc, phase[0]), message=_one_line(exc), phase=phase[0])
        return 1
    return 0


def run_trial(request: dict[str, Any], events: Events, phase: list[str]) -> None:
    """Build, apply, check and measure one configuration (or eager when `source` is None)."""
    protocol = Protocol.from_dict(request.get("protocol", {}))
    device = torch.device(request["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    events.emit("phase", phase="build")
    workload = resolve(request["spec"])
    batches = [_to_device(b, device) for b in workload.draw_batches(seed=int(request.get("seed", 0)))]
    model = workload.model.to(device)
    events.emit("environment", environment=environment.fingerprint(str(device)))
    source = request.get("source")
    generated = codegen.load_module(source, request.get("source_path", "apply_compilation.py")) if source else None
    prepare: Callable[[Any], Any] = generated.prepare_batch if generated else (lambda batch: batch)
    step = StepRunner(workload, device, bool(request.get("uses_cuda_graphs")))
    reference = copy.deepcopy(model) if generated and protocol.check_accuracy else None
    optimizer = workload.optimizer(model.parameters()) if workload.task == "train" and workload.optimizer else None
    reset_peak_memory(device)

    with DynamoWatch() as watch:
        phase[0] = "compile"
        events.emit("phase", phase="compile")
        started = time.perf_counter()
        if generated and request.get("load_cache_path"):
            # Loading the artifacts is part of what a warm start costs, so it is inside the compile clock.
            loaded = generated.load_compile_cache(request["load_cache_path"])
            events.emit("cache", loaded=loaded, load_seconds=time.perf_counter() - started)
        if generated:
            model, optimizer = generated.apply_compilation(model, optimizer)
        extra_check_seconds = 0.0
        if reference is not None:
            extra_check_seconds = check_accuracy(workload, reference, model, batches[0], prepare, step)
            del reference
        model.train(workload.task == "train")
        synchronize(device)
        settled_at, warmup_passes = warm_up(batches, prepare, model, optimizer, step, protocol, watch, device)
        compile_seconds = max(settled_at - started - extra_check_seconds, 0.0) if generated else 0.0
        counts = dynamo_counts()
        events.emit("compiled", compile_seconds=compile_seconds, warmup_passes=warmup_passes, **counts)

        phase[0] = "measure"
        events.emit("phase", phase="measure")
        samples = sum(samples_in(b) for b in batches)
        clock = Stopwatch(device)
        clock.start()
        run_pass(batches, prepare, model, optimizer, step)
        passes = min(
            MAX_PASSES_PER_WINDOW,
            max(protocol.passes_per_window, math.ceil(MIN_WINDOW_SECONDS / max(clock.elapsed(), 1e-6))),
        )
        windows = []
        for index in range(protocol.windows):
            clock.start()
            for _ in range(passes):
                run_pass(batches, prepare, model, optimizer, step)
            seconds = clock.elapsed()
            window = {
                "index": index,
                "seconds": seconds,
                "samples_per_second": samples * passes / seconds,
                "batches_per_second": len(batches) * passes / seconds,
            }
            windows.append(window)
            events.emit("window", **window)
        _fail_on_limit(watch)
        settled = dynamo_counts()
    if generated and request.get("save_cache_path"):
        events.emit("cache", **compile_cache.save_compile_cache(request["save_cache_path"], str(device)))

    throughputs = sorted(w["samples_per_second"] for w in windows)
    steps = sorted(w["batches_per_second"] for w in windows)
    events.emit(
        "result",
        samples_per_second=_median(throughputs),
        batches_per_second=_median(steps),
        samples_per_second_min=throughputs[0],
        samples_per_second_max=throughputs[-1],
        compile_seconds=compile_seconds,
        warmup_passes=warmup_passes,
        passes_per_window=passes,
        steps_per_window=passes * len(batches),
        peak_memory_mb=peak_memory_mb(device),
        memory_kind="cuda_allocated" if device.type == "cuda" else "process_rss",
        recompiled_while_measuring=settled["frames"] != counts["frames"],
        **settled,
    )


class StepRunner:
    """One training or inference step, the way a user's loop runs it under this configuration."""

    def __init__(self, workload: Workload, device: torch.device, cuda_graphs: bool) -> None:
        self.workload = workload
        self.cuda_graphs = cuda_graphs
        self.autocast = (
            torch.autocast(device.type, dtype=workload.autocast) if workload.autocast else contextlib.nullcontext()
        )

    def forward(self, model: nn.Module, batch: Any) -> Any:
        with self.autocast:
            return self.workload.run_forward(model, batch)

    def __call__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        if self.cuda_graphs:
            # Replayed graphs reuse their output buffers: mark each step and read what it returns before the next.
            torch.compiler.cudagraph_mark_step_begin()
        if self.workload.task == "infer":
            with torch.no_grad():
                output = self.forward(model, batch)
            return [t.clone() for t in tensor_leaves(output)] if self.cuda_graphs else output
        loss = self.workload.compute_loss(self.forward(model, batch), batch)
        loss.backward()
        assert optimizer is not None
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach().clone()


def run_pass(
    batches: list[Any], prepare: Callable[[Any], Any], model: nn.Module, optimizer: Any, step: StepRunner
) -> None:
    """One step on every fixed batch, in order."""
    for batch in batches:
        step(model, optimizer, prepare(batch))


def warm_up(
    batches: list[Any],
    prepare: Callable[[Any], Any],
    model: nn.Module,
    optimizer: Any,
    step: StepRunner,
    protocol: Protocol,
    watch: DynamoWatch,
    device: torch.device,
) -> tuple[float, int]:
    """Run passes until one compiles nothing new; returns (clock time when the last compiling pass ended, passes)."""
    settled_at = time.perf_counter()
    for index in range(1, protocol.max_warmup_passes + 1):
        before = dynamo_counts()["frames"]
        run_pass(batches, prepare, model, optimizer, step)
        synchronize(device)
        _fail_on_limit(watch)
        if dynamo_counts()["frames"] == before:
            return settled_at, index
        settled_at = time.perf_counter()
    return settled_at, protocol.max_warmup_passes


def check_accuracy(
    workload: Workload,
    reference: nn.Module,
    model: nn.Module,
    batch: Any,
    prepare: Callable[[Any], Any],
    step: StepRunner,
) -> float:
    """Compare the compiled model with eager on one batch; returns the seconds spent if that compiled an extra mode.

    Train: loss and every gradient after one forward/backward (no optimizer step, so the
    measured run starts from the same weights). Infer: every floating-point output.
    With dropout in the model both run in eval mode, since compiled and eager dropout
    draw different random numbers; that costs one compile of its own, excluded from the
    compile time.
    """
    training = workload.task == "train"
    mode = training and not _has_dropout(model)
    started = time.perf_counter()
    reference.train(mode)
    model.train(mode)
    tolerance = tolerance_for(workload.autocast)
    prepared = prepare(batch)
    with contextlib.nullcontext() if training else torch.no_grad():
        expected = step.forward(reference, batch)
        actual = step.forward(model, prepared)
    if training:
        pairs = [("loss", workload.compute_loss(expected, batch), workload.compute_loss(actual, prepared))]
        pairs[0][1].backward()
        pairs[0][2].backward()
        grads = dict(model.named_parameters())
        for name, param in reference.named_parameters():
            if param.grad is not None:
                pairs.append((f"grad of {name}", param.grad, grads[name].grad))
        model.zero_grad(set_to_none=True)
    else:
        wanted, got = list(tensor_leaves(expected)), list(tensor_leaves(actual))
        if len(wanted) != len(got):
            raise TrialFailure("accuracy", f"the compiled model returns {len(got)} outputs, eager {len(wanted)}")
        pairs = [(f"output {i}", e, a) for i, (e, a) in enumerate(zip(wanted, got, strict=True))]
    # A gradient is judged against its own size, but never against less than a small share of a
    # typical gradient's: some are zero in exact arithmetic and hold only rounding noise.
    norms = sorted(float(torch.linalg.vector_norm(want.detach().double())) for what, want, _ in pairs if what != "loss")
    scale = 1e-2 * norms[len(norms) // 2] if training and norms else 0.0
    for what, want, got in pairs:
        if got is None:
            raise TrialFailure("accuracy", f"{what}: eager computed it, the compiled model did not")
        if what == "loss" or not training:
            error = compare(want, got, tolerance)
        else:
            error = compare(want, got, 10 * tolerance, scale)
        if error is not None:
            raise TrialFailure("accuracy", f"{what} differs from eager: relative error {error:.3g} > tolerance")
    return time.perf_counter() - started if training and not mode else 0.0


def classify(exc: BaseException, phase: str) -> str:
    """The FAIL reason for an exception raised in `phase`."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower():
        return "oom"
    name = type(exc).__name__
    if name == "FailOnRecompileLimitHit" or "recompile limit" in text.lower():
        return "recompile_limit"
    if name in ("Unsupported", "UserError") or "graph break" in text.lower():
        return "graph_break"
    if phase == "compile" or "torch._dynamo" in type(exc).__module__ or "torch._inductor" in type(exc).__module__:
        return "compile_error"
    if phase == "build":
        return "workload_error"
    return "runtime_error"


def _fail_on_limit(watch: DynamoWatch) -> None:
    if watch.limit_hits:
        raise TrialFailure(
            "recompile_limit", f"dynamo fell back to eager after hitting its recompile limit: {watch.limit_hits[0]}"
        )


def _has_dropout(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _median(values: list[float]) -> float:
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _one_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    detail = " ".join(lines[:3])[:600]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
