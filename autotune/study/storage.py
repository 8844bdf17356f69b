"""Opening an autotune study in any Optuna storage, safely when several processes do it at once.

Errors a user can act on: a storage that cannot be opened or is damaged is named, with
what to do; a study made by something else, or for another workload or objective, is
refused instead of mixed in.
"""

from __future__ import annotations

import time
from typing import Any

import optuna
import sqlalchemy.exc

from autotune.errors import SearchError

__all__ = ["create_study", "load_search_study"]

_ATTEMPTS = 6


def create_study(name: str, storage: str, **kwargs: Any) -> optuna.Study:
    """`optuna.create_study(load_if_exists=True)`, retried when two processes create the same new study at once.

    Two processes opening a new SQLite file race on creating its tables (one sees "table
    already exists" or a duplicate version row); the loser simply opens what the winner made.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    last: Exception | None = None
    for attempt in range(_ATTEMPTS):
        try:
            return optuna.create_study(study_name=name, storage=storage, load_if_exists=True, **kwargs)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            _refuse_damaged(storage, exc)
            last = exc
            time.sleep(0.1 * (attempt + 1))
    raise SearchError(f"cannot open study {name!r} in {storage}: {_first_line(last)}; is another process holding it?")


def load_search_study(storage: str, study_name: str) -> optuna.Study:
    """A study made by `autotune search`, from any Optuna storage; errors list the studies that are there."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise SearchError(f"study {study_name!r} is not in {storage}; studies there: {names}.") from None
    except sqlalchemy.exc.SQLAlchemyError as exc:
        _refuse_damaged(storage, exc)
        raise SearchError(f"cannot read study {study_name!r} from {storage}: {_first_line(exc)}") from None
    if "workload" not in study.user_attrs:
        raise SearchError(
            f"study {study_name!r} in {storage} was not made by `autotune search`: it records no workload."
        )
    return study


def _refuse_damaged(storage: str, exc: Exception) -> None:
    text = str(exc).lower()
    if "malformed" in text or "not a database" in text or "file is encrypted" in text:
        raise SearchError(
            f"{storage} is damaged ({_first_line(exc)}): restore it from a copy, or start a new study "
            "with --study-name (or another --out)."
        ) from None


def _first_line(exc: Exception | None) -> str:
    return str(exc).strip().splitlines()[0][:300] if exc is not None and str(exc).strip() else type(exc).__name__
