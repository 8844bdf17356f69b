"""Run an autotune command against a copy of an output folder on a file system with no space left.

    unshare -rm sh -c 'mount -t tmpfs -o size=16m tmpfs DISK && exec python -m tests.tools.full_disk DISK SOURCE ARGS'

Inside a mount namespace of its own (no root needed with `unshare -r`), a small tmpfs is mounted at
DISK. This copies the folder SOURCE to DISK/out, fills DISK to the last byte, runs `autotune ARGS`
(where `{out}` stands for DISK/out), and prints one JSON line: the exit code, what it said on
stderr, whether every file of DISK/out is byte-identical to before, and what else was left in it.
The namespace, and the file system with it, is gone when this process ends.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import shutil
import sys
from pathlib import Path


def contents(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path -> sha256 of its bytes)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def fill(disk: Path) -> int:
    """Write zeros into a file on `disk` until no byte more fits; returns how many were written."""
    written = 0
    with open(disk / "filler", "wb", buffering=0) as filler:
        for size in (1 << 20, 1 << 12, 1):
            chunk = bytes(size)
            while True:
                try:
                    written += filler.write(chunk) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return written


def main(argv: list[str]) -> int:
    disk, source, *args = argv
    out = Path(disk) / "out"
    shutil.copytree(source, out)
    before = contents(out)
    filled = fill(Path(disk))
    from autotune import cli

    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([arg.replace("{out}", str(out)) for arg in args])
    after = contents(out)
    print(
        json.dumps(
            {
                "code": code,
                "stderr": said.getvalue(),
                "filled": filled,
                "unchanged": after == before,
                "changed": sorted(name for name in after.keys() | before.keys() if after.get(name) != before.get(name)),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
