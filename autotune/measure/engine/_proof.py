"""The compile cache proven inside a campaign's replicates, not in two runs of its own after them.

A search ships the winner's compile artifacts (`compile_cache.bin`) and says how long compiling
takes with them loaded. That proof needs a process that saves the artifacts of the code that was
measured, and a fresh process that starts from the saved file alone. A confirmation starts such
processes anyway: every replicate starts each subject afresh from its own warm cache folder. So:

* in the first replicate it runs, each configuration's process saves its artifacts as it ends,
  after its windows (a fraction of a second for the toy's 2.5 MB), into `folder`;
* in the second, the leader's process starts from an empty cache folder with its saved file
  loaded: its compile and warm-up time is the cached compile time, and its windows count like
  any replicate's, since the file holds the same compiled code as its folder.

Only the leader loads: a process started from the file alone compiles for longer than one warm
from its folder (19.2 s against 3.6 s for the toy's winner on a 2-core CPU), and one such start
costs a little less than the separate saving and loading runs it replaces (19 s on the toy; on a
GPU, where a warm start from the file is closer to one from the folder, more). Whatever the campaign
then exports, its file is saved; only a winner that was not the leader after the first replicate
still needs a run with its file loaded (`autotune.measure.tasks.record_compile_cache`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from autotune.trial.recorded import RECORDED_FILE
from autotune.trial.records import CacheLoaded, CacheSaved
from autotune.trial.request import TrialRequest, TrialRun

__all__ = ["CacheProof", "Loaded", "Saved"]


@dataclass(frozen=True)
class Saved:
    """A configuration's artifacts, saved by its process of a replicate."""

    path: Path
    record: CacheSaved
    replicate: int
    """The campaign's replicate (from 1) whose process saved them."""


@dataclass(frozen=True)
class Loaded:
    """A process of a replicate that started from a saved file alone."""

    record: CacheLoaded
    compile_seconds: float
    """Its compile and warm-up, the load included: what a user's first compile costs with the file."""
    replicate: int


@dataclass
class CacheProof:
    """What a campaign's replicates saved and loaded; the engine fills it (`measure(..., cache_proof=)`)."""

    folder: Path
    """Where the saved files are written; the caller moves the one it ships and removes the folder."""
    saved: dict[str, Saved] = field(default_factory=dict)
    loaded: dict[str, Loaded] = field(default_factory=dict)
    replicates: int = 0
    """Replicates of this campaign run with the proof so far."""
    _scratch: list[Path] = field(default_factory=list)

    def requests(
        self, requests: Mapping[str, TrialRequest], leader: str | None, configured: set[str]
    ) -> dict[str, TrialRequest]:
        """The next replicate's requests: the first saves every configuration's artifacts, the second starts
        `leader` from its saved file in an empty cache folder; later ones are left as they are."""
        asked = dict(requests)
        if self.replicates == 0:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name in asked.keys() & configured:
                target = self.folder / f"{path_name(name)}.bin"
                asked[name] = replace(asked[name], save_cache_path=str(target))
        elif self.replicates == 1 and leader in asked and leader in self.saved:
            empty = Path(tempfile.mkdtemp(prefix=f"loaded-{path_name(leader)}-", dir=self.folder))
            self._scratch.append(empty)
            # What eager computed, as the configuration's first run recorded it: the loaded run checks its first
            # steps against it, as every replicate's run does.
            recorded = Path(asked[leader].cache_dir or "") / RECORDED_FILE
            if asked[leader].cache_dir and recorded.exists():
                shutil.copy2(recorded, empty / RECORDED_FILE)
            asked[leader] = replace(asked[leader], cache_dir=str(empty), load_cache_path=str(self.saved[leader].path))
        return asked

    def take(self, requests: Mapping[str, TrialRequest], runs: Mapping[str, TrialRun], replicate: int) -> None:
        """Note what the replicate's processes saved and loaded; `replicate`: the campaign's count, from 1."""
        for name, request in requests.items():
            run = runs.get(name)
            if run is None or run.state != "complete":
                continue
            if request.save_cache_path and run.cache_saved is not None and run.cache_saved.saved:
                self.saved[name] = Saved(Path(request.save_cache_path), run.cache_saved, replicate)
            loaded = run.cache_loaded
            if request.load_cache_path and loaded is not None and loaded.loaded and run.compiled is not None:
                self.loaded[name] = Loaded(loaded, run.compiled.compile_seconds, replicate)
        self.replicates += 1
        for folder in self._scratch:
            shutil.rmtree(folder, ignore_errors=True)
        self._scratch.clear()

    def forget(self, replicate: int) -> None:
        """Take back what the campaign's `replicate` (from 1) saved and loaded: it was set aside, measured on a busy
        machine, and the replicate that runs in its place saves or loads again."""
        self.saved = {name: saved for name, saved in self.saved.items() if saved.replicate != replicate}
        self.loaded = {name: loaded for name, loaded in self.loaded.items() if loaded.replicate != replicate}
        self.replicates = max(self.replicates - 1, 0)


def path_name(name: str) -> str:
    """`name` as a file or folder name: anything but letters, digits and '-_.' becomes '-'."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
