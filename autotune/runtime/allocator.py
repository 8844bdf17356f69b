"""A steady host allocator: glibc's malloc with fixed thresholds, so that a training step stops faulting pages in.

With its default, adaptive thresholds, glibc's malloc hands the top of its heap back to the
operating system whenever more than 128 KiB lie free there, and takes it again on the next
step: every step of a small CPU training loop then faults its activations' pages in anew and
has the kernel zero them. Eager training steps of `examples.convnet` took hundreds of minor
page faults each; with the thresholds fixed they took none and ran faster. How many pages a
step faults also changed from one process to the next, and with it each process's own speed:
the variation between measurement replicates that no pairing inside a process can cancel
(`outputs/benchmarks/noise.md`, *The allocator*).

Fixing both thresholds turns the adaptation off: blocks under `MMAP_THRESHOLD` come from
the heap, and the heap keeps up to `TRIM_THRESHOLD` free at its top. Every process autotune
measures starts with these settings (`worker_environment`), and the generated
`apply_compilation` sets the same ones (`steady_malloc`), so what was measured is what runs.
A user who set either threshold, or swapped in another allocator, keeps that: these settings
are for glibc's malloc alone, and they are left alone where the environment already names one.

Imports only the standard library: the generated file copies `steady_malloc` as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "VARIABLES", "steady_malloc", "worker_environment"]

MMAP_THRESHOLD = 32 * 1024 * 1024
"""Blocks smaller than this come from the heap, not from a mapping of their own (glibc's largest allowed value)."""
TRIM_THRESHOLD = 256 * 1024 * 1024
"""The heap hands its top back to the operating system only when more than this lies free there."""
VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
"""glibc's environment variables for the same two settings, read when a process starts."""
_USER_CHOICES = (*VARIABLES, "GLIBC_TUNABLES", "LD_PRELOAD")
"""Where a user chooses an allocator or its settings themselves: then autotune leaves it as they set it."""


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to a measured process's environment `environ`: none when the user chose already."""
    if any(environ.get(name) for name in _USER_CHOICES):
        return {}
    return dict(VARIABLES)


def steady_malloc() -> bool:
    """Fix glibc malloc's thresholds for this process (see autotune.runtime.allocator); True when they were set.

    Leaves the allocator as it is (False) outside glibc, and where the environment already
    chose its settings or another allocator.
    """
    import ctypes
    import os

    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # not a glibc system (Windows has no confstr)
        glibc = ""
    chosen = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", "LD_PRELOAD")
    if not glibc.startswith("glibc") or any(os.environ.get(name) for name in chosen):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, 32 * 1024 * 1024) and mallopt(m_trim_threshold, 256 * 1024 * 1024))
