"""The package's layers, as `lint-imports` checks them from pyproject.toml: kept now, and able to fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
    ]
    return subprocess.run(
        [*command, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_package(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "autotune", tmp_path / "autotune", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_every_contract(tmp_path: Path) -> None:
    done = lint_imports(copy_of_package(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout


def test_a_runtime_module_importing_the_study_layer_breaks_the_layers(tmp_path: Path) -> None:
    root = copy_of_package(tmp_path)
    batching = root / "autotune" / "runtime" / "batching.py"
    batching.write_text(
        batching.read_text().replace("import torch\n", "import torch\n\nfrom autotune.study import history\n", 1)
    )
    done = lint_imports(root)
    assert done.returncode == 1
    assert "autotune.runtime is not allowed to import autotune.study" in done.stdout
    assert "autotune.runtime.batching -> autotune.study.history" in done.stdout


def test_the_runtime_importing_optuna_breaks_its_contract(tmp_path: Path) -> None:
    root = copy_of_package(tmp_path)
    config = root / "autotune" / "runtime" / "config.py"
    config.write_text(
        config.read_text().replace(
            "from autotune.errors import", "import optuna  # noqa: F401\nfrom autotune.errors import", 1
        )
    )
    done = lint_imports(root)
    assert done.returncode == 1
    assert "The runtime imports only torch, PyYAML and the standard library BROKEN" in done.stdout
