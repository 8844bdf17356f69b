"""The studies in an output folder or a storage, one row each: what was tuned, where, how far, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import optuna
import sqlalchemy

from autotune.errors import AutotuneError, RecordError, SearchError
from autotune.runtime.limits import printable
from autotune.runtime.tuned import read
from autotune.study.storage import check_storage_url, open_storage, read_study_record, shown

__all__ = ["StudyRow", "studies_in", "studies_in_storage"]


@dataclass(frozen=True)
class StudyRow:
    """One study, as `autotune studies` lists it."""

    name: str
    storage: str
    model: str
    device: str
    trials: dict[str, int]
    """How many trials ended in each state (complete, pruned, fail, running)."""
    verdict: str
    """The verdict in the best.yaml beside the study (shortened to 160 characters), or what stands instead."""


def studies_in(folder: Path) -> list[StudyRow]:
    """The studies of every study.db in `folder` and the folders in it (as `autotune search --out` leaves them)."""
    if not folder.is_dir():
        raise SearchError(f"{folder}: no such folder; give the folder a search wrote into (default: outputs).")
    databases = sorted({*folder.glob("study.db"), *folder.glob("*/study.db")})
    rows: list[StudyRow] = []
    for database in databases:
        rows += studies_in_storage(f"sqlite:///{database}", best=database.parent / "best.yaml")
    return rows


def studies_in_storage(storage: str, best: Path | None = None) -> list[StudyRow]:
    """The studies in one Optuna storage; the verdict comes from `best` (a best.yaml) when it names the study's model."""
    check_storage_url(storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        rdb = open_storage(storage)
        rows = []
        for summary in optuna.get_all_study_summaries(rdb, include_best_trial=False):
            study = optuna.load_study(study_name=summary.study_name, storage=rdb)
            counts: dict[str, int] = {}
            for trial in study.get_trials(deepcopy=False):
                counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
            try:
                record = read_study_record(study)
            except RecordError as exc:  # one study a later autotune wrote does not hide the others
                rows.append(StudyRow(summary.study_name, shown(storage), "?", "?", counts, printable(str(exc))[:160]))
                continue
            model = record.model or "?"
            rows.append(
                StudyRow(
                    name=summary.study_name,
                    storage=shown(storage),
                    model=model,
                    device=record.device or "?",
                    trials=counts,
                    verdict=_verdict(best, model),
                )
            )
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise SearchError(f"cannot read the studies in {shown(storage)}: {str(exc).splitlines()[0]}") from None
    return rows


def _verdict(best: Path | None, model: str) -> str:
    if best is None or not best.is_file():
        return "not exported"
    try:
        tuned = read(best)
    except AutotuneError as exc:
        return f"best.yaml unreadable: {printable(str(exc))[:80]}"
    if tuned.workload.spec != model:
        return "not exported (the best.yaml beside it is another model's)"
    verdict = printable(str(tuned.metrics.get("verdict") or "no verdict recorded"))
    return verdict if len(verdict) <= 160 else verdict[:159] + "…"
