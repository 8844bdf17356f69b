"""Opening an autotune study in any Optuna storage, safely when several processes do it at once.

Errors a user can act on: a storage that cannot be opened or is damaged is named, with
what to do; a study made by something else, or for another workload or objective, is
refused instead of mixed in; a PostgreSQL URL without its driver says which extra to install.

A plain `postgresql://` URL is opened with psycopg 3 (the `autotune[postgres]` extra),
whichever SQLAlchemy is installed: SQLAlchemy 2.0 would otherwise look for psycopg2.
"""

from __future__ import annotations

import contextlib
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.engine
import sqlalchemy.exc

from autotune.errors import SearchError
from autotune.study.storage._study_record import read_study_record

__all__ = [
    "check_storage_url",
    "create_study",
    "discard_study",
    "load_search_study",
    "open_storage",
    "opened_in",
    "shown",
    "storage_failures_named",
]

_ATTEMPTS = 6
_OPENED: weakref.WeakKeyDictionary[optuna.Study, optuna.storages.RDBStorage] = weakref.WeakKeyDictionary()
"""Each study opened here, with the RDB storage it was opened in: Optuna keeps a study's storage to itself."""
IDLE_IN_TRANSACTION_SECONDS = 30
"""A PostgreSQL session left inside a transaction this long is ended by the server, and its locks with it."""
_POSTGRES = ("postgresql", "postgres")
"""URL schemes that name PostgreSQL without a driver; psycopg 3 is the one the extra installs."""


def check_storage_url(url: str) -> sqlalchemy.engine.URL:
    """The parsed database URL; SearchError naming the value and the forms allowed when it is none."""
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise SearchError(
            f"--storage {url!r} is not a database URL: a file is sqlite:///PATH (here: "
            f"sqlite:///{Path(url).expanduser().resolve()}), a server postgresql://USER@HOST/DB."
        ) from None
    try:
        parsed.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError:
        if parsed.get_backend_name() not in _POSTGRES:
            raise SearchError(
                f"--storage {shown(url)}: {parsed.drivername!r} is no database this can open; use sqlite:///PATH "
                "or postgresql://USER@HOST/DB."
            ) from None
    return parsed


def open_storage(url: str, **heartbeat: Any) -> optuna.storages.RDBStorage:
    """An Optuna RDB storage for `url`; `heartbeat` are RDBStorage's heartbeat arguments, for a shared study.

    Connections are checked before use, since a database server may have closed an idle one
    during a long trial; a missing PostgreSQL driver is named with the extra that installs it.
    On PostgreSQL the server ends a session that stays inside a transaction for
    IDLE_IN_TRANSACTION_SECONDS: a host that hangs or loses its network in the middle of a write
    would otherwise hold the trial's row locked, and every other search that fails its stale
    trial, or writes that row, would wait on it until the connection is found dead (hours).
    """
    check_storage_url(url)
    engine_kwargs: dict[str, Any] = {} if url.startswith("sqlite") else {"pool_pre_ping": True}
    if url.startswith(_POSTGRES):
        engine_kwargs["connect_args"] = {"options": _server_options(url)}
    try:
        with warnings.catch_warnings():
            # Optuna calls its heartbeat experimental; the warning says nothing a user can act on.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(_with_driver(url), engine_kwargs=engine_kwargs, **heartbeat)
    except ImportError as exc:
        if not url.startswith(_POSTGRES):
            raise
        raise SearchError(
            f"{shown(url)} needs a PostgreSQL driver, which is not installed ({exc}); "
            "install it with `pip install autotune[postgres]`."
        ) from None


def opened_in(study: optuna.Study) -> optuna.storages.RDBStorage | None:
    """The storage `study` was opened in by `create_study` or `load_search_study`; None for one opened elsewhere."""
    return _OPENED.get(study)


def shown(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url


def _server_options(url: str) -> str:
    """The session options for a PostgreSQL URL: the URL's own `options`, then the idle-in-transaction limit."""
    try:
        given = sqlalchemy.engine.make_url(url).query.get("options") or ""
    except sqlalchemy.exc.ArgumentError:
        given = ""
    ours = f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_SECONDS * 1000}"
    given = given if isinstance(given, str) else " ".join(given)
    return f"{given} {ours}".strip()


