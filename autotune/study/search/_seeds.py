"""Where a new study starts: plain torch.compile and the generic recipes an expert tries first.

Before the sampler proposes anything, a new study is given, as its first trials, the
configurations that are worth trying on almost any model (`expert_recipes`): plain
`torch.compile`, the declared dynamic inputs marked dynamic, a compiled optimizer step for
training, regional compilation of the repeated blocks, `max-autotune-no-cudagraphs`, and
padding the dynamic axes to a multiple of 8.

A recipe (`autotune.measure.tasks.Recipe`) is a few answers to the space's questions
(`scope: regional`); every other question gets its neutral answer: the default mode, no marks,
no padding, each Inductor option at Inductor's own default. A space file's recipe may instead be
a whole configuration (a recipe file, or one in its form), whose answers `params_for` finds. The
trial is enqueued with those answers, so the sampler learns from it like from any trial. A recipe the adapted space cannot ask (no repeated
blocks, no declared dynamic inputs, inference) is skipped with the reason. With the
never-worse rule, the export is then at least as good as the best of them that the
confirmation measured.

Once every recipe has run, the ones that ran faster than plain compile are tried together
(`stacked_recipes`: each pair, then all of them), before the sampler has the rest of the
budget: the sampler finds a combination only by chance, and an engineer's next step after two
recipes that each help is to try both.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import optuna

from autotune.errors import AutotuneError
from autotune.measure import Objective
from autotune.measure.tasks import Recipe
from autotune.runtime.config import CompileConfig, inductor_option_defaults, spelled_mode
from autotune.runtime.knobs import registered
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._params import params_for
from autotune.study.search._space import SearchSpace
from autotune.study.storage import TrialRecord, queue_trial, record_of, trial_rank

__all__ = [
    "PAD_MULTIPLE",
    "expert_recipes",
    "recipes_pending",
    "seed_params",
    "seed_study",
    "space_recipes",
    "stacked_recipes",
    "study_seeds",
]

PAD_MULTIPLE = 8
SMALL_BUDGET_RECIPES = 3
"""Generic recipes a study gets even when half its trials is fewer: plain compile and the two most
likely to help (the first two of `expert_recipes` that apply), as far as --trials allows."""


def expert_recipes(workload: WorkloadSummary) -> list[Recipe]:
    """The generic recipes for this workload, most generally useful first."""
    dynamic = any(workload.dynamic_dims.values())
    seeds = [Recipe(name="plain", description="plain torch.compile(model)")]
    if dynamic:
        seeds.append(
            Recipe(
                name="mark_dynamic",
                description="the declared dynamic inputs marked dynamic",
                answers={"mark_dynamic": True},
            )
        )
    if workload.trains:
        # Before regional and max-autotune: the optimizer step is where the benchmark's training
        # gains came from (captioning_static 1.25x, the toy's winner), so a short budget keeps it.
        seeds.append(
            Recipe(
                name="compiled-optimizer",
                description="optimizer.step compiled too",
                answers={"compile_optimizer": True},
            )
        )
    seeds.append(
        Recipe(
            name="regional", description="each repeated block compiled once and reused", answers={"scope": "regional"}
        )
    )
    seeds.append(
        Recipe(
            name="max-autotune",
            description="Inductor's autotuned kernels, no CUDA graphs",
            answers={"mode": "max-autotune-no-cudagraphs"},
        )
    )
    if dynamic:
        seeds.append(
            Recipe(
                name="pad8",
                description=f"dynamic axes padded to a multiple of {PAD_MULTIPLE}",
                answers={"padding_alignment": PAD_MULTIPLE},
            )
        )
    return seeds


def space_recipes(space: SearchSpace) -> list[Recipe]:
    """The recipes the space file names itself (its `recipes:` section), in the file's order."""
    return list(space.recipes)


