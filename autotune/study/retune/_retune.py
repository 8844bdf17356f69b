"""Nightly retuning: re-measure a tuned configuration where it runs today, look for a better one, decide.

`retune(RetuneOptions(path="outputs/<study>/best.yaml"))`:

1. reads best.yaml, its study (the same storage) and its workload (both can be overridden);
2. runs a short warm-started search in the same study, so history accumulates: the
   incumbent and the previous top trials first, then `trials` new ones;
3. measures eager, plain torch.compile, the incumbent and the best challenger of that
   search in one campaign of replicates (`replicates` to `max_replicates`), and compares the
   environment and the model with the ones recorded in best.yaml;
4. decides with `decision.decide` on the paired ratios of those replicates;
5. saves the winner's compile cache, replaces best.yaml, apply_compilation.py and
   compile_cache.bin together (the old ones kept as *.prev.*), appends a line to
   history.jsonl and rewrites trials.csv and report.md.

A regression that no challenger fixes leaves the files as they were, so the next run still sees it.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import ConfigError, RetuneError, SearchError
from autotune.measure import (
    BASELINES,
    Campaign,
    CampaignRules,
    Choice,
    Objective,
    Subject,
    baseline_figures,
    confirmation_table,
    measure,
    metrics,
    record_compile_cache,
)
from autotune.measure.choice import DECISIONS, Decision, decide, recorded_ratios
from autotune.measure.engine import CacheProof, first_windows, run_label
from autotune.measure.format import utc_now
from autotune.measure.stats import method_change
from autotune.runtime import compile_cache, environment, tuned
from autotune.runtime.config import CompileConfig, is_plain_compile
from autotune.study.report import (
    Progress,
    ProgressCallback,
    quiet,
    study_summary,
    trial_rows,
    write_report,
    write_trials_csv,
    written_together,
)
from autotune.study.retune import _publish as publish
from autotune.study.retune._warmstart import WarmStart
from autotune.study.search import CACHES_FOLDER, bundled_spaces, load_space, prepare_workload
from autotune.study.storage import (
    HISTORY_FILE,
    append_history,
    load_search_study,
    read_study_record,
    storage_failures_named,
    update_study_record,
)
from autotune.trial.request import check_device

__all__ = ["DECISIONS", "RetuneOptions", "RetuneResult", "retune"]


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
    """A challenger's median paired ratio to the incumbent must exceed 1 + this to replace it."""
    max_regression: float = 0.10
    """The incumbent regressed when its ratio to a baseline fell by more than this fraction since tuning."""
    replicates: int = 3
    """Replicates of eager, plain compile, incumbent and challenger before the campaign may stop."""
    max_replicates: int = 6
    """Replicates at most, while the intervals do not decide."""
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
        if isinstance(self.replicates, bool) or not isinstance(self.replicates, int) or self.replicates < 1:
            raise RetuneError(f"--replicates {self.replicates!r}: must be an integer >= 1.")
        if not isinstance(self.max_replicates, int) or self.max_replicates < max(self.replicates, 2):
            raise RetuneError(
                f"--max-replicates {self.max_replicates!r}: must be an integer >= --replicates ({self.replicates}) and >= 2 "
                "(a regression or a replacement needs two replicates at least)."
            )
        if not 0 <= self.min_gain < 1:
            raise RetuneError(f"--min-gain {self.min_gain!r}: must be a fraction in [0, 1), e.g. 0.03 for 3%.")
        if not 0 < self.max_regression < 1:
            raise RetuneError(f"--max-regression {self.max_regression!r}: must be a fraction in (0, 1), e.g. 0.1.")
        if self.trial_timeout <= 0:
            raise RetuneError(f"--trial-timeout {self.trial_timeout!r}: must be a positive number of seconds.")
        if self.device is not None:
            check_device(self.device)


