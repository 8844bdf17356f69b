"""The install checks what it needs before installing anything, and says how to get what is missing.

`.ci/install` (which the README's two commands run first) is run from a copy of the clone's
scripts, with a PATH that holds stand-ins for `python3` and the compilers, so that each
missing prerequisite is shown without touching this machine's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel  # runs shell scripts and times nothing

ROOT = Path(__file__).resolve().parents[2]


def _clone_of_scripts(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    (clone / ".ci").mkdir(parents=True)
    for name in ("install", "python"):
        shutil.copy(ROOT / ".ci" / name, clone / ".ci" / name)
    return clone


def _tools(tmp_path: Path, *, python: str | None, compilers: tuple[str, ...] = ()) -> str:
    """A PATH of bash and coreutils, `python3` as given (a script body, or None for none) and stand-in compilers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "dirname", "cat", "date", "mkdir", "id"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    if python is not None:
        (bin_dir / "python3").write_text(python)
        (bin_dir / "python3").chmod(0o755)
    for compiler in compilers:
        (bin_dir / compiler).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / compiler).chmod(0o755)
    return str(bin_dir)


def _install(clone: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHON", "CXX")}
    return subprocess.run(
        ["bash", str(clone / ".ci" / "install")],
        cwd=clone,
        env={**keep, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _fake_python(version: str, *, venv: bool = True) -> str:
    """A `python3` that reports `version` and can (or cannot) import venv and ensurepip; it installs nothing."""
    major, minor = version.split(".")
    return (
        "#!/bin/sh\n"
        'case "$2" in\n'
        f"  *sys.version_info\\ \\<*) [ {minor} -lt 10 ] && exit 1; exit 0 ;;\n"
        f"  *print*) echo {major}.{minor}; exit 0 ;;\n"
        f"  *ensurepip*) exit {0 if venv else 1} ;;\n"
        "esac\n"
        "exit 3\n"
    )


def test_without_python3_the_install_says_which_python_to_install(tmp_path: Path) -> None:
    done = _install(_clone_of_scripts(tmp_path), _tools(tmp_path, python=None, compilers=("g++",)))
    assert done.returncode == 1
    assert "no python3 on PATH; install Python 3.10 or newer" in done.stderr
    assert "sudo apt-get install python3 python3-venv" in done.stderr


def test_an_old_python_is_refused_with_the_version_it_is(tmp_path: Path) -> None:
    clone = _clone_of_scripts(tmp_path)
    done = _install(clone, _tools(tmp_path, python=_fake_python("3.9"), compilers=("g++",)))
    assert done.returncode == 1
    assert "autotune needs Python 3.10 or newer; 'python3' is Python 3.9" in done.stderr
    assert not (clone / ".venv").exists(), "nothing was installed"


def test_a_python_without_venv_is_told_to_install_python3_venv(tmp_path: Path) -> None:
    done = _install(_clone_of_scripts(tmp_path), _tools(tmp_path, python=_fake_python("3.12", venv=False)))
    assert done.returncode == 1
    assert "its venv module or ensurepip is missing (Debian/Ubuntu: sudo apt-get install python3-venv" in done.stderr


def test_without_a_cpp_compiler_the_install_says_how_to_get_one(tmp_path: Path) -> None:
    # This interpreter, which passes the Python checks, and no compiler on PATH.
    path = _tools(tmp_path, python=None)
    done = _install(_clone_of_scripts(tmp_path), path, PYTHON=sys.executable)
    assert done.returncode == 1
    assert "no C++ compiler (c++, g++ or clang++) on PATH" in done.stderr
    assert "sudo apt-get install g++" in done.stderr
    named = _install(_clone_of_scripts(tmp_path / "again"), path, PYTHON=sys.executable, CXX="my-clang++")
    assert named.returncode == 1 and "CXX is 'my-clang++', which is not a program on PATH" in named.stderr
