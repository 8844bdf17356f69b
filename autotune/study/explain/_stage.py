"""The first compiler stage that fails: PyTorch's own bisector (`torch._inductor.compiler_bisector`) run on repro.py.

The bisector runs the reproduction again and again in fresh processes, each time with the
compile backend it is testing (dynamo alone, then AOTAutograd, then its decompositions and
partitioner, then Inductor) and, inside the first that fails, with one of its passes or
lowerings turned off or cut short, until it names the stage and, where it can, the pass. It is
PyTorch's command line (`python -m torch._inductor.compiler_bisector run python repro.py`), run in a
process of its own with a cache folder of its own, within what is left of the failure's budget.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BISECTED", "STAGE_NAMES", "Stage", "failing_stage"]

BISECTED = ("compile_error", "accuracy")
"""Failures the bisector is run on: those a stage of the compiler can cause by itself."""

STAGE_NAMES = {
    "eager": "dynamo (the eager backend: tracing alone)",
    "aot_eager": "AOTAutograd (aot_eager)",
    "aot_eager_decomp_partition": "AOTAutograd's decompositions and partitioner (aot_eager_decomp_partition)",
    "aot_eager_decomp_partition_crossref": "AOTAutograd under fake-tensor cross-checks",
    "inductor": "Inductor",
}
"""The bisector's backends, as people read them."""

_RESULT = re.compile(
    r"Bisection complete: BisectionResult\(backend='(?P<backend>[^']*)', subsystem=(?:'(?P<subsystem>[^']*)'|None), "
    r"bisect_number=(?P<number>-?\d+|None), debug_info=(?P<debug>.*)\)\s*$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Stage:
    """What the bisector said."""

    text: str
    """The failing stage, e.g. 'Inductor: lowerings, application 12 (aten.add)'; '' where none was found."""
    note: str = ""
    """Why there is no stage: the budget was spent, or no backend failed under the bisector."""


def failing_stage(script: Path, seconds: float, *, cwd: Path | None = None) -> Stage:
    """Run PyTorch's bisector on `script` (a repro.py) for at most `seconds`, from `cwd` (default: here)."""
    if seconds < 1:
        return Stage("", "not bisected: the budget was spent narrowing the settings")
    folder = cwd or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="autotune-bisect-") as cache:
        paths = [str(folder), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "PYTHONPATH": os.pathsep.join(paths)}
        command = [sys.executable, "-m", "torch._inductor.compiler_bisector", "run", sys.executable, str(script)]
        # A session of its own: the bisector and every run of the reproduction it starts end together, with it.
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            _end(process)
            return Stage("", f"not found: the bisector ran past the {seconds:.0f} s left of the budget")
        except BaseException:
            _end(process)  # Ctrl-C or SIGTERM: nothing of the bisector is left running
            raise
    return stage_of(output)


def _end(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def stage_of(output: str) -> Stage:
    """The stage the bisector's output names (its last 'Bisection complete' line)."""
    found = list(_RESULT.finditer(output))
    if not found:
        if "no issue found" in output:
            return Stage("", "not found: the reproduction passed under every backend the bisector tried")
        return Stage("", "not found: the bisector said nothing it could be read from")
    result = found[-1]
    text = STAGE_NAMES.get(result["backend"], result["backend"])
    if result["subsystem"]:
        text += f": {result['subsystem']}"
        if result["number"] not in (None, "None", "0"):
            text += f", application {result['number']}"
        debug = result["debug"].strip("'\"")
        if debug not in ("None", result["subsystem"], ""):
            text += f" ({debug[:200]})"
    return Stage(text)
