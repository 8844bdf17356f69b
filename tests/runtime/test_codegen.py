"""Generated apply_compilation.py: every combination parses and runs with only torch; nothing can be injected."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autotune import CompileConfig, ConfigError, ModuleSettings
from autotune.runtime import batching, codegen
from autotune.runtime.config import available_modes
from autotune.runtime.summary import WorkloadSummary
from tests.blocked_imports import blocker_source

pytestmark = pytest.mark.parallel

CREATED = "2026-01-02T03:04:05Z"
MARKS = (("attention_mask", 1), ("input_ids", 1), ("labels", 1))
SHAPE_OPTIONS = {"shape_padding": True, "epilogue_fusion": False}

# Every scope x mode x dynamic/mark_dynamic x padding x optimizer combination.
MODES = (*available_modes(), "options")
DYNAMICS = ("none", "static", "dynamic", "marked")
PADDINGS = (None, 8, "pow2", "max")
BLOCKS = ["encoder.blocks.0", "encoder.blocks.1", "encoder.blocks.2"]
COMBINATIONS = list(itertools.product(("whole", "modular", "regional"), MODES, DYNAMICS, PADDINGS, (False, True)))

# The stand-in has the toy's submodule paths, so generated code can be applied to it cheaply:
# `module.compile()` only wraps; nothing is compiled until a forward runs.
CHILD = (
    blocker_source("autotune", "examples", "tests", "yaml", "optuna")
    + r"""
import importlib.util
import json

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class StandIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(8, 4)
        self.encoder = Encoder()
        self.head = nn.Linear(4, 8)

    def forward(self, input_ids, attention_mask, labels):
        return self.head(self.encoder(self.embed(input_ids)))


