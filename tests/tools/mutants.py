"""Plant a one-line bug in each part of autotune that decides something, and see the fast tier's tests catch it.

    python -m tests.tools.mutants              every mutant against its own tests (minutes in all)
    python -m tests.tools.mutants choice codegen
    python -m tests.tools.mutants --fast-tier  every mutant against the whole fast tier (minutes each)

Each mutant replaces one line of the package with a wrong one. The line is found by its text
anywhere under `autotune/`, so a module that is split or renamed keeps its mutants; a line found
nowhere, or more than once, stops the command and names it, since that mutant no longer plants
the bug it says. Mutants are planted in a copy of the repository under the system's temporary
folder, never in the checkout, so the command may run beside other work. In the copy, the
mutant's own test files run first without any mutant (they must pass: a failure then would be
the copy's, not the bug's), then once with each mutant, each run stopping at its first failure.
Only the tests marked `parallel` run: they rest on no timing, so a failure is the bug's. A
mutant the tests do not catch is a hole in the fast tier: the command then exits with 1.
`tests/project/test_mutants.py` runs it in the full tier.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "autotune"


@dataclass(frozen=True)
class Mutant:
    name: str
    line: str
    """The line as it is (stripped of its indentation), found once under `autotune/`."""
    wrong: str
    """What it becomes."""
    why: str
    tests: tuple[str, ...]
    """The test files, relative to the repository's root, that must catch it."""


MUTANTS = (
    Mutant(
        "statistics",
        "half = quantile * spread / math.sqrt(len(log_ratios))",
        "half = quantile * spread / len(log_ratios)",
        "intervals narrower than the data allow",
        ("tests/measure/test_engine.py",),
    ),
    Mutant(
        "choice",
        "best = max(candidates, key=lambda c: c[0].median, default=None)",
        "best = min(candidates, key=lambda c: c[0].median, default=None)",
        "the slowest candidate is the one judged for export",
        ("tests/measure/test_pareto.py", "tests/measure/test_choice.py"),
    ),
    Mutant(
        "search loop",
        "if paired is None or paired.samples_per_second is None:",
        "if True:",
        "a trial's figure is its own process's, not paired with the live reference",
        ("tests/study/test_trials.py",),
    ),
    Mutant(
        "codegen",
        "module.compile(**kwargs)",
        "module.compile()",
        "the generated code compiles without the configuration's settings",
        ("tests/trial/test_runner.py",),
    ),
    Mutant(
        "accuracy check of training",
        "error = compare(want * kept[name], got[name] * kept[name], 10 * self.tolerance, scale)",
        "error = compare(want * kept[name], want * kept[name], 10 * self.tolerance, scale)",
        "a compiled training step's parameter updates are never compared with eager's",
        ("tests/trial/test_runner.py",),
    ),
    Mutant(
        "accuracy check of inference",
        "error = compare(want, got.detach().cpu(), self.tolerance)",
        "error = compare(want, want, self.tolerance)",
        "a compiled model's outputs are never compared with eager's",
        ("tests/trial/test_runner.py",),
    ),
    Mutant(
        "retune decision",
        'replaced = versus.median > 1 + min_gain and outcome(versus, BAND) == "gain"',
        'replaced = versus.median > 1 + min_gain or outcome(versus, BAND) == "gain"',
        "a challenger replaces the incumbent on its estimate alone",
        ("tests/measure/test_choice.py",),
    ),
)


class StaleMutant(Exception):
    """A mutant's line is not in the package once: the mutant would plant nothing, or plant it in the wrong place."""


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    path: str
    """Where the line was found, relative to the root."""
    caught_by: str
    """The first failing test's line; '' when nothing failed."""
    seconds: float

    @property
    def caught(self) -> bool:
        return bool(self.caught_by)


