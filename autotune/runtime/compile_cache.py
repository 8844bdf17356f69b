"""Compile-cache files: torch's compile artifacts, tagged with the software and device that made them.

A worker that ran the winning configuration saves what `torch.compiler.save_cache_artifacts()`
returns to `compile_cache.bin`. The file starts with one JSON line saying where it was made
(torch, Triton, CUDA, Python, device name) and the SHA-256 of the artifacts; loading it in
another environment would at best be useless, so `load_compile_cache` refuses with a warning
and torch compiles as usual.

`running_fingerprint` and `load_compile_cache` are copied verbatim into every generated
`apply_compilation.py` (like the batch helpers), so they use only `torch` at module level,
import what else they need from the standard library inside, and annotate with builtins.
The device's name comes from `autotune.runtime.device.device_name`, copied beside them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from autotune.runtime.device import device_name

__all__ = [
    "CACHE_FILE",
    "FINGERPRINT_KEYS",
    "MAGIC",
    "SAVED_FROM_COLD",
    "SAVED_FROM_MEASURED",
    "describe",
    "load_compile_cache",
    "proven_text",
    "read_header",
    "running_fingerprint",
    "save_compile_cache",
    "write_cache_file",
]

CACHE_FILE = "compile_cache.bin"
MAGIC = "autotune-compile-cache"
FINGERPRINT_KEYS = ("torch", "triton", "cuda", "python", "device_name")
"""What must be the same for artifacts to be loaded (`load_compile_cache` repeats this tuple)."""


def running_fingerprint(device: str = "cpu") -> dict:
    """The versions and device name that decide whether compile artifacts can be reused here."""
    import platform  # this function is copied into apply_compilation.py, which imports only torch at the top

    info = {
        "torch": str(torch.__version__),
        "triton": None,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device,
        "device_name": device_name(device),
    }
    try:
        import triton  # optional: CPU builds of torch have no Triton

        info["triton"] = str(triton.__version__)
    except ImportError:
        pass
    return info


def load_compile_cache(path: str | None = None, fingerprint: dict | None = None) -> dict:
    """Warm-start torch.compile with the compile artifacts autotune saved for this configuration.

    Call it once, before the first compiled step. `path` defaults to the compile_cache.bin
    beside the file this function is in (apply_compilation.py, exported with it). The file records the torch, Triton, CUDA and
    Python versions and the device it was made with; when this process differs (or when
    `fingerprint`, e.g. best.yaml's compile_cache.fingerprint, names another), nothing is
    loaded, a warning says why, and torch compiles as usual.

    Returns what torch loaded, as the number of artifacts of each kind (e.g. {"inductor": 2,
    "aot_autograd": 1}); an empty dict (false) when nothing was loaded. The file holds pickled
    compiled code: load only a cache you made, or one from a source you trust.
    """
    # This function is copied into apply_compilation.py, whose only module-level import is torch.
    import hashlib
    import json
    import os
    import warnings

    keys = ("torch", "triton", "cuda", "python", "device_name")
    if path is None:
        here = globals().get("__file__")
        path = (
            os.path.join(os.path.dirname(os.path.abspath(here)), "compile_cache.bin") if here else "compile_cache.bin"
        )
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline().decode("utf-8"))
            payload = handle.read()
    except (OSError, ValueError) as exc:
        warnings.warn(f"compile cache {path} not loaded, compiling normally: cannot read it ({exc})", stacklevel=2)
        return {}
    if not isinstance(header, dict) or header.get("format") != "autotune-compile-cache":
        warnings.warn(f"compile cache {path} not loaded, compiling normally: not an autotune cache file", stacklevel=2)
        return {}
    made = header.get("fingerprint") or {}
    here = running_fingerprint(str(made.get("device", "cpu")))
    expected = fingerprint if fingerprint is not None else made
    changed = [f"{k} {made.get(k)!r}, here {here[k]!r}" for k in keys if made.get(k) != here[k]]
    changed += [f"{k} {made.get(k)!r}, expected {expected.get(k)!r}" for k in keys if made.get(k) != expected.get(k)]
    if changed:
        warnings.warn(
            f"compile cache {path} was made in another environment ({'; '.join(changed)}), so it is not loaded "
            "and torch compiles as usual; run `autotune retune` to make a new one.",
            stacklevel=2,
        )
        return {}
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        warnings.warn(f"compile cache {path} not loaded, compiling normally: its content is damaged", stacklevel=2)
        return {}
    loader = getattr(torch.compiler, "load_cache_artifacts", None)  # torch's mega-cache; absent before 2.7
    if loader is None:
        warnings.warn(
            f"compile cache {path} not loaded, compiling normally: torch {torch.__version__} cannot load one",
            stacklevel=2,
        )
        return {}
    info = loader(payload)
    loaded = {str(kind): len(keys) for kind, keys in (info.artifacts if info is not None else {}).items() if keys}
    if not loaded:
        warnings.warn(
            f"compile cache {path} not loaded, compiling normally: torch found nothing it can use in it", stacklevel=2
        )
    return loaded


def save_compile_cache(path: str | os.PathLike[str], device: str) -> dict[str, Any]:
    """Write what this process compiled to `path` (atomically); returns what was saved, for the parent."""
    saver = getattr(torch.compiler, "save_cache_artifacts", None)  # torch's mega-cache; absent before 2.7
    if saver is None:
        return {"saved": False, "message": f"torch {torch.__version__} has no torch.compiler.save_cache_artifacts"}
    saved = saver()
    if saved is None:
        return {"saved": False, "message": "torch recorded no compile artifacts in this process"}
    payload, info = saved
    header = write_cache_file(path, payload, running_fingerprint(device))
    artifacts = {kind: len(keys) for kind, keys in getattr(info, "artifacts", {}).items()}
    return {
        "saved": True,
        "bytes": header["bytes"],
        "sha256": header["sha256"],
        "fingerprint": header["fingerprint"],
        "artifacts": artifacts,
    }


def write_cache_file(path: str | os.PathLike[str], payload: bytes, fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """Write a compile-cache file: one JSON header line (fingerprint, SHA-256, size), then `payload`."""
    header = {
        "format": MAGIC,
        "version": 1,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "bytes": len(payload),
        "fingerprint": dict(fingerprint),
    }
    target = Path(path)
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    # os.open with a mode (not mkstemp, which makes 0600 files) so the file is as readable as the others.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(header).encode("utf-8") + b"\n")
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return header


def read_header(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The JSON header of a compile-cache file ({} when the file is missing or not one)."""
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) and header.get("format") == MAGIC else {}