results = {}
new = set()
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("apply_compilation", path)
    module = importlib.util.module_from_spec(spec)
    loaded = set(sys.modules)
    spec.loader.exec_module(module)
    # What importing the file pulls in (torch.compile itself loads its own dependencies later).
    new |= {name.partition(".")[0] for name in set(sys.modules) - loaded}
    model = StandIn()
    keys = list(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = module.apply_compilation(model, optimizer)
    batch = {name: torch.ones(2, 13, dtype=torch.long) for name in ("input_ids", "attention_mask", "labels")}
    prepared = module.prepare_batch(batch)
    results[path] = {
        # Compiled in place: by Module.compile(), or, for torch's own modules, through their forward.
        "compiled": sorted(n for n, m in model.named_modules() if m._compiled_call_impl is not None),
        "forward_compiled": sorted(n for n, m in model.named_modules() if "forward" in vars(m)),
        "optimizer_compiled": "step" in vars(optimizer),
        "state_dict_unchanged": list(model.state_dict()) == keys,
        "lengths": {k: v.shape[1] for k, v in prepared.items()},
        "label_padding": sorted(set(prepared["labels"][0, 13:].tolist())),
        "marked": sorted(k for k, v in prepared.items() if 1 in getattr(v, "_dynamo_dynamic_indices", ())),
    }
print(json.dumps({"results": results, "new_modules": sorted(new - set(sys.stdlib_module_names) - {"torch"})}))
"""
)


def make_config(scope: str, mode: str, dynamic: str, padding: object, optimizer: bool) -> CompileConfig:
    settings = {}
    if scope == "modular":  # one module with its own settings, the others with the config's
        settings = {"head": ModuleSettings(mode=None, options={"coordinate_descent_tuning": True})}
    return CompileConfig(
        scope=scope,
        mode=None if mode == "options" else mode,
        options=SHAPE_OPTIONS if mode == "options" else {},
        dynamic={"none": None, "static": False, "dynamic": True, "marked": None}[dynamic],
        mark_dynamic=MARKS if dynamic == "marked" else (),
        padding_alignment=padding,
        module_settings=settings,
        compile_optimizer=optimizer,
    )


def generate(config: CompileConfig, summary: WorkloadSummary) -> str:
    return codegen.generate(config, summary, created=CREATED, version="1.2.3")


def imported_modules(source: str) -> set[str]:
    """Top-level names of the modules a source imports, except optional imports guarded by `except ImportError`."""
    found: set[str] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Import) and not guarded:
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not guarded:
            found.add((node.module or "").partition(".")[0])
        if isinstance(node, ast.Try):
            catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            optional = bool(catches & {"ImportError", "ModuleNotFoundError"})
            for child in node.body:
                visit(child, guarded or optional)
            for child in (*node.handlers, *node.orelse, *node.finalbody):
                visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(ast.parse(source), False)
    return found


def assert_torch_and_stdlib_only(source: str) -> None:
    imported = imported_modules(source)
    assert "torch" in imported
    assert imported <= {"torch", *sys.stdlib_module_names}, imported - {"torch", *sys.stdlib_module_names}


def test_every_combination_parses_and_runs_without_autotune(toy_summary: WorkloadSummary, tmp_path: Path) -> None:
    files = {}
    for index, combination in enumerate(COMBINATIONS):
        source = generate(make_config(*combination), toy_summary)
        assert_torch_and_stdlib_only(source)  # parses it: a syntax error fails here
        path = tmp_path / f"apply_{index}.py"
        path.write_text(source)
        files[str(path)] = combination
    # -I: no user site, no PYTHONPATH, no current directory; the blocker hides an installed autotune.
    child = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, *files], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["new_modules"] == [], "generated code imported more than torch and the standard library"
    longest = toy_summary.max_lengths["input_ids"][1]
    # The stand-in's root and encoder are its own classes; embed, head and the blocks are torch's.
    expected_compiled = {"whole": ([""], []), "modular": (["encoder"], ["embed", "head"]), "regional": ([], BLOCKS)}
    for path, (scope, _mode, dynamic, padding, optimizer) in files.items():
        result = report["results"][path]
        length = {None: 13, 8: 16, "pow2": 16, "max": longest}[padding]
        assert (result["compiled"], result["forward_compiled"]) == expected_compiled[scope], (scope, result)
        assert result["optimizer_compiled"] is optimizer
        assert result["state_dict_unchanged"]
        assert result["lengths"] == {"input_ids": length, "attention_mask": length, "labels": length}
        assert result["label_padding"] == ([-100] if length > 13 else [])
        assert result["marked"] == (sorted(k for k, _ in MARKS) if dynamic == "marked" else [])


def test_settings_are_written_as_readable_literals(toy_summary: WorkloadSummary) -> None:
    config = CompileConfig(
        scope="modular",
        mode="max-autotune-no-cudagraphs",
        knobs={"fullgraph": True},
        padding_alignment="max",
        mark_dynamic=(("input_ids", 1),),
        module_settings={"head": ModuleSettings(mode=None, options={"shape_padding": True})},
    )
    module = codegen.load_module(generate(config, toy_summary))
    assert module.MODULE_KWARGS == {
        "embed": {"backend": "inductor", "fullgraph": True, "dynamic": None, "mode": "max-autotune-no-cudagraphs"},
        "encoder": {"backend": "inductor", "fullgraph": True, "dynamic": None, "mode": "max-autotune-no-cudagraphs"},
        "head": {"backend": "inductor", "fullgraph": True, "dynamic": None, "options": {"shape_padding": True}},
    }
    assert module.DYNAMIC_DIMS == {"input_ids": (1,), "attention_mask": (1,), "labels": (1,)}
    assert module.PAD_VALUES == {"labels": -100}
    assert module.PADDING_ALIGNMENT == "max"
    assert {k: dict(v) for k, v in toy_summary.max_lengths.items()} == module.MAX_LENGTHS
    assert module.MARK_DYNAMIC == (("input_ids", 1),)
    regional = codegen.load_module(generate(CompileConfig(scope="regional", padding_alignment=8), toy_summary))
    assert regional.BLOCKS == ("encoder.blocks",)
    assert regional.MAX_LENGTHS == {}  # only 'max' padding needs them


def test_header_says_what_it_is_and_where_it_came_from(toy_summary: WorkloadSummary) -> None:
    source = generate(CompileConfig(compile_optimizer=True, padding_alignment=8), toy_summary)
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring is not None
    assert docstring.startswith("Compile settings for examples.toy:model, tuned by autotune.")
    assert f"Generated by autotune 1.2.3 on {CREATED} for a train workload (ToyLM)." in docstring
    assert "Configuration: scope=whole mode=default dynamic=None pad=8 compiled optimizer." in docstring
    assert "from apply_compilation import apply_compilation, prepare_batch" in docstring
    assert "lr=torch.tensor" in docstring
    assert "cudagraph_mark_step_begin" not in docstring
    graphs = ast.get_docstring(ast.parse(generate(CompileConfig(mode="reduce-overhead"), toy_summary)))
    assert graphs is not None and "cudagraph_mark_step_begin" in graphs


def test_batch_helpers_are_copied_verbatim(toy_summary: WorkloadSummary) -> None:
    source = generate(CompileConfig(), toy_summary)
    for helper in (batching.padded_length, batching.pad_axis, batching.prepare_inputs):
        assert inspect.getsource(helper) in source


def test_same_inputs_give_the_same_bytes(toy_summary: WorkloadSummary) -> None:
    config = make_config("modular", "options", "marked", "pow2", True)
    assert generate(config, toy_summary) == generate(CompileConfig.from_dict(config.to_dict()), toy_summary)


def test_load_module_names_the_file() -> None:
    summary = WorkloadSummary(spec="m:w", task="infer")
    module = codegen.load_module(generate(CompileConfig(), summary), "outputs/s/apply_compilation.py")
    assert module.__name__ == "apply_compilation"
    assert module.__file__ == "outputs/s/apply_compilation.py"
    assert callable(module.apply_compilation) and callable(module.prepare_batch)
    x = torch.ones(2, 3)
    assert module.prepare_batch(x) is x  # no dynamic inputs declared: nothing to pad or mark


@pytest.mark.parametrize(
    ("config", "summary", "named"),
    [
        (CompileConfig(scope="modular"), {"modules": ()}, "scope: 'modular' needs the workload's modules"),
        (CompileConfig(scope="regional"), {"blocks": ()}, "scope: 'regional' needs repeated blocks"),
        (
            CompileConfig(scope="modular", module_settings={"decoder": ModuleSettings()}),
            {},
            "module_settings: ['decoder'] are not among the workload's modules",
        ),
        (CompileConfig(compile_optimizer=True), {"task": "infer"}, "compile_optimizer: true needs a train workload"),
        (
            CompileConfig(knobs={"compiled_autograd": True}),
            {"task": "infer"},
            "compiled_autograd: True needs autotune's backward, which this infer workload lacks",
        ),
        (
            CompileConfig(knobs={"compiled_autograd": True}),
            {"own_step": True},
            "compiled_autograd: True needs autotune's backward, which this train workload lacks",
        ),
        (
            CompileConfig(mark_dynamic=(("input_ids", 0),)),
            {},
            "mark_dynamic: ('input_ids', 0) is not a declared dynamic axis",
        ),
        (CompileConfig(mark_dynamic=(("pixel_values", 2),)), {}, "is not a declared dynamic axis"),
        (
            CompileConfig(padding_alignment=8),
            {"dynamic_dims": {}, "pad_values": {}, "max_lengths": {}},
            "needs declared dynamic_dims",
        ),
    ],
)
def test_config_that_does_not_fit_the_workload(
    config: CompileConfig, summary: dict, named: str, toy_summary: WorkloadSummary
) -> None:
    with pytest.raises(ConfigError) as raised:
        generate(config, dataclasses.replace(toy_summary, **summary))
    assert named in str(raised.value)


HOSTILE_TEXT = [
    'x"""\nimport os; os.system("touch {marker}")\n"""',
    "x\\\"\"\"; open('{marker}', 'w')  # ",
    "x'''\n'''; open('{marker}', 'w')",
    "x\x00\r\n\ud800\u2028 open('{marker}', 'w')",
]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_free_text_cannot_escape_the_docstring(text: str, tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    text = text.format(marker=marker)
    summary = WorkloadSummary(spec=text, task="train", model_class=text)
    source = codegen.generate(CompileConfig(), summary, created=text, version=text)
    source.encode("utf-8")
    tree = ast.parse(source)
    assert isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant)
    assert_torch_and_stdlib_only(source)
    module = codegen.load_module(source)
    assert not marker.exists()
    benign = codegen.load_module(
        codegen.generate(CompileConfig(), WorkloadSummary(spec="m:w", task="train"), created="c", version="v")
    )
    assert set(vars(module)) == set(vars(benign))  # nothing defined beyond what every generated file defines


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("modules", ("x'); __import__('os').system('id'); ('",), r"modules: .* is not a submodule path"),
        ("blocks", ("encoder.blocks\n__import__('os')",), r"blocks: .* is not a submodule path"),
        ("dynamic_dims", {"ids': 1}; __import__('os'); {'": (1,)}, r"dynamic_dims: .* is not a valid input name"),
        ("pad_values", {"labels": object()}, "object values cannot be written as literals"),
        ("pad_values", {"labels": float("nan")}, "nan is not a finite number"),
    ],
)
def test_values_that_bypassed_validation_are_still_refused(
    field: str, value: object, said: str, toy_summary: WorkloadSummary
) -> None:
    """Codegen checks identifiers and literals again, so even a summary altered after validation cannot inject code."""
    summary = dataclasses.replace(toy_summary)
    object.__setattr__(summary, field, value)
    scope = {"modules": "modular", "blocks": "regional"}.get(field, "whole")
    with pytest.raises(ConfigError, match=said):
        generate(CompileConfig(scope=scope, padding_alignment=8), summary)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"modules": ("x'); __import__('os').system('id'); ('",)}, r"workload.modules/blocks: .* not a submodule path"),
        ({"blocks": ("layers; import os",)}, r"workload.modules/blocks: 'layers; import os' is not a submodule path"),
        ({"dynamic_dims": {"ids'] = 1; import os; x = ['": [1]}}, r"dynamic_dims: .* is not a valid input name"),
        (
            {"pad_values": {"labels": "-100; import os"}, "dynamic_dims": {"labels": [1]}},
            r"pad_values.labels: '-100; import os' must be a number or a bool",
        ),
    ],
)
def test_summary_refuses_injection(fields: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        WorkloadSummary(spec="m:w", task="train", **fields)


@pytest.mark.parametrize("scope", ["whole", "modular", "regional"])
def test_torch_modules_are_really_compiled(scope: str) -> None:
    """Module.compile() on torch's own modules (nn.Sequential, nn.Linear) compiles nothing; the generated code must."""
    from torch import nn
    from torch._dynamo.utils import counters

    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    summary = WorkloadSummary(spec="m:w", task="infer", modules=("0", "1"))
    if scope == "regional":
        model = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)))
        summary = WorkloadSummary(spec="m:w", task="infer", blocks=("0",))
    keys = list(model.state_dict())
    module = codegen.load_module(
        codegen.generate(CompileConfig(scope=scope, backend="eager"), summary, created="c", version="v")
    )
    torch._dynamo.reset()
    frames = counters["frames"]["ok"]
    module.apply_compilation(model)
    expected = model(torch.ones(2, 4))
    assert counters["frames"]["ok"] - frames == {"whole": 1, "modular": 2, "regional": 2}[scope]
    assert list(model.state_dict()) == keys
    torch.testing.assert_close(model(torch.ones(2, 4)), expected)


