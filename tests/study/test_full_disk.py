"""Export, search and retune into a file system with no space left: exit 2, the disk named, the folder's files as they were.

Each command runs against a copy of a finished search's folder on a small tmpfs filled to its
last byte, in a mount namespace of its own (`unshare -rm`: no root needed, nothing left mounted),
through `tests/tools/full_disk.py`. The search runs in worker processes whose compiles use dynamo's
eager backend (`tests.trial_targets.dynamo_only`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import cli
from tests.short_runs import SHORT_FLAGS

pytestmark = pytest.mark.parallel  # times nothing

ROOT = Path(__file__).resolve().parents[2]
SPEC = "tests.trial_targets.dynamo_only:tiny_infer"
STUDY = "tests.trial_targets.dynamo_only-tiny_infer"
SPACE = str(ROOT / "tests" / "retune_spaces" / "whole_or_regional.yaml")
UNSHARE = shutil.which("unshare")
if UNSHARE is None:
    pytest.fail("these tests mount a small tmpfs in a namespace of their own with unshare (util-linux)", pytrace=False)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search") / "tiny"
    code = cli.main(
        [
            "search", "--no-doctor", "--model", SPEC, "--space", SPACE, "--trials", "1", "--confirm", "1",
            "--replicates", "2", "--max-replicates", "2", "--windows", "2", *SHORT_FLAGS, "--device", "cpu",
            "--no-compile-cache", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == cli.EXIT_OK
    return out


def on_a_full_disk(tmp_path: Path, source: Path, *args: str) -> dict:
    """What `autotune ARGS` did against a copy of `source` on a full tmpfs (see tests/tools/full_disk.py)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = f'mount -t tmpfs -o size=16m tmpfs "{disk}" && exec "$0" -m tests.tools.full_disk "$@"'
    done = subprocess.run(
        [UNSHARE, "-rm", "sh", "-c", script, sys.executable, str(disk), str(source), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["filled"] > 0, "the tmpfs was filled to its last byte"
    return said


def test_export_into_a_full_disk_names_it_and_leaves_the_previous_files(searched: Path, tmp_path: Path) -> None:
    said = on_a_full_disk(
        tmp_path, searched, "export", "--storage", f"sqlite:///{searched / 'study.db'}", "--study-name", STUDY,
        "--out", "{out}",
    )  # fmt: skip
    assert said["code"] == cli.EXIT_ERROR, said["stderr"]
    assert "cannot write the exported files in " in said["stderr"] and "No space left on device" in said["stderr"]
    assert "nothing was changed there: the files it held are as they were" in said["stderr"]
    assert "Traceback" not in said["stderr"]
    assert said["unchanged"], f"changed: {said['changed']}"


@pytest.mark.slow  # a retune: a minute or so
def test_retune_into_a_full_disk_names_it_and_leaves_the_previous_files(searched: Path, tmp_path: Path) -> None:
    said = on_a_full_disk(
        tmp_path, searched, "retune", "{out}/best.yaml", "--space", SPACE, "--trials", "0", "--replicates", "2",
        "--max-replicates", "2", "--no-compile-cache",
    )  # fmt: skip
    _named_and_unchanged(said)


@pytest.mark.slow  # a search that resumes: the fast tier fills the disk under an export only
def test_a_search_resumed_on_a_full_disk_names_it_and_leaves_the_previous_files(searched: Path, tmp_path: Path) -> None:
    # The study lives beside the exports (study.db in the output folder): the disk that fills up holds both.
    said = on_a_full_disk(
        tmp_path, searched, "search", "--no-doctor", "--model", SPEC, "--space", SPACE, "--trials", "2",
        "--confirm", "1", "--replicates", "2", "--max-replicates", "2", "--windows", "2", *SHORT_FLAGS, "--device", "cpu",
        "--no-compile-cache", "--out", "{out}",
    )  # fmt: skip
    _named_and_unchanged(said)


def _named_and_unchanged(said: dict) -> None:
    """Exit 2, the full disk named, no traceback, every file of the folder as it was."""
    assert said["code"] == cli.EXIT_ERROR, said["stderr"]
    assert "disk is full" in said["stderr"] or "No space left on device" in said["stderr"], said["stderr"]
    assert "Traceback" not in said["stderr"]
    assert said["unchanged"], f"changed: {said['changed']}"
