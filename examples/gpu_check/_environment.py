"""The environment stage: what the machine is, and whether everything the project imports is there.

Runs in seconds: the GPU's name, driver, compute mode and memory (nvidia-smi), Python, torch,
Triton and CUDA versions, and one import of every module the project and its checks need. A
missing module is named with the error that import raised, so a missing wheel shows at once.
"""

from __future__ import annotations

import importlib
import platform
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["NEEDED", "OPTIONAL", "environment", "headline", "imports", "nvidia_smi"]

NEEDED = (
    "torch",
    "yaml",
    "numpy",
    "optuna",
    "sqlalchemy",
    "alembic",
    "colorlog",
    "mako",
    "transformers",
    "matplotlib",
    "rich",
    "pytest",
    "autotune",
    "autotune.cli",
    "autotune.measure",
    "autotune.study.search",
    "autotune.study.report",
    "autotune.trial.worker",
    "examples.toy",
)
"""What the stages import: the project, its dependencies, the test runner and the example workload."""
OPTIONAL = ("triton", "pytest_timeout", "accelerate", "psutil", "tqdm", "packaging")
"""Reported, never a failure: Triton only matters on a GPU (checked there), the rest are conveniences."""
SMI_FIELDS = ("name", "driver_version", "memory.total", "compute_mode", "cuda_version")


def imports(modules: tuple[str, ...]) -> dict[str, str]:
    """Module -> its version (or 'ok'), or 'missing: <the error>'."""
    found = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # any import error is the answer, not a crash
            found[name] = f"missing: {type(exc).__name__}: {exc}"
            continue
        found[name] = str(getattr(module, "__version__", "ok"))
    return found


def nvidia_smi() -> dict[str, str]:
    """The first GPU as nvidia-smi sees it (name, driver, memory, compute mode), or {'error': why not}."""
    if shutil.which("nvidia-smi") is None:
        return {"error": "nvidia-smi is not on PATH"}
    fields = list(SMI_FIELDS)
    for attempt in (fields, fields[:-1]):  # older drivers do not know cuda_version as a query field
        try:
            done = subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(attempt)}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=15,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"error": f"nvidia-smi: {exc}"}
        if done.returncode == 0 and done.stdout.strip():
            values = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")]
            return dict(zip(attempt, values, strict=False))
    return {"error": f"nvidia-smi failed: {done.stderr.strip() or done.stdout.strip()}"}


def environment(*, dry_run: bool) -> tuple[dict[str, Any], list[str]]:
    """(what the machine is, the problems that fail the stage)."""
    found = imports(NEEDED)
    optional = imports(OPTIONAL)
    problems = [f"{name}: {state}" for name, state in found.items() if state.startswith("missing")]
    facts: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import torch

        facts["torch"] = str(torch.__version__)
        facts["torch_cuda"] = torch.version.cuda
        facts["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name(0)
            facts["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
            facts["devices"] = torch.cuda.device_count()
    except Exception as exc:  # reported as a problem; the imports above name it too
        problems.append(f"torch: {type(exc).__name__}: {exc}")
    facts["triton"] = optional.get("triton")
    if dry_run:
        # The stand-in device check: the CPU, and nvidia-smi not asked for.
        facts["device"] = f"cpu ({platform.processor() or platform.machine()}), dry run"
    else:
        facts["nvidia_smi"] = nvidia_smi()
        if not facts.get("cuda_available"):
            problems.append("torch sees no CUDA device")
        if str(facts["triton"]).startswith("missing"):
            problems.append(f"triton: {facts['triton']}")
        if "error" in facts["nvidia_smi"]:
            problems.append(f"nvidia-smi: {facts['nvidia_smi']['error']}")
    facts["imports"] = found
    facts["optional"] = optional
    return facts, problems


def headline(facts: dict[str, Any]) -> str:
    """One line: the device, the driver and compute mode, torch, CUDA and Triton."""
    smi = facts.get("nvidia_smi") or {}
    device = facts.get("gpu") or facts.get("device") or "no device"
    parts = [str(device)]
    if smi.get("driver_version"):
        parts.append(f"driver {smi['driver_version']}, {smi.get('compute_mode', '?')}")
    triton = facts.get("triton")
    triton = "no Triton" if triton is None or str(triton).startswith("missing") else f"Triton {triton}"
    parts.append(f"torch {facts.get('torch', '?')} (CUDA {facts.get('torch_cuda')}), {triton}")
    parts.append(f"Python {facts['python']}")
    return "; ".join(parts)