SAVED_FROM_MEASURED = "measured cache"
"""A `compile_cache` section's `saved_from` when the artifacts came from the measured subject's own cache folder."""
SAVED_FROM_COLD = "cold compile"
"""... and when they came from a compile in an empty cache."""


def describe(section: Mapping[str, Any]) -> str:
    """One line on a `compile_cache` section, for terminals and reports."""
    if not section.get("saved"):
        return f"compile cache: not saved ({section.get('note', 'not measured')})"
    measured = section.get("saved_from") == SAVED_FROM_MEASURED
    source = " (saved from the cache of the run that was measured)" if measured else ""
    return (
        f"compile cache: {section['file']} ({section['bytes'] / 1024:.0f} KiB){source}; compile and warm-up took "
        f"{section['cold_compile_seconds']:.1f} s cold and {section['cached_compile_seconds']:.1f} s with the cache loaded"
        + proven_text(section)
    )


def proven_text(section: Mapping[str, Any]) -> str:
    """Which confirmation replicates saved the file and started from it alone ('' where separate runs did)."""
    proven = section.get("proven_in") or {}
    parts = []
    if "saved" in proven:
        parts.append(f"saved by its process of confirmation replicate {proven['saved']}")
    if "loaded" in proven:
        parts.append(f"loaded alone by its process of replicate {proven['loaded']}")
    return f" ({', '.join(parts)})" if parts else ""
