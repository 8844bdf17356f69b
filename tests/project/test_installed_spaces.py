"""The bundled search spaces live at the top of the clone (`search_spaces/`), where a user looks for them, and
still install with the package: a wheel built from the clone, installed elsewhere, lists and loads every one."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.study.search import bundled_spaces

pytestmark = pytest.mark.parallel  # builds and installs a wheel; times nothing

ROOT = Path(__file__).resolve().parents[2]


def test_the_spaces_are_at_the_top_of_the_clone_and_the_package_links_to_them() -> None:
    top = sorted(p.name for p in (ROOT / "search_spaces").glob("*.yaml"))
    assert {"default.yaml", "quick.yaml", "thorough.yaml", "inference.yaml"} <= set(top)
    link = ROOT / "autotune" / "search_spaces"
    assert link.is_symlink() and link.resolve() == (ROOT / "search_spaces").resolve()
    assert sorted(p.name for p in bundled_spaces().values()) == top


def test_an_installed_wheel_outside_the_clone_lists_and_loads_every_bundled_space(tmp_path: Path) -> None:
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", *isolation, str(ROOT), "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("autotune-*.whl")
    site = tmp_path / "site"
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    listing = subprocess.run(
        [sys.executable, "-m", "autotune", "spaces"],
        cwd=tmp_path,  # not the clone: nothing is found through the working directory
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr[-2000:]
    names = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines() if not line.startswith(" ")}
    assert set(names) == set(bundled_spaces()), listing.stdout
    for name, path in names.items():
        assert path.startswith(str(site)), f"{name} is read from the installed package, not the clone: {path}"
        assert not Path(path).is_symlink() and Path(path).stat().st_size > 0
