"""Replacing a study's exported files as one set: best.yaml, apply_compilation.py and compile_cache.bin.

A process can die between any two renames, and nothing renames two files at once. So the
new files are written and synced under temporary names first, the current ones are
hard-linked aside, and a small journal names the set; the renames follow, best.yaml last,
since it is what `autotune.load` reads. If anything fails before best.yaml is renamed, the
old files are put back at once; if the process was killed instead, the next `replace_together`
(and `autotune retune`, before anything else) finds the journal and puts them back then.
After a complete replacement the old files are kept as `*.prev.*`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from autotune.errors import PublishError
from autotune.trial.runner import process_alive

__all__ = ["JOURNAL", "PublishError", "previous_name", "recover", "replace_together"]

JOURNAL = ".replacing.json"
Content = bytes | str | Path | None
"""New content of a file: bytes or text, a finished file to move in, or None to remove the file."""


def previous_name(name: str) -> str:
    """Where the replaced file is kept: best.yaml -> best.prev.yaml."""
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.prev.{suffix}" if dot else f"{name}.prev"


def replace_together(folder: str | os.PathLike[str], files: Mapping[str, Content], *, commit: str) -> None:
    """Replace `files` (name -> new content) in `folder` as a whole; `commit`, renamed last, decides.

    Either every file is new, with the previous ones kept as `*.prev.*`, or, if this raises or
    the process dies, every file is as it was (after `recover` for a process that died).
    """
    if files.get(commit) is None:
        raise PublishError(f"the commit file {commit!r} must be among the new files {sorted(files)}, with content.")
    target = Path(folder)
    recover(target)
    names = [name for name in files if name != commit] + [commit]
    staged: dict[str, Path] = {}
    existed = [name for name in names if (target / name).exists()]
    try:
        for name in names:
            content = files[name]
            if content is not None:
                staged[name] = _stage(target, name, content)
        for name in existed:
            _backup(target, name).unlink(missing_ok=True)
            os.link(target / name, _backup(target, name))
        _write_journal(target, {"names": names, "existed": existed, "staged": {k: str(v) for k, v in staged.items()}})
    except OSError as exc:
        for path in [*staged.values(), *(_backup(target, name) for name in existed)]:
            path.unlink(missing_ok=True)
        raise PublishError(f"cannot stage the new files in {target}: {exc}; the previous files are unchanged.") from exc
    try:
        for name in names:
            if name in staged:
                os.replace(staged[name], target / name)
            else:
                (target / name).unlink(missing_ok=True)
        _sync(target)
    except BaseException as exc:
        _roll_back(target, names, existed, staged)
        if isinstance(exc, OSError):
            raise PublishError(
                f"cannot replace the files in {target}: {exc}; the previous files were put back."
            ) from exc
        raise
    _finish(target, names)


def recover(folder: str | os.PathLike[str]) -> bool:
    """Finish or undo a replacement that a killed process left half done; True when there was one."""
    target = Path(folder)
    journal = target / JOURNAL
    try:
        entry = json.loads(journal.read_text())
        names = [str(n) for n in entry["names"]]
        existed = [str(n) for n in entry["existed"]]
        staged = {str(k): Path(v) for k, v in entry["staged"].items()}
    except FileNotFoundError:
        _remove_strays(target)
        return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # The journal is written to a temporary name and renamed: a damaged one was never ours.
        raise PublishError(f"{journal} is damaged; check the files in {target} and remove it.") from None
    if staged[names[-1]].exists():
        # best.yaml (the commit file) was not renamed yet: the old set is the valid one.
        _roll_back(target, names, existed, staged)
    else:
        _finish(target, names)
    return True


STRAY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)(\.[A-Za-z0-9_]+)?\.(new|tmp|staged)$")
"""Temporary files of a replacement (and of a compile cache being saved): a dot, a name, the writer's pid."""


def _remove_strays(folder: Path) -> None:
    """Remove the temporary files a killed process left before its journal existed (nothing to recover then).

    A file whose writer is still alive belongs to a replacement under way and is left alone.
    The `.NAME.old` links are made only after every new file is staged and are named in the
    journal, so without a journal they are links to the current files and go too.
    """
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = STRAY.match(path.name)
        if match and not process_alive(int(match["pid"])):
            path.unlink(missing_ok=True)
        elif path.name.startswith(".") and path.name.endswith(".old") and (folder / path.name[1:-4]).exists():
            with contextlib.suppress(OSError):
                if os.path.samefile(path, folder / path.name[1:-4]):
                    path.unlink()


def _stage(folder: Path, name: str, content: Content) -> Path:
    path = folder / f".{name}.{os.getpid()}.new"
    if isinstance(content, Path):
        os.replace(content, path)
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
        return path
    data = content.encode("utf-8") if isinstance(content, str) else content
    assert isinstance(data, bytes)
    try:
        with open(path, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)  # cut short (a full disk): not one of the staged files the caller removes
        raise
    return path


def _backup(folder: Path, name: str) -> Path:
    return folder / f".{name}.old"


def _write_journal(folder: Path, entry: Mapping[str, object]) -> None:
    tmp = folder / f"{JOURNAL}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        json.dump(entry, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder / JOURNAL)
    _sync(folder)


def _roll_back(folder: Path, names: list[str], existed: list[str], staged: Mapping[str, Path]) -> None:
    """Put every old file back and remove files that did not exist before; safe to repeat."""
    for name in names:
        backup = _backup(folder, name)
        current = folder / name
        if backup.exists() and current.exists() and os.path.samefile(backup, current):
            backup.unlink()  # never replaced (renaming a hard link onto itself would do nothing)
        elif backup.exists():
            os.replace(backup, current)
        elif name not in existed:
            current.unlink(missing_ok=True)
    _sync(folder)
    # Only now may the journal go: until then a second recovery must still see that a rollback is due.
    (folder / JOURNAL).unlink(missing_ok=True)
    for path in staged.values():
        path.unlink(missing_ok=True)
    _sync(folder)


def _finish(folder: Path, names: list[str]) -> None:
    """After a complete replacement: keep the old files as *.prev.*, then forget the journal."""
    for name in names:
        backup = _backup(folder, name)
        if backup.exists():
            os.replace(backup, folder / previous_name(name))
    (folder / JOURNAL).unlink(missing_ok=True)
    _sync(folder)


def _sync(folder: Path) -> None:
    """Make the renames in `folder` durable (a directory fsync; not every platform has one)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
