"""`autotune --version`: what a bug report needs, from the command a user has."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
import torch

from autotune.runtime.environment import version

pytestmark = pytest.mark.parallel  # times nothing


def test_version_names_autotune_python_and_torch_and_exits_0() -> None:
    done = subprocess.run([sys.executable, "-m", "autotune", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = f"autotune {version()} (Python {platform.python_version()}, torch {torch.__version__})"
    assert done.stdout.strip() == expected
    assert version() != "0+unknown", "the installed package knows its own version"
