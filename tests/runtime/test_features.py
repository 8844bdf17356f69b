"""Settings some torch releases lack are probed, not assumed from a version: torch 2.11's gaps, made on 2.13."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo.variables.builder

from autotune.errors import ConfigError
from autotune.runtime import codegen, features
from autotune.runtime.config import CompileConfig
from autotune.runtime.features import has_feature, torch_lacks
from autotune.runtime.summary import WorkloadSummary

pytestmark = pytest.mark.parallel


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    features._probe.cache_clear()
    yield
    features._probe.cache_clear()  # the next test probes the real torch again


def generated(config: CompileConfig, summary: WorkloadSummary) -> str:
    return codegen.generate(config, summary, created="2025-01-01T00:00:00+00:00", version="test")


OLDER_TORCH_LACKS = {"recompile_limit", "mark_as=sources"}
"""What torch 2.11 (the GPU check's) lacks of what torch 2.13 (the CI's) has; pyproject.toml admits both."""


def _release() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def test_each_probe_agrees_with_the_installed_torch_whatever_its_release() -> None:
    import torch._dynamo.compiled_autograd
    import torch._dynamo.decorators
    import torch.compiler

    # The same facts, looked up another way.
    present = {
        "mark_as=unbacked": hasattr(torch._dynamo.decorators, "mark_unbacked"),
        "mark_as=sources": hasattr(torch._dynamo.variables.builder, "_parse_source_entry"),
        "recompile_limit": "recompile_limit" in inspect.signature(torch.compile).parameters,
        "stance_after_warmup": "'eager_on_recompile'" in (torch.compiler.set_stance.__doc__ or "")
        or '"eager_on_recompile"' in (torch.compiler.set_stance.__doc__ or ""),
        "compiled_autograd": hasattr(torch._dynamo.compiled_autograd, "_enable"),
        "float32_matmul_precision": hasattr(torch, "set_float32_matmul_precision"),
    }
    # Four are knobs' probes (`autotune.runtime.knobs`), the rest FEATURES.
    knobs = {"recompile_limit", "float32_matmul_precision", "stance_after_warmup", "compiled_autograd"}
    assert set(features.FEATURES) | knobs == set(present), "a probe this test does not know"
    for name, there in present.items():
        setting, _, value = name.partition("=")
        assert has_feature(setting, value or None) is there, name
    missing = {name for name, there in present.items() if not there}
    assert missing == (set() if _release() >= (2, 13) else missing & OLDER_TORCH_LACKS), (torch.__version__, missing)
    if not missing:
        config = CompileConfig(knobs={"recompile_limit": 4, "stance_after_warmup": "eager_on_recompile"})
        assert torch_lacks(config) == []


def test_a_torch_compile_without_the_recompile_limit_keyword_refuses_it_by_name(monkeypatch, toy_summary) -> None:
    real = torch.compile

    def compile_of_torch_2_11(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False):  # fmt: skip
        return real(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options)

    monkeypatch.setattr(torch, "compile", compile_of_torch_2_11)
    assert not has_feature("recompile_limit") and has_feature("recompile_limit", None) is False
    config = CompileConfig(knobs={"recompile_limit": 4})
    assert torch_lacks(config) == ["recompile_limit=4 (needs torch.compile with recompile_limit)"]
    with pytest.raises(ConfigError, match=r"lacks: recompile_limit=4 \(needs torch.compile with recompile_limit\)"):
        generated(config, toy_summary)
    generated(CompileConfig(), toy_summary)  # the rest still generates


def test_without_the_per_axis_parser_marking_by_source_is_refused(monkeypatch, toy_summary) -> None:
    monkeypatch.delattr(torch._dynamo.variables.builder, "_parse_source_entry")
    assert not has_feature("mark_as", "sources") and has_feature("mark_as", "unbacked")
    config = CompileConfig(mark_dynamic=(("input_ids", 1),), mark_as="sources")
    (missing,) = torch_lacks(config)
    assert missing == "mark_as='sources' (needs torch._dynamo.variables.builder._parse_source_entry)"
    with pytest.raises(ConfigError, match="mark_as='sources'"):
        generated(config, toy_summary)
    # Marking each batch's tensors needs no parser.
    assert torch_lacks(CompileConfig(mark_dynamic=(("input_ids", 1),), mark_as="dynamic")) == []


def test_a_stance_set_stance_does_not_document_is_missing(monkeypatch) -> None:
    def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
        """Set the stance: "default" or "force_eager"."""

    monkeypatch.setattr(torch.compiler, "set_stance", set_stance)
    assert torch_lacks(CompileConfig(knobs={"stance_after_warmup": "eager_on_recompile"})) == [
        "stance_after_warmup='eager_on_recompile' (needs torch.compiler.set_stance with eager_on_recompile)"
    ]


def test_without_the_mega_cache_nothing_is_saved_or_loaded_and_it_says_why(monkeypatch, tmp_path) -> None:
    from autotune.runtime.compile_cache import (
        load_compile_cache,
        running_fingerprint,
        save_compile_cache,
        write_cache_file,
    )

    write_cache_file(tmp_path / "compile_cache.bin", b"payload", running_fingerprint("cpu"))
    monkeypatch.delattr(torch.compiler, "save_cache_artifacts")
    monkeypatch.delattr(torch.compiler, "load_cache_artifacts")
    saved = save_compile_cache(tmp_path / "other.bin", "cpu")
    assert saved["saved"] is False and "has no torch.compiler.save_cache_artifacts" in saved["message"]
    assert not (tmp_path / "other.bin").exists()
    with pytest.warns(UserWarning, match="cannot load one"):
        assert load_compile_cache(str(tmp_path / "compile_cache.bin")) == {}


def test_the_recompile_limit_flag_falls_back_to_dynamos_config(monkeypatch) -> None:
    import torch._dynamo

    from autotune.trial.compile_counts import fail_on_recompile_limit

    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", False)
    monkeypatch.delattr(torch.compiler, "config")  # a torch whose torch.compiler has no config module
    fail_on_recompile_limit()
    assert torch._dynamo.config.fail_on_recompile_limit_hit is True


def test_counts_survive_a_torch_without_compile_metrics_or_compile_callbacks(monkeypatch) -> None:
    import torch._dynamo
    import torch._dynamo.utils

    from autotune.trial import compile_counts

    monkeypatch.delattr(torch._dynamo.utils, "get_compilation_metrics")
    monkeypatch.delattr(torch._dynamo, "callback_handler")
    compile_counts.watch_compiles()  # nothing to register with: no recordings counted, no error
    counts = compile_counts.dynamo_counts()
    assert counts["recompiles"] == 0 and counts["cuda_graph_recordings"] == compile_counts._RECORDINGS[0]


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_recompile_counts_as_compiling_with_or_without_fullgraph(fullgraph: bool) -> None:
    # Under fullgraph=True torch.compile converts frames without dynamo's frame counter: the toy's forward recompiled
    # for three new lengths in a warm-up pass that then looked settled, 27 s of compiling left out of compile time.
    import torch

    from autotune.trial import compile_counts

    compile_counts.watch_compiles()
    compiled = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2, fullgraph=fullgraph, dynamic=False)
    compiled(torch.ones(3))
    before = compile_counts.frames_compiled()
    compiled(torch.ones(3))
    assert compile_counts.frames_compiled() == before, "a call that compiled nothing"
    compiled(torch.ones(5))  # a new length: dynamo compiles again
    assert compile_counts.frames_compiled() == before + 1
    torch._dynamo.reset()  # clears dynamo's compile callbacks: counting goes on
    before = compile_counts.frames_compiled()
    compiled(torch.ones(7))
    assert compile_counts.frames_compiled() == before + 1