def study_seeds(space: SearchSpace, workload: WorkloadSummary, trials: int) -> tuple[list[Recipe], int]:
    """What a new study starts with, and how many of them at most, for a study of `trials` trials.

    A space that names its recipes gets them, every one that `trials` has room for: whoever wrote
    the space chose them. Otherwise the generic recipes take at most half of the trials, so the
    sampler keeps the other half, but never fewer than SMALL_BUDGET_RECIPES that `trials` has room
    for: with --trials 3, plain compile alone would leave the recipes most likely to help untried.
    """
    if space.recipes:
        return space_recipes(space), max(1, trials)
    return expert_recipes(workload), max(1, min(trials, SMALL_BUDGET_RECIPES), trials // 2)


class _Answers:
    """Answers the space's questions for a seed: its own where it has one, else the neutral choice."""

    def __init__(self, answers: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
        self.answers = answers
        self.defaults = defaults
        self.params: dict[str, Any] = {}
        self.used: set[str] = set()
        self.missing: list[str] = []

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        key = "mark_dynamic" if name.startswith("mark_dynamic.") else name
        if key in self.answers:
            value = self.answers[key]
            self.used.add(key)
            if not any(_same(value, c) for c in choices):
                self.missing.append(f"{name}={value!r}")
                value = choices[0]
        else:
            value = self._neutral(name, choices)
        self.params[name] = value
        return value

    def _neutral(self, name: str, choices: Sequence[Any]) -> Any:
        if name.startswith("options."):
            wanted = self.defaults.get(name.removeprefix("options."))
        elif name == "mode" or name.startswith("module_mode."):
            wanted = self.answers.get("mode", "default")
        elif name in registered():
            wanted = registered()[name].neutral
        else:
            wanted = {
                "dynamic": None,
                "scope": "whole",
                "padding_alignment": None,
                "mark_as": "dynamic",
            }.get(name, False)
        return next((c for c in choices if _same(c, wanted)), choices[0])


def _same(a: Any, b: Any) -> bool:
    # 1 == True in Python, but a padding of 1 is not dynamic=True: compare types too.
    return type(a) is type(b) and a == b


def seed_params(space: SearchSpace, seed: Recipe) -> tuple[dict[str, Any], CompileConfig] | str:
    """The space's answers for `seed` and the configuration they give, or why the space cannot express it."""
    if seed.config is not None:
        return _whole_params(space, seed.config)
    answers = _Answers(seed.answers, inductor_option_defaults())
    try:
        config = space.suggest(answers)
    except AutotuneError as exc:
        return f"the configuration is invalid here ({exc})"
    # A question the space does not ask, since it offers one answer, is answered where that is the recipe's own.
    unasked = sorted(k for k in set(seed.answers) - answers.used if not _holds(config, k, seed.answers[k]))
    if unasked or answers.missing:
        what = ", ".join(answers.missing + [f"{k}={seed.answers[k]!r}" for k in unasked])
        return f"the space '{space.name}' does not offer {what}"
    return answers.params, config


def _holds(config: CompileConfig, question: str, answer: Any) -> bool:
    """Whether `config` gives `question` the recipe's `answer` (one the space pins, so it was never asked)."""
    if question.startswith("options."):
        name = question.removeprefix("options.")
        return _same(config.options.get(name, inductor_option_defaults().get(name)), answer)
    if question in registered():
        return _same(config.knobs.get(question, registered()[question].neutral), answer)
    if question == "mode":
        return _same(config.mode if config.mode is not None else spelled_mode(config.options)[0], answer)
    if question == "mark_dynamic":
        return _same(bool(config.mark_dynamic), answer)
    plain = config.to_dict()
    return question in plain and _same(plain[question], answer)


def _whole_params(space: SearchSpace, config: CompileConfig) -> tuple[dict[str, Any], CompileConfig] | str:
    """The answers that give a recipe's whole configuration, or why the space cannot express it. An Inductor option the
    space asks and the recipe leaves out runs at Inductor's default, as the option a space asks is always answered."""
    defaults = inductor_option_defaults()
    options = {name: defaults[name] for name in space.options if name in defaults}
    wanted = replace(config, options={**options, **config.options})
    params = params_for(space, wanted)
    if params is None:
        return f"the space '{space.name}' cannot express {config.describe()}"
    return params, wanted  # `params_for` found the answers whose configuration is `wanted`


def seed_study(study: optuna.Study, space: SearchSpace, seeds: Sequence[Recipe], limit: int) -> list[str]:
    """Enqueue up to `limit` seeds as the study's first trials; returns what was done, in words."""
    queued, notes = planned_seeds(space, seeds, limit)
    for seed, params in queued:
        queue_trial(study, params, TrialRecord(recipe=seed.name), skip_if_exists=True)
    return notes


def planned_seeds(
    space: SearchSpace, seeds: Sequence[Recipe], limit: int
) -> tuple[list[tuple[Recipe, dict[str, Any]]], list[str]]:
    """The seeds, up to `limit`, that would start a study in `space`, each with its parameters; and why, in words."""
    notes = []
    queued: list[tuple[Recipe, dict[str, Any]]] = []
    configs: list[CompileConfig] = []
    for seed in seeds:
        found = seed_params(space, seed)
        if isinstance(found, str):
            notes.append(f"recipe {seed.name} not seeded: {found}")
            continue
        params, config = found
        if config in configs:
            notes.append(f"recipe {seed.name} not seeded: the same configuration as an earlier recipe here")
            continue
        if len(queued) >= limit:
            notes.append(f"recipe {seed.name} not seeded: --trials leaves room for {limit} recipe(s)")
            continue
        queued.append((seed, params))
        configs.append(config)
        notes.append(f"recipe {seed.name} seeded: {seed.description}")
    return queued, notes


def recipes_pending(study: optuna.Study) -> bool:
    """Whether a recipe of the study is still waiting or running: stacking waits until every one has run."""
    waiting = (optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)
    return any(record_of(t).recipe is not None for t in study.get_trials(deepcopy=False, states=waiting))


def stacked_recipes(study: optuna.Study, seeds: Sequence[Recipe], objective: Objective) -> list[Recipe]:
    """The recipes that ran faster than plain compile, together: each pair, then all of them (best first).

    Faster is by the trials' search-time figures, which only rank them (the confirmation decides
    what is exported): for throughput, a ratio to plain compile above 1 once the reference's own
    level is taken out (`speedup_vs_compile`), else a better value than the plain recipe's. Answers that two recipes give differently cannot stack; such a combination is left
    out. A stacked recipe is named after its parts (`mark_dynamic+compiled-optimizer`).
    """
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    plain = [t for t in complete if record_of(t).recipe == "plain"]
    if not plain:
        return []
    bar = trial_rank(plain[0], objective)
    by_name = {seed.name: seed for seed in seeds}
    ran = [t for t in complete if record_of(t).recipe in by_name and record_of(t).recipe != "plain"]
    helped = [by_name[str(record_of(t).recipe)] for t in sorted(ran, key=lambda t: -trial_rank(t, objective))]
    helped = [seed for seed in helped if seed.answers and _faster(_trial_of(ran, seed.name), bar, objective)]
    groups = [list(pair) for pair in itertools.combinations(helped, 2)]
    if len(helped) > 2:
        groups.append(helped)
    stacked = []
    for group in groups:
        answers: dict[str, Any] = {}
        if any(answers.setdefault(k, v) != v for seed in group for k, v in seed.answers.items()):
            continue  # two of them answer one question differently
        names = "+".join(seed.name for seed in group)
        stacked.append(
            Recipe(
                name=names,
                description=f"recipes that each ran faster than plain compile, together: {names}",
                answers=answers,
            )
        )
    return stacked


def _faster(trial: optuna.trial.FrozenTrial, bar: float, objective: Objective) -> bool:
    """Whether a recipe's trial ran faster than plain compile: its anchored ratio, or its value against `bar`."""
    ratio = record_of(trial).speedup_vs_compile
    if objective.per_sample and ratio is not None:
        return float(ratio) > 1.0
    return trial_rank(trial, objective) > bar


def _trial_of(trials: Sequence[optuna.trial.FrozenTrial], recipe: str) -> optuna.trial.FrozenTrial:
    return next(t for t in trials if record_of(t).recipe == recipe)
