"""Plant a one-line bug in each part of autotune that decides something, and see the fast tier catch it.

    python -m tests.tools.mutants              every mutant, one after another (minutes each)
    python -m tests.tools.mutants choice codegen

Each mutant replaces one line of the package with a wrong one, runs the fast tier's tests
(the pass two at a time, then the pass alone, each stopping at its first failure), and puts
the line back, whatever happens. A mutant the tests do not catch is a hole in the fast tier:
the command then exits with 1. Run it on a clean checkout, with nothing else running; it
changes files of the package while it runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    line: str
    """The line as it is (stripped of its indentation)."""
    wrong: str
    """What it becomes."""
    why: str


MUTANTS = (
    Mutant(
        "statistics",
        "autotune/measure/stats/_statistics.py",
        "half = quantile * spread / math.sqrt(len(log_ratios))",
        "half = quantile * spread / len(log_ratios)",
        "intervals narrower than the data allow",
    ),
    Mutant(
        "choice",
        "autotune/measure/choice/_choice.py",
        "best = max(candidates, key=lambda c: c[0].median, default=None)",
        "best = min(candidates, key=lambda c: c[0].median, default=None)",
        "the slowest candidate is the one judged for export",
    ),
    Mutant(
        "search loop",
        "autotune/study/search/_loop.py",
        "record = self._paired_figures(trial, record, paired, reused=bool(reused))",
        "record = record",
        "a trial's figure is its own process's, not paired with the live reference",
    ),
    Mutant(
        "codegen",
        "autotune/runtime/codegen.py",
        "module.compile(**kwargs)",
        "module.compile()",
        "the generated code compiles without the configuration's settings",
    ),
    Mutant(
        "accuracy check of training",
        "autotune/trial/worker.py",
        "error = compare(want * kept[name], got[name] * kept[name], 10 * self.tolerance, scale)",
        "error = compare(want * kept[name], want * kept[name], 10 * self.tolerance, scale)",
        "a compiled training step's parameter updates are never compared with eager's",
    ),
    Mutant(
        "accuracy check of inference",
        "autotune/trial/worker.py",
        "error = compare(want, got.detach().cpu(), self.tolerance)",
        "error = compare(want, want, self.tolerance)",
        "a compiled model's outputs are never compared with eager's",
    ),
    Mutant(
        "retune decision",
        "autotune/measure/choice/_decision.py",
        'replaced = versus.median > 1 + min_gain and outcome(versus, BAND) == "gain"',
        'replaced = versus.median > 1 + min_gain or outcome(versus, BAND) == "gain"',
        "a challenger replaces the incumbent on its estimate alone",
    ),
)


def plant(mutant: Mutant) -> str:
    """Write the mutant into its file; returns the file's text before, to put back."""
    path = ROOT / mutant.path
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    found = [i for i, line in enumerate(lines) if line.strip() == mutant.line]
    if len(found) != 1:
        raise SystemExit(f"mutants: {mutant.path} has {len(found)} lines {mutant.line!r}, not one: update MUTANTS")
    index = found[0]
    indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
    lines[index] = f"{indent}{mutant.wrong}\n"
    path.write_text("".join(lines))
    return text


def run_fast_tier() -> tuple[bool, str]:
    """(passed, the first failing test's line) of the fast tier's two passes, each stopping at its first failure."""
    for marks, extra in (("parallel", ["-n", "2", "--dist", "loadfile"]), ("not parallel", [])):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", marks, *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode not in (0, 5):
            failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
            return False, failed[0] if failed else done.stdout[-300:]
    return True, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(m.name for m in MUTANTS)}")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"no mutant {sorted(unknown)}; the mutants are {[m.name for m in MUTANTS]}")
    escaped = 0
    for mutant in [m for m in MUTANTS if not args.names or m.name in args.names]:
        before = plant(mutant)
        started = time.monotonic()
        try:
            passed, caught_by = run_fast_tier()
        finally:
            (ROOT / mutant.path).write_text(before)
        seconds = time.monotonic() - started
        escaped += passed
        said = "NOT CAUGHT" if passed else f"caught by {caught_by}"
        print(f"{mutant.name} ({mutant.why}): {said} [{seconds:.0f} s]", flush=True)
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
