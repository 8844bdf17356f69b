"""Every Python example in the README and the documentation runs, or says why it cannot.

A ```python block runs as it is, in a fresh namespace, from a folder that holds what a
finished `bash .ci/demo` leaves: `outputs/examples.toy-model/best.yaml` and
`apply_compilation.py` beside it, and a copy of `apply_compilation.py` next to the
script, as the guides say to put it. The configuration
compiles with dynamo's `eager` backend, so that the examples check the API, not Inductor's
speed, in seconds.

A block that cannot run here (it needs your own package, a GPU, a Trainer with its data,
a database) starts with the line `# not run: <the reason>`; the reason is required.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune import CompileConfig, load, resolve
from autotune.workload.resolve import EXTRAS
from tests.best_yaml import tuned_config
from tests.blocked_imports import blocker_source

# Compiles the toy with dynamo's eager backend in-process and times nothing: the fast tier, beside other tests.
pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]
STUDY = "outputs/examples.toy-model"
FENCE = re.compile(r"^(?P<indent>[ ]*)```python[ ]*\n(?P<code>.*?)^(?P=indent)```[ ]*$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"^# not run: (?P<reason>\S.*)$")
CORE_LACKS = ("transformers", "accelerate", "lightning")
"""What `pip install autotune` leaves out: the extras' libraries."""


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks() -> list[tuple[str, int, str]]:
    blocks = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            indent = len(match["indent"])
            code = "\n".join(line[indent:] for line in match["code"].splitlines())
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((str(page.relative_to(ROOT)), line, code))
    return blocks


BLOCKS = _blocks()