@dataclass(kw_only=True)
class RetuneResult:
    """What a retune measured and decided, and where it wrote it."""

    path: Path
    study_name: str
    date: str
    objective: Objective
    decision: Decision
    campaign: Campaign
    environment: dict[str, Any]
    environment_changes: dict[str, tuple[Any, Any]]
    model_changes: dict[str, tuple[Any, Any]]
    compile_cache: dict[str, Any]
    written: bool
    """Whether best.yaml, apply_compilation.py and compile_cache.bin were replaced."""
    notes: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return self.decision.decision == "regression"

    def subject(self, name: str) -> dict[str, Any] | None:
        """One subject's runs and ratios, as history.jsonl records it."""
        if name not in self.campaign.subjects:
            return None
        subject = self.campaign.subjects[name]
        failure = self.campaign.counted_failure(name)
        values = [self.objective.of(r) for r in self.campaign.complete_runs(name)]
        versus = self.campaign.ratio(name, "compile") if name != "compile" else None
        return {
            "config": subject.description,
            "trial": subject.trial,
            "state": "failed" if failure else ("complete" if values else "not measured"),
            "reason": failure.reason if failure else "",
            "message": failure.message[:500] if failure else "",
            "failed_replicates": self.campaign.failure_note(name),
            "runs": [round(v, 4) for v in values],
            "median": round(statistics.median(values), 4) if values else None,
            "vs_compile": versus.to_dict() if versus else None,
            "compile_seconds": [r.compile_seconds for r in self.campaign.complete_runs(name)],
        }

    def to_history(self) -> dict[str, Any]:
        """The history.jsonl line of this run."""
        return {
            "date": self.date,
            "decision": self.decision.decision,
            "replaced": self.decision.replaced,
            "written": self.written,
            "regressions": self.decision.regressions,
            "warnings": list(self.decision.warnings),
            "objective": str(self.objective),
            "unit": self.objective.unit,
            "environment": self.environment,
            "environment_changes": {k: list(v) for k, v in self.environment_changes.items()},
            "model_changes": {k: list(v) for k, v in self.model_changes.items()},
            "incumbent": self.subject("incumbent"),
            "challenger": self.subject("challenger"),
            "gain": round(self.decision.gain, 4) if self.decision.gain is not None else None,
            "baselines": {name: self.subject(name) for name in BASELINES},
            "replicates": self.campaign.replicate_count,
            "noise": self.campaign.noise(),
            "compile_cache": {
                k: self.compile_cache.get(k)
                for k in ("saved", "cold_compile_seconds", "cached_compile_seconds", "note")
                if k in self.compile_cache
            },
            "notes": self.notes,
        }

    def render(self) -> str:
        """A short account for the terminal: the decision first, then the figures."""
        challenger = self.campaign.subjects.get("challenger")
        replacement = f"trial {challenger.trial if challenger else '?'} replaces the incumbent"
        verdict = {
            "unchanged": "unchanged: the incumbent stays",
            "improved": f"improved: {replacement}",
            "regression": "regression: "
            + (
                replacement
                if self.decision.replaced
                else "no challenger replaces the incumbent; the files are left as they were"
            ),
        }[self.decision.decision]
        lines = [f"decision: {verdict}"]
        lines += [f"REGRESSION: {text}" for text in self.decision.regressions]
        lines += [f"WARNING: {text}" for text in self.decision.warnings]
        lines += [
            "",
            f"retune of {self.path} (study {self.study_name!r}, objective {self.objective} in {self.objective.unit})",
        ]
        for what, changes in (("environment", self.environment_changes), ("model", self.model_changes)):
            if changes:
                lines.append(f"{what}: CHANGED since it was tuned:")
                lines += [f"  {k}: {old} -> {new}" for k, (old, new) in changes.items()]
            else:
                lines.append(f"{what}: unchanged since it was tuned")
        lines += ["", confirmation_table(self.campaign), ""]
        if self.decision.gain is not None:
            lines.append(f"challenger vs incumbent: {self.decision.gain:+.1%} (median of paired replicates)")
        lines += [f"note: {text}" for text in self.notes]
        if self.written:
            files = "best.yaml, apply_compilation.py" + (
                " and compile_cache.bin" if self.compile_cache.get("saved") else ""
            )
            lines.append(f"wrote {files} in {self.path.parent} (the previous ones are kept as *.prev.*)")
        if self.compile_cache:
            lines.append(compile_cache.describe(self.compile_cache))
        lines.append(f"history: {self.path.parent / HISTORY_FILE}; report: {self.path.parent / 'report.md'}")
        return "\n".join(lines)


def retune(options: RetuneOptions, progress: ProgressCallback | None = None) -> RetuneResult:
    """Retune the configuration in `options.path`; see the module docstring for every step."""
    return _Retune(options, progress or quiet).run()


