"""Opening an autotune study in any Optuna storage, safely when several processes do it at once.

Errors a user can act on: a storage that cannot be opened or is damaged is named, with
what to do; a study made by something else, or for another workload or objective, is
refused instead of mixed in; a PostgreSQL URL without its driver says which extra to install.

A plain `postgresql://` URL is opened with psycopg 3 (the `autotune[postgres]` extra),
whichever SQLAlchemy is installed: SQLAlchemy 2.0 would otherwise look for psycopg2.

A `journal:///PATH` URL is a file that several hosts share without a database server (a
cluster's shared file system): Optuna's `JournalStorage` with its file backend, whose lock
is a symbolic link that works over NFS. Optuna keeps no heartbeat there;
`autotune.study.storage._heartbeat` keeps its own.
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
from optuna.storages.journal import JournalFileBackend

from autotune.errors import SearchError
from autotune.study.storage._study_record import read_study_record

__all__ = [
    "JOURNAL",
    "check_storage_url",
    "create_study",
    "discard_study",
    "journal_liveness",
    "journal_path",
    "load_search_study",
    "open_storage",
    "opened_in",
    "shown",
    "storage_failures_named",
]

_ATTEMPTS = 6
_OPENED: weakref.WeakKeyDictionary[optuna.Study, optuna.storages.BaseStorage] = weakref.WeakKeyDictionary()
"""Each study opened here, with the storage it was opened in: Optuna keeps a study's storage to itself."""
_JOURNAL_BEATS: weakref.WeakKeyDictionary[optuna.storages.JournalStorage, tuple[int, int]] = weakref.WeakKeyDictionary()
"""Each journal storage opened for a shared search, with its trials' heartbeat interval and grace period (seconds)."""
JOURNAL = "journal:"
"""The scheme of a journal file's URL: journal:///PATH (absolute) or journal:PATH (relative)."""
IDLE_IN_TRANSACTION_SECONDS = 30
"""A PostgreSQL session left inside a transaction this long is ended by the server, and its locks with it."""
_POSTGRES = ("postgresql", "postgres")
"""URL schemes that name PostgreSQL without a driver; psycopg 3 is the one the extra installs."""


def journal_path(url: str) -> Path | None:
    """The file of a journal URL (journal:///PATH, or journal:PATH relative to the working folder); None for a
    database URL. SearchError when it names no file, or one in a folder that does not exist."""
    if not url.startswith(JOURNAL):
        return None
    rest = url.removeprefix(JOURNAL)
    path = Path(rest[2:] if rest.startswith("//") else rest).expanduser()
    if not str(path) or str(path) == "." or rest.endswith("/"):
        raise SearchError(f"--storage {url!r} names no file: a journal is journal:///PATH/study.journal.")
    if not path.parent.is_dir():
        raise SearchError(
            f"--storage {url!r}: the folder {path.parent.resolve()} does not exist; the journal file is created in it, "
            "not the folder (on a cluster, a folder of the shared file system every host sees)."
        )
    return path


def journal_liveness(storage: optuna.storages.BaseStorage | None) -> tuple[int, int] | None:
    """A journal storage's heartbeat interval and grace period (seconds) when it was opened for a shared search;
    None for any other storage."""
    if not isinstance(storage, optuna.storages.JournalStorage):
        return None
    return _JOURNAL_BEATS.get(storage)


def check_storage_url(url: str) -> sqlalchemy.engine.URL | Path:
    """The parsed database URL, or a journal's file; SearchError naming the value and the forms allowed when it is
    neither."""
    journal = journal_path(url)
    if journal is not None:
        return journal
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise SearchError(
            f"--storage {url!r} is not a storage URL: a file is sqlite:///PATH (here: "
            f"sqlite:///{Path(url).expanduser().resolve()}), a server postgresql://USER@HOST/DB, a file several "
            "hosts share journal:///PATH."
        ) from None
    try:
        parsed.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError:
        if parsed.get_backend_name() not in _POSTGRES:
            raise SearchError(
                f"--storage {shown(url)}: {parsed.drivername!r} is no database this can open; use sqlite:///PATH, "
                "postgresql://USER@HOST/DB or journal:///PATH."
            ) from None
    return parsed


def open_storage(url: str, **heartbeat: Any) -> optuna.storages.BaseStorage:
    """An Optuna storage for `url`; `heartbeat` are RDBStorage's heartbeat arguments, for a shared study (for a
    journal, its interval and grace period are kept for `autotune.study.storage._heartbeat`).

    Connections are checked before use, since a database server may have closed an idle one
    during a long trial; a missing PostgreSQL driver is named with the extra that installs it.
    On PostgreSQL the server ends a session that stays inside a transaction for
    IDLE_IN_TRANSACTION_SECONDS: a host that hangs or loses its network in the middle of a write
    would otherwise hold the trial's row locked, and every other search that fails its stale
    trial, or writes that row, would wait on it until the connection is found dead (hours).
    """
    journal = check_storage_url(url)
    if isinstance(journal, Path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
        if heartbeat.get("heartbeat_interval"):
            _JOURNAL_BEATS[storage] = (int(heartbeat["heartbeat_interval"]), int(heartbeat["grace_period"]))
        return storage
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


def opened_in(study: optuna.Study) -> optuna.storages.BaseStorage | None:
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
    storage: str | optuna.storages.BaseStorage,
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
    url = storage if isinstance(storage, str) else str(getattr(storage, "url", type(storage).__name__))
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
    if isinstance(parsed, Path):
        if not parsed.is_file():
            raise SearchError(f"{storage}: there is no file {parsed}; give the journal a search wrote.")
    else:
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
    if isinstance(parsed, Path):
        sqlite = False
        if not parsed.is_file():
            return None
    else:
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
    except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError, OSError) as exc:
        if isinstance(exc, OSError) and not storage.startswith(JOURNAL):
            raise  # a journal is the only storage read as a file here; any other OSError is not the storage's
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
