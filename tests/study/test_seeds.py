"""A new study starts from plain torch.compile and the generic expert recipes, as its first trials."""

from __future__ import annotations

import re

import optuna
import pytest

from autotune.measure import Throughput, TimeTo
from autotune.measure.tasks import Recipe
from autotune.runtime.config import inductor_option_defaults, is_plain_compile
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import expert_recipes, load_space, seed_params, seed_study, stacked_recipes
from autotune.study.search._seeds import recipes_pending
from autotune.study.storage import record_of

pytestmark = pytest.mark.parallel


def adapted(summary: WorkloadSummary, name: str = "default"):
    return load_space(name).adapt(summary, "cpu")


def test_recipes_follow_the_workload(toy_summary: WorkloadSummary) -> None:
    names = [seed.name for seed in expert_recipes(toy_summary)]
    assert names[0] == "plain"
    assert toy_summary.task == "train" and toy_summary.dynamic_dims
    assert {"mark_dynamic", "pad8", "compiled-optimizer", "max-autotune"} <= set(names)
    assert names[:3] == ["plain", "mark_dynamic", "compiled-optimizer"], "a budget of 4 recipes keeps the optimizer"
    static = {"task": "infer", "dynamic_dims": {}, "pad_values": {}, "max_lengths": {}}
    inference = WorkloadSummary.from_dict({**toy_summary.to_dict(), **static})
    assert [seed.name for seed in expert_recipes(inference)] == ["plain", "regional", "max-autotune"]


def test_a_recipe_sets_only_what_it_names_and_leaves_inductor_options_at_their_defaults(toy_summary) -> None:
    space = adapted(toy_summary)
    params, plain = seed_params(space, Recipe(name="plain", description="plain"))
    defaults = inductor_option_defaults()
    for name in space.options:  # the space asks for every option; a recipe answers Inductor's own default
        assert params[f"options.{name}"] == defaults[name]
    assert (plain.scope, plain.dynamic, plain.mark_dynamic, plain.padding_alignment) == ("whole", None, (), None)
    assert plain.compile_optimizer is False and "fullgraph" not in plain.knobs
    # Its options stay in the configuration, yet it compiles what plain torch.compile does: the
    # search reuses the compile baseline's run for it and leaves it out of the confirmation.
    assert plain.options and is_plain_compile(plain)

    _, padded = seed_params(space, Recipe(name="pad8", description="pad", answers={"padding_alignment": 8}))
    assert padded.padding_alignment == 8 and padded.scope == "whole" and not is_plain_compile(padded)
    _, marked = seed_params(space, Recipe(name="mark", description="mark", answers={"mark_dynamic": True}))
    assert set(marked.mark_dynamic) == {(key, axis) for key, axes in toy_summary.dynamic_dims.items() for axis in axes}
    _, optimizer = seed_params(space, Recipe(name="opt", description="opt", answers={"compile_optimizer": True}))
    assert optimizer.compile_optimizer is True


def test_a_recipe_leaves_a_knob_at_its_neutral_value_wherever_the_space_file_lists_it(tmp_path, toy_summary) -> None:
    # A space may list a knob's values in any order; a recipe that does not name the knob still changes nothing.
    path = tmp_path / "reordered.yaml"
    path.write_text(
        "description: knobs listed after another value\nmark_dynamic: [false, true]\nrecompile_limit: [4, null]\nfloat32_matmul_precision: [high, null]\n"
    )
    space = load_space(str(path)).adapt(toy_summary, "cpu", allow_precision_changes=True)
    assert space.knobs == {"recompile_limit": (4, None), "float32_matmul_precision": ("high", None)}

    params, marked = seed_params(space, Recipe(name="mark", description="mark", answers={"mark_dynamic": True}))

    assert marked.mark_dynamic and marked.knobs == {}, marked.describe()
    assert params["recompile_limit"] is None and params["float32_matmul_precision"] is None
    _, asked = seed_params(
        space, Recipe(name="recompile", description="recompile", answers={"mark_dynamic": True, "recompile_limit": 4})
    )
    assert asked.knobs == {"recompile_limit": 4}


def test_a_recipe_the_space_cannot_ask_is_skipped_with_the_reason(toy_summary) -> None:
    quick = adapted(toy_summary, "quick")
    assert "compile_optimizer" not in quick.dimensions()
    reason = seed_params(
        quick, Recipe(name="compiled-optimizer", description="opt", answers={"compile_optimizer": True})
    )
    assert reason == "the space 'quick' does not offer compile_optimizer=True"