NEWER = [
    (CompileConfig(mode="lite"), ["COMPILE_KWARGS = {", "'mode': 'lite'"]),
    (
        CompileConfig(mark_dynamic=MARKS, mark_as="unbacked"),
        ["# 'dynamic': torch._dynamo.mark_dynamic; 'unbacked': mark_unbacked", "MARK_AS = 'unbacked'"],
    ),
    (CompileConfig(knobs={"recompile_limit": 2}), ["'recompile_limit': 2"]),
    (
        CompileConfig(knobs={"stance_after_warmup": "eager_on_recompile"}),
        ["def finish_warmup():", "# Shapes compiled so far keep", "torch.compiler.set_stance('eager_on_recompile')"],
    ),
    (
        CompileConfig(knobs={"compiled_autograd": True}),
        [
            "def backward(loss, run=None):",
            "# Compiled autograd:",
            "BACKWARD_COMPILE_KWARGS = {",
            "compiled_autograd._enable(",
        ],
    ),
    (
        CompileConfig(compile_optimizer=True, knobs={"optimizer_mode": "max-autotune-no-cudagraphs"}),
        ["OPTIMIZER_COMPILE_KWARGS = {'fullgraph': False, 'mode': 'max-autotune-no-cudagraphs'}"],
    ),
    (
        CompileConfig(knobs={"float32_matmul_precision": "high"}),
        [
            "# Changes numerics (searched only with --allow-precision-changes)",
            "torch.set_float32_matmul_precision('high')",
        ],
    ),
    (CompileConfig(mode=None, options={"cpp_wrapper": True, "cpp.dynamic_threads": True}), ["'cpp_wrapper': True"]),
    (
        CompileConfig(mark_dynamic=MARKS, mark_as="sources"),
        [
            "MARK_AS = 'sources'",
            "# torch.compiler.config.dynamic_sources entries",
            "DYNAMIC_SOURCES = \".*\\\\['attention_mask'\\\\]$:1,",
            "# Mark the chosen axes dynamic by input name in every compiled frame",
            'torch.compiler.config.dynamic_sources = ",".join(',
        ],
    ),
]


