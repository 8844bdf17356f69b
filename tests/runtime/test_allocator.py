"""The steady host allocator: measured processes start with it, and the generated file sets the same in a user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import CompileConfig
from autotune.runtime import allocator, codegen
from autotune.runtime.summary import WorkloadSummary
from autotune.trial import live
from autotune.trial.request import TrialRequest

pytestmark = pytest.mark.parallel

# Where 16 MiB blocks come from, and what the heap keeps once 160 MiB of them are freed: with glibc's adaptive
# thresholds such a block gets a mapping of its own, which is unmapped when freed and faulted in anew next time;
# with the steady ones it comes from the heap, which keeps it. Prints both before and after calling
# `apply_compilation` from the generated file given as argv[1] (with --env, only before).
HEAP = r"""
import importlib.util
import json
import sys

import torch


def heap():
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith("[heap]"):
                low, high = (int(part, 16) for part in line.split()[0].split("-"))
                return low, high
    return 0, 0


def blocks():
    xs = [torch.ones(4 * 1024 * 1024) for _ in range(10)]
    low, high = heap()
    inside = sum(low <= x.data_ptr() < high for x in xs)
    del xs
    low, high = heap()
    return {"from_heap": inside, "heap_kept_mb": (high - low) / 2**20}


result = {"before": blocks()}
if sys.argv[1] != "--env":
    spec = importlib.util.spec_from_file_location("apply_compilation", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.apply_compilation(torch.nn.Linear(2, 2))
    result["after"] = blocks()
print(json.dumps(result))
"""


def _clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD", *allocator.VARIABLES)}
    return {**env, **extra}


def _blocks(argument: str, env: dict[str, str]) -> dict[str, dict[str, float]]:
    child = subprocess.run(
        [sys.executable, "-c", HEAP, argument], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout)


def test_a_measured_process_starts_with_fixed_thresholds_unless_the_user_chose(monkeypatch, tmp_path: Path) -> None:
    for name in ("GLIBC_TUNABLES", "LD_PRELOAD", *allocator.VARIABLES):
        monkeypatch.delenv(name, raising=False)
    env = live._environment(tmp_path, TrialRequest(spec="m:f", source=None, device="cpu"), 3)
    assert {name: env[name] for name in allocator.VARIABLES} == {
        "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
        "MALLOC_TRIM_THRESHOLD_": str(256 * 1024 * 1024),
    }

    # A user who set a threshold, a tunable or another allocator keeps what they set, and nothing is added.
    for name, value in (("MALLOC_TRIM_THRESHOLD_", "1000"), ("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")):
        monkeypatch.setenv(name, value)
        env = live._environment(tmp_path, TrialRequest(spec="m:f", source=None, device="cpu"), 3)
        assert env[name] == value
        assert "MALLOC_MMAP_THRESHOLD_" not in env
        monkeypatch.delenv(name)
    assert allocator.worker_environment({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}) == {}
    assert allocator.worker_environment({"LD_PRELOAD": ""}) == dict(allocator.VARIABLES)


def test_the_copied_function_sets_the_same_thresholds_and_respects_the_same_choices_as_the_workers() -> None:
    # The generated file holds steady_malloc's source, with its values as literals: they must be the workers'.
    constants = allocator.steady_malloc.__code__.co_consts
    assert allocator.MMAP_THRESHOLD in constants and allocator.TRIM_THRESHOLD in constants
    # ...and it leaves the allocator alone where the workers would: the same user choices, in the same order.
    assert allocator._USER_CHOICES in constants


def test_the_generated_file_keeps_a_step_s_memory_in_the_heap(tmp_path: Path) -> None:
    path = tmp_path / "apply_compilation.py"
    source = codegen.generate(
        CompileConfig(scope="none"), WorkloadSummary(spec="m:w", task="infer"), created="now", version="0"
    )
    path.write_text(source)

    plain = _blocks(str(path), _clean_environment())
    assert plain["before"]["from_heap"] == 0, plain  # glibc's default: a mapping each, unmapped when freed
    assert plain["after"]["from_heap"] == 10, plain
    # ...and the heap keeps the 160 MiB once they are freed, rather than handing it back to be faulted in again.
    assert plain["after"]["heap_kept_mb"] - plain["before"]["heap_kept_mb"] >= 150, plain

    # The variables the workers start with do the same from the first allocation on.
    assert _blocks("--env", _clean_environment(**allocator.VARIABLES))["before"]["from_heap"] == 10
    # A user's own choice is kept: the generated file changes nothing then (here a fixed 1 MiB threshold).
    chosen = _blocks(str(path), _clean_environment(MALLOC_MMAP_THRESHOLD_=str(2**20)))
    assert chosen["before"]["from_heap"] == chosen["after"]["from_heap"] == 0, chosen


@pytest.mark.slow
def test_the_allocator_study_sees_no_faults_with_the_steady_thresholds(tmp_path: Path) -> None:
    from examples import allocator_study

    out = tmp_path / "allocator.md"
    assert allocator_study.main(["--workload", "examples.toy:model", "--pairs", "1", "--out", str(out)]) == 0
    lines = [line for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in lines[1:]}
    assert set(rows) == {"glibc default", "steady thresholds"}, out.read_text()
    assert rows["steady thresholds"][-1].strip(" |") == "0", out.read_text()  # page faults per step, its one process