def test_a_recipe_answering_what_the_space_pins_is_seeded_where_the_pinned_value_is_its_own(
    tmp_path, toy_summary
) -> None:
    # A question with one answer is never asked, so a recipe that gives that answer asks nothing of the space.
    path = tmp_path / "pinned.yaml"
    path.write_text("description: pinned\nmode: [default]\nfullgraph: [true]\ncompile_optimizer: [true]\n")
    space = load_space(str(path)).adapt(toy_summary, "cpu")
    answers = {"mode": "default", "fullgraph": True, "compile_optimizer": True}
    params, config = seed_params(space, Recipe(name="pinned", description="pinned", answers=answers))
    assert params == {} and config.knobs == {"fullgraph": True} and config.compile_optimizer
    other = seed_params(space, Recipe(name="other", description="other", answers={"fullgraph": False}))
    assert other == "the space 'pinned' does not offer fullgraph=False"


def test_seeds_are_the_first_trials_of_the_study_within_the_limit(toy_summary) -> None:
    space = adapted(toy_summary)
    study = optuna.create_study(direction="maximize")
    notes = seed_study(study, space, expert_recipes(toy_summary), limit=3)
    seeded = [n for n in notes if " seeded: " in n and " not seeded: " not in n]
    assert len(seeded) == 3 and seeded[0].startswith("recipe plain seeded")
    assert any("--trials leaves room for 3 recipe(s)" in n for n in notes)
    asked = [study.ask() for _ in range(4)]
    assert [record_of(t).recipe for t in asked[:3]] == [n.split()[1] for n in seeded]
    for trial in asked[:3]:
        config = space.suggest(trial)  # the enqueued answers give the recipe's configuration
        assert config.describe()
    assert record_of(asked[3]).recipe is None, "after the seeds, the sampler proposes"


CUDA_GRAPHS_SPACE = "examples/spaces/cuda_graphs.yaml"


def test_a_space_with_its_own_recipes_starts_with_those_in_its_order(toy, toy_summary) -> None:
    from autotune.study.search import observed_lengths, shared_length_groups, study_seeds

    batches = toy.draw_batches()
    space = load_space(CUDA_GRAPHS_SPACE).adapt(
        toy_summary,
        "cuda",  # the space is adapted for a GPU without one: adapting reads only the device's name
        shared_lengths=shared_length_groups(toy_summary, batches),
        lengths=observed_lengths(toy_summary, batches),
    )
    seeds, limit = study_seeds(space, toy_summary, trials=3)
    assert [seed.name for seed in seeds] == ["plain", "cuda-graphs", "max-autotune", "static"] and limit == 3
    study = optuna.create_study(direction="maximize")
    notes = seed_study(study, space, seeds, limit=limit)
    assert all(" seeded: " in note for note in notes), notes
    _, graphs = seed_params(space, seeds[1])
    assert graphs.mode == "reduce-overhead" and graphs.padding_alignment == "buckets" and graphs.padding_buckets
    assert seed_params(space, seeds[2])[1].mode == "max-autotune"  # type: ignore[index]


def test_on_a_cpu_the_spaces_cuda_graph_recipes_are_skipped_with_the_reason(toy_summary) -> None:
    from autotune.study.search import study_seeds

    space = load_space(CUDA_GRAPHS_SPACE).adapt(toy_summary, "cpu")
    seeds, limit = study_seeds(space, toy_summary, trials=6)
    notes = seed_study(optuna.create_study(direction="maximize"), space, seeds, limit=limit)
    assert notes[0].startswith("recipe plain seeded")
    assert (
        notes[1]
        == "recipe cuda-graphs not seeded: the space 'cuda_graphs' does not offer mode='reduce-overhead', padding_alignment='buckets'"
    )
    assert notes[2].startswith("recipe max-autotune not seeded")
    assert notes[3].startswith("recipe static seeded"), "what runs beside plain compile on a CPU (the dry run)"


def test_without_recipes_of_its_own_a_space_gets_the_generic_ones_within_half_the_trials(toy_summary) -> None:
    from autotune.study.search import study_seeds

    seeds, limit = study_seeds(adapted(toy_summary, "quick"), toy_summary, trials=6)
    assert seeds == expert_recipes(toy_summary) and limit == 3
    assert study_seeds(adapted(toy_summary), toy_summary, trials=12)[1] == 6


@pytest.mark.parametrize(("trials", "room"), [(1, 1), (2, 2), (3, 3), (4, 3), (8, 4)])
def test_a_small_budget_still_tries_plain_compile_and_the_two_recipes_most_likely_to_help(
    toy_summary, trials: int, room: int
) -> None:
    from autotune.study.search import study_seeds

    space = adapted(toy_summary)
    seeds, limit = study_seeds(space, toy_summary, trials=trials)
    assert limit == room
    study = optuna.create_study(direction="maximize")
    notes = seed_study(study, space, seeds, limit=limit)
    seeded = [n.split()[1] for n in notes if " seeded: " in n and " not seeded: " not in n]
    # The toy trains on lengths that vary: its lengths marked dynamic and its optimizer step compiled come first.
    assert seeded == ["plain", "mark_dynamic", "compiled-optimizer", "regional"][:room]