def test_each_newer_dimension_is_readable_code_that_runs_without_autotune(
    toy_summary: WorkloadSummary, tmp_path: Path
) -> None:
    files = []
    for index, (config, lines) in enumerate(NEWER):
        source = generate(config, toy_summary)
        ast.parse(source)
        assert_torch_and_stdlib_only(source)
        for line in lines:
            assert line in source, (config.describe(), line)
        path = tmp_path / f"apply_{index}.py"
        path.write_text(source)
        files.append(str(path))
        module = codegen.load_module(source)
        assert callable(module.finish_warmup) and callable(module.backward)
    assert "set_stance" not in generate(CompileConfig(), toy_summary), "the default stance needs no code"
    child = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, *files], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.splitlines()[-1])["results"]
    assert report[files[5]]["optimizer_compiled"] is True
    assert all(result["state_dict_unchanged"] for result in report.values())


PRECISION_CHILD = r"""
import json, sys, torch
# A user's script that already used the per-backend API (torch 2.9 and later); the legacy getter,
# which Inductor calls when it keys GEMM autotuning, now raises on this torch.
torch.backends.cuda.matmul.fp32_precision = "tf32"
try:
    torch.get_float32_matmul_precision()
    mixed = "readable"
except RuntimeError:
    mixed = "raises"
namespace = {}
exec(compile(open(sys.argv[1]).read(), "apply_compilation.py", "exec"), namespace)
namespace["apply_compilation"](torch.nn.Linear(4, 4))
print(json.dumps({
    "before": mixed,
    "after": torch.get_float32_matmul_precision(),
    "cuda_matmul": torch.backends.cuda.matmul.fp32_precision,
    "cpu_matmul": torch.backends.mkldnn.matmul.fp32_precision,
}))
"""


