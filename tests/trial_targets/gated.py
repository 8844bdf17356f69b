"""A stand-in trial process for the measurement gate's tests: it "compiles" and "measures" by the clock.

`python -m tests.trial_targets.gated request.json`, with the request's spec
"COMPILE_SECONDS,MEASURE_SECONDS,FOLDER[,deaf]". While compiling it writes the time into
FOLDER/ticks-PID every 10 ms, so a test sees exactly when it ran; it counts only the time
it ran, so a pause makes its compile take longer by the clock. It then says it is ready and,
told to end with its stream pass (which its parent does in the device's turn), "measures" by
sleeping, and writes the measurement's start and end to FOLDER/measured-PID. A "deaf" one says it can
be paused quietly but ignores the SIGTSTP that asks it to, as a worker stuck in a long C call would. A
"together" one measures until another worker of FOLDER has begun to measure too (MEASURE_SECONDS at
most): two such workers measure at the same time wherever nothing stops one of them, however long
each took to start.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from autotune.trial.events import command_channel, open_request
from autotune.trial.records import EndCommand, FreshPass, Pausable, PhaseChange
from tests import fake_records


def main(argv: list[str] | None = None) -> int:
    request, events = open_request(argv)
    compile_seconds, measure_seconds, folder, *flags = request.spec.split(",")
    if "deaf" in flags:
        signal.signal(signal.SIGTSTP, signal.SIG_IGN)
        events.emit(Pausable())
    events.emit(PhaseChange(phase="compile"))
    started = time.time()
    ran, last = 0.0, time.monotonic()
    with open(os.path.join(folder, f"ticks-{os.getpid()}"), "w") as ticks:
        while ran < float(compile_seconds):
            time.sleep(0.01)
            now = time.monotonic()
            ran += min(now - last, 0.05)  # a longer gap is a pause: it does not count as compiling
            last = now
            ticks.write(f"{time.time()}\n")
            ticks.flush()
    settled = time.time()
    events.emit(fake_records.compiled(compile_seconds=settled - started, compile_span=[started, settled]))
    events.emit(fake_records.ready(settle_windows=[1.0]))
    events.emit(PhaseChange(phase="ready"))
    for command in command_channel() or [EndCommand(stream=True)]:
        if isinstance(command, EndCommand):
            break
    events.emit(PhaseChange(phase="measure"))
    measure_started = time.time()
    open(os.path.join(folder, f"measuring-{os.getpid()}"), "w").close()
    if "together" in flags:
        while not _others_measuring(folder) and time.time() < measure_started + float(measure_seconds):
            time.sleep(0.01)
    else:
        time.sleep(float(measure_seconds))
    with open(os.path.join(folder, f"measured-{os.getpid()}"), "w") as measured:
        measured.write(f"{measure_started} {time.time()}\n")
    events.emit(
        FreshPass(
            samples_per_second=1.0,
            batches_per_second=1.0,
            fresh_batches=1,
            fresh_recompiles=0,
            fresh_compile_seconds=0.0,
        )
    )
    events.emit(fake_records.result(samples_per_second=1.0, batches_per_second=1.0))
    return 0


def _others_measuring(folder: str) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith("measuring-") and name != f"measuring-{os.getpid()}"]


if __name__ == "__main__":
    sys.exit(main())
