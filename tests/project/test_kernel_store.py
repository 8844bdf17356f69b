"""The suite's compiler store: a kernel built once is the same bytes when built again, in any cache folder.

`tests/tools/kernel_store.py` keeps each shared object the real compiler builds, under the hash
of what it was built from. These tests build real C++ with the machine's g++ and count how often
the real compiler ran, through a stand-in that logs each call and then runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tools.kernel_store import build_key, compile_or_copy, kernel_build

pytestmark = pytest.mark.parallel

GXX = shutil.which("g++")
TOOLS = Path(__file__).resolve().parents[1] / "tools"
if GXX is None:
    pytest.fail("these tests build C++ with g++, which Inductor needs on a CPU as well: install it", pytrace=False)


@pytest.fixture
def counted(tmp_path: Path) -> tuple[str, Path]:
    """A real compiler that writes one line to a log each time it runs: (its path, the log)."""
    log = tmp_path / "calls.log"
    script = tmp_path / "counted-g++"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {GXX} "$@"\n')
    script.chmod(0o755)
    return str(script), log


def _kernel(folder: Path, value: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "kernel.cpp"
    source.write_text(f'extern "C" int kernel() {{ return {value}; }}\n')
    return source


def _build(source: Path) -> list[str]:
    return [str(source), "-O1", "-shared", "-fPIC", "-o", str(source.with_suffix(".so"))]


def _calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_same_kernel_in_another_folder_is_copied_not_built_again(tmp_path: Path, counted: tuple[str, Path]) -> None:
    real, log = counted
    store = tmp_path / "store"
    first, second = _kernel(tmp_path / "a", 7), _kernel(tmp_path / "b", 7)
    assert compile_or_copy(real, str(store), _build(first)) == 0
    assert compile_or_copy(real, str(store), _build(second)) == 0
    assert _calls(log) == 1, "the second build of the same source ran the compiler again"
    assert second.with_suffix(".so").read_bytes() == first.with_suffix(".so").read_bytes()
    assert len(list(store.iterdir())) == 1
    # what was copied works: load it and call the kernel
    import ctypes

    assert ctypes.CDLL(str(second.with_suffix(".so"))).kernel() == 7


def test_another_source_or_other_flags_are_built_and_kept_apart(tmp_path: Path, counted: tuple[str, Path]) -> None:
    real, log = counted
    store = tmp_path / "store"
    assert compile_or_copy(real, str(store), _build(_kernel(tmp_path / "a", 7))) == 0
    assert compile_or_copy(real, str(store), _build(_kernel(tmp_path / "b", 8))) == 0
    other_flags = [flag if flag != "-O1" else "-O2" for flag in _build(_kernel(tmp_path / "c", 7))]
    assert compile_or_copy(real, str(store), other_flags) == 0
    assert _calls(log) == 3
    assert len(list(store.iterdir())) == 3


def test_a_forced_include_counts_by_its_text_not_its_name(tmp_path: Path) -> None:
    source = _kernel(tmp_path / "a", 1)
    one, two, three = tmp_path / "one.h", tmp_path / "two.h", tmp_path / "three.h"
    one.write_text("#define X 1\n")
    two.write_text("#define X 1\n")
    three.write_text("#define X 2\n")
    keys = [build_key("g++", ["-include", str(h), *_build(source)], str(source), "out.so") for h in (one, two, three)]
    assert keys[0] == keys[1]
    assert keys[0] != keys[2]


def test_a_failed_build_keeps_nothing_and_says_so(tmp_path: Path, counted: tuple[str, Path]) -> None:
    real, log = counted
    store = tmp_path / "store"
    broken = tmp_path / "broken.cpp"
    broken.write_text("this is not C++\n")
    assert compile_or_copy(real, str(store), _build(broken)) != 0
    assert not store.exists() or not list(store.iterdir())


def test_anything_but_one_file_built_into_a_shared_object_goes_to_the_compiler_unchanged(tmp_path: Path) -> None:
    source = _kernel(tmp_path, 3)
    assert kernel_build(["--version"]) is None
    assert kernel_build([str(source), "-c", "-o", str(tmp_path / "kernel.o")]) is None  # an object, not a .so
    assert kernel_build([str(source), "-shared", "-o"]) is None  # no output named
    assert kernel_build(_build(source)) == (str(source), str(source.with_suffix(".so")))
    front = subprocess.run(
        [str(TOOLS / "g++"), "--version"],
        env={
            **os.environ,
            "AUTOTUNE_TEST_PYTHON": sys.executable,
            "AUTOTUNE_TEST_REAL_CXX": str(GXX),
            "AUTOTUNE_TEST_CXX_STORE": str(tmp_path / "store"),
        },
        capture_output=True,
        text=True,
        check=True,
    )
    assert "g++" in front.stdout or "Free Software Foundation" in front.stdout


@pytest.mark.slow  # two processes compile with Inductor
def test_inductor_in_a_new_cache_folder_builds_no_kernel_the_store_holds(tmp_path: Path) -> None:
    """Two processes compile the same function with Inductor, each in a cache folder of its own: the second builds
    nothing, and its compiled function still computes what eager does."""
    program = textwrap.dedent(
        """
        import torch
        def f(x):
            return torch.nn.functional.gelu(x * 3 + 1).sum(dim=-1)
        x = torch.arange(64, dtype=torch.float32).reshape(8, 8) / 64
        torch.testing.assert_close(torch.compile(f)(x), f(x))
        """
    )
    store = tmp_path / "store"
    real = tmp_path / "counted-g++"  # one compiler for both: it is part of what a kernel is kept under
    real.write_text(f'#!/bin/sh\ncase "$*" in *-shared*) echo "$*" >> "$KERNEL_LOG";; esac\nexec {GXX} "$@"\n')
    real.chmod(0o755)
    counts = []
    for run in ("first", "second"):
        log = tmp_path / f"{run}.log"
        env = {
            "KERNEL_LOG": str(log),
            **os.environ,
            "CXX": str(TOOLS / "g++"),
            "AUTOTUNE_TEST_PYTHON": sys.executable,
            "AUTOTUNE_TEST_REAL_CXX": str(real),
            "AUTOTUNE_TEST_CXX_STORE": str(store),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"cache-{run}"),
        }
        subprocess.run([sys.executable, "-c", program], env=env, check=True, timeout=600)
        counts.append(_calls(log))
    assert counts[0] >= 1, "the first process built no kernel: Inductor did not use the suite's compiler"
    assert counts[1] == 0, f"the second process built {counts[1]} kernel(s) the store held"
