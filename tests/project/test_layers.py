"""The package's layers, as `lint-imports` checks them from pyproject.toml: kept now, and able to fail."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]


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
    assert "Contracts: 11 kept, 0 broken." in done.stdout


def test_a_runtime_module_importing_the_study_layer_breaks_the_layers(tmp_path: Path) -> None:
    root = copy_of_package(tmp_path)
    batching = root / "autotune" / "runtime" / "batching.py"
    batching.write_text(
        batching.read_text().replace(
            "import torch\n", "import torch\n\nfrom autotune.study.storage import read_history\n", 1
        )
    )
    done = lint_imports(root)
    assert done.returncode == 1
    assert "autotune.runtime is not allowed to import autotune.study" in done.stdout
    assert "autotune.runtime.batching -> autotune.study.storage" in done.stdout


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


def test_the_measurement_engine_importing_optuna_breaks_its_contract(tmp_path: Path) -> None:
    root = copy_of_package(tmp_path)
    statistics = root / "autotune" / "measure" / "engine" / "_campaign.py"
    statistics.write_text(
        statistics.read_text().replace("import hashlib\n", "import hashlib\n\nimport optuna  # noqa: F401\n", 1)
    )
    done = lint_imports(root)
    assert done.returncode == 1
    assert "the measurement engine never import Optuna" in done.stdout.replace("\n", " ")
    assert "autotune.measure.engine._campaign -> optuna" in done.stdout


def broken_by(tmp_path: Path, module: str, anchor: str, added: str) -> str:
    """lint-imports' report on a copy of the package whose `module` imports `added` before `anchor`; it must fail."""
    root = copy_of_package(tmp_path)
    path = root / module
    path.write_text(path.read_text().replace(anchor, f"{added}\n{anchor}", 1))
    done = lint_imports(root)
    assert done.returncode == 1, done.stdout[-2000:]
    return done.stdout


def test_the_report_importing_the_search_breaks_the_study_rooms(tmp_path: Path) -> None:
    added = "from autotune.study.search import TrialLoop  # noqa: F401"
    report = broken_by(tmp_path, "autotune/study/report/_verdict.py", "from autotune.measure.format import", added)
    assert "Study rooms: storage < doctor < report < explain < search < retune BROKEN" in report
    assert "autotune.study.report._verdict -> autotune.study.search" in report


def test_the_statistics_importing_the_campaign_breaks_the_measure_rooms(tmp_path: Path) -> None:
    added = "from autotune.measure.engine import Campaign  # noqa: F401"
    report = broken_by(tmp_path, "autotune/measure/stats/_statistics.py", "from typing import Any", added)
    assert "Measure rooms: format < stats < engine < report < choice < tasks BROKEN" in report
    assert "autotune.measure.stats._statistics -> autotune.measure.engine" in report


MAX_FUNCTION_LINES = 80
"""A function longer than this cannot be read without scrolling; split it."""


def long_functions(source: str, name: str) -> list[str]:
    """'name:line function (N lines)' for every function or method of `source` over MAX_FUNCTION_LINES."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_of_the_package_is_longer_than_80_lines() -> None:
    found = [
        hit
        for path in sorted((ROOT / "autotune").rglob("*.py"))
        for hit in long_functions(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, "split these functions:\n" + "\n".join(found)


def test_the_length_check_finds_a_long_function_and_passes_a_short_one() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def long():\n{body}", "m.py") == [f"m.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]
    short = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    assert long_functions(f"def short():\n{short}", "m.py") == []


def test_the_core_importing_the_trainer_integration_or_transformers_breaks_a_contract(tmp_path: Path) -> None:
    added = "import transformers\n\nimport autotune.integrations.transformers\n"
    report = broken_by(tmp_path, "autotune/trial/gate.py", "from autotune.trial.guard import process_guard", added)
    assert "autotune.trial is not allowed to import autotune.integrations" in report
    assert "autotune.trial is not allowed to import transformers" in report


def test_each_integration_importing_the_other_library_breaks_a_contract(tmp_path: Path) -> None:
    # Each integration must import with only its own library installed: `autotune[hf]` or `autotune[lightning]`.
    anchor = "from autotune.errors import"
    report = broken_by(tmp_path / "hf", "autotune/integrations/transformers.py", anchor, "import lightning\n")
    assert "autotune.integrations.transformers is not allowed to import lightning" in report
    assert "autotune.integrations.transformers -> lightning" in report
    report = broken_by(tmp_path / "lightning", "autotune/integrations/lightning.py", anchor, "import transformers\n")
    assert "autotune.integrations.lightning is not allowed to import transformers" in report
    assert "autotune.integrations.lightning -> transformers" in report


STORAGE = Path("autotune") / "study" / "storage"
"""The one folder that reads and writes Optuna's user attributes: studies and trials keep their records there."""
ATTRIBUTE_WORDS = ("user_attrs", "set_user_attr")


def loose_attribute_uses(root: Path) -> list[str]:
    """'path:line' for every line of a module of `root`/autotune outside STORAGE that names an Optuna user attribute."""
    found = []
    for path in sorted((root / "autotune").rglob("*.py")):
        relative = path.relative_to(root)
        if relative.is_relative_to(STORAGE):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(word in line for word in ATTRIBUTE_WORDS):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_only_the_storage_reads_or_writes_user_attributes() -> None:
    # A study's state is its StudyRecord and a trial's its TrialRecord: read and written through their functions,
    # never as loose attributes with a default at each reader.
    found = loose_attribute_uses(ROOT)
    assert not found, "read or write the records through autotune.study.storage instead:\n" + "\n".join(found)


def test_the_attribute_check_finds_a_module_that_reads_a_study_attribute(tmp_path: Path) -> None:
    root = copy_of_package(tmp_path)
    export = root / "autotune" / "study" / "report" / "_export.py"
    export.write_text(export.read_text() + '\n\ndef _model(study):\n    return study.user_attrs.get("model")\n')
    (found,) = loose_attribute_uses(root)
    assert found.startswith("autotune/study/report/_export.py:") and 'study.user_attrs.get("model")' in found
    assert "user_attrs" in (root / STORAGE / "_study_record.py").read_text(), "the storage itself does, and may"