def locate(mutant: Mutant, root: Path = ROOT) -> tuple[Path, int]:
    """The one file under `autotune/` holding the mutant's line, and the line's index there."""
    found = [
        (path, index)
        for path in sorted((root / PACKAGE).rglob("*.py"))
        for index, line in enumerate(path.read_text(encoding="utf-8").splitlines())
        if line.strip() == mutant.line
    ]
    if len(found) != 1:
        where = ", ".join(f"{p.relative_to(root)}:{i + 1}" for p, i in found) or "nowhere"
        raise StaleMutant(
            f"mutant {mutant.name!r}: its line {mutant.line!r} must be in {PACKAGE}/ once, found {where}: update MUTANTS"
        )
    return found[0]


def plant(mutant: Mutant, root: Path) -> tuple[Path, str]:
    """Write the mutant into its file under `root`; returns the file and its text before, to put back."""
    path, index = locate(mutant, root)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
    lines[index] = f"{indent}{mutant.wrong}\n"
    path.write_text("".join(lines), encoding="utf-8")
    return path, text


def _tracked(root: Path) -> list[str]:
    """The repository's files as git sees them (tracked, and new ones not ignored); every file where git is absent."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "site", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        return [
            str(path.relative_to(root))
            for path in root.rglob("*")
            if not path.is_dir() and not skip.intersection(path.relative_to(root).parts)
        ]
    return [name for name in done.stdout.decode().split("\0") if name]


def copy_repository(target: Path, root: Path = ROOT) -> Path:
    """A copy of the repository's files under `target`, links kept as links (the bundled spaces' is one)."""
    for name in _tracked(root):
        source = root / name
        if not source.is_symlink() and not source.is_file():
            continue  # listed but gone from the working tree
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)
    return target


def run_tests(root: Path, tests: Sequence[str], *, fast_tier: bool = False) -> str:
    """The first failing test's line of the tests in the copy at `root`; '' when they all pass."""
    # The copy's package first, in the tests and in every worker process they start. A run from inside a test
    # leaves out what marks that test's own process (xdist's worker name, the test running); the share of
    # the cores its xdist pass gives stays.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    base = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--tier", "fast"]
    if fast_tier:
        runs = [[*base, "-m", "parallel", "-n", "2", "--dist", "loadfile"], [*base, "-m", "not parallel", "-n", "0"]]
    else:
        runs = [[*base, "-m", "parallel", "-n", "0", *tests]]
    for command in runs:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 5):
            failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
            return failed[0] if failed else (done.stdout + done.stderr)[-300:].strip() or f"exit {done.returncode}"
    return ""


def run(
    mutants: Iterable[Mutant], *, fast_tier: bool = False, report: Callable[[str], object] = print
) -> list[Outcome]:
    """Plant each mutant in one copy of the repository, in turn, and run its tests; the copy is removed after."""
    mutants = list(mutants)
    for mutant in mutants:
        locate(mutant)  # every line is checked before anything runs
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="autotune-mutants-") as folder:
        copy = copy_repository(Path(folder) / "repo")
        control = sorted({test for m in mutants for test in m.tests})
        started = time.monotonic()
        failed = run_tests(copy, control, fast_tier=fast_tier)
        if failed:
            raise RuntimeError(f"the tests fail in the copy without a mutant, so no mutant can be judged: {failed}")
        report(f"without a mutant: {len(control)} test file(s) pass [{time.monotonic() - started:.0f} s]")
        for mutant in mutants:
            started = time.monotonic()
            path, before = plant(mutant, copy)
            try:
                caught_by = run_tests(copy, mutant.tests, fast_tier=fast_tier)
            finally:
                path.write_text(before, encoding="utf-8")
            outcome = Outcome(mutant, str(path.relative_to(copy)), caught_by, time.monotonic() - started)
            said = f"caught by {caught_by}" if outcome.caught else "NOT CAUGHT"
            report(f"{mutant.name} ({mutant.why}; {outcome.path}): {said} [{outcome.seconds:.0f} s]")
            outcomes.append(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.mutants", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(m.name for m in MUTANTS)}")
    parser.add_argument("--fast-tier", action="store_true", help="run the whole fast tier against each mutant")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"no mutant {sorted(unknown)}; the mutants are {[m.name for m in MUTANTS]}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    try:
        outcomes = run(chosen, fast_tier=args.fast_tier, report=lambda line: print(line, flush=True))
    except StaleMutant as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0 if all(o.caught for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
