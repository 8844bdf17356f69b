"""Replacing best.yaml, apply_compilation.py and compile_cache.bin as one set, even when a process dies midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autotune import cli
from autotune.study.retune import _publish as publish

pytestmark = pytest.mark.parallel

OLD = {"compile_cache.bin": b"old cache", "apply_compilation.py": "old apply\n", "best.yaml": "old: best\n"}
NEW = {"compile_cache.bin": b"new cache", "apply_compilation.py": "new apply\n", "best.yaml": "new: best\n"}


def make_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "study"
    folder.mkdir()
    for name, content in OLD.items():
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def as_bytes(files: dict[str, bytes | str]) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else v.encode() for k, v in files.items()}


def test_replaces_every_file_and_keeps_the_previous_ones(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    publish.replace_together(folder, NEW, commit="best.yaml")
    assert contents(folder) == {
        **as_bytes(NEW),
        "best.prev.yaml": b"old: best\n",
        "apply_compilation.prev.py": b"old apply\n",
        "compile_cache.prev.bin": b"old cache",
    }


def test_a_file_without_new_content_is_removed_and_kept_as_previous(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    staged = tmp_path / "staged.bin"
    staged.write_bytes(b"moved in")
    publish.replace_together(folder, {**NEW, "compile_cache.bin": None}, commit="best.yaml")
    assert not (folder / "compile_cache.bin").exists()
    assert (folder / "compile_cache.prev.bin").read_bytes() == b"old cache"
    publish.replace_together(folder, {**NEW, "compile_cache.bin": staged}, commit="best.yaml")
    assert (folder / "compile_cache.bin").read_bytes() == b"moved in" and not staged.exists()


def test_first_publication_into_an_empty_folder(tmp_path: Path) -> None:
    publish.replace_together(tmp_path, NEW, commit="best.yaml")
    assert contents(tmp_path) == as_bytes(NEW)


def test_a_failure_between_two_files_puts_the_previous_set_back(tmp_path: Path, monkeypatch) -> None:
    folder = make_folder(tmp_path)
    real_replace = os.replace
    renamed: list[str] = []

    def replace_then_fail(src, dst):
        if Path(dst).parent == folder and Path(dst).name in NEW and Path(src).name.endswith(".new"):
            if renamed:  # the second file of the set: the disk fills up, say
                raise OSError(28, "No space left on device")
            renamed.append(Path(dst).name)
        return real_replace(src, dst)

    monkeypatch.setattr(publish.os, "replace", replace_then_fail)
    with pytest.raises(publish.PublishError, match="previous files were put back"):
        publish.replace_together(folder, NEW, commit="best.yaml")
    assert renamed == ["compile_cache.bin"], "the first file had really been replaced"
    assert contents(folder) == as_bytes(OLD), "exactly the previous files, nothing half-written or left over"


def test_ctrl_c_between_two_files_puts_the_previous_set_back_and_is_not_swallowed(tmp_path: Path, monkeypatch) -> None:
    folder = make_folder(tmp_path)
    real_replace = os.replace
    renamed: list[str] = []

    def replace_then_interrupt(src, dst):
        if Path(dst).parent == folder and Path(dst).name in NEW and Path(src).name.endswith(".new"):
            if renamed:  # the second file of the set: the user presses Ctrl-C
                raise KeyboardInterrupt
            renamed.append(Path(dst).name)
        return real_replace(src, dst)

    monkeypatch.setattr(publish.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        publish.replace_together(folder, NEW, commit="best.yaml")
    assert renamed == ["compile_cache.bin"], "the first file had really been replaced"
    assert contents(folder) == as_bytes(OLD), "exactly the previous files, no journal and nothing staged left"
    monkeypatch.setattr(publish.os, "replace", real_replace)
    assert publish.recover(folder) is False, "nothing was left to recover"


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from autotune.study.retune import _publish as publish

    folder, after = Path(sys.argv[1]), int(sys.argv[2])
    real_replace = os.replace
    count = []

    def replace_then_die(src, dst):
        real_replace(src, dst)
        if Path(dst).parent == folder and Path(dst).name in ("compile_cache.bin", "apply_compilation.py", "best.yaml"):
            count.append(dst)
            if len(count) == after:
                os.kill(os.getpid(), signal.SIGKILL)

    publish.os.replace = replace_then_die
    publish.replace_together(folder, {
        "compile_cache.bin": b"new cache", "apply_compilation.py": "new apply\\n", "best.yaml": "new: best\\n",
    }, commit="best.yaml")
""")


def kill_after(folder: Path, renames: int) -> None:
    done = subprocess.run([sys.executable, "-c", KILLER, str(folder), str(renames)], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]


def test_a_process_killed_between_two_files_is_undone_by_the_next_run(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    kill_after(folder, 2)  # cache and apply code renamed, best.yaml not yet
    assert (folder / publish.JOURNAL).exists()
    assert (folder / "best.yaml").read_text() == "old: best\n", "what autotune.load reads is still the old file"
    assert publish.recover(folder) is True
    assert contents(folder) == as_bytes(OLD)
    assert publish.recover(folder) is False


def test_a_process_killed_after_best_yaml_is_finished_by_the_next_run(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    kill_after(folder, 3)  # every file renamed; the previous ones not yet kept as *.prev.*
    assert publish.recover(folder) is True
    assert contents(folder) == {
        **as_bytes(NEW),
        "best.prev.yaml": b"old: best\n",
        "apply_compilation.prev.py": b"old apply\n",
        "compile_cache.prev.bin": b"old cache",
    }


def test_a_retune_first_undoes_what_a_killed_retune_left(tmp_path: Path, capsys) -> None:
    folder = make_folder(tmp_path)
    kill_after(folder, 1)
    # This folder has no study, so the retune stops with an error, but only after putting the files back.
    assert cli.main(["retune", str(folder / "best.yaml")]) == cli.EXIT_ERROR
    assert contents(folder) == as_bytes(OLD)


def test_the_commit_file_must_have_content(tmp_path: Path) -> None:
    with pytest.raises(publish.PublishError, match="'best.yaml'"):
        publish.replace_together(tmp_path, {"best.yaml": None}, commit="best.yaml")


def test_previous_names() -> None:
    assert publish.previous_name("best.yaml") == "best.prev.yaml"
    assert publish.previous_name("apply_compilation.py") == "apply_compilation.prev.py"
    assert publish.previous_name("compile_cache.bin") == "compile_cache.prev.bin"
