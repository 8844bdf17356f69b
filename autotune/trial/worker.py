"""The trial process: `python -m autotune.trial.worker REQUEST.json`.

This module is the process's entry: it reads the request, waits for its parent's go where it was
started beside other subjects, and sends the result or the failure. The run itself is
`autotune.trial.measuring.WorkerRun`, and the accuracy check's eager references are
`autotune.trial.references`. The run builds the workload, applies the configuration by executing
the generated `apply_compilation.py` (none for the eager baseline), checks it against eager, and
gets ready:

1. compile time: applying the configuration and warming up on the fixed batches until a
   pass compiles nothing new (the eager reference of the accuracy check is not in it);
2. settle windows on the fixed batches: a window in which anything compiled is measured
   again, so a ready worker has stopped compiling on what it has seen.

Started beside other subjects (AUTOTUNE_HOLD set), it first imports, says "held" and waits for
its parent's go (`may_go_on`). Then it says "ready" and does what its parent asks, one command per
line on the descriptor named by AUTOTUNE_COMMAND_FD (without one, it ends at once), each a typed
record of `autotune.trial.records`:

* `WindowCommand(index=k, start=s, count=n)`: time batches s .. s+n-1 of the fresh
  stream (modulo its length), each once, with the calibration probe just before; the steps
  that compiled a new shape are timed apart and counted. The parent gives every subject of a
  turn the same slice, and stops the others (SIGSTOP) while one measures;
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
import os
import signal
import sys
import traceback

from autotune.errors import WorkloadError
from autotune.runtime.device import Device, parse_device
from autotune.trial.events import (
    COMMAND_FD_VARIABLE,
    HOLD_VARIABLE,
    PAUSE_FD_VARIABLE,
    Events,
    end_detached,
    open_request,
    wait_for_go,
)
from autotune.trial.failure import TrialFailure, classify, one_line
from autotune.trial.measuring import WorkerRun
from autotune.trial.records import (
    Failure,
    Held,
    Pausable,
    PhaseChange,
    WorkerOrder,
)
from autotune.workload import preimport

__all__ = ["answer_pauses", "exit_now", "may_go_on", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the trial described by the request file; returns 0 when it completed, 1 when it failed."""
    request, events = open_request(argv)
    if answer_pauses(parse_device(request.device)):
        events.emit(Pausable())
    if not may_go_on(request, events):
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
        events.emit(Failure(reason=classify(exc, trial.phase), message=one_line(exc), phase=trial.phase))
        return 1
    return 0


def may_go_on(request: WorkerOrder, events: Events) -> bool:
    """Whether the worker goes on: at once, unless it was started beside other subjects (HOLD_VARIABLE set); then
    once it has imported the workload's module, said "held" and been given the go.

    Starting Python, importing torch and the workload's module take one core each, so subjects
    started together share those seconds; building, compiling and settling, which use every
    core, wait for the parent's go, given to one subject at a time. False when the parent
    asked for anything else (the worker then ends) or closed the channel.
    """
    if not os.environ.get(HOLD_VARIABLE) or not os.environ.get(COMMAND_FD_VARIABLE):
        return True
    preimport(request.spec)  # a module that fails to import fails again, and is classified, in build
    events.emit(PhaseChange(phase="held"))
    events.emit(Held())
    return wait_for_go()


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


def exit_now(code: int) -> None:
    """End the worker without the interpreter's teardown.

    Once the result is sent there is nothing left to do, yet finalising what dynamo and
    Inductor built takes about a second after a compile, in every run. The parent removes
    the run's caches and ends its process group; only the output streams need flushing, and
    what left that group (a daemon in a session of its own) ending (`end_detached`).
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    end_detached()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
