"""The compile doctor's process: `python -m autotune.trial.doctor REQUEST.json`.

It builds the workload and runs its step once eagerly, on the first fixed batch: a workload whose
own step fails with nothing compiled is reported as the workload's error, in a line, since no trial
could run it either. It then compiles the model the way a user's plain `torch.compile(model)`
would, but with dynamo's `eager` backend (graph breaks and recompiles are decided by
dynamo before any backend runs, so they are the same as with Inductor, found in seconds
instead of minutes), then runs the workload's steps: two passes over the fixed batches,
then each fresh batch once. It reports what dynamo said while doing so:

- every graph break, from torch's `graph_breaks` log records (where dynamo broke, the
  user stack, torch's reason, explanation and hints), one entry per break dynamo logged;
- every recompile, from dynamo's compilation metrics (`recompile_reason`: the guard that
  failed), with the phase it happened in.

Turning these into a verdict with fixes is the parent's job (`autotune.study.doctor`).

`torch._dynamo.explain` is not used: in torch 2.13 its `break_reasons` come back empty for
breaks that the graph-break counters and log records do report (a `print`, a skipped
builtin, a data-dependent shape), and it runs the model outside the workload's step. The
log records carry the place and the stack; the counters carry only the reason.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from typing import Any, cast

import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import clear_compilation_metrics, counters

from autotune.errors import WorkloadError
from autotune.runtime.device import Device, parse_device, to_device
from autotune.trial.compile_split import compile_split
from autotune.trial.events import open_request
from autotune.trial.failure import classify, one_line, raised_at
from autotune.trial.records import DoctorFindings, Failure, PhaseChange
from autotune.trial.request import RunProtocol
from autotune.trial.worker import exit_now
from autotune.workload import input_keys, input_of, resolve
from autotune.workload.steps import StepRunner

__all__ = ["BreakLog", "main", "parse_break", "recompiles_since"]

GRAPH_BREAK_LOGGERS = "__graph_breaks"
"""Torch's graph-break artifact loggers end with this name (one per dynamo module that logs breaks)."""
_LOCATION = re.compile(r"in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.MULTILINE)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)', re.MULTILINE)


def parse_break(message: str) -> dict[str, Any]:
    """One graph-break log record as data: location, torch's reason (summary, explanation, hints) and stack.

    Torch writes a first record with the user stack for each break, and shorter ones
    ("user stack suppressed due to duplicate graph break") when the same break is hit again.
    """
    located = _LOCATION.search(message.splitlines()[0] if message else "")
    reason_text = message.partition("Graph Break Reason:")[2]
    reason_text, _, traceback_text = reason_text.partition("User code traceback:")
    if "Graph break encountered:" in reason_text:
        reason_text = reason_text.partition("Graph break encountered:")[2]
    elif reason_text.strip().startswith("Encountered graph break when attempting"):
        reason_text = reason_text.strip().partition("\n")[2]
    lines = [line.strip() for line in reason_text.strip().splitlines() if line.strip()]
    summary = lines[0] if lines else "(torch gave no reason)"
    explanation = next(
        (line.removeprefix("Explanation:").strip() for line in lines if line.startswith("Explanation:")), ""
    )
    context = next(
        (line.partition(":")[2].strip() for line in lines if line.startswith("Developer debug context:")), ""
    )
    stack = [
        {"file": m["file"], "line": int(m["line"]), "function": m["function"]} for m in _FRAME.finditer(traceback_text)
    ]
    return {
        "file": located["file"] if located else (stack[-1]["file"] if stack else ""),
        "line": int(located["line"]) if located else (stack[-1]["line"] if stack else 0),
        "summary": summary,
        "explanation": explanation,
        "torch_hints": [line.removeprefix("Hint:").strip() for line in lines if line.startswith("Hint:")],
        "context": context[:500],
        "stack": stack,
    }


class BreakLog(logging.Handler):
    """Collects torch's graph-break log records while installed (`with BreakLog() as log:`)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.breaks: list[dict[str, Any]] = []
        self._loggers: list[logging.Logger] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.breaks.append(parse_break(record.getMessage()))
        except Exception:  # a record in a format this version does not know is still a break
            self.breaks.append(parse_break(""))

    def __enter__(self) -> BreakLog:
        torch._logging.set_logs(graph_breaks=True)
        names = [name for name in logging.root.manager.loggerDict if name.endswith(GRAPH_BREAK_LOGGERS)]
        for name in names:
            logger = logging.getLogger(name)
            logger.addHandler(self)
            # Kept here rather than printed: the records carry whole stacks, and the doctor reports them.
            logger.propagate = False
            self._loggers.append(logger)
        return self

    def __exit__(self, *exc: object) -> None:
        for logger in self._loggers:
            logger.removeHandler(self)
            logger.propagate = True
        torch._logging.set_logs()


def recompiles_since(seen: set[str], phase: str) -> list[dict[str, Any]]:
    """Recompiles dynamo recorded that are not in `seen` (compile ids), tagged with `phase`; adds them to `seen`."""
    found = []
    for metrics in torch._dynamo.utils.get_compilation_metrics():
        compile_id = str(metrics.compile_id)
        if compile_id in seen:
            continue
        seen.add(compile_id)
        if compile_id.endswith("/0"):
            continue
        found.append(
            {
                "compile_id": compile_id,
                "function": metrics.co_name or "?",
                "file": metrics.co_filename or "",
                "line": metrics.co_firstlineno or 0,
                # Older releases do not record why; the recompile still counts.
                "reason": str(getattr(metrics, "recompile_reason", None) or ""),
                "phase": phase,
            }
        )
    return found


def main(argv: list[str] | None = None) -> int:
    """Diagnose the workload of the request file; returns 0 when the analysis ran, 1 when it could not."""
    request, events = open_request(argv)
    phase = "build"
    try:
        events.emit(PhaseChange(phase=phase))
        device = parse_device(request.device)
        device.prepare()
        protocol = RunProtocol.from_dict(request.protocol)
        workload = resolve(request.spec)
        seed = request.seed
        fixed = [to_device(b, device.torch_device) for b in workload.draw_batches(seed=seed)]
        drawn = workload.fresh_batches(seed=seed, count=protocol.fresh_batches)
        fresh = [to_device(b, device.torch_device) for b in drawn]
        model = workload.model.to(device.torch_device)
        model.train(workload.trains)
        step = StepRunner(workload, device.torch_device, cuda_graphs=False)
        optimizer, step.extras = workload.build_optimizer(model)
        phase = "eager"
        events.emit(PhaseChange(phase=phase))
        if fixed:
            step.eager()(model, optimizer, fixed[0])
        compiled = compiled_as_generated(model, backend="eager")
        seen: set[str] = set()
        recompiles: list[dict[str, Any]] = []
        with BreakLog() as log:
            for phase, batches in (("fixed", fixed), ("repeat", fixed), ("fresh", fresh)):
                events.emit(PhaseChange(phase=phase))
                for batch in batches:
                    step(compiled, optimizer, batch)
                recompiles += recompiles_since(seen, phase)
        timed = _timed_compile(model, step, optimizer, fixed, device, events) if request.measure_compile else {}
        events.emit(
            DoctorFindings(
                compile_seconds=timed.get("compile_seconds"),
                compile_split=timed.get("compile_split", {}),
                blocks=list(workload.block_paths()),
                breaks=log.breaks,
                recompiles=recompiles,
                graphs=int(counters["stats"]["unique_graphs"]),
                frames=int(counters["frames"]["ok"]),
                fixed_batches=len(fixed),
                fresh_batches=len(fresh),
                recompile_limit=int(getattr(torch._dynamo.config, "recompile_limit", 8)),
                task=workload.task,
                dynamic_dims={str(k): list(v) for k, v in workload.dynamic_dims.items()},
                # Each declared axis's length in every batch: what padding would waste, and how many shapes it leaves.
                lengths={
                    f"{k}:{axis}": [int(input_of(b, k).shape[axis]) for b in (*fixed, *fresh)]
                    for k, axes in workload.dynamic_dims.items()
                    for axis in axes
                },
                inputs=[str(k) for k in input_keys(fixed[0])] if fixed else [],
                torch=torch.__version__,
            )
        )
    except Exception as exc:
        reason = classify(exc, "build" if phase == "build" else "run")
        if phase == "eager" and reason != "oom":
            # Its own step fails with nothing compiled: the workload's error, whatever raised it. What it is and
            # where it was raised say it; a traceback through autotune's frames would only bury that.
            said = str(exc) if isinstance(exc, WorkloadError) else f"{one_line(exc)} (raised at {raised_at(exc)})"
            events.emit(Failure(reason="workload_error", message=f"{NOT_EAGER}: {said}"[:2000], phase=phase))
            return 1
        if not isinstance(exc, WorkloadError):  # the workload's own code said what is wrong with it: no traceback
            traceback.print_exc()
        events.emit(Failure(reason=reason, message=f"{exc}"[:2000], phase=phase))
        return 1
    return 0


NOT_EAGER = "the workload does not run eagerly: its step failed on the first fixed batch before anything was compiled"
"""How the doctor's message starts when the workload's own step fails before anything is compiled."""


def _timed_compile(
    model: nn.Module, step: StepRunner, optimizer: Any, fixed: list[Any], device: Device, events: Any
) -> dict[str, Any]:
    """Plain torch.compile over the fixed batches: its compile time (the first pass less a second one) and its split."""
    events.emit(PhaseChange(phase="compile"))
    torch._dynamo.reset()
    clear_compilation_metrics()
    compiled = compiled_as_generated(model)

    def one_pass() -> float:
        started = time.perf_counter()
        for batch in fixed:
            step(compiled, optimizer, batch)
        device.synchronize()
        return time.perf_counter() - started

    first = one_pass()
    return {"compile_seconds": round(max(first - one_pass(), 0.0), 3), "compile_split": compile_split()}


def compiled_as_generated(model: nn.Module, **kwargs: Any) -> nn.Module:
    """`model` compiled as plain torch.compile's generated code compiles it: in place where it can be.

    A wrapper returned by `torch.compile(model)` compiles only calls made through it; a step that
    calls the model's own methods (a Lightning module's `training_step`, which calls `self(...)`)
    would run uncompiled and show no graph at all. In place, `self(...)` is the compiled call. torch's
    own modules, whose forward dynamo does not trace as a top-level frame, are wrapped as before.
    """
    if (getattr(type(model).forward, "__module__", None) or "").startswith("torch."):
        return cast(nn.Module, torch.compile(model, **kwargs))
    model.compile(**kwargs)  # replaces an earlier in-place compile: one compiled call at a time
    return model


if __name__ == "__main__":
    exit_now(main())