def _with_driver(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return f"postgresql+psycopg://{rest}" if sep and scheme in _POSTGRES else url


def create_study(
    name: str,
    storage: str | optuna.storages.RDBStorage,
    *,
    heartbeat: dict[str, Any] | None = None,
    **kwargs: Any,
) -> optuna.Study:
    """`optuna.create_study(load_if_exists=True)`, retried when two processes create the same new study at once.

    `storage`: a database URL, or a caller's RDBStorage object, used as it is (`heartbeat` then does not apply).
    `heartbeat`: RDBStorage's heartbeat arguments (see `autotune.study.storage._heartbeat`), or None.

    Two processes opening a new SQLite file race on creating its tables (one sees "table
    already exists" or a duplicate version row); the loser simply opens what the winner made.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    heartbeat = heartbeat or {}
    last: Exception | None = None
    url = storage if isinstance(storage, str) else str(storage.url)
    for attempt in range(_ATTEMPTS):
        try:
            rdb = open_storage(storage, **heartbeat) if isinstance(storage, str) else storage
            study = optuna.create_study(study_name=name, storage=rdb, load_if_exists=True, **kwargs)
            _OPENED[study] = rdb
            return study
        except sqlalchemy.exc.SQLAlchemyError as exc:
            _refuse_damaged(url, exc)
            last = exc
            time.sleep(0.1 * (attempt + 1))
    raise SearchError(
        f"cannot open study {name!r} in {shown(url)}: {_first_line(last)}; is another process holding it?"
    )


def load_search_study(storage: str, study_name: str) -> optuna.Study:
    """A study made by `autotune search`, from any Optuna storage; errors list the studies that are there."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parsed = check_storage_url(storage)
    database = parsed.database or ""
    if parsed.get_backend_name() == "sqlite" and database not in ("", ":memory:") and not Path(database).is_file():
        # SQLite would create an empty database there: a typo must not leave a file behind.
        raise SearchError(f"{shown(storage)}: there is no file {database}; give the study.db a search made.")
    try:
        rdb = open_storage(storage)
        study = optuna.load_study(study_name=study_name, storage=rdb)
        _OPENED[study] = rdb
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(rdb)]
        raise SearchError(f"study {study_name!r} is not in {shown(storage)}; studies there: {names}.") from None
    except sqlalchemy.exc.SQLAlchemyError as exc:
        _refuse_damaged(storage, exc)
        raise SearchError(f"cannot read study {study_name!r} from {shown(storage)}: {_first_line(exc)}") from None
    if read_study_record(study).workload is None:
        raise SearchError(
            f"study {study_name!r} in {shown(storage)} was not made by `autotune search`: it records no workload."
        )
    return study


def discard_study(storage: str, name: str) -> int | None:
    """Delete study `name` from `storage`, so that a search starts it afresh; how many trials it held, or None where
    there was no such study (an SQLite file that does not exist is not created).

    In a storage several hosts share, a study with a running trial is refused: another search may be working on it.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parsed = check_storage_url(storage)
    database = parsed.database or ""
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite and database not in ("", ":memory:") and not Path(database).is_file():
        return None
    rdb = open_storage(storage)
    try:
        study = optuna.load_study(study_name=name, storage=rdb)
    except KeyError:
        return None
    trials = study.get_trials(deepcopy=False)
    running = [t.number for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    if running and not sqlite:
        raise SearchError(
            f"--new: study {name!r} in {shown(storage)} has running trial(s) {running}: another search may be "
            "working on it. Stop it first, or start a new study under another --study-name."
        )
    optuna.delete_study(study_name=name, storage=rdb)
    return len(trials)


@contextlib.contextmanager
def storage_failures_named(storage: str) -> Iterator[None]:
    """Inside the block, a storage that fails (a database server gone, a file damaged or removed) raises SearchError
    naming it and why, instead of Optuna's or SQLAlchemy's own exception.

    Optuna wraps what went wrong in a message that blames the data ("invalid data in the commit"); the driver's
    own words, which it keeps as the cause, say what happened. What was measured before the failure stays in the
    storage, and the same command resumes from it once the storage is back.
    """
    try:
        yield
    except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        _refuse_damaged(storage, cause)
        raise SearchError(
            f"the study storage {shown(storage)} failed: {_first_line(cause)}. The trials finished before it are "
            "kept there; run the same command again once it is back."
        ) from None


def _refuse_damaged(storage: str, exc: Exception) -> None:
    text = str(exc).lower()
    if "malformed" in text or "not a database" in text or "file is encrypted" in text:
        raise SearchError(
            f"{shown(storage)} is damaged ({_first_line(exc)}): restore it from a copy, or start a new study "
            "with --study-name (or another --out)."
        ) from None


def _first_line(exc: Exception | None) -> str:
    return str(exc).strip().splitlines()[0][:300] if exc is not None and str(exc).strip() else type(exc).__name__
