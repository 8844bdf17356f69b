"""Where each subject starts: a cache folder of its own, which its first run (alone and cold) fills and its replicates
start from warm; and the cold compiles before a replicate, in empty folders, that time compiling."""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from autotune.measure.engine._callbacks import COLD_COMPILE, RunCallback
from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._harness import Harness
from autotune.measure.engine._lab import Lab
from autotune.measure.engine._proof import path_name
from autotune.trial.request import TrialRequest

__all__ = ["cache_folder", "cold_compiles", "first_runs", "has_warm_cache", "warm_requests"]


@contextlib.contextmanager
def cache_folder(given: str | Path | None) -> Iterator[Path]:
    """The folder the subjects' cache folders are made in: `given`, kept, or a temporary one removed at the end."""
    if given is not None:
        Path(given).mkdir(parents=True, exist_ok=True)
        yield Path(given)
        return
    folder = Path(tempfile.mkdtemp(prefix="autotune-caches-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def first_runs(
    harness: Harness, campaign: Campaign, folders: dict[str, str], on_run: RunCallback | None, lab: Lab
) -> None:
    """Each subject without a first run: alone, cold, in its empty folder; compile time, accuracy, one stream pass."""
    for name in campaign.measured():
        subject = campaign.subjects[name]
        if name in campaign.cold and (subject.config is None or has_warm_cache(folders[name])):
            continue  # its first run was made, and filled the folder its replicates start from
        request = harness.request(subject.config, created=subject.created, cache_dir=folders[name])
        run = lab.first(request)
        campaign.environment = campaign.environment or dict(run.environment)
        record = run.record()
        campaign.cold[name] = record
        if on_run:
            on_run(name, -1, record)


def warm_requests(harness: Harness, campaign: Campaign, folders: dict[str, str]) -> dict[str, TrialRequest]:
    """Each measured subject's request for its replicates: the same code, started from its warm folder."""
    requests: dict[str, TrialRequest] = {}
    for name in campaign.measured():
        subject = campaign.subjects[name]
        request = harness.request(subject.config, created=subject.created, cache_dir=folders[name])
        # The first run checked the configuration against eager; the same code needs no second check. A warm run
        # settles in one window that compiles nothing: its windows are measured beside the others, paired, and a
        # second settle window (half a second a subject, every replicate) would tell the pairing nothing.
        protocol = {**request.protocol, "check_accuracy": False, "settle_windows": 1}
        requests[name] = replace(request, protocol=protocol)
    return requests


def cold_compiles(
    harness: Harness, campaign: Campaign, root: Path, rng: random.Random, lab: Lab, on_run: RunCallback | None
) -> float:
    """Each configuration the next replicate runs, compiled once more alone and cold in an empty folder, in a random
    order (drift over the minutes lands on no subject in particular): its compile time for that replicate.

    The run compiles, warms up on the fixed batches and stops after one window: no accuracy check (the first run
    made it, and its time is never part of the compile time) and no fresh stream. Eager compiles nothing and is not
    run. A compile that fails leaves no figure for that replicate (None). Returns the seconds they took.
    """
    index = campaign.replicate_count
    names = [n for n in campaign.racing() if campaign.subjects[n].config is not None]
    rng.shuffle(names)
    started = lab.clock()
    for name in names:
        subject = campaign.subjects[name]
        folder = Path(tempfile.mkdtemp(prefix=f"cold-{path_name(name)}-", dir=root))
        try:
            request = harness.request(subject.config, created=subject.created, cache_dir=str(folder))
            protocol = {**request.protocol, "check_accuracy": False, "windows": 1, "settle_windows": 1}
            record = lab.first(replace(request, protocol={**protocol, "fresh_batches": 0})).record()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        column = campaign.compiles.setdefault(name, [])
        column.extend([None] * (index - len(column)))
        column.append(record.compile_seconds if record.complete else None)
        if on_run:
            on_run(name, COLD_COMPILE - index, record)
    return lab.clock() - started


def has_warm_cache(folder: str) -> bool:
    """Whether a subject's cache folder holds what a first run leaves (Inductor's caches)."""
    return any((Path(folder) / "inductor").glob("*"))
