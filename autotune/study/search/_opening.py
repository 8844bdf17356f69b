"""Opening a search's study: created or resumed, checked against the options and environment it was started with."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import warnings
from typing import Any

import optuna

from autotune.errors import SearchError
from autotune.measure import Objectives, parse_pick
from autotune.measure.stats import METHOD
from autotune.runtime import environment
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._options import SearchOptions
from autotune.study.storage import (
    SearchSettings,
    StudyRecord,
    create_study,
    open_storage,
    read_study_record,
    update_study_record,
)

__all__ = ["forget_new_study", "open_search_study"]


def open_search_study(
    options: SearchOptions,
    objectives: Objectives,
    summary: WorkloadSummary,
    model_fingerprint: dict[str, Any],
    space_name: str,
) -> tuple[optuna.Study, bool]:
    """The search's study, created or resumed, with what it was started with recorded; (study, whether it is new).

    A resumed study must have the same objective, model and device, and have been measured
    with the same torch, CUDA and Python (unless a retune reuses it on purpose).
    """
    created = not (options.out_dir / "study.db").exists() if options.storage is None else False
    if objectives.multi:
        # Optuna's pruners judge one objective: a multi-objective study prunes for slowness only.
        directions: dict[str, Any] = {"directions": objectives.directions}
        pruner: optuna.pruners.BasePruner = optuna.pruners.NopPruner()
    else:
        directions, pruner = {"direction": objectives.primary.direction}, _pruner(options)
    heartbeat = options.liveness.storage_kwargs() if options.shared else None
    study = create_study(
        options.name,
        options.storage_object or options.storage_url,
        heartbeat=heartbeat,
        sampler=_sampler(options),
        pruner=pruner,
        **directions,
    )
    record = read_study_record(study)
    resumed = record != StudyRecord()  # a study no search has opened holds nothing: its record is the defaults
    if resumed:
        _check_resumed(options, str(objectives), record)
    settings = SearchSettings(
        sampler=options.sampler_name,
        pruner=options.pruner_name,
        seed=options.seed,
        protocol=options.protocol.to_dict(),
        allow_precision_changes=options.allow_precision_changes,
        storage=options.storage_url if options.storage else "study.db",
    )
    update_study_record(
        study,
        objective=str(objectives),
        # The method its search-time figures are measured with: the first session's.
        method=record.method if record.method is not None else dict(METHOD),
        pick=str(parse_pick(options.pick)),
        model=options.model,
        device=options.device or "",
        workload=summary,
        model_fingerprint=model_fingerprint,
        settings=settings,
        space=space_name,
    )
    return study, created or not resumed


def _check_resumed(options: SearchOptions, objectives: str, record: StudyRecord) -> None:
    """A study started with another objective, model, device or environment is refused, naming what differs."""
    for recorded_value, wanted, flag in (
        (record.objective, objectives, "--objective"),
        (record.model, options.model, "--model"),
        (record.device, options.device, "--device"),
    ):
        if recorded_value and recorded_value != wanted:
            raise SearchError(
                f"study {options.name!r} was started with {flag} {recorded_value}, not {wanted}: its trials would "
                "not compare with new ones; use another --study-name (or --out), or the same setting."
            )
    recorded = record.environment
    compared = [key for key in ("torch", "cuda", "python") if key in recorded]
    changed = environment.differences(recorded, environment.fingerprint("cpu"), compared)
    if changed and not options.reuse_since:
        what = ", ".join(f"{key} {old} there, {new} here" for key, (old, new) in changed.items())
        raise SearchError(
            f"study {options.name!r} was measured in another environment ({what}): its trials would not compare "
            "with new ones. Use another --study-name (or --out) for a new search, or `autotune retune` on its "
            "best.yaml to re-measure it here."
        )


def forget_new_study(options: SearchOptions, study: optuna.Study) -> None:
    """Remove a study a session created when it failed before its first trial: no empty study is left."""
    if study.get_trials(deepcopy=False):
        return
    storage = options.storage_object or open_storage(options.storage_url)
    optuna.delete_study(study_name=study.study_name, storage=storage)
    if options.storage is None and not optuna.get_all_study_summaries(storage):
        (options.out_dir / "study.db").unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            options.out_dir.rmdir()  # only when empty


def _sampler(options: SearchOptions) -> optuna.samplers.BaseSampler:
    if not isinstance(options.sampler, str):
        return options.sampler  # the caller's own object, with its own seed
    seed = _sampler_seed(options)
    if options.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if options.sampler == "bruteforce":
        # Optuna marks the brute-force sampler experimental; the warning says nothing a user can act on.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=seed)
    # The constant liar scores trials still running (a pool's other workers, other hosts) as bad ones, so that
    # trials asked together do not all land on the same promising region.
    return optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=min(10, max(3, options.trials // 3)), constant_liar=True
    )


def _sampler_seed(options: SearchOptions) -> int:
    """--seed; in a shared study mixed with the host and process, or every host would propose the same trials.

    Samplers draw from their own seeded generator, so two hosts with one seed ask for the same
    configurations in the same order: half the budget would go to twins.
    """
    if not options.shared:
        return options.seed
    mixed = hashlib.sha256(f"{options.seed}:{socket.gethostname()}:{os.getpid()}".encode()).digest()
    return int.from_bytes(mixed[:4], "little")


def _pruner(options: SearchOptions) -> optuna.pruners.BasePruner:
    if not isinstance(options.pruner, str):
        return options.pruner
    if options.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=2, max_resource=options.protocol.windows)
    if options.pruner == "none":
        return optuna.pruners.NopPruner()
    # Half the windows of warm-up and three trials to compare with: early windows, and a median of
    # two trials, stopped good trials on a busy machine. A trial measured while the calibration
    # probe said the machine was busy is not judged at all (`Monitor`).
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=max(2, options.protocol.windows // 2))
