"""What `autotune search` takes, checked: one field per flag, each with what it does."""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from autotune.errors import ConfigError, SearchError
from autotune.measure import DEFAULT_PICK, CampaignRules, Objectives, parse_pick
from autotune.runtime.device import Device, parse_device
from autotune.study.search._space_file import load_space
from autotune.study.storage import Liveness, check_storage_url
from autotune.trial.devices import default_workers, refuse_shared_exclusive
from autotune.trial.request import RunProtocol, check_device

__all__ = ["PRUNERS", "SAMPLERS", "SearchOptions", "default_study_name"]

SAMPLERS = ("tpe", "random", "bruteforce")
PRUNERS = ("median", "hyperband", "none")


@dataclass(kw_only=True)
class SearchOptions:
    """Everything `autotune search` takes; the CLI flags map one to one."""

    model: str
    """The workload target, "pkg.mod:attr"."""
    space: str = "default"
    """A bundled search space's name, or a YAML file."""
    trials: int = 20
    """Trials in the study, resumed ones included."""
    timeout: float | None = None
    """Stop starting new trials after this many seconds."""
    time_budget: float | None = None
    """The whole search, its confirmation included, in about this many seconds: no trial starts that would leave
    the confirmation too little time, and the confirmation adds no replicate past it (it always runs `replicates`)."""
    trial_timeout: float = 900.0
    """Kill a run's whole process group after this many seconds."""
    device: str | None = None
    """cpu, cuda or cuda:N (default: cuda when available); several CUDA devices as 'cuda:0,cuda:1', one worker each.
    After validation, the first device: the baselines, the confirmation and the doctor run there."""
    workers: int | None = None
    """Trials run at once (default: on a GPU host, as many per GPU as it compiles at once with its share of the
    cores, `default_workers`; one per CPU device); more workers than devices share a device, compiling side by
    side and measuring one at a time."""
    devices: list[str] = field(default_factory=list)
    """Every device trials run on (filled from `device`)."""
    workers_chosen: str = ""
    """Why a search with no --workers runs the workers it does, in words; '' for one per device."""
    out: str | None = None
    """The output folder (default: outputs/<study-name>)."""
    study_name: str | None = None
    """The study's name (default: derived from `model`)."""
    storage: str | optuna.storages.RDBStorage | None = None
    """An Optuna storage URL (default: SQLite in the output folder); a database server lets several hosts share it.
    From Python, an `optuna.storages.RDBStorage` object too, used as it is: its own engine settings, and its own
    heartbeat (`heartbeat_interval` and `grace_period` below then do not apply)."""
    heartbeat_interval: int = 10
    """A shared storage's trials beat every this many seconds."""
    grace_period: int = 60
    """A shared storage's trial without a beat for this many seconds is failed as abandoned and queued again."""
    sampler: str | optuna.samplers.BaseSampler = "tpe"
    """tpe, random or bruteforce; or, from Python, an Optuna sampler object, used as it is (its own seed)."""
    pruner: str | optuna.pruners.BasePruner = "median"
    """median, hyperband or none; or, from Python, an Optuna pruner object, used as it is."""
    seed: int = 0
    """Seeds the sampler and the batches drawn."""
    objective: str = "throughput"
    """'throughput', 'time-to:N', or a list with trade-offs: 'throughput,compile-time,peak-memory'."""
    pick: str = DEFAULT_PICK
    """Which point of a multi-objective study's Pareto front best.yaml gets (see `autotune.measure.choice`)."""
    max_compile_seconds: float | None = None
    """Stop a trial whose compile and warm-up take longer (replaces the compile budget)."""
    compile_budget: float = 4.0
    """Stop a trial whose compile and warm-up take longer than this many times plain torch.compile's; 0: no budget."""
    max_failure_rate: float = 0.8
    """Stop searching (and confirm what completed) when more than this share of at least 5 trials failed."""
    slow_ratio: float = 0.5
    """Prune a trial whose windows run below this fraction of eager's throughput."""
    confirm: int = 3
    """Re-measure this many of the best trials with both baselines, in replicates of paired windows, before choosing."""
    replicates: int = CampaignRules.min_replicates
    """Replicates of the confirmation campaign before it may stop (the engine's `CampaignRules`)."""
    max_replicates: int = CampaignRules.max_replicates
    """Replicates of the confirmation campaign at most, while the leader's interval does not decide (the engine's
    `CampaignRules`)."""
    protocol: RunProtocol = field(default_factory=RunProtocol)
    """How every run is measured."""
    allow_precision_changes: bool = False
    """Also search settings that change numerics (float32 matmul precision, unsafe math), judged at a looser tolerance."""
    recipes: bool = True
    """Start a new study with plain torch.compile and the generic expert recipes (`autotune.study.search._seeds`)."""
    doctor: bool = True
    """First find the workload's graph breaks and recompiles (`autotune doctor`); kept in best.yaml and the report."""
    explain_failures: bool = False
    """Narrow each trial that fails for a reason a setting can cause to the settings and the compiler stage that cause
    it, write its reproduction under failures/, and sample those settings no more (`autotune explain`)."""
    explain_budget: float | None = None
    """Seconds each failure's narrowing may take; None: four times the failing trial's own run."""
    compile_cache: bool = True
    """Save the winner's compile artifacts to compile_cache.bin and measure its cold and cached compile time."""
    reuse_since: int = 0
    """Trials numbered from here on may reuse an identical configuration's outcome instead of being measured;
    a retune sets it to its first trial, since earlier ones may have run in another environment."""

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise SearchError(f"--trials {self.trials}: must be >= 1.")
        for flag, given, names, base in (
            ("--sampler", self.sampler, SAMPLERS, optuna.samplers.BaseSampler),
            ("--pruner", self.pruner, PRUNERS, optuna.pruners.BasePruner),
        ):
            if isinstance(given, str) and given not in names:
                raise SearchError(f"{flag} {given!r} is not allowed; use one of {names}.")
            if not isinstance(given, (str, base)):
                raise SearchError(
                    f"{flag} {given!r}: must be one of {names} or an Optuna {base.__name__} object; got "
                    f"{type(given).__name__}."
                )
        if not 0 < self.max_failure_rate <= 1:
            raise SearchError(f"--max-failure-rate {self.max_failure_rate}: must be in (0, 1].")
        for flag, seconds in (
            ("--trial-timeout", self.trial_timeout),
            ("--timeout", self.timeout),
            ("--time-budget", self.time_budget),
            ("--max-compile-seconds", self.max_compile_seconds),
            ("--explain-budget", self.explain_budget),
        ):
            if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
                raise SearchError(f"{flag} {seconds}: must be a positive number of seconds.")
        if not 0 <= self.seed < 2**32:
            raise SearchError(f"--seed {self.seed}: must be in [0, 2**32 - 1] (it seeds numpy, torch and the sampler).")
        if not math.isfinite(self.compile_budget) or self.compile_budget < 0 or 0 < self.compile_budget < 1:
            raise SearchError(
                f"--compile-budget {self.compile_budget}: must be 0 (no budget) or >= 1 (times plain torch.compile's "
                "compile time)."
            )
        if not 0 <= self.slow_ratio < 1:
            raise SearchError(f"--slow-ratio {self.slow_ratio}: must be in [0, 1); 0 never prunes for slowness.")
        if self.confirm < 0:
            raise SearchError(f"--confirm {self.confirm}: must be >= 0.")
        if not 1 <= self.heartbeat_interval < self.grace_period:
            raise SearchError(
                f"--heartbeat-interval {self.heartbeat_interval} and --grace-period {self.grace_period}: "
                "1 <= heartbeat-interval < grace-period must hold."
            )
        if self.replicates < 1:
            raise SearchError(f"--replicates {self.replicates}: must be >= 1.")
        if self.max_replicates < self.replicates:
            raise SearchError(f"--max-replicates {self.max_replicates}: must be >= --replicates ({self.replicates}).")
        self.devices = _devices(self.device, self.devices)
        self.device = self.devices[0]
        if self.workers is None and Objectives.parse(self.objective).compile_decides:
            self.workers = len(self.devices)  # compile time decides: compiles side by side would each read slower
        if self.workers is None:
            self.workers, self.workers_chosen = default_workers(
                self.devices, len(os.sched_getaffinity(0)), os.environ.get("CUDA_VISIBLE_DEVICES")
            )
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < len(self.devices):
            raise SearchError(
                f"--workers {self.workers}: must be an integer >= the {len(self.devices)} device(s) of --device "
                f"{','.join(self.devices)} (each device needs a worker)."
            )
        refuse_shared_exclusive(self.devices, self.workers, os.environ.get("CUDA_VISIBLE_DEVICES"))
        Objectives.parse(self.objective)
        parse_pick(self.pick)
        if self.storage is not None and not isinstance(self.storage, (str, optuna.storages.RDBStorage)):
            raise SearchError(
                f"storage: {type(self.storage).__name__} is not allowed; give a database URL or an "
                "optuna.storages.RDBStorage (a study another process may read back needs a database)."
            )
        if self.storage is not None:
            check_storage_url(self.storage_url)  # refused before any folder or study is made
        load_space(self.space)  # a space that is not there, or not valid, before the workload is built

    @property
    def sampler_name(self) -> str:
        """The sampler as the study's settings record it: its name, or an object's class name."""
        return self.sampler if isinstance(self.sampler, str) else type(self.sampler).__name__

    @property
    def pruner_name(self) -> str:
        """The pruner as the study's settings and the trials' messages name it."""
        return self.pruner if isinstance(self.pruner, str) else type(self.pruner).__name__

    @property
    def brute_force(self) -> bool:
        """Whether the sampler tries every configuration in turn: such a study is not seeded with recipes."""
        return self.sampler == "bruteforce" or isinstance(self.sampler, optuna.samplers.BruteForceSampler)

    @property
    def name(self) -> str:
        return self.study_name or default_study_name(self.model)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("outputs") / self.name

    @property
    def storage_url(self) -> str:
        if isinstance(self.storage, optuna.storages.RDBStorage):
            return str(self.storage.url)
        return self.storage or f"sqlite:///{(self.out_dir / 'study.db').resolve()}"

    @property
    def storage_object(self) -> optuna.storages.RDBStorage | None:
        """The caller's own storage object, or None where the search opens its storage from the URL."""
        return self.storage if isinstance(self.storage, optuna.storages.RDBStorage) else None

    @property
    def shared(self) -> bool:
        """Whether several hosts may share the study: a database server or a journal file, any storage but SQLite."""
        return not self.storage_url.startswith("sqlite")

    @property
    def liveness(self) -> Liveness:
        return Liveness(interval=self.heartbeat_interval, grace=self.grace_period)


def _devices(device: str | None, devices: list[str]) -> list[str]:
    """The validated devices of `--device`: one, or several distinct CUDA devices separated by commas."""
    if devices:
        return [check_device(d) for d in devices]
    if device is None or "," not in device:
        return [check_device(device)]
    names = [part.strip() for part in device.split(",")]
    found = [_numbered(name) for name in names]
    if None in found or len(set(found)) != len(found):
        raise SearchError(
            f"--device {device!r}: several devices must be distinct CUDA devices such as 'cuda:0,cuda:1'; for "
            "several workers on one device use --workers N."
        )
    return [check_device(name) for name in names]


def _numbered(name: str) -> Device | None:
    """The device `name` names when it is one of several of its kind ('cuda:1', not 'cuda' or 'cpu'), else None."""
    with contextlib.suppress(ConfigError):
        found = parse_device(name)
        return found if found.index is not None else None
    return None


def default_study_name(model: str) -> str:
    """A file-system friendly name from a model target: 'examples.toy:model' -> 'examples.toy-model'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-") or "study"
