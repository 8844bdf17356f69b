"""Nightly retuning: re-measure a tuned configuration where it runs today, look for a better one, decide.

`retune(RetuneOptions(path="outputs/<study>/best.yaml"))`:

1. reads best.yaml, its study (the same storage) and its workload (both can be overridden),
   and compares the environment and the model with the ones recorded there;
2. measures eager, plain torch.compile and the incumbent in fresh processes, interleaved,
   `repeats` rounds;
3. runs a short warm-started search in the same study, so history accumulates: the
   incumbent and the previous top trials first, then `trials` new ones;
4. measures the best challenger `repeats` more times and decides: it replaces the
   incumbent only when its median is faster by more than `min_gain` and even its slowest
   run beats the incumbent's median. A regression is the incumbent failing, or running
   slower than its recorded figure by more than `max_regression`, or (when it was at least
   on par with plain torch.compile when tuned) slower than plain torch.compile by as much;
5. saves the winner's compile cache, replaces best.yaml, apply_compilation.py and
   compile_cache.bin together (the old ones kept as *.prev.*), appends a line to
   history.jsonl and rewrites trials.csv and report.md.

A regression that no challenger fixes leaves the files as they were, so the next run still sees it.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from autotune import codegen, compile_cache, environment, history, publish, tuned
from autotune.config import CompileConfig
from autotune.errors import AutotuneError, ConfigError
from autotune.export import BASELINE_FIELDS
from autotune.measure import Protocol
from autotune.runner import TrialRequest, TrialRun, check_device, record_of, run_trial
from autotune.search import Objective, Progress, SearchError, SearchOptions, explore, shared_length_groups
from autotune.space import SearchSpace, bundled_spaces, load_space
from autotune.workload import resolve

__all__ = [
    "DECISIONS",
    "Decision",
    "RetuneError",
    "RetuneOptions",
    "RetuneResult",
    "Subject",
    "decide",
    "faster",
    "params_for",
    "retune",
]

DECISIONS = ("unchanged", "improved", "regression")
_MAX_PROBES = 20_000


class RetuneError(AutotuneError):
    """A retune cannot start or cannot measure (missing study, bad options, a workload that does not run)."""


@dataclass(kw_only=True)
class RetuneOptions:
    """Everything `autotune retune` takes; the CLI flags map one to one."""

    path: str
    """The best.yaml to retune; its folder receives the new files, history.jsonl and the report."""
    model: str | None = None
    """The workload target (default: the one recorded in best.yaml)."""
    trials: int = 4
    """New trials of the warm-started search, after the incumbent and the previous top trials."""
    top: int = 3
    """Previous top trials (distinct configurations) measured again before the new ones."""
    min_gain: float = 0.03
    """A challenger must be faster than the incumbent by more than this fraction to replace it."""
    max_regression: float = 0.10
    """The incumbent regressed when slower than recorded (or than plain compile) by more than this fraction."""
    repeats: int = 3
    """Rounds of eager, plain compile and incumbent; runs of the best challenger."""
    device: str | None = None
    """Where to measure (default: the device recorded in best.yaml)."""
    storage: str | None = None
    """The study's storage (default: the one recorded in best.yaml; study.db beside it)."""
    space: str | None = None
    """The search space of the new trials (default: the study's, when it is a bundled one)."""
    trial_timeout: float = 900.0
    """Hard limit for each run, in seconds."""
    compile_cache: bool = True
    """Save the winner's compile artifacts to compile_cache.bin and time compiling with them."""

    def __post_init__(self) -> None:
        for name in ("trials", "top"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RetuneError(f"--{name} {value!r}: must be an integer >= 0.")
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1:
            raise RetuneError(f"--repeats {self.repeats!r}: must be an integer >= 1.")
        if not 0 <= self.min_gain < 1:
            raise RetuneError(f"--min-gain {self.min_gain!r}: must be a fraction in [0, 1), e.g. 0.03 for 3%.")
        if not 0 < self.max_regression < 1:
            raise RetuneError(f"--max-regression {self.max_regression!r}: must be a fraction in (0, 1), e.g. 0.1.")
        if self.trial_timeout <= 0:
            raise RetuneError(f"--trial-timeout {self.trial_timeout!r}: must be a positive number of seconds.")
        if self.device is not None:
            check_device(self.device)


@dataclass(kw_only=True)
class Subject:
    """One configuration (or baseline) measured in several fresh processes during a retune."""

    name: str
    description: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    """The objective of each complete run, in the order they ran."""
    trial: int | None = None
    """The study trial that holds this configuration (its newest measurement)."""

    @property
    def failure(self) -> dict[str, Any] | None:
        """The first failed run, if any failed."""
        return next((r for r in self.runs if r["state"] == "failed"), None)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def median_run(self) -> dict[str, Any]:
        """The complete run whose objective is the (lower) median: the figures best.yaml records."""
        complete = [(v, r) for v, r in zip(self.values, self._complete_runs(), strict=True)]
        complete.sort(key=lambda pair: pair[0])
        return complete[(len(complete) - 1) // 2][1]

    def _complete_runs(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["state"] == "complete"]

    def to_dict(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "config": self.description,
            "trial": self.trial,
            "state": "failed" if failure else ("complete" if self.values else "not measured"),
            "reason": failure["reason"] if failure else "",
            "message": failure["message"][:500] if failure else "",
            "runs": [round(v, 4) for v in self.values],
            "median": round(self.median, 4) if self.median is not None else None,
            "compile_seconds": [r.get("compile_seconds") for r in self._complete_runs()],
        }


@dataclass(kw_only=True)
class RetuneResult:
    """What a retune measured and decided, and where it wrote it."""

    path: Path
    study_name: str
    date: str
    objective: str
    unit: str
    decision: str
    """'unchanged', 'improved' (a challenger replaced the incumbent) or 'regression'."""
    replaced: bool
    regressions: list[str]
    environment: dict[str, Any]
    environment_changes: dict[str, tuple[Any, Any]]
    model_changes: dict[str, tuple[Any, Any]]
    incumbent: Subject
    challenger: Subject | None
    baselines: dict[str, Subject]
    gain: float | None
    """The challenger's median over the incumbent's, minus one (None without both)."""
    compile_cache: dict[str, Any]
    written: bool
    """Whether best.yaml, apply_compilation.py and compile_cache.bin were replaced."""
    notes: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return self.decision == "regression"

    def to_history(self) -> dict[str, Any]:
        """The history.jsonl line of this run."""
        return {
            "date": self.date,
            "decision": self.decision,
            "replaced": self.replaced,
            "written": self.written,
            "regressions": self.regressions,
            "objective": self.objective,
            "unit": self.unit,
            "environment": self.environment,
            "environment_changes": {k: list(v) for k, v in self.environment_changes.items()},
            "model_changes": {k: list(v) for k, v in self.model_changes.items()},
            "incumbent": self.incumbent.to_dict(),
            "challenger": self.challenger.to_dict() if self.challenger else None,
            "gain": round(self.gain, 4) if self.gain is not None else None,
            "baselines": {name: subject.to_dict() for name, subject in self.baselines.items()},
            "compile_cache": {
                k: self.compile_cache.get(k)
                for k in ("saved", "cold_compile_seconds", "cached_compile_seconds", "note")
                if k in self.compile_cache
            },
            "notes": self.notes,
        }

    def render(self) -> str:
        """A short account for the terminal."""
        lines = [f"retune of {self.path} (study {self.study_name!r}, objective {self.objective} in {self.unit})"]
        for what, changes in (("environment", self.environment_changes), ("model", self.model_changes)):
            if changes:
                lines.append(f"{what}: CHANGED since it was tuned:")
                lines += [f"  {k}: {old} -> {new}" for k, (old, new) in changes.items()]
            else:
                lines.append(f"{what}: unchanged since it was tuned")
        lines += ["", f"{'':>11} {'median':>10}  runs"]
        subjects = [self.baselines["eager"], self.baselines["compile"], self.incumbent]
        subjects += [self.challenger] if self.challenger else []
        for subject in subjects:
            median = f"{subject.median:.4g}" if subject.median is not None else "–"
            runs = ", ".join(f"{v:.4g}" for v in subject.values)
            failure = subject.failure
            if failure:
                runs += f"{', ' if runs else ''}failed ({failure['reason']})"
            lines.append(f"{subject.name:>11} {median:>10}  {runs}   {subject.description}")
        lines.append("")
        if self.gain is not None:
            lines.append(f"challenger vs incumbent: {self.gain:+.1%}")
        lines += [f"REGRESSION: {text}" for text in self.regressions]
        verdict = {
            "unchanged": "unchanged: the incumbent stays",
            "improved": f"improved: trial {self.challenger.trial if self.challenger else '?'} replaces the incumbent",
            "regression": "regression"
            + (
                f": trial {self.challenger.trial if self.challenger else '?'} replaces the incumbent"
                if self.replaced
                else ": no challenger replaces the incumbent; the files are left as they were"
            ),
        }[self.decision]
        lines.append(f"decision: {verdict}")
        lines += [f"note: {text}" for text in self.notes]
        if self.written:
            files = "best.yaml, apply_compilation.py" + (
                " and compile_cache.bin" if self.compile_cache.get("saved") else ""
            )
            lines.append(f"wrote {files} in {self.path.parent} (the previous ones are kept as *.prev.*)")
        if self.compile_cache:
            lines.append(compile_cache.describe(self.compile_cache))
        lines.append(f"history: {self.path.parent / history.HISTORY_FILE}; report: {self.path.parent / 'report.md'}")
        return "\n".join(lines)


ProgressCallback = Callable[[Progress], None]


def retune(options: RetuneOptions, progress: ProgressCallback | None = None) -> RetuneResult:
    """Retune the configuration in `options.path`; see the module docstring for every step."""
    return _Retune(options, progress or (lambda p: None)).run()


class _Retune:
    def __init__(self, options: RetuneOptions, progress: ProgressCallback) -> None:
        self.options = options
        self.progress = progress
        self.path = Path(options.path)
        self.out_dir = self.path.parent
        self.date = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
        self.notes: list[str] = []
        if publish.recover(self.out_dir):
            self._note(f"finished an interrupted replacement of the files in {self.out_dir} first")
        self.tuned = tuned.read(self.path)
        self.study = self._open_study()
        attrs = self.study.user_attrs
        self.objective = Objective.parse(str(attrs.get("objective", "throughput")))
        settings = attrs.get("settings") or {}
        self.settings = settings
        self.protocol = Protocol.from_dict(settings.get("protocol") or {})
        self.seed = int(settings.get("seed", 0))
        self.device = check_device(options.device or self.tuned.study.get("device") or attrs.get("device") or None)
        self.spec = options.model or self.tuned.workload.spec
        workload = resolve(self.spec)
        batches = workload.draw_batches(seed=self.seed)
        self.summary = workload.summary(self.spec, batches)
        self.shared_lengths = shared_length_groups(self.summary, batches)
        self.model_fingerprint = environment.model_fingerprint(workload.model, environment.batch_shapes(batches))
        self.space_name = self._space_name()
        # The first trial of this retune's search: only trials from here on ran in today's environment.
        self.first_trial = len(self.study.trials)

    # -- reading what was recorded ---------------------------------------------------------------

    def _open_study(self) -> optuna.Study:
        recorded = self.tuned.study
        name = recorded.get("name")
        if not isinstance(name, str) or not name:
            raise RetuneError(f"{self.path}: study.name is missing, so there is no study to retune; search again.")
        storage = self.options.storage or str(recorded.get("storage") or "study.db")
        if storage == "study.db":
            database = self.out_dir / "study.db"
            if not database.is_file():
                raise RetuneError(
                    f"{self.path} records its study in study.db beside it, but {database} does not exist; "
                    "keep the whole outputs folder, or pass --storage URL."
                )
            self.storage = None  # the search's own default, so best.yaml keeps saying 'study.db'
            url = f"sqlite:///{database.resolve()}"
        else:
            self.storage = storage
            url = storage
        self.storage_url = url
        from autotune.export import load_search_study

        try:
            return load_search_study(url, name)
        except SearchError as exc:
            raise RetuneError(str(exc)) from None

    def _space_name(self) -> str:
        if self.options.space:
            return self.options.space
        recorded = str(self.tuned.study.get("space") or self.study.user_attrs.get("space") or "")
        if recorded in bundled_spaces():
            return recorded
        raise RetuneError(
            f"{self.path} was tuned on the search space {recorded!r}, which is not a bundled one; "
            f"pass --space PATH (bundled: {sorted(bundled_spaces())})."
        )

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> RetuneResult:
        incumbent = Subject(
            name="incumbent", description=self.tuned.config.describe(), trial=self.tuned.metrics.get("trial")
        )
        baselines = {
            "eager": Subject(name="eager", description="eager"),
            "compile": Subject(name="compile", description="plain torch.compile"),
        }
        current = self._measure_round_robin(incumbent, baselines)
        environment_changes, model_changes = self._changes(current)
        self._search(incumbent, baselines)
        challenger = self._best_challenger()
        if challenger is not None and self._worth_confirming(challenger, incumbent):
            self._measure_more(challenger)
        verdict = decide(
            incumbent,
            challenger,
            baselines["compile"],
            recorded=self._recorded_value(self.tuned.metrics),
            recorded_compile=self._recorded_value(self.tuned.baselines.get("compile") or {}),
            objective=self.objective,
            min_gain=self.options.min_gain,
            max_regression=self.options.max_regression,
        )
        # A regression that no challenger fixes keeps the files, so that the next run sees it again.
        written = not verdict.regressions or verdict.replaced
        winner = challenger if verdict.replaced and challenger else incumbent
        shipped, cache = self._publish(winner, baselines, current, verdict.replaced) if written else (self.tuned, {})
        result = RetuneResult(
            path=self.path,
            study_name=self.study.study_name,
            date=self.date,
            objective=str(self.objective),
            unit=self.objective.unit,
            decision=verdict.decision,
            replaced=verdict.replaced,
            regressions=verdict.regressions,
            environment=current,
            environment_changes=environment_changes,
            model_changes=model_changes,
            incumbent=incumbent,
            challenger=challenger,
            baselines=baselines,
            gain=verdict.gain,
            compile_cache=cache,
            written=written,
            notes=self.notes,
        )
        history.append(self.out_dir, result.to_history())
        self._write_report(shipped, baselines if written else None)
        return result

    def _changes(self, current: Mapping[str, Any]) -> tuple[dict[str, tuple[Any, Any]], dict[str, tuple[Any, Any]]]:
        """What differs from best.yaml: the environment the workers saw, and the model."""
        environment_changes = environment.differences(self.tuned.environment, current, environment.RETUNE_KEYS)
        recorded_model = self.tuned.environment.get("model")
        model_changes = (
            environment.differences(recorded_model, self.model_fingerprint)
            if isinstance(recorded_model, Mapping)
            else {}
        )
        for what, changes in (("environment", environment_changes), ("model", model_changes)):
            if changes:
                self._note(
                    f"{what} changed since tuning: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changes.items())
                )
        return environment_changes, model_changes

    # -- measuring -------------------------------------------------------------------------------

    def _request(self, source: str | None, config: CompileConfig | None) -> TrialRequest:
        return TrialRequest(
            spec=self.spec,
            source=source,
            device=self.device,
            seed=self.seed,
            protocol=self.protocol.to_dict(),
            uses_cuda_graphs=bool(config and config.uses_cuda_graphs),
            timeout=self.options.trial_timeout,
        )

    def _source(self, config: CompileConfig, created: str) -> str | None:
        try:
            return codegen.generate(config, self.summary, created=created, version=environment.version())
        except ConfigError as exc:
            self._note(f"{config.describe()} no longer fits the workload: {exc}")
            return None

    def _measure_round_robin(self, incumbent: Subject, baselines: dict[str, Subject]) -> dict[str, Any]:
        """`repeats` rounds of eager, plain compile and the incumbent; returns the environment the workers saw."""
        sources = {
            "eager": (None, None),
            "compile": (self._source(CompileConfig(), self.date), CompileConfig()),
            "incumbent": (self._source(self.tuned.config, self.tuned.created), self.tuned.config),
        }
        subjects = {**baselines, "incumbent": incumbent}
        seen: dict[str, Any] = {}
        rounds = self.options.repeats
        for index in range(rounds):
            for name, subject in subjects.items():
                source, config = sources[name]
                self._phase(f"round {index + 1}/{rounds}: {name}")
                if name == "incumbent" and source is None:
                    subject.runs.append(
                        {"state": "failed", "reason": "invalid_config", "message": "does not fit the workload"}
                    )
                    continue
                run = run_trial(self._request(source, config))
                seen = seen or run.environment
                self._add(subject, run)
        if not baselines["eager"].values:
            failure = baselines["eager"].failure or {}
            raise RetuneError(
                f"the workload {self.spec} does not run eagerly any more, so nothing can be compared: "
                f"{failure.get('reason')}: {failure.get('message')}\n{failure.get('stderr_tail', '')}"
            )
        return dict(seen)

    def _add(self, subject: Subject, run: TrialRun | dict[str, Any]) -> None:
        record = record_of(run) if isinstance(run, TrialRun) else run
        subject.runs.append(record)
        if record["state"] == "complete":
            subject.values.append(self._value(record))
            shown = f"{subject.values[-1]:.4g} {self.objective.unit}"
        else:
            shown = f"{record['state']} ({record.get('reason')}: {record.get('message', '')[:200]})"
        self._note(f"{subject.name}: {shown}")

    def _value(self, record: Mapping[str, Any]) -> float:
        return self.objective.value(
            float(record["samples_per_second"]),
            float(record["batches_per_second"]),
            float(record.get("compile_seconds") or 0.0),
        )

    def _measure_more(self, challenger: Subject) -> None:
        trial = self.study.trials[challenger.trial] if challenger.trial is not None else None
        config = CompileConfig.from_dict(trial.user_attrs["config"]) if trial else None
        source = self._source(config, trial.user_attrs["created"]) if trial and config else None
        if source is None:
            return
        for index in range(self.options.repeats):
            self._phase(f"challenger run {index + 1}/{self.options.repeats}")
            self._add(challenger, run_trial(self._request(source, config)))

    # -- the warm-started search -----------------------------------------------------------------

    def _search(self, incumbent: Subject, baselines: dict[str, Subject]) -> None:
        """Incumbent and previous top trials first, then the new trials, all in the same study."""
        study = self.study
        for name, subject in baselines.items():
            if subject.values:
                study.set_user_attr(f"baseline.{name}", subject.median_run())
        if self.options.model:
            study.set_user_attr("model", self.spec)  # an explicit --model is the workload from now on
        compile_breaks = (
            int(baselines["compile"].median_run().get("graph_breaks") or 0) if baselines["compile"].values else 0
        )
        space = load_space(self.space_name).adapt(
            self.summary, self.device, graph_breaks=compile_breaks, shared_lengths=self.shared_lengths
        )
        self.first_trial = len(study.trials)
        queued = self._enqueue(space)
        finished = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
        waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        planned = len(waiting) + self.options.trials
        if not planned:
            return
        self._note(
            f"warm-started search: {queued} earlier configuration(s) again, then {self.options.trials} new trial(s)"
        )
        try:
            self.study = explore(self._search_options(len(finished) + planned), self.progress)
        except SearchError as exc:
            # What was measured is in the study; the decision below still stands on it.
            self._note(f"the warm-started search stopped early: {exc}")
            self.study = optuna.load_study(study_name=self.study.study_name, storage=self.storage_url)
        for trial in self.study.get_trials(deepcopy=False)[self.first_trial :]:
            mine = trial.user_attrs.get("retune_role") == "incumbent" and "duplicate_of" not in trial.user_attrs
            complete = trial.state == optuna.trial.TrialState.COMPLETE
            if mine and (complete or trial.user_attrs.get("state") == "failed"):
                self._add(incumbent, _record_of_trial(trial))
                incumbent.trial = trial.number if complete else incumbent.trial

    def _search_options(self, trials: int) -> SearchOptions:
        """The study's own settings, so the new trials are measured as the first ones were."""
        return SearchOptions(
            model=self.spec,
            space=self.space_name,
            trials=trials,
            trial_timeout=self.options.trial_timeout,
            device=self.device,
            out=str(self.out_dir),
            study_name=self.study.study_name,
            storage=self.storage,
            sampler=str(self.settings.get("sampler", "tpe")),
            pruner=str(self.settings.get("pruner", "median")),
            seed=self.seed,
            objective=str(self.objective),
            protocol=self.protocol,
            confirm=0,
            compile_cache=False,
            reuse_since=self.first_trial,
        )

    def _enqueue(self, space: SearchSpace) -> int:
        """Enqueue the incumbent and the previous top trials as this space would ask for them."""
        wanted: list[tuple[CompileConfig, dict[str, Any]]] = [(self.tuned.config, {"retune_role": "incumbent"})]
        complete = [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "duplicate_of" not in t.user_attrs and "config" in t.user_attrs and t.value is not None
        ]
        complete.sort(key=lambda t: t.value or 0.0, reverse=self.objective.direction == "maximize")
        seen = [self.tuned.config.to_dict()]
        for trial in complete:
            if len(wanted) > self.options.top:
                break
            if trial.user_attrs["config"] in seen:
                continue
            seen.append(trial.user_attrs["config"])
            wanted.append(
                (
                    CompileConfig.from_dict(trial.user_attrs["config"]),
                    {"retune_role": "previous", "previous_trial": trial.number},
                )
            )
        queued = 0
        for config, attrs in wanted:
            params = params_for(space, config)
            if params is None:
                self._note(
                    f"{config.describe()} is not in the space '{space.name}' any more, so it is not searched again"
                )
                continue
            self.study.enqueue_trial(params, user_attrs={**attrs, "retune": self.date})
            queued += 1
        return queued

    def _best_challenger(self) -> Subject | None:
        mine = self.tuned.config.to_dict()
        candidates = [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if t.number >= self.first_trial
            and "duplicate_of" not in t.user_attrs
            and t.user_attrs.get("config") not in (None, mine)
        ]
        if not candidates:
            return None
        best = max(candidates, key=lambda t: faster(t.value or 0.0, 1.0, self.objective))
        challenger = Subject(
            name="challenger",
            description=CompileConfig.from_dict(best.user_attrs["config"]).describe(),
            trial=best.number,
        )
        self._add(challenger, _record_of_trial(best))
        return challenger

    # -- deciding --------------------------------------------------------------------------------

    def _worth_confirming(self, challenger: Subject, incumbent: Subject) -> bool:
        if incumbent.failure or incumbent.median is None:
            return True
        return faster(challenger.values[0], incumbent.median, self.objective) - 1 > self.options.min_gain

    def _recorded_value(self, figures: Mapping[str, Any]) -> float | None:
        if figures.get("objective") == str(self.objective) and isinstance(figures.get("value"), (int, float)):
            return float(figures["value"])
        try:
            return self._value(figures)
        except (KeyError, TypeError, ValueError):
            return None

    # -- writing ---------------------------------------------------------------------------------

    def _publish(
        self, winner: Subject, baselines: dict[str, Subject], current: dict[str, Any], replaced: bool
    ) -> tuple[tuned.TunedConfig, dict[str, Any]]:
        """The winner's compile cache, then best.yaml, apply_compilation.py and compile_cache.bin as one set."""
        from autotune.export import study_summary

        if replaced:
            trial = self.study.trials[winner.trial] if winner.trial is not None else None
            assert trial is not None
            config, created = CompileConfig.from_dict(trial.user_attrs["config"]), str(trial.user_attrs["created"])
        else:
            config, created = self.tuned.config, self.tuned.created
        source = codegen.generate(config, self.summary, created=created, version=environment.version())
        cache: dict[str, Any] = {}
        staged = None
        if self.options.compile_cache:
            self._phase("compile cache: cold, then warm")
            cache, staged = compile_cache.record_compile_cache(self._request(source, config), self.out_dir)
            self._note(compile_cache.describe(cache))
        figures = {name: _figures(subject) for name, subject in baselines.items()}
        metrics = self._metrics(winner, figures)
        summary = {**study_summary(self.study), "retuned": self.date}
        new = tuned.TunedConfig(
            workload=self.summary,
            config=config,
            created=created,
            metrics=metrics,
            baselines=figures,
            environment={**current, "model": self.model_fingerprint},
            study=summary,
            compile_cache=cache,
        )
        publish.replace_together(
            self.out_dir,
            {"compile_cache.bin": staged, "apply_compilation.py": new.source, "best.yaml": new.to_yaml()},
            commit="best.yaml",
        )
        # The study now says what the files say, so `autotune export` gives the same choice.
        self.study.set_user_attr("environment", current)
        self.study.set_user_attr("model_fingerprint", self.model_fingerprint)
        if winner.trial is not None:
            self.study.set_user_attr(
                "confirmation",
                {
                    "eager": baselines["eager"].median_run(),
                    "compile": baselines["compile"].median_run() if baselines["compile"].values else {},
                    "trials": {str(winner.trial): winner.median_run()},
                },
            )
            self.study.set_user_attr("compile_cache", {**cache, "trial": winner.trial} if cache else {})
        return new, cache

    def _metrics(self, winner: Subject, figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
        record = winner.median_run()
        windows = [w for r in winner.runs if r["state"] == "complete" for w in r.get("windows") or []]
        sps = statistics.median(r["samples_per_second"] for r in winner.runs if r["state"] == "complete")
        metrics: dict[str, Any] = {
            "trial": winner.trial,
            "objective": str(self.objective),
            "unit": self.objective.unit,
            "value": winner.median,
            "samples_per_second": sps,
            "batches_per_second": record["batches_per_second"],
            "spread": {
                "min": min(windows, default=sps),
                "median": statistics.median(windows) if windows else sps,
                "max": max(windows, default=sps),
                "windows": len(windows),
            },
            "compile_seconds": statistics.median(
                r.get("compile_seconds") or 0.0 for r in winner.runs if r["state"] == "complete"
            ),
            **{k: record.get(k) for k in ("peak_memory_mb", "memory_kind", "graphs", "graph_breaks", "recompiles")},
            "confirmed": True,
            "runs": len(winner.values),
            "retuned": self.date,
        }
        for name in ("eager", "compile"):
            base = figures.get(name, {}).get("samples_per_second")
            metrics[f"speedup_vs_{name}"] = round(sps / base, 4) if base else None
        return metrics

    def _write_report(self, current: tuned.TunedConfig, baselines: dict[str, Subject] | None) -> None:
        from autotune.export import study_summary, trial_rows, write_trials_csv
        from autotune.report import write_report

        figures = {name: _figures(s) for name, s in baselines.items()} if baselines else dict(current.baselines)
        rows = trial_rows(self.study.get_trials(deepcopy=False), figures)
        write_trials_csv(self.out_dir, rows)
        write_report(
            self.out_dir,
            self.study,
            rows,
            figures,
            dict(current.metrics) or None,
            study_summary(self.study),
            self.objective,
            compile_cache=dict(current.compile_cache),
        )

    # -- display ---------------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        self.progress(Progress(0, 0, None, "", None, None, None, message))

    def _phase(self, phase: str) -> None:
        self.progress(Progress(0, 0, None, phase, None, None, None))


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the measurements say: keep, replace, and whether the incumbent regressed."""

    decision: str
    """'unchanged', 'improved' or 'regression'."""
    replaced: bool
    regressions: list[str]
    gain: float | None
    """The challenger's median over the incumbent's, minus one."""


def decide(
    incumbent: Subject,
    challenger: Subject | None,
    plain_compile: Subject,
    *,
    recorded: float | None,
    recorded_compile: float | None,
    objective: Objective,
    min_gain: float,
    max_regression: float,
) -> Decision:
    """Decide on the runs of this retune and the figures recorded in best.yaml (`recorded`: the incumbent's).

    A challenger replaces the incumbent when it ran at least twice without failing, its
    median beats the incumbent's by more than `min_gain` and even its slowest run beats the
    incumbent's median; any working challenger replaces an incumbent that failed. The
    incumbent regressed when it failed, ran slower than `recorded` by more than
    `max_regression`, or, having been at least on par with plain torch.compile when tuned,
    now runs slower than it by more than `max_regression`.
    """
    regressions: list[str] = []
    unit = objective.unit
    failure = incumbent.failure
    if failure:
        regressions.append(f"the incumbent failed ({failure['reason']}): {str(failure.get('message', ''))[:300]}")
    elif incumbent.median is None:
        regressions.append("the incumbent was not measured")
    else:
        now = incumbent.median
        if recorded:
            speed = faster(now, recorded, objective)
            if speed < 1 - max_regression:
                regressions.append(
                    f"the incumbent runs at {now:.4g} {unit}, {1 - speed:.0%} slower than the {recorded:.4g} "
                    f"recorded in best.yaml (--max-regression {max_regression:.0%})"
                )
        stood = faster(recorded, recorded_compile, objective) if recorded and recorded_compile else None
        if plain_compile.median and (stood is None or stood >= 1 - max_regression):
            speed = faster(now, plain_compile.median, objective)
            if speed < 1 - max_regression:
                regressions.append(
                    f"the incumbent runs at {speed:.2f}x plain torch.compile ({plain_compile.median:.4g} {unit}), "
                    f"slower by more than --max-regression {max_regression:.0%}"
                    + (f"; it stood at {stood:.2f}x when tuned" if stood is not None else "")
                )
    gain = None
    if challenger is not None and challenger.median is not None and incumbent.median is not None:
        gain = faster(challenger.median, incumbent.median, objective) - 1
    replaced = False
    if challenger is not None and not challenger.failure and len(challenger.values) >= 2:
        # One run is a number, not a measurement: a challenger must have been confirmed.
        if failure or incumbent.median is None:
            replaced = True
        else:
            consistent = all(faster(v, incumbent.median, objective) > 1 for v in challenger.values)
            replaced = gain is not None and gain > min_gain and consistent
    decision = "regression" if regressions else ("improved" if replaced else "unchanged")
    return Decision(decision=decision, replaced=replaced, regressions=regressions, gain=gain)


def faster(a: float, b: float, objective: Objective) -> float:
    """How many times faster `a` is than `b` under the objective (samples/s up, or seconds down)."""
    if objective.direction == "maximize":
        return a / b if b else float("inf")
    return b / a if a else float("inf")


def params_for(space: SearchSpace, config: CompileConfig) -> dict[str, Any] | None:
    """The answers that make `space.suggest` return `config`, or None when the space cannot express it.

    Trials are enqueued by their answers (Optuna parameters), and a space that grew since the
    configuration was found asks more or other questions than its trial answered; so the
    answers are found again by trying them, pinning what maps straight onto a setting.
    """
    wanted = config.to_dict()
    pinned = {
        "dynamic": config.dynamic,
        "scope": config.scope,
        "padding_alignment": config.padding_alignment,
        "fullgraph": config.fullgraph,
        "compile_optimizer": config.compile_optimizer,
    }
    stack: list[dict[str, Any]] = [{}]
    probes = 0
    while stack and probes < _MAX_PROBES:
        probes += 1
        probe = _Probe(stack.pop(), pinned)
        try:
            found = space.suggest(probe)
        except (AutotuneError, _Impossible):
            found = None
        if found is not None and found.to_dict() == wanted:
            return probe.params
        # Try the other answers of every open question, keeping the answers before it.
        for index in reversed(range(len(probe.open))):
            name, choices = probe.open[index]
            before = {n: probe.params[n] for n, _ in probe.open[:index]}
            stack.extend({**probe.fixed, **before, name: choice} for choice in reversed(choices[1:]))
    return None


class _Impossible(Exception):
    """No choice of a question can give the wanted configuration."""


class _Probe:
    """A stand-in for an Optuna trial: fixed answers where given, else the first possible choice."""

    def __init__(self, fixed: dict[str, Any], pinned: Mapping[str, Any]) -> None:
        self.fixed = fixed
        self.pinned = pinned
        self.params: dict[str, Any] = {}
        self.open: list[tuple[str, list[Any]]] = []

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        if name in self.fixed:
            value = self.fixed[name]
        else:
            possible = [c for c in choices if name not in self.pinned or _same(c, self.pinned[name])]
            if not possible:
                raise _Impossible(name)
            value = possible[0]
            if len(possible) > 1:
                self.open.append((name, possible))
        self.params[name] = value
        return value


def _same(a: Any, b: Any) -> bool:
    # 1 == True in Python, but a padding of 1 is not dynamic=True: compare types too.
    return type(a) is type(b) and a == b


def _record_of_trial(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    record = dict(trial.user_attrs)
    record["state"] = {"COMPLETE": "complete", "PRUNED": "pruned"}.get(trial.state.name, "failed")
    record.setdefault("reason", "")
    record.setdefault("message", "")
    return record


def _figures(subject: Subject) -> dict[str, Any]:
    """A baseline's figures for best.yaml: its median run, and every run's throughput."""
    if not subject.values:
        failure = subject.failure or {}
        return {"state": "failed", "reason": failure.get("reason", ""), "runs": []}
    record = subject.median_run()
    return {
        **{k: record[k] for k in BASELINE_FIELDS if k in record},
        "runs": [r["samples_per_second"] for r in subject.runs if r["state"] == "complete"],
    }
