"""Fixtures shared by the test modules: the bundled toy workload and its summary, a PostgreSQL server."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from autotune import resolve
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import Workload
from tests.leaks import PyTorchAsFound
from tests.postgres import PostgresMissing, running_server

TOY = "examples.toy:model"

collect_ignore = [] if torch.cuda.is_available() else ["gpu"]
"""tests/gpu needs a CUDA device: `bash .ci/gpu` runs it where there is one; elsewhere it is not collected."""


FULL_TIER = ("slow", "quiet", "postgres")
"""Markers of the full tier: real Inductor compiles and searches, premises that need a quiet machine, a server."""
TIERS = ("fast", "full", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="fast",
        help="fast (the default): every test that compiles nothing with Inductor, needs no quiet machine and no "
        f"server; full: only the tests marked {', '.join(FULL_TIER)}; all: both",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Kernels built once are copied after (`share_kernel_builds`); OpenMP threads are shared out beside other tests."""
    share_kernel_builds()
    _share_cores()


def share_kernel_builds() -> Path | None:
    """Point Inductor, here and in every process a test starts, at the suite's compiler with its store of kernels.

    `tests/tools/kernel_store.py` says how: the same kernel built again is a copy of the bytes
    the real compiler made the first time, in any cache folder. The store lives beside other
    temporary files under a name drawn from torch's, Python's and the compiler's versions, so a
    new torch or compiler starts an empty one; both passes and every worker share it. Where no
    g++ is found, or CXX names another compiler, nothing changes. Returns the store, if any.
    """
    wrapper = Path(__file__).parent / "tools" / "g++"
    real = shutil.which("g++")
    if real is None or os.environ.get("CXX", str(wrapper)) != str(wrapper):
        return None
    version = subprocess.run([real, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256(f"{torch.__version__}\0{sys.version}\0{real}\0{version}".encode()).hexdigest()[:16]
    store = Path(tempfile.gettempdir()) / f"autotune-test-kernels-{key}"
    os.environ.update(
        AUTOTUNE_TEST_REAL_CXX=real,
        AUTOTUNE_TEST_CXX_STORE=str(store),
        AUTOTUNE_TEST_PYTHON=sys.executable,
        CXX=str(wrapper),  # read when Inductor's config is imported: by every process a test starts
    )
    from torch._inductor import config as inductor_config

    inductor_config.cpp.cxx = (None, str(wrapper))  # this process may have imported it already
    return store


def _share_cores() -> None:
    """Beside other tests, each pytest-xdist worker and every process it starts gets its share of the cores.

    OpenMP gives every process one thread per core, and its threads spin while they wait: two
    tests side by side on two cores, each with two threads, took 2.8 times as long as with one
    thread each (two real searches of the tiny workload on a 2-core AMD EPYC: 221 s against 80 s, each 70 s alone).
    The parallel pass rests on no timing, so one thread changes nothing it asserts. Tests that run
    alone keep torch's default, the one the product measures with.
    """
    workers = _xdist_workers()
    if workers > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by every worker process a test starts
        torch.set_num_threads(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tier asked for (`--tier`); then, beside other tests, modules with more slow tests come first.

    `.ci/test` hands whole modules out (`--dist loadfile`) in the order they were collected;
    the module of real searches, left to the end, ran for minutes while the other worker idled.
    The order within a module, and of the tests that run alone, stays as written.
    """
    _select_tier(config, items)
    if _xdist_workers() <= 1:
        return
    slow = Counter(item.path for item in items if item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow[item.path])  # stable: each module's tests keep their order


def _select_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests of the other tier; a test that uses the PostgreSQL server is marked `postgres` here."""
    tier = config.getoption("--tier")
    keep, left_out = [], []
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        full = any(item.get_closest_marker(name) is not None for name in FULL_TIER)
        (keep if tier == "all" or full == (tier == "full") else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = keep


def _xdist_workers() -> int:
    """How many pytest-xdist workers run side by side; 1 without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


_as_found: list[PyTorchAsFound] = []
"""PyTorch as the first test module found it, noted once per process."""


@pytest.fixture(autouse=True, scope="module")
def _pytorch_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test module leaves PyTorch's functions and compiler settings as it found them, whatever ran before it."""
    if not _as_found:
        _as_found.append(PyTorchAsFound.note())
    yield
    leaked = _as_found[0].differences()
    if leaked:
        pytest.fail(
            f"{request.module.__name__} left PyTorch changed for the tests after it (now put back); undo a patch "
            f"when the test ends (monkeypatch, config.patch), never at import: {'; '.join(leaked[:8])}"
            + (f" and {len(leaked) - 8} more" if len(leaked) > 8 else ""),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def toy() -> Workload:
    """The toy workload; tests that train or compile its model work on a copy."""
    return resolve(TOY)


@pytest.fixture(scope="session")
def toy_summary(toy: Workload) -> WorkloadSummary:
    return toy.summary(TOY, toy.draw_batches())


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 for the session's shared-study tests, stopped at the end.

    A server that cannot start fails those tests, naming what is missing: they test what
    several hosts rely on, so they must not pass by being skipped.
    """
    try:
        with running_server() as url:
            yield url
    except PostgresMissing as exc:
        # Never a skip: these tests must be able to fail. `.ci/test` installs the server as root.
        pytest.fail(f"the shared-study tests need a PostgreSQL server: {exc}")