@pytest.mark.parametrize(
    ("recipes", "message"),
    [
        ("[plain]", "must map recipe names to recipes"),
        (
            "{plain: reduce-overhead}",
            "recipes.plain: 'reduce-overhead' is not a recipe file (.yaml or .yml) relative to",
        ),
        ("{plain: 3}", "recipes.plain: 3 must map questions to answers (e.g. {mode: reduce-overhead}"),
        ("{fast: {modes: default}}", "recipes.fast: 'modes' is not a question a space asks; allowed: mode, "),
        ("{fast: {description: '', scope: regional}}", "recipes.fast: description: '' must be a non-empty string"),
        ("{fast: {description: fast, config: {mode: warp}}}", "recipes.fast: config.mode: "),
        ("{fast: {config: {}}}", "recipes.fast: missing key(s) ['description']"),
    ],
)
def test_a_bad_recipes_section_names_the_recipe_and_what_is_allowed(tmp_path, recipes: str, message: str) -> None:
    from autotune.errors import SpaceError

    path = tmp_path / "space.yaml"
    path.write_text(f"description: a space\nmode: [default]\nrecipes: {recipes}\n")
    with pytest.raises(SpaceError, match=re.escape(message)):
        load_space(str(path))


WHOLE_SPACE = """description: a space whose recipes are written the three ways
scope: [whole, regional]
compile_optimizer: [false, true]
recipes:
  plain: {}
  regional: regional.yaml
  optimizer:
    description: the optimizer step compiled too, as a whole configuration
    config: {compile_optimizer: true}
  graphs: {description: CUDA graphs, config: {mode: reduce-overhead}}
"""


def test_a_space_starts_with_a_recipe_file_and_a_whole_configuration_as_with_answers(tmp_path, toy_summary) -> None:
    from autotune.measure.tasks import read_config_file
    from autotune.study.search import study_seeds

    (tmp_path / "regional.yaml").write_text("description: each block compiled once\nconfig: {scope: regional}\n")
    (tmp_path / "space.yaml").write_text(WHOLE_SPACE)
    space = load_space(str(tmp_path / "space.yaml")).adapt(toy_summary, "cpu")
    seeds, limit = study_seeds(space, toy_summary, trials=4)
    assert [seed.name for seed in seeds] == ["plain", "regional", "optimizer", "graphs"] and limit == 4
    assert seeds[1].description == "each block compiled once" and seeds[1].config is not None
    study = optuna.create_study(direction="maximize")
    notes = seed_study(study, space, seeds, limit=limit)
    assert notes[:3] == [
        "recipe plain seeded: the space's recipe: plain torch.compile(model)",
        "recipe regional seeded: each block compiled once",
        "recipe optimizer seeded: the optimizer step compiled too, as a whole configuration",
    ]
    assert notes[3].startswith("recipe graphs not seeded: the space 'space' cannot express "), notes[3]
    # The file the space names is the one `autotune validate` measures: one reader, one configuration.
    _, regional = seed_params(space, seeds[1])  # type: ignore[misc]
    assert regional.scope == "regional" and not regional.compile_optimizer
    assert read_config_file(tmp_path / "regional.yaml")[1] == seeds[1].config
    defaults = inductor_option_defaults()
    assert {k: regional.options[k] for k in space.options} == {k: defaults[k] for k in space.options}
    _, optimizer = seed_params(space, seeds[2])  # type: ignore[misc]
    assert optimizer.compile_optimizer and optimizer.scope == "whole"
    queued = [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)]
    assert queued[1]["scope"] == "regional" and queued[2]["compile_optimizer"] is True


def test_a_recipe_is_a_whole_configuration_or_answers_and_only_a_whole_one_is_measured_as_it_is() -> None:
    from autotune import CompileConfig
    from autotune.errors import ConfigError

    with pytest.raises(ConfigError, match="a whole configuration or answers to a space's questions, not both"):
        Recipe(name="both", description="both", config=CompileConfig(), answers={"scope": "regional"})
    answers = Recipe(name="regional", description="regional", answers={"scope": "regional"})
    with pytest.raises(ConfigError, match="recipe 'regional' answers a search space's questions"):
        answers.whole()
    assert Recipe(name="plain", description="plain", config=CompileConfig()).whole() == CompileConfig()


# -- stacking the recipes that helped ----------------------------------------------------------------


