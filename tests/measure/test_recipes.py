"""The hand-tuned recipes in examples/recipes: they load, validate, generate and apply to the captioning workload.

Every recipe is applied (apply_compilation wraps lazily, so applying costs nothing); only
the recipes that work without a GPU also run compiled here: `regional` (default mode) trains
both captioning variants one step, and `dynamic_true` (max-autotune-no-cudagraphs) runs
forward passes of two caption lengths. `static`, `dynamic_mark`, `buckets` and `modular`
use max-autotune, whose CUDA graphs need CUDA, so on the CPU they are generated, parsed,
executed and applied, but not run. The regional runs are also the captioning examples'
compiled training steps (tests/project/test_examples.py runs the other examples').
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from autotune import cli, resolve
from autotune.errors import ConfigError
from autotune.measure.tasks import Recipe, read_recipe, read_recipes, without_cuda_graphs
from autotune.runtime import codegen
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import Workload
from tests.dynamo import fresh_dynamo  # noqa: F401

pytestmark = pytest.mark.parallel

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
STATIC = "examples.captioning:captioning_static"
DYNAMIC = "examples.captioning:captioning_dynamic"
RUNS_ON_CPU = ("dynamic_true", "regional")
# The workloads each recipe is written for.
TARGETS = {
    "static": (STATIC,),
    "dynamic_mark": (DYNAMIC,),
    "dynamic_true": (DYNAMIC,),
    "buckets": (DYNAMIC,),
    "modular": (STATIC, DYNAMIC),
    "regional": (STATIC, DYNAMIC),
    "reduce_overhead": (STATIC, DYNAMIC),
}


@pytest.fixture(scope="module")
def recipes() -> dict[str, Recipe]:
    return {recipe.name: recipe for recipe in read_recipes(RECIPES)}


@pytest.fixture(scope="module")
def workloads() -> dict[str, tuple[Workload, list, WorkloadSummary]]:
    loaded = {}
    for spec in (STATIC, DYNAMIC):
        workload = resolve(spec)
        batches = workload.draw_batches()
        loaded[spec] = (workload, batches, workload.summary(spec, batches))
    return loaded


def generated(recipe: Recipe, summary: WorkloadSummary) -> str:
    return codegen.generate(recipe.config, summary, created="2025-01-01T00:00:00+00:00", version="test")


def compiled_paths(model: torch.nn.Module) -> list[str]:
    return [path for path, module in model.named_modules() if getattr(module, "_compiled_call_impl", None) is not None]


def test_every_recipe_loads(recipes: dict[str, Recipe]) -> None:
    assert sorted(recipes) == sorted(TARGETS)
    for recipe in recipes.values():
        assert len(recipe.description) > 40
        assert recipe.config.uses_cuda_graphs == (recipe.name not in RUNS_ON_CPU)


def test_recipes_say_what_the_case_study_did(recipes: dict[str, Recipe]) -> None:
    static = recipes["static"].config
    assert (static.mode, static.knobs.get("fullgraph"), static.compile_optimizer) == ("max-autotune", True, True)
    marked = recipes["dynamic_mark"].config
    assert set(marked.mark_dynamic) == {("labels", 1), ("decoder_attention_mask", 1)}
    assert (marked.padding_alignment, marked.mode) == (8, "max-autotune")
    dynamic = recipes["dynamic_true"].config
    assert (dynamic.dynamic, dynamic.mode) == (True, "max-autotune-no-cudagraphs")
    buckets = recipes["buckets"].config
    assert (buckets.padding_alignment, buckets.dynamic) == ("pow2", False)
    modular = recipes["modular"].config
    assert modular.scope == "modular"
    assert {p: s.mode for p, s in modular.module_settings.items()} == {"encoder": "max-autotune", "decoder": "default"}
    assert recipes["regional"].config.scope == "regional"


def test_every_recipe_generates_and_applies(recipes: dict[str, Recipe], workloads: dict) -> None:
    for name, specs in TARGETS.items():
        recipe = recipes[name]
        for spec in specs:
            workload, batches, summary = workloads[spec]
            source = generated(recipe, summary)
            ast.parse(source)
            assert ("cudagraph_mark_step_begin" in source) == recipe.config.uses_cuda_graphs
            module = codegen.load_module(source)
            model = copy.deepcopy(workload.model)
            optimizer = workload.optimizer(model.parameters())
            same_model, same_optimizer = module.apply_compilation(model, optimizer)
            assert same_model is model and same_optimizer is optimizer
            expected = {
                "whole": [""],
                "modular": ["encoder", "decoder"],
                "regional": [f"{lst}.{i}" for lst in summary.blocks for i in range(2)],
            }[recipe.config.scope]
            assert compiled_paths(model) == expected, name
            # A compiled step is set on the optimizer itself, shadowing the class's method.
            assert ("step" in vars(optimizer)) == recipe.config.compile_optimizer
            prepared = module.prepare_batch(batches[0])
            assert set(prepared) == set(batches[0])


def test_dynamic_recipes_need_the_dynamic_workload(recipes: dict[str, Recipe], workloads: dict) -> None:
    static_summary = workloads[STATIC][2]
    for name in ("dynamic_mark", "buckets"):
        with pytest.raises(ConfigError, match=r"mark_dynamic|padding_alignment"):
            generated(recipes[name], static_summary)


def test_cuda_graph_recipes_have_a_cpu_variant(recipes: dict[str, Recipe], workloads: dict) -> None:
    for recipe in recipes.values():
        variant = without_cuda_graphs(recipe.config)
        assert not variant.uses_cuda_graphs
        if not recipe.config.uses_cuda_graphs:
            assert variant is recipe.config
        generated(Recipe(name=recipe.name, description=recipe.description, config=variant), workloads[DYNAMIC][2])
    assert without_cuda_graphs(recipes["static"].config).mode == "max-autotune-no-cudagraphs"
    modular = without_cuda_graphs(recipes["modular"].config)
    assert modular.module_settings["encoder"].mode == "max-autotune-no-cudagraphs"
    assert without_cuda_graphs(recipes["buckets"].config).padding_alignment == "pow2"


def run_recipe(
    recipe: Recipe, workload: Workload, summary: WorkloadSummary, batch: dict, train: bool = True
) -> tuple[float, float]:
    """The loss of one step from the example's weights: eager, then compiled by the recipe's generated code.

    `train=False` runs the forward pass only (under no_grad), which compiles no backward graph.
    """
    module = codegen.load_module(generated(recipe, summary))
    eager = copy.deepcopy(workload.model)
    torch.manual_seed(0)
    with torch.no_grad():
        want = float(workload.compute_loss(workload.run_forward(eager, batch), batch))
    model = copy.deepcopy(workload.model)
    model, optimizer = module.apply_compilation(model, workload.optimizer(model.parameters()))
    torch.manual_seed(0)
    with torch.set_grad_enabled(train):
        loss = workload.compute_loss(workload.run_forward(model, module.prepare_batch(batch)), batch)
    if train:
        loss.backward()
        optimizer.step()
    return want, float(loss.detach())


@pytest.mark.slow
def test_regional_recipe_trains_both_captioning_variants(recipes: dict[str, Recipe], workloads: dict) -> None:
    for spec in (STATIC, DYNAMIC):
        torch._dynamo.reset()
        counters.clear()
        workload, batches, summary = workloads[spec]
        # Compiled dropout draws its own random masks unless told to use eager's generator.
        with torch._inductor.config.patch(fallback_random=True):
            want, got = run_recipe(recipes["regional"], workload, summary, batches[0])
        assert math.isfinite(got) and got == pytest.approx(want, rel=1e-3), spec
        # The two encoder layers share one graph, and so do the two decoder blocks.
        assert counters["stats"]["unique_graphs"] == 2, spec
        assert not counters["graph_break"], spec


@pytest.mark.slow
def test_dynamic_true_recipe_serves_every_caption_length_with_one_graph(
    recipes: dict[str, Recipe], workloads: dict
) -> None:
    # Forward passes only: a dynamic-shape training graph takes minutes to build on two cores,
    # and the regional test above already trains this workload compiled.
    workload, batches, summary = workloads[DYNAMIC]
    with torch._inductor.config.patch(fallback_random=True):
        want, got = run_recipe(recipes["dynamic_true"], workload, summary, batches[0], train=False)
        assert math.isfinite(got) and got == pytest.approx(want, rel=1e-3)
        graphs = counters["stats"]["unique_graphs"]
        assert graphs >= 1 and not counters["graph_break"]
        longer = next(b for b in batches if b["labels"].shape[1] != batches[0]["labels"].shape[1])
        want, got = run_recipe(recipes["dynamic_true"], workload, summary, longer, train=False)
    assert got == pytest.approx(want, rel=1e-3)
    assert counters["stats"]["unique_graphs"] == graphs, "a new caption length compiled a new graph"


@pytest.mark.parametrize("name", ["dynamic_mark", "buckets"])
def test_padding_recipes_bound_the_graphs_dynamo_traces(name: str, recipes: dict[str, Recipe], workloads: dict) -> None:
    # These recipes need CUDA graphs; dynamo's eager backend still shows which graphs they
    # trace over the dynamic workload's batches, without compiling anything.
    workload, batches, summary = workloads[DYNAMIC]
    config = dataclasses.replace(recipes[name].config, mode=None, backend="eager")
    module = codegen.load_module(generated(Recipe(name=name, description="-", config=config), summary))
    model = copy.deepcopy(workload.model)
    module.apply_compilation(model)
    widths = set()
    for batch in batches:
        prepared = module.prepare_batch(batch)
        widths.add(prepared["labels"].shape[1])
        workload.compute_loss(workload.run_forward(model, prepared), prepared).backward()
    assert not counters["graph_break"]
    if name == "dynamic_mark":
        assert all(width % 8 == 0 for width in widths)
        assert counters["stats"]["unique_graphs"] == 1, "marked dynamic, every padded length shares one graph"
    else:
        assert all(width & (width - 1) == 0 for width in widths)
        assert counters["stats"]["unique_graphs"] == len(widths), "one static graph per bucket"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("description: x\nconfig: {}\nextra: 1\n", r"recipe\.yaml: unknown key\(s\) \['extra'\]"),
        ("config: {mode: default}\n", r"recipe\.yaml: missing key\(s\) \['description'\]"),
        ("description: ''\nconfig: {}\n", r"recipe\.yaml: description: expected a non-empty string"),
        ("description: x\nconfig: {modes: default}\n", r"recipe\.yaml: config: unknown setting\(s\) \['modes'\]"),
        (
            "description: x\nconfig: {mode: fastest}\n",
            r"recipe\.yaml: config\.mode: 'fastest' is not a torch\.compile mode",
        ),
        ("description: x\nconfig: {padding_alignment: 3.5}\n", r"recipe\.yaml: config\.padding_alignment: 3\.5"),
        (
            "description: x\nconfig: {scope: modular, module_settings: {encoder: {mode: turbo}}}\n",
            r"config\.module_settings\.mode: 'turbo'",
        ),
        (
            "description: x\nconfig: {mode: max-autotune, options: {shape_padding: true}}\n",
            r"recipe\.yaml: config: mode='max-autotune' and options.*mode_options",
        ),
        (
            "description: x\nconfig: {options: {no_such_option: 1}}\n",
            r"config\.options: 'no_such_option' is not an option",
        ),
        (
            "- description\n- config\n",
            r"recipe\.yaml: expected a mapping with keys \['description', 'config'\], got list",
        ),
        (
            "description: x\nconfig: !!python/object/apply:os.system ['true']\n",
            r"recipe\.yaml: not a valid plain YAML file",
        ),
        ("description: [unclosed\n", r"recipe\.yaml: not a valid plain YAML file"),
    ],
)
def test_bad_recipes_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_recipe(write(tmp_path, text))


def test_a_recipe_may_combine_a_mode_with_options_through_mode_options(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "description: max-autotune without CUDA graphs, plus shape padding\n"
        "config:\n  mode: null\n  options: {max_autotune: true, coordinate_descent_tuning: true, shape_padding: true}\n",
    )
    config = read_recipe(path).config
    assert config.mode is None and not config.uses_cuda_graphs
    assert config.compile_kwargs() == {
        "backend": "inductor",
        "fullgraph": False,
        "dynamic": None,
        "options": {"coordinate_descent_tuning": True, "max_autotune": True, "shape_padding": True},
    }


def test_missing_files_and_folders_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nothing\.yaml: cannot read the file"):
        read_recipe(tmp_path / "nothing.yaml")
    with pytest.raises(ConfigError, match=r"not a folder of recipes"):
        read_recipes(tmp_path / "nowhere")


@pytest.mark.parallel  # refused before anything is built or measured: nothing is timed beside it
def test_validate_refuses_an_alias_bomb_in_a_recipe_at_once(tmp_path, capsys) -> None:
    # 500 bytes whose description expands to 10^9 strings, with a valid configuration beside it: parsed
    # by yaml.safe_load before the guarded reader saw it, it ran 31 s into a MemoryError under a 3 GB cap.
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\ndescription: *i\nconfig:\n  mode: default\n", encoding="utf-8")
    assert bomb.stat().st_size < 600
    # Expanded, it would run for half a minute into a MemoryError: the refusal and its words show it never was.
    code = cli.main(["validate", str(bomb), "--model", "examples.toy:model"])
    assert code == 2
    err = capsys.readouterr().err
    assert "refused as a configuration file: more than" in err and "once its aliases are expanded" in err, err


@pytest.mark.parallel  # refused before anything is built or measured: nothing is timed beside it
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--device", "gpu"], "--device 'gpu' is not allowed"),
        (["--max-replicates", "1"], "--max-replicates 1: must be >= --replicates (3)"),
        (["--measure-seconds", "-1"], "--measure-seconds -1.0: must be a positive number of seconds"),
        (["--trial-timeout", "nan"], "--trial-timeout nan: must be a positive number of seconds"),
    ],
)
def test_validate_refuses_bad_values_by_name_before_the_workload_is_imported(flags, said, tmp_path, capsys) -> None:
    # The workload cannot even be imported: each value must be refused before anything tries to.
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("description: plain\nconfig:\n  mode: default\n", encoding="utf-8")
    assert cli.main(["validate", str(recipe), "--model", "no.such.module:nothing", *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and "no.such.module" not in err