def test_the_generated_precision_setting_leaves_inductor_able_to_read_it(
    toy_summary: WorkloadSummary, tmp_path
) -> None:
    # The per-backend API alone would leave torch.get_float32_matmul_precision() raising inside Inductor;
    # the process-wide setter the generated code uses sets every backend and keeps it readable.
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.fail(f"torch {torch.__version__} lacks the per-backend API this test is about")
    path = tmp_path / "apply_compilation.py"
    path.write_text(generate(CompileConfig(knobs={"float32_matmul_precision": "medium"}), toy_summary))
    child = subprocess.run(
        [sys.executable, "-c", PRECISION_CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    seen = json.loads(child.stdout.splitlines()[-1])
    assert seen["before"] == "raises", "this torch still mixes the two APIs badly: the reason for the choice"
    assert seen == {"before": "raises", "after": "medium", "cuda_matmul": "tf32", "cpu_matmul": "bf16"}


def test_a_precision_change_is_said_in_the_header(toy_summary: WorkloadSummary) -> None:
    source = generate(CompileConfig(knobs={"float32_matmul_precision": "medium"}), toy_summary)
    header = ast.get_docstring(ast.parse(source)) or ""
    assert "changes numerics" in header and "looser accuracy tolerance" in header
    assert "changes numerics" not in (ast.get_docstring(ast.parse(generate(CompileConfig(), toy_summary))) or "")
