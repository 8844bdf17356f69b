"""Clocks inside the worker: synchronised wall-clock time, and how much of the machine others used meanwhile.

A window's seconds are only worth what the machine gave it: these read the load average, the
hypervisor's steal and other processes' CPU ticks around it. What the device itself says
(synchronisation, memory, the calibration probe) is asked of its `autotune.runtime.device.Device`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from autotune.runtime.device import Device
from autotune.runtime.processes import group_processes

__all__ = ["Stopwatch", "cpu_times", "cpu_use", "load_average", "others_share", "steal_share"]


def load_average() -> float | None:
    """The 1-minute load average, or None where the system does not report one."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) CPU ticks since boot from /proc/stat, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(v) for v in fields]
    except (OSError, ValueError, IndexError):
        return None
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks[:8])


def cpu_use() -> tuple[int, int, int] | None:
    """(ticks the machine was busy, ticks in all, ticks this run used), since boot, or None off Linux.

    Busy counts user, nice, system, interrupts and steal. This run's ticks are the user and
    system time of every process in its process group: its own threads (OpenMP's included) and
    the compile workers Inductor started for it, whose work is the run's own, not another load.
    """
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields), _group_ticks(os.getpgrp())


def _group_ticks(group: int) -> int:
    """User and system ticks of every live process in process group `group` (/proc/PID/stat)."""
    return sum(int(fields[11]) + int(fields[12]) for _, fields in group_processes(group))


def others_share(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None) -> float | None:
    """Share of the machine's CPU time that other processes used between two `cpu_use` readings.

    What a window's clock felt of the rest of the machine: 0 on a quiet machine, 0.5 when
    something kept one of two cores busy. None where the system does not say, or for a span
    too short for the kernel's ticks to count.
    """
    if before is None or after is None or after[1] - before[1] < 10:
        return None
    others = (after[0] - before[0]) - (after[2] - before[2])
    return max(0.0, min(1.0, others / (after[1] - before[1])))


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of CPU time the hypervisor gave to other machines between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


@dataclass
class Stopwatch:
    """Synchronised wall-clock timing of device work."""

    device: Device
    started: float = field(default=0.0)

    def start(self) -> None:
        self.device.synchronize()
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        self.device.synchronize()
        return time.perf_counter() - self.started
