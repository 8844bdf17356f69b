"""Writing a command's output files as one set: every file staged first, then moved into place.

A search, an export or a retune writes several files into one folder (best.yaml, the generated
code, trials.csv, report.md and its plots). Written one by one, a full disk or a read-only folder
would leave some new and some old, or one cut short. Here each is written into a staging folder
inside the output folder first (the same file system, so that moving one in takes no space);
only when every one is written are they moved into place. A write that fails leaves the output
folder as it was, and says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autotune.errors import SearchError
from autotune.trial.forkserver import process_alive

__all__ = ["STAGING_PREFIX", "cannot_write", "written_together"]

STAGING_PREFIX = ".staged-"
"""A staging folder in the output folder is STAGING_PREFIX + the writer's pid + a random part."""


@contextlib.contextmanager
def written_together(out_dir: Path, what: str) -> Iterator[Path]:
    """A staging folder for `what`; its files replace their namesakes in `out_dir` once the block ends without error.

    An OSError while the block writes (no space left, a read-only folder, a quota) removes what
    was staged and raises SearchError naming the folder and why; the files `out_dir` held are as
    they were. Staging folders that a killed process left are removed first.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(out_dir)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=out_dir))
    except OSError as exc:
        raise SearchError(cannot_write(out_dir, exc, what, changed=False)) from None
    try:
        try:
            yield staging
        except OSError as exc:
            raise SearchError(cannot_write(out_dir, exc, what, changed=False)) from None
        try:
            for path in sorted(p for p in staging.rglob("*") if p.is_file()):
                target = out_dir / path.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
        except OSError as exc:
            raise SearchError(cannot_write(out_dir, exc, what, changed=True)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def cannot_write(out_dir: Path, exc: OSError, what: str, *, changed: bool) -> str:
    """The message for a write into `out_dir` that failed: where, why, what was kept and what to do."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        do = "free some space there, or write elsewhere (--out)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        do = "make it writable, or write elsewhere (--out)"
    else:
        do = "see why, or write elsewhere (--out)"
    kept = (
        "some of the new files were moved in before it failed"
        if changed
        else "nothing was changed there: the files it held are as they were"
    )
    return (
        f"cannot write {what} in {out_dir}: {why}; {kept}. To write them, {do}; the study keeps every trial, so "
        "running the same command again (or `autotune export`) writes them without measuring anything again."
    )


def _remove_abandoned(out_dir: Path) -> None:
    """Remove staging folders whose writer is gone (a process killed while it wrote)."""
    for folder in out_dir.glob(f"{STAGING_PREFIX}*-*"):
        owner = folder.name[len(STAGING_PREFIX) :].partition("-")[0]
        if folder.is_dir() and owner.isdigit() and not process_alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
