"""What a compile builds once for every later process of the environment, timed so that no subject is charged for it.

Inductor compiles every CPU kernel against one large header, which it precompiles (`g++ -x
c++-header`: a large file, seconds of compiling) the first time any process of a Python
environment needs it. It keeps the result under the system's temporary folder, shared by every
process whatever its TORCHINDUCTOR_CACHE_DIR, since it depends only on the compiler, its flags and
torch's headers. So in a new environment (a fresh clone, the first search after the temporary
folder was cleared, a new torch) the first subject to compile pays it for every subject after it:
plain compile, the first baseline, whose cold compile then counted the build too
(`outputs/benchmarks/noise.md`, *The first compile of an environment paid for the rest*). The build is the
environment's, not the configuration's: `watch_shared_builds` times it, and the worker leaves it
out of the compile time, as it leaves out the accuracy check's eager reference.

Only a build that had not been made yet counts, and the wait for another process that is making
it; the header's preprocessing, which every process does again, stays in. The watch wraps
Inductor's private `_precompile_header` and `_worker_compile_cpp`; a torch without them builds no
shared header this way, and nothing is left out.

The host's vector instructions are the same kind of cost. Before its first CPU kernel, a process
asks which vector instruction sets (AVX512-VNNI, AVX512 and AVX2 on x86) the compiler can build
and the machine load: per set it builds a test library in the process's cache folder, then loads it
in a new Python process. With a trial's empty cache folder that took seconds, with a filled one
less, and every worker paid it again, in its cold compile and in its warm start (the demo before and after
the change: `outputs/benchmarks/timings.md`). A user's own processes, whose cache folder persists, pay the
lesser cost. `check_host_isa` asks once: the fork server asks before it
forks, so every child keeps the answer, and a worker started by `python -m` asks before its compile
clock starts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["SharedBuilds", "check_host_isa", "watch_shared_builds"]


class SharedBuilds:
    """The spans (seconds since the epoch) this process spent building what the environment shares."""

    def __init__(self) -> None:
        self.spans: list[list[float]] = []

    def within(self, start: float, end: float) -> list[list[float]]:
        """The builds that began inside [start, end]."""
        return [list(span) for span in self.spans if start <= span[0] <= end]


_WATCH = SharedBuilds()
_WATCHED = "_autotune_shared_builds"


def watch_shared_builds() -> SharedBuilds:
    """Time, from now on, every precompiled header this process builds; the process's one record of them."""
    from torch._inductor import codecache

    precompile: Callable[..., Any] | None = getattr(codecache, "_precompile_header", None)
    build: Callable[[str, Sequence[Any]], Any] | None = getattr(codecache, "_worker_compile_cpp", None)
    if precompile is None or build is None or getattr(precompile, _WATCHED, False):
        return _WATCH

    def timed(lock_path: str, builders: Sequence[Any]) -> Any:
        made = [getattr(builder, "get_target_file_path", lambda: "")() for builder in builders]
        # A precompiled header (.gch with gcc, .pch with clang): never a kernel, even one built meanwhile elsewhere.
        missing = any(path.endswith((".gch", ".pch")) and not os.path.exists(path) for path in made)
        began = time.time()
        try:
            return build(lock_path, builders)
        finally:
            if missing:
                _WATCH.spans.append([began, time.time()])

    def watched(*args: Any, **kwargs: Any) -> Any:
        # The header is built synchronously here, in this process: only its build is timed, no kernel's.
        codecache._worker_compile_cpp = timed  # type: ignore[assignment]
        try:
            return precompile(*args, **kwargs)
        finally:
            codecache._worker_compile_cpp = build  # type: ignore[assignment]

    setattr(watched, _WATCHED, True)
    codecache._precompile_header = watched  # type: ignore[assignment]
    return _WATCH


def check_host_isa() -> None:
    """Ask Inductor which vector instruction sets this host builds and loads, as its first CPU kernel would; once
    asked, the answer is kept for the process and the children it forks.

    A torch without the check (or one whose check fails) is left to ask in its own time: nothing is left out.
    """
    try:
        from torch._inductor import cpu_vec_isa

        check: Callable[[], Any] | None = getattr(cpu_vec_isa, "valid_vec_isa_list", None)
        if check is not None:
            check()
    except Exception:  # noqa: BLE001 - the compile asks again and says what is wrong
        return