@pytest.fixture(scope="module")
def demo_outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as after `bash .ci/demo`, with a cheap configuration of the toy."""
    folder = tmp_path_factory.mktemp("docs")
    out = folder / STUDY
    out.mkdir(parents=True)
    toy = resolve("examples.toy:model")
    summary = toy.summary("examples.toy:model", toy.draw_batches())
    tuned = tuned_config(
        summary, CompileConfig(backend="eager", compile_optimizer=True), created="2026-01-01T00:00:00Z"
    )
    tuned.write(out / "best.yaml")
    (out / "apply_compilation.py").write_text(tuned.source, encoding="utf-8")
    shutil.copy(out / "apply_compilation.py", folder / "apply_compilation.py")
    return folder


@pytest.fixture
def in_demo_folder(demo_outputs: Path) -> Iterator[Path]:
    before, path = Path.cwd(), list(sys.path)
    os.chdir(demo_outputs)
    sys.path[:0] = [str(demo_outputs), str(ROOT)]
    try:
        yield demo_outputs
    finally:
        os.chdir(before)
        sys.path[:] = path
        sys.modules.pop("apply_compilation", None)


def test_examples_were_found() -> None:
    assert len(BLOCKS) >= 5, "the collector found almost no ```python blocks: the fence pattern is broken"


def _first_line(code: str) -> str:
    return code.lstrip().splitlines()[0] if code.strip() else ""


RUNNABLE = [b for b in BLOCKS if not _first_line(b[2]).startswith("# not run")]
MARKED = [b for b in BLOCKS if _first_line(b[2]).startswith("# not run")]


def test_every_block_that_cannot_run_says_why() -> None:
    # Such blocks are not run (they stand for a user's own Trainer, Accelerator or saved cache), so they are
    # not collected as tests either: each must only name its reason.
    for page, line, code in MARKED:
        assert NOT_RUN.match(_first_line(code)), f"{page}:{line}: write `# not run: <why it cannot run>`"


@pytest.mark.parametrize(("page", "line", "code"), RUNNABLE, ids=[f"{page}:{line}" for page, line, _ in RUNNABLE])
def test_example_runs(page: str, line: int, code: str, in_demo_folder: Path) -> None:
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__docs__"})


def test_the_readmes_own_model_example_is_searched_as_it_is_shown(tmp_path: Path) -> None:
    """The README's "tune your own model" file, saved where it says, and the command under it, end to end.

    The file gets one line more, first: its workers then compile on dynamo's eager backend
    (`tests.trial_targets.dynamo_only`), so that the search takes seconds; what is tested is that
    the example is a workload autotune searches and exports, not Inductor's speed on it.

    Every process of the search runs as in an install without the extras: transformers, accelerate and
    Lightning cannot be imported (a `sitecustomize` on PYTHONPATH refuses them), and the plots are drawn.
    """
    (code,) = [code for page, _, code in BLOCKS if page == "README.md" and _first_line(code) == "# mypkg/tune.py"]
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tune.py").write_text("import tests.trial_targets.dynamo_only  # noqa: F401\n" + code)
    readme = (ROOT / "README.md").read_text()
    assert "autotune search --model mypkg.tune:model --effort quick" in readme
    out = tmp_path / "outputs" / "mypkg.tune-model"
    core = tmp_path / "core_install"
    core.mkdir()
    (core / "sitecustomize.py").write_text(blocker_source(*CORE_LACKS))
    assert "autotune search --model mypkg.tune:model --effort quick --dry-run" in readme
    planned = _search(
        tmp_path, "--model", "mypkg.tune:model", "--effort", "quick", "--dry-run", timeout=600, first_on_path=core
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "  trials      2 on 1 worker(s): first the recipe(s) plain" in planned.stdout, planned.stdout
    assert "  estimate    about " in planned.stdout and not out.exists(), "the dry run stores nothing"
    done = _search(tmp_path, "--model", "mypkg.tune:model", "--effort", "quick", timeout=600, first_on_path=core)
    assert done.returncode == 0, done.stderr[-3000:]
    tuned = load(out / "best.yaml")
    assert tuned.workload.spec == "mypkg.tune:model" and tuned.workload.task == "train"
    assert tuned.metrics["verdict"] in (out / "report.md").read_text()
    assert (out / "apply_compilation.py").is_file()
    assert {"decision.png", "history.png"} <= {p.name for p in out.glob("*.png")}, "the report's plots are drawn"


def test_without_the_extras_a_transformers_target_is_refused_with_the_install_that_fixes_it(tmp_path: Path) -> None:
    (tmp_path / "hftarget.py").write_text("from transformers import Trainer\n\ndef trainer():\n    return Trainer\n")
    script = blocker_source(*CORE_LACKS) + (
        "from autotune.workload import resolve\nfrom autotune.errors import WorkloadError\n"
        "try:\n    resolve('hftarget:trainer')\nexcept WorkloadError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cannot import 'hftarget'" in done.stdout
    assert "'transformers' is not installed: autotune installs it with its 'hf' extra" in done.stdout
    assert "pip install 'autotune[hf]'" in done.stdout


def test_a_core_install_pulls_none_of_the_extras() -> None:
    # What pip installs with autotune, from the installed package's own metadata.
    requirements = importlib.metadata.requires("autotune") or []
    core = {re.split(r"[<>=\[ ;]", r)[0].lower() for r in requirements if "extra ==" not in r}
    assert core == {"torch", "optuna", "pyyaml", "matplotlib", "rich"}, "what every user needs, nothing more"
    for library in CORE_LACKS:
        extra = EXTRAS[library]
        assert any(r.startswith(library) and f'extra == "{extra}"' in r for r in requirements), (library, extra)


@pytest.mark.slow  # GPT-2's 50,257-word head in every step of every trial: minutes, even on the eager backend
def test_the_public_model_tuned_with_its_own_step_is_searched_as_workload_md_shows(tmp_path: Path) -> None:
    """docs/workload.md's GPT-2 with a script's own train_step: the lines that tune it are few, and they work."""
    (code,) = [code for page, _, code in BLOCKS if page == "docs/workload.md" and "gpt2_tune.py" in _first_line(code)]
    tuning = code[code.index("from autotune import Workload") :]
    assert len([line for line in tuning.splitlines() if line.strip()]) <= 15, "at most 15 lines of the user's code"
    (tmp_path / "gpt2_tune.py").write_text("import tests.trial_targets.dynamo_only  # noqa: F401\n" + code)
    assert "autotune search --model gpt2_tune:workload" in (ROOT / "docs" / "workload.md").read_text()
    # Unconfirmed: GPT-2 runs about three steps a second on two cores, and a confirmation would add two and a half
    # minutes that the example's own step does not change (the loop example's search confirms an own step).
    done = _search(tmp_path, "--model", "gpt2_tune:workload", "--out", str(tmp_path / "out"), timeout=1200, confirm=0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert load(tmp_path / "out" / "best.yaml").workload.own_step


def _search(
    folder: Path, *argv: str, timeout: float, confirm: int = 1, first_on_path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`autotune search ARGV` from `folder`, short: two trials, `confirm` confirmed in at most two rounds;
    `first_on_path` goes first on every process's PYTHONPATH."""
    return subprocess.run(
        [
            sys.executable, "-m", "autotune", "search", *argv, "--trials", "2", "--confirm", str(confirm),
            "--max-replicates", "2", "--no-doctor", "--window-seconds", "0.1", "--device", "cpu", "--no-compile-cache",
        ],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (first_on_path, folder, ROOT) if p)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )  # fmt: skip


def test_the_readme_is_a_newcomers_page_of_at_most_150_lines() -> None:
    # The rest lives in docs/: a README that grows past a screenful or two stops being read.
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"
