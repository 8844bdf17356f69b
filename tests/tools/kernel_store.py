"""The test suite's C++ compiler: the real one, with the kernels it built kept by what they were built from.

Inductor builds each CPU kernel with one command, `g++ KERNEL.cpp ... -shared -o KERNEL.so`, in
the cache folder of the process that compiles. A search gives every trial a cache folder of its
own, so the suite's many searches of the same small models build the same kernels again and
again, and on a CPU these builds are about a third of a cold compile. The suite points Inductor
at `tests/tools/g++` (`tests/conftest.py`), which runs this script: it runs the real compiler
(`AUTOTUNE_TEST_REAL_CXX`) and keeps each kernel it built in `AUTOTUNE_TEST_CXX_STORE` under the
hash of the source's bytes and the command line (the source's and the output's paths left out, a
forced include read by its text, since its name changes from process to process), so the same
build later is a copy of the same bytes. Anything else (version queries, headers, builds of
several files) goes to the real compiler unchanged.

The product never uses it: a search's cold compiles are what a user pays, and a trial's own
cache folder is still its own; only the compiler's output is shared.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence


def build_key(real: str, args: Sequence[str], source: str, output: str) -> str:
    """The hash a kernel is kept under: the compiler, its arguments without the two paths, the source's bytes."""
    digest = hashlib.sha256(real.encode())
    for before, arg in zip(["", *args[:-1]], args, strict=True):
        if arg in (source, output):
            arg = "<source>" if arg == source else "<output>"
        elif before == "-include" and os.path.isfile(arg):
            arg = "<include>" + _file_hash(arg)
        digest.update(b"\0" + arg.encode())
    digest.update(b"\0" + _file_hash(source).encode())
    return digest.hexdigest()


def kernel_build(args: Sequence[str]) -> tuple[str, str] | None:
    """(source, output) where `args` build one C++ file into a shared object, else None (pass it through)."""
    sources = [arg for arg in args if arg.endswith(".cpp") and os.path.isfile(arg)]
    if len(sources) != 1 or "-shared" not in args or "-o" not in args[:-1]:
        return None
    return sources[0], args[list(args).index("-o") + 1]


def place(origin: str, target: str) -> None:
    """Copy `origin` to `target` whole or not at all: the copy is written beside it, then renamed into place."""
    fd, partial = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(target)), prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out, open(origin, "rb") as handle:
            out.write(handle.read())
        os.chmod(partial, 0o755)
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise


def compile_or_copy(real: str, store: str, args: Sequence[str]) -> int:
    """Build as `real` would, from the store where the same build is kept; keep what was built. The exit status."""
    build = kernel_build(args)
    if build is None:
        return subprocess.call([real, *args])
    source, output = build
    kept = os.path.join(store, build_key(real, args, source, output) + ".so")
    if os.path.isfile(kept):
        place(kept, output)
        return 0
    code = subprocess.call([real, *args])
    if code == 0 and os.path.isfile(output):
        os.makedirs(store, exist_ok=True)
        place(output, kept)
    return code


def _file_hash(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


if __name__ == "__main__":
    sys.exit(compile_or_copy(os.environ["AUTOTUNE_TEST_REAL_CXX"], os.environ["AUTOTUNE_TEST_CXX_STORE"], sys.argv[1:]))