class _Retune:
    cache_proof: CacheProof | None = None
    """What the campaign's replicates saved and loaded of the compile cache (None: `--no-compile-cache`)."""

    def __init__(self, options: RetuneOptions, progress: ProgressCallback) -> None:
        self.options = options
        self.progress = progress
        self.path = Path(options.path)
        self.out_dir = self.path.parent
        self.date = utc_now()
        self.notes: list[str] = []
        if publish.recover(self.out_dir):
            self._note(f"finished an interrupted replacement of the files in {self.out_dir} first")
        self.tuned = tuned.read(self.path)
        self.study, self.storage, self.storage_url = _open_study(self.path, self.tuned, options.storage)
        record = read_study_record(self.study)
        self.objective = record.objectives.primary
        self.settings = record.settings
        device = check_device(options.device or self.tuned.study.get("device") or record.device or None)
        self.spec = options.model or self.tuned.workload.spec
        self.prepared = prepare_workload(
            self.spec,
            device=device,
            seed=self.settings.seed,
            protocol=self.settings.run_protocol,
            timeout=options.trial_timeout,
        )
        self.harness, self.model_fingerprint = self.prepared.harness, self.prepared.model_fingerprint
        self.space_name = _space_name(self.path, options.space, self.tuned, self.study)
        # The campaign's replicates save the compile cache and start the leader from it (`CacheProof`).
        self.cache_proof = (
            CacheProof(self.out_dir / CACHES_FOLDER / "compile-cache-proof") if options.compile_cache else None
        )

    def run(self) -> RetuneResult:
        try:
            with storage_failures_named(self.storage_url):
                return self._run()
        finally:
            shutil.rmtree(self.out_dir / CACHES_FOLDER, ignore_errors=True)

    def _run(self) -> RetuneResult:
        challenger = self._challenger()
        campaign, verdict = self._measure(challenger)
        current = dict(campaign.environment or read_study_record(self.study).environment)
        written = not verdict.regressions or verdict.replaced
        shipped, cache = _publish(self, campaign, verdict, current) if written else (self.tuned, {})
        environment_changes, model_changes = self._changes(current)
        result = RetuneResult(
            path=self.path,
            study_name=self.study.study_name,
            date=self.date,
            objective=self.objective,
            decision=verdict,
            campaign=campaign,
            environment=current,
            environment_changes=environment_changes,
            model_changes=model_changes,
            compile_cache=cache,
            written=written,
            notes=self.notes,
        )
        try:
            rows = trial_rows(self.study.get_trials(deepcopy=False), read_study_record(self.study))
            # The history moves in with the table and the report, or not at all: appended to a staged copy, never
            # in place, where a disk that fills up could take the line and refuse the report.
            with written_together(self.out_dir, "history.jsonl, trials.csv and report.md") as staging:
                history = self.out_dir / HISTORY_FILE
                if history.exists():
                    shutil.copy2(history, staging / HISTORY_FILE)
                append_history(staging, result.to_history())
                write_trials_csv(staging, rows)
                write_report(staging, self.study, rows, campaign, shipped, history_from=staging)
        except (OSError, SearchError) as exc:
            files = "best.yaml, apply_compilation.py and compile_cache.bin"
            done = (
                f"{files} were written (the previous ones kept as *.prev.*)" if written else f"{files} are as they were"
            )
            raise RetuneError(f"the retune decided '{verdict.decision}' and {done}; then {exc}") from None
        return result

    def _challenger(self) -> Subject | None:
        """The warm-started short search in the study: its best new configuration, if any."""
        space = self.prepared.space(
            load_space(self.space_name),
            graph_breaks=0,
            allow_precision_changes=self.settings.allow_precision_changes,
        )
        warm = WarmStart(
            study=self.study,
            storage=self.storage,
            storage_url=self.storage_url,
            out_dir=str(self.out_dir),
            tuned=self.tuned,
            harness=self.harness,
            space=space,
            space_name=self.space_name,
            settings=self.settings,
            objective=self.objective,
            trials=self.options.trials,
            top=self.options.top,
            trial_timeout=self.options.trial_timeout,
            date=self.date,
            progress=self.progress,
            note=self._note,
        )
        self.study, challenger = warm.challenger()
        return challenger

    def _subjects(self, challenger: Subject | None) -> list[Subject]:
        """Both baselines, the incumbent (a baseline's runs, when it is one) and the challenger."""
        baseline = _baseline_it_is(self.tuned.config)
        incumbent = Subject(
            name="incumbent",
            config=self.tuned.config,
            created=self.tuned.created,
            trial=self.tuned.metrics.get("trial"),
            same_as=baseline,
            reproduce=True,  # its failure is a regression, a claim a scheduler acts on: only once it is reproduced
        )
        subjects = [*Subject.baselines(), incumbent, *([challenger] if challenger is not None else [])]
        measured = ", ".join(s.name for s in subjects if s.same_as is None)
        self._note(f"measuring {measured}: each alone and cold first, then in replicates of paired windows")
        if baseline is not None:
            self._note(
                f"the incumbent is {'plain torch.compile' if baseline == 'compile' else 'no compilation'}: "
                f"the {baseline} baseline's runs are its own"
            )
        return subjects

    def _measure(self, challenger: Subject | None) -> tuple[Campaign, Decision]:
        """The campaign and what it decides; a regression is measured for every replicate the budget allows."""

        def shown(name: str, index: int, record: Any) -> None:
            self._note(f"{run_label(index)}: {name}: {_shown(record, self.objective)}")

        # The challenger is paired with the incumbent; an incumbent that is a baseline is measured as that baseline's
        # runs (`_subjects`), so that baseline is the subject the others are paired with.
        reference = (_baseline_it_is(self.tuned.config) or "incumbent") if challenger is not None else "compile"
        options = self.options
        campaign = measure(
            self.harness,
            self._subjects(challenger),
            objective=self.objective,
            rules=CampaignRules(
                min_replicates=options.replicates,
                max_replicates=options.max_replicates,
                reference=reference,
                windows=first_windows(self.harness.protocol),
                cold_compiles=self.objective.counts_compile,
            ),
            on_run=shown,
            cache_root=self.out_dir / CACHES_FOLDER,
            cache_proof=self.cache_proof,
        )
        failure = campaign.reproduced_failure("eager")
        if failure is not None:
            raise RetuneError(
                f"the workload {self.spec} does not run eagerly any more, so nothing can be compared: "
                f"{failure.reason if failure else 'not measured'}: {failure.message if failure else ''}"
            )
        recorded = recorded_ratios(self.tuned.metrics)
        changed = method_change(self.tuned.metrics)
        if changed:
            # Ratios of two methods are not comparable: the incumbent's figures now are its figures under this
            # method, and nothing recorded under the other can make them a regression.
            self._note(f"{changed}: the incumbent was measured again under it, and no recorded ratio is compared")
            recorded = {}
        verdict = decide(campaign, recorded=recorded, min_gain=options.min_gain, max_regression=options.max_regression)
        slower = bool(verdict.regressions) and campaign.reproduced_failure("incumbent") is None
        failed_last = campaign.reproduced_failure("incumbent") is None and campaign.failed_replicates("incumbent") == [
            campaign.replicate_count - 1
        ]
        if (slower or failed_last) and campaign.replicate_count < options.max_replicates:
            # A regression is a claim a scheduler acts on: before making it, measure every round the budget allows;
            # and a failure in the last replicate is run again, to see whether it happens again.
            why = "failed once, in its last replicate" if failed_last else "looks slower"
            self._note(
                f"the incumbent {why} after {campaign.replicate_count} replicate(s); measuring up to "
                f"{options.max_replicates} to be sure"
            )
            campaign = measure(
                self.harness,
                [],
                objective=self.objective,
                rules=CampaignRules(
                    min_replicates=options.max_replicates,
                    max_replicates=options.max_replicates,
                    reference=reference,
                    windows=first_windows(self.harness.protocol),
                    cold_compiles=self.objective.counts_compile,
                ),
                campaign=campaign,
                on_run=shown,
                cache_root=self.out_dir / CACHES_FOLDER,
                cache_proof=self.cache_proof,
            )
            verdict = decide(
                campaign, recorded=recorded, min_gain=options.min_gain, max_regression=options.max_regression
            )
        return campaign, verdict

    def _changes(self, current: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """What changed since tuning: the environment (torch, driver, device...) and the model."""
        environment_changes = (
            environment.differences(self.tuned.environment, current, environment.RETUNE_KEYS) if current else {}
        )
        recorded_model = self.tuned.environment.get("model")
        model_changes = (
            environment.differences(recorded_model, self.model_fingerprint)
            if isinstance(recorded_model, Mapping)
            else {}
        )
        return environment_changes, model_changes

    def _note(self, message: str) -> None:
        self.progress(Progress(0, 0, None, "", None, message))


def _baseline_it_is(config: CompileConfig) -> str | None:
    """'compile' for plain torch.compile, 'eager' for no compilation, else None: a baseline is measured once."""
    if is_plain_compile(config):
        return "compile"
    if config == CompileConfig(scope="none"):
        return "eager"
    return None


def _publish(
    run: _Retune, campaign: Campaign, verdict: Decision, current: dict[str, Any]
) -> tuple[tuned.TunedConfig, dict[str, Any]]:
    """The winner's compile cache, then best.yaml, apply_compilation.py and compile_cache.bin as one set."""
    name = "challenger" if verdict.replaced else "incumbent"
    subject = campaign.subjects[name]
    assert subject.config is not None
    exported = {"compile": "plain torch.compile", "eager": "no compilation"}.get(subject.same_as or "")
    if exported is None:
        exported = f"trial {subject.trial}" if subject.trial is not None else subject.description
    choice = Choice(
        subject=name,
        exported=exported,
        config=subject.config,
        trial=subject.trial,
        verdict=f"retune {run.date}: {verdict.decision}"
        + ("; the challenger replaced the incumbent" if verdict.replaced else ""),
    )
    cache: dict[str, Any] = {}
    staged = None
    if run.options.compile_cache and subject.config.scope != "none":
        ran = subject.same_as or name
        proven = run.cache_proof is not None and ran in run.cache_proof.loaded
        run._note(
            "compile cache: " + ("from the replicates" if proven else "saved from the measured cache, then loaded")
        )
        try:
            cache, staged = record_compile_cache(
                run.harness,
                subject.config,
                subject.created,
                run.out_dir,
                warm_from=campaign.subjects[ran].cache_dir,
                cold_seconds=campaign.compile_seconds(name),
                proof=run.cache_proof,
                subject=ran,
            )
        except ConfigError as exc:
            cache = {"saved": False, "note": str(exc)}
        run._note(compile_cache.describe(cache))
    new = tuned.TunedConfig(
        workload=run.prepared.summary,
        config=subject.config,
        created=subject.created or run.date,
        metrics=metrics(campaign, choice, extra={"retuned": run.date}),
        baselines={n: baseline_figures(campaign, n) for n in BASELINES},
        environment={**current, "model": run.model_fingerprint},
        study={**study_summary(run.study), "retuned": run.date},
        compile_cache=cache,
    )
    publish.replace_together(
        run.out_dir,
        {"compile_cache.bin": staged, "apply_compilation.py": new.source, "best.yaml": new.to_yaml()},
        commit="best.yaml",
    )
    # The study records where the files were measured; its confirmation stays the search's, so `autotune export`
    # rebuilds the search's choice, and best.yaml is the record of a retune's (docs/retune.md says so).
    update_study_record(run.study, environment=current, model_fingerprint=run.model_fingerprint)
    return new, cache


def _open_study(path: Path, recorded: tuned.TunedConfig, storage: str | None) -> tuple[optuna.Study, str | None, str]:
    """The study best.yaml names: (study, the storage as best.yaml records it, its URL)."""
    name = recorded.study.get("name")
    if not isinstance(name, str) or not name:
        raise RetuneError(f"{path}: study.name is missing, so there is no study to retune; search again.")
    storage = storage or str(recorded.study.get("storage") or "study.db")
    url = storage
    if storage == "study.db":
        database = path.parent / "study.db"
        if not database.is_file():
            raise RetuneError(
                f"{path} records its study in study.db beside it, but {database} does not exist; "
                "keep the whole outputs folder, or pass --storage URL."
            )
        url = f"sqlite:///{database.resolve()}"
    try:
        study = load_search_study(url, name)
    except SearchError as exc:
        raise RetuneError(str(exc)) from None
    # None: the search's own default, study.db beside best.yaml, so best.yaml keeps saying 'study.db'.
    return study, None if storage == "study.db" else storage, url


def _space_name(path: Path, option: str | None, recorded: tuned.TunedConfig, study: optuna.Study) -> str:
    """The space of the new trials: --space, or the study's own when it is a bundled one."""
    if option:
        return option
    name = str(recorded.study.get("space") or read_study_record(study).space)
    if name in bundled_spaces():
        return name
    raise RetuneError(
        f"{path} was tuned on the search space {name!r}, which is not a bundled one; "
        f"pass --space PATH (bundled: {sorted(bundled_spaces())})."
    )


def _shown(record: Any, objective: Objective) -> str:
    if record.complete:
        return f"{objective.of(record):.4g} {objective.unit}" + (f" [noisy: {record.noisy}]" if record.noisy else "")
    return f"{record.state} ({record.reason}: {record.message[:200]})"
