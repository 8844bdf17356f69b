"""The package reaches Optuna only through its public API: no private attribute of a study, trial or storage."""

from __future__ import annotations

import ast
from pathlib import Path

import optuna
import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]


def optuna_private_names() -> set[str]:
    """The private attributes (one leading underscore) of Optuna's studies, trials and storages, their instances'
    included (a study's `_storage`, a trial's `_trial_id`)."""
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    trial = study.ask()
    study.tell(trial, 1.0)
    objects: list[object] = [study, trial, study.trials[0], optuna.storages.RDBStorage, study._storage]
    objects += [optuna.storages.InMemoryStorage, optuna.storages.BaseStorage]
    names = {name for thing in objects for name in [*dir(thing), *getattr(thing, "__dict__", {})]}
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def private_uses(source: str, name: str, private: set[str]) -> list[str]:
    """'name:line .attribute' for every access to one of `private` on anything but `self`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{name}:{node.lineno} .{node.attr}")
    return found


def test_no_module_of_the_package_uses_a_private_attribute_of_optuna() -> None:
    private = optuna_private_names()
    assert {"_storage", "_trial_id", "_study_id", "_get_stale_trial_ids"} <= private
    found = [
        hit
        for path in sorted((ROOT / "autotune").rglob("*.py"))
        for hit in private_uses(path.read_text(), str(path.relative_to(ROOT)), private)
    ]
    assert not found, "use Optuna's public API instead:\n" + "\n".join(found)


def test_the_check_finds_a_study_s_storage_reached_through_its_private_attribute() -> None:
    private = optuna_private_names()
    source = "def beat(study, trial):\n    study._storage.record_heartbeat(trial._trial_id)\n"
    assert sorted(private_uses(source, "m.py", private)) == ["m.py:2 ._storage", "m.py:2 ._trial_id"]
    assert private_uses("class A:\n    def f(self):\n        return self._storage\n", "m.py", private) == []
