"""Compile-cache files: loaded only where they were made, refused with a warning elsewhere.

These tests write cache files with stand-in artifacts and watch what reaches
`torch.compiler.load_cache_artifacts`; test_retune.py saves and loads real ones.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.compiler._cache import CacheInfo

from autotune import CompileConfig
from autotune.runtime import codegen, compile_cache, device, environment
from autotune.runtime.summary import WorkloadSummary
from tests.best_yaml import tuned_config

pytestmark = pytest.mark.parallel

PAYLOAD = b"\x00stand-in artifacts\xff" * 10
SUMMARY = WorkloadSummary(spec="m:w", task="infer")


@pytest.fixture
def loaded(monkeypatch) -> list[bytes]:
    """What load_compile_cache handed to torch (nothing, when it refused)."""
    calls: list[bytes] = []

    def load(payload: bytes) -> object:
        calls.append(payload)
        info = CacheInfo()  # torch returns what it loaded, or None when it loaded nothing
        info.artifacts["inductor"].append("stand-in")
        return info

    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", load)
    return calls


def cache_file(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "compile_cache.bin"
    compile_cache.write_cache_file(path, PAYLOAD, {**compile_cache.running_fingerprint("cpu"), **changes})
    return path


def test_a_cache_torch_finds_nothing_in_is_not_reported_as_loaded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", lambda payload: None)
    with pytest.warns(UserWarning, match="torch found nothing it can use in it"):
        assert compile_cache.load_compile_cache(str(cache_file(tmp_path))) == {}


def test_a_cache_made_here_is_loaded(tmp_path: Path, loaded: list[bytes]) -> None:
    path = cache_file(tmp_path)
    header = compile_cache.read_header(path)
    assert header["bytes"] == len(PAYLOAD) and header["fingerprint"]["device"] == "cpu"
    assert compile_cache.load_compile_cache(str(path)) == {"inductor": 1}
    assert loaded == [PAYLOAD]


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"torch": "1.0.0"}, "torch '1.0.0', here"),
        ({"python": "3.0.1"}, "python '3.0.1', here"),
        ({"device_name": "Some Other CPU"}, "device_name 'Some Other CPU', here"),
        ({"cuda": "12.4", "device": "cuda:0", "device_name": "NVIDIA H100"}, "cuda '12.4', here"),
    ],
)
def test_a_cache_made_elsewhere_is_refused_with_a_warning(
    changes: dict, named: str, tmp_path: Path, loaded: list[bytes]
) -> None:
    path = cache_file(tmp_path, **changes)
    with pytest.warns(UserWarning, match="made in another environment") as caught:
        assert compile_cache.load_compile_cache(str(path)) == {}
    message = str(caught[0].message)
    assert named in message and "torch compiles as usual" in message and "autotune retune" in message
    assert loaded == []


def test_a_cache_that_is_not_the_one_expected_is_refused(tmp_path: Path, loaded: list[bytes]) -> None:
    path = cache_file(tmp_path)
    expected = {**compile_cache.running_fingerprint("cpu"), "torch": "9.9.9"}
    with pytest.warns(UserWarning, match="torch '.*', expected '9.9.9'"):
        assert compile_cache.load_compile_cache(str(path), fingerprint=expected) == {}
    assert loaded == []


@pytest.mark.parametrize("damage", ["payload", "header", "missing"])
def test_damaged_or_missing_files_are_refused(damage: str, tmp_path: Path, loaded: list[bytes]) -> None:
    path = cache_file(tmp_path)
    if damage == "payload":
        path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    elif damage == "header":
        path.write_bytes(b"not json\n" + PAYLOAD)
    else:
        path.unlink()
    with pytest.warns(UserWarning, match="not loaded"):
        assert compile_cache.load_compile_cache(str(path)) == {}
    assert loaded == []
    assert compile_cache.read_header(path) == {} or damage == "payload"


def test_generated_code_carries_the_same_check(tmp_path: Path, loaded: list[bytes]) -> None:
    source = codegen.generate(CompileConfig(), SUMMARY, created="c", version="v")
    for function in (compile_cache.load_compile_cache, compile_cache.running_fingerprint, device.device_name):
        assert inspect.getsource(function) in source
    module = codegen.load_module(source)
    assert module.load_compile_cache(str(cache_file(tmp_path))) == {"inductor": 1}
    with pytest.warns(UserWarning, match="another environment"):
        assert module.load_compile_cache(str(cache_file(tmp_path, torch="1.0.0"))) == {}
    assert loaded == [PAYLOAD]


def test_tuned_config_checks_the_fingerprint_in_best_yaml(tmp_path: Path, loaded: list[bytes]) -> None:
    path = cache_file(tmp_path)
    here = compile_cache.running_fingerprint("cpu")
    matching = tuned_config(SUMMARY, created="c", environment={}, compile_cache={"fingerprint": here})
    assert matching.load_compile_cache(path) == {"inductor": 1}
    other = tuned_config(SUMMARY, created="c", environment={}, compile_cache={"fingerprint": {**here, "cuda": "12.1"}})
    with pytest.warns(UserWarning, match="cuda"):
        assert other.load_compile_cache(path) == {}
    assert loaded == [PAYLOAD]


def test_environment_fingerprint_agrees_with_the_cache_check() -> None:
    running = compile_cache.running_fingerprint("cpu")
    recorded = environment.fingerprint("cpu")
    assert {k: recorded[k] for k in compile_cache.FINGERPRINT_KEYS} == {
        k: running[k] for k in compile_cache.FINGERPRINT_KEYS
    }
    assert json.loads(json.dumps(running)) == running


def test_describe_says_what_was_measured() -> None:
    section = {
        "saved": True,
        "file": "compile_cache.bin",
        "bytes": 2048,
        "cold_compile_seconds": 9.5,
        "cached_compile_seconds": 3.25,
    }
    assert compile_cache.describe(section) == (
        "compile cache: compile_cache.bin (2 KiB); compile and warm-up took 9.5 s cold and 3.2 s with the cache loaded"
    )
    assert "not saved (the cold run failed)" in compile_cache.describe({"saved": False, "note": "the cold run failed"})
    measured = {**section, "saved_from": compile_cache.SAVED_FROM_MEASURED}
    assert compile_cache.describe(measured).startswith(
        "compile cache: compile_cache.bin (2 KiB) (saved from the cache of the run that was measured); "
    )


@pytest.mark.slow  # compiles with Inductor, saves its artifacts and loads them in another process
def test_generated_code_loads_the_cache_beside_it_by_default(tmp_path: Path) -> None:
    exported = tmp_path / "outputs"
    exported.mkdir()
    (exported / "apply_compilation.py").write_text(codegen.generate(CompileConfig(), SUMMARY, created="c", version="v"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import sys, warnings; sys.path.insert(0, sys.argv[1]); from apply_compilation import load_compile_cache\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always'); loaded = load_compile_cache()\n"
        "print(loaded, [str(w.message) for w in caught])\n"
    )

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, str(exported)], cwd=elsewhere, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "cannot read it" in run() and str(exported / "compile_cache.bin") in run()
    # A file beside apply_compilation.py (not in the working directory) is the one read: here torch
    # finds nothing in stand-in artifacts, which it can only say after reading that file.
    compile_cache.write_cache_file(exported / "compile_cache.bin", PAYLOAD, compile_cache.running_fingerprint("cpu"))
    assert "torch found nothing it can use" in run()
