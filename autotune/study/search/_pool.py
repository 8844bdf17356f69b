"""Several trials at once: `--workers N` threads, each running one worker process at a time.

Worker i runs on device i modulo the devices given (`--device cuda:0,cuda:1`), so with one
worker per device the trials run side by side on their own devices. Workers that share a
device compile side by side but measure one at a time, the others stopped meanwhile
(`autotune.trial.gate`). The threads share the study through the loop's lock: asking for a
trial and telling its outcome; Optuna's TPE sampler scores the trials still running with a
constant liar, so that workers do not propose the same configuration together.

Workers on different devices get disjoint shares of the host's CPU cores, so that one's
compile does not slow another's measurement; workers that share a GPU each get an equal share
of its memory, and a trial that runs out of memory there is run again alone (`TrialLoop`).

Ctrl-C stops every worker: the threads' monitors end their trials as interrupted, the gate
kills every worker's process group, and a guard process does the same if the search itself
is killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable

from autotune.measure import Harness
from autotune.runtime.device import parse_device
from autotune.study.search._loop import TrialLoop
from autotune.trial.devices import core_sets
from autotune.trial.gate import GateClosed, MeasurementGate

__all__ = ["TrialPool", "worker_devices"]


def worker_devices(devices: list[str], workers: int) -> list[str]:
    """The device of each worker: round-robin over `devices`."""
    return [devices[index % len(devices)] for index in range(workers)]


class TrialPool:
    """Runs the loop's trials on several workers until `more()` says the budget is spent."""

    def __init__(
        self,
        loop: TrialLoop,
        devices: list[str],
        *,
        more: Callable[[], bool],
        finished_one: Callable[[], None],
    ) -> None:
        self.loop = loop
        self.devices = devices
        """One entry per worker."""
        self.more = more
        """Whether another trial may start (called under the loop's lock, so two workers never both take the last)."""
        self.finished_one = finished_one
        self.gate: MeasurementGate | None = None
        self._errors: list[BaseException] = []

    def run(self) -> None:
        """Run trials on every worker until the budget is spent; re-raise what stopped a worker."""
        loop = self.loop
        loop.workers_per_device = max(self.devices.count(device) for device in self.devices)
        if loop.workers_per_device > 1:
            self.gate = MeasurementGate()
        # Each worker says it ended with an event of its own, never with `Thread.join`: on Python 3.11 a Ctrl-C
        # that interrupts a join marks the thread stopped while it still runs, so a second join returned at
        # once and the search ended before the worker told its trial.
        ended = [threading.Event() for _ in self.devices]
        threads = [
            threading.Thread(target=self._work, args=(device, done), name=f"autotune-worker-{index}", daemon=True)
            for index, (device, done) in enumerate(zip(self.devices, ended, strict=True))
        ]
        try:
            for thread in threads:
                thread.start()
            for done in ended:
                while not done.wait(0.5):
                    pass
        except BaseException:
            # Ctrl-C (in the main thread): every worker's trial ends as interrupted, and no process is left.
            self._stop(ended)
            raise
        finally:
            if self.gate is not None:
                self.gate.close()
            loop.workers_per_device = 1
            loop.stopping.clear()
        if self._errors:
            raise self._errors[0]

    def harness_for(self, device: str) -> Harness:
        """The harness of a worker on `device`: its share of the host's cores and, on a shared GPU, of its memory."""
        cores = core_sets(self.devices, sorted(os.sched_getaffinity(0))).get(device)
        sharing = self.devices.count(device)
        share = parse_device(device).memory_share(sharing)
        return dataclasses.replace(self.loop.harness, device=device, cpus=cores, memory_share=share)

    def _stop(self, ended: list[threading.Event]) -> None:
        self.loop.stopping.set()
        if self.gate is not None:
            self.gate.close()
        for done in ended:
            done.wait()

    def _work(self, device: str, done: threading.Event) -> None:
        try:
            self._trials_on(device)
        finally:
            done.set()

    def _trials_on(self, device: str) -> None:
        loop = self.loop
        harness = self.harness_for(device)
        try:
            while not loop.stopping.is_set():
                with loop.lock:
                    if not self.more():
                        return
                    trial = loop.ask()
                loop.one_trial(trial, harness=harness, gate=self.gate)
                with loop.lock:
                    self.finished_one()
        except (KeyboardInterrupt, GateClosed):
            return  # the pool stops: this worker's trial was told as interrupted
        except BaseException as exc:
            # An error of ours in one worker stops the others: the search reports it once they are gone.
            self._errors.append(exc)
            loop.stopping.set()
            if self.gate is not None:
                with contextlib.suppress(Exception):
                    self.gate.close()