def recipe_study(values: dict[str, float], direction: str = "maximize") -> optuna.Study:
    """A study whose recipe trials completed with these values (samples/s, or seconds for time-to)."""
    study = optuna.create_study(direction=direction)
    for name, value in values.items():
        study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.COMPLETE, value=value, params={}, distributions={},
                user_attrs={"recipe": name},
            )
        )  # fmt: skip
    return study


def test_the_recipes_that_beat_plain_compile_are_stacked_in_pairs_then_all_together(toy_summary) -> None:
    seeds = expert_recipes(toy_summary)
    values = {"plain": 100.0, "mark_dynamic": 110.0, "compiled-optimizer": 120.0, "regional": 90.0, "pad8": 100.0}
    stacked = stacked_recipes(recipe_study(values), seeds, Throughput())
    assert [seed.name for seed in stacked] == ["compiled-optimizer+mark_dynamic"], "regional was slower, pad8 a tie"
    (both,) = stacked
    assert both.answers == {"compile_optimizer": True, "mark_dynamic": True}
    values.update({"max-autotune": 104.0})
    names = [seed.name for seed in stacked_recipes(recipe_study(values), seeds, Throughput())]
    assert names == [
        "compiled-optimizer+mark_dynamic",
        "compiled-optimizer+max-autotune",
        "mark_dynamic+max-autotune",
        "compiled-optimizer+mark_dynamic+max-autotune",
    ], "best first; with three that helped, all three together last"


def test_stacking_reads_a_time_to_objective_as_smaller_is_better(toy_summary) -> None:
    seeds = expert_recipes(toy_summary)
    values = {"plain": 100.0, "mark_dynamic": 90.0, "compiled-optimizer": 95.0, "regional": 120.0}
    stacked = stacked_recipes(recipe_study(values, "minimize"), seeds, TimeTo(100))
    assert [seed.name for seed in stacked] == ["mark_dynamic+compiled-optimizer"]


def test_recipes_that_answer_one_question_differently_do_not_stack() -> None:
    seeds = [
        Recipe(name="plain", description="plain"),
        Recipe(name="tuned", description="tuned kernels", answers={"mode": "max-autotune-no-cudagraphs"}),
        Recipe(name="graphs", description="CUDA graphs", answers={"mode": "reduce-overhead"}),
        Recipe(name="opt", description="optimizer", answers={"compile_optimizer": True}),
    ]
    values = {"plain": 100.0, "tuned": 110.0, "graphs": 120.0, "opt": 105.0}
    names = [seed.name for seed in stacked_recipes(recipe_study(values), seeds, Throughput())]
    assert names == ["graphs+opt", "tuned+opt"], "graphs+tuned and all three ask for two modes"


def test_a_stacked_recipe_is_queued_as_one_configuration_with_both_settings(toy_summary) -> None:
    space = adapted(toy_summary)
    seeds = expert_recipes(toy_summary)
    study = recipe_study({"plain": 100.0, "mark_dynamic": 110.0, "compiled-optimizer": 120.0})
    assert not recipes_pending(study)
    stacked = stacked_recipes(study, seeds, Throughput())
    notes = seed_study(study, space, stacked, limit=1)
    assert notes == ["recipe compiled-optimizer+mark_dynamic seeded: " + stacked[0].description]
    assert recipes_pending(study), "queued and not yet run"
    (waiting,) = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    _, config = seed_params(space, stacked[0])
    assert config.compile_optimizer is True and set(config.mark_dynamic) == {
        (key, axis) for key, axes in toy_summary.dynamic_dims.items() for axis in axes
    }
    assert waiting.system_attrs["fixed_params"] == seed_params(space, stacked[0])[0], "the answers the trial will get"


def test_without_plain_compile_among_the_recipes_nothing_is_stacked(toy_summary) -> None:
    study = recipe_study({"mark_dynamic": 110.0, "compiled-optimizer": 120.0})
    assert stacked_recipes(study, expert_recipes(toy_summary), Throughput()) == []


def test_a_recipe_is_stacked_by_its_ratio_to_plain_compile_once_the_reference_level_is_taken_out(toy_summary) -> None:
    # Every recipe's raw pairing reads about 10% above plain compile: the live reference sat low. Their
    # anchored ratios say which of them really ran faster than a fresh plain compile.
    study = recipe_study({"plain": 100.0})
    anchored = {"mark_dynamic": 1.04, "compiled-optimizer": 1.08, "regional": 0.99}
    for name, ratio in anchored.items():
        study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.COMPLETE, value=110.0 * ratio, params={}, distributions={},
                user_attrs={"recipe": name, "speedup_vs_compile": ratio},
            )
        )  # fmt: skip
    names = [seed.name for seed in stacked_recipes(study, expert_recipes(toy_summary), Throughput())]
    assert names == ["compiled-optimizer+mark_dynamic"], "regional's raw value beat plain compile's; its ratio did not"
