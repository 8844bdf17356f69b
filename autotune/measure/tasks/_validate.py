"""Re-measuring a saved configuration (best.yaml or a recipe) against eager and plain torch.compile.

One measurement campaign: the three subjects in fresh processes, in replicates of paired windows, with
the configuration's ratio to each baseline over paired replicates, with its interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from autotune.errors import ConfigError, WorkloadError
from autotune.measure.engine import (
    VALIDATION_MAX_REPLICATES,
    VALIDATION_PRECISION,
    VALIDATION_REPLICATES,
    VALIDATION_SECONDS,
    Campaign,
    Harness,
    ReplicateCallback,
    RunCallback,
    Subject,
    measure,
    validation_rules,
)
from autotune.measure.format import interval
from autotune.measure.report import confirmation_table
from autotune.measure.stats import BAND, Interval, Throughput, outcome
from autotune.measure.tasks._recipes import recipe_from
from autotune.runtime import tuned
from autotune.runtime.config import CompileConfig
from autotune.runtime.limits import read_yaml_file
from autotune.trial.request import RunProtocol, check_device
from autotune.workload import resolve

__all__ = ["ValidationReport", "design_text", "read_config_file", "validate"]


@dataclass(kw_only=True)
class ValidationReport:
    """The campaign that measured a configuration file, and what it says."""

    path: str
    model: str
    description: str
    config: CompileConfig
    campaign: Campaign
    within: float = BAND
    """The band of equivalence around 1."""

    @property
    def ok(self) -> bool:
        """The configuration completed (ran and matched eager) in every replicate."""
        return self.campaign.failure("config") is None and bool(self.campaign.complete_runs("config"))

    @property
    def slower(self) -> bool:
        """It ran and matched eager, and is decided slower than plain torch.compile (`outcome`'s loss): plain compile
        serves better."""
        return self.ok and outcome(self.speedup("compile"), self.within) == "loss"

    def speedup(self, over: str) -> Interval | None:
        """The configuration's paired ratio to a baseline ('eager' or 'compile'), with its interval."""
        return self.campaign.ratio("config", over)

    def render(self) -> str:
        """A short table for the terminal."""
        lines = [
            f"{self.path}: {self.description}",
            f"workload {self.model}; configuration: {self.config.describe()}",
            "",
        ]
        lines += [confirmation_table(self.campaign), ""]
        failure = self.campaign.failure("config")
        if failure is not None:
            lines.append(f"The configuration failed ({failure.reason}): {failure.message}")
        else:
            eager, compiled = self.speedup("eager"), self.speedup("compile")
            lines.append(
                f"speedup: {interval(eager.to_dict() if eager else None)} over eager, "
                f"{interval(compiled.to_dict() if compiled else None)} over plain torch.compile "
                f"(geometric mean of paired replicates, t-interval simultaneous over the looks): {outcome(compiled, self.within)} "
                "against plain torch.compile"
            )
            lines.append(compile_text(self.campaign))
            if self.slower:
                lines.append("It is decided slower than plain torch.compile: plain torch.compile serves better here.")
        lines += ["", design_text(self.campaign)]
        return "\n".join(lines)


def compile_text(campaign: Campaign) -> str:
    """How much longer the configuration compiles than plain compile: with its interval where both compiled cold before
    each replicate, else as the one cold compile each that it is."""
    extra = campaign.extra_compile("config", "compile")
    if extra is not None:
        return (
            f"compile time: {extra.median:+.1f} s against plain torch.compile [{extra.low:+.1f}, {extra.high:+.1f}] "
            f"(the mean of {extra.replicates} paired cold compiles, 95%)"
        )
    ours, theirs = campaign.compile_seconds("config"), campaign.compile_seconds("compile")
    if ours is None or theirs is None:
        return "compile time: not measured"
    return (
        f"compile time: {ours - theirs:+.1f} s against plain torch.compile (one cold compile each, no interval; "
        "--cold-compiles measures it before every replicate)"
    )


def read_config_file(path: str | Path) -> tuple[str, CompileConfig, str | None]:
    """(description, config, recorded model target) from a best.yaml or a recipe file."""
    data = read_yaml_file(path, "a configuration file")  # sizes and aliases counted before anything is built
    if isinstance(data, dict) and "schema_version" in data:
        best = tuned.read(path)
        return f"tuned configuration from {best.created}", best.config, best.workload.spec
    recipe = recipe_from(data, str(path), Path(path).stem)
    return recipe.description, recipe.whole(), None


def validate(
    path: str | Path,
    *,
    model: str | None = None,
    device: str | None = None,
    replicates: int = VALIDATION_REPLICATES,
    max_replicates: int = VALIDATION_MAX_REPLICATES,
    precision: float | None = VALIDATION_PRECISION,
    measure_seconds: float | None = VALIDATION_SECONDS,
    cold_compiles: bool = False,
    trial_timeout: float = 900.0,
    protocol: RunProtocol | None = None,
    on_run: RunCallback | None = None,
    on_replicate: ReplicateCallback | None = None,
) -> ValidationReport:
    """Measure the configuration in `path` against both baselines, each first alone and cold, then in replicates.

    Replicates are added from `replicates` until the interval against plain torch.compile is
    within +/- `precision` (None: until it is decided), `max_replicates` replicates, or
    `measure_seconds` of measurement after the first runs. With `cold_compiles`, the configuration
    and plain compile compile again, alone and cold, before each replicate: compile time and its
    pay-back get intervals (`CampaignRules.cold_compiles`).
    """
    if replicates < 2:
        raise ConfigError(
            f"--replicates {replicates}: must be >= 2 (one replicate says nothing of the variation between them)."
        )
    if max_replicates < replicates:
        raise ConfigError(f"--max-replicates {max_replicates}: must be >= --replicates ({replicates}).")
    if precision is not None and not 0 < precision < 1:
        raise ConfigError(f"--precision {precision}: must be a fraction in (0, 1), e.g. 0.03 for +/-3%.")
    for flag, seconds in (("--measure-seconds", measure_seconds), ("--trial-timeout", trial_timeout)):
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise ConfigError(f"{flag} {seconds}: must be a positive number of seconds.")
    checked_device = check_device(device)  # a device this torch cannot use, before the workload is built
    description, config, recorded = read_config_file(path)
    spec = model or recorded
    if not spec:
        raise WorkloadError(f"{path} records no workload; pass --model PKG.MOD:ATTR.")
    workload = resolve(spec, isolated=True)
    harness = Harness(
        spec=spec,
        summary=workload.summary(spec, workload.draw_batches()),
        device=checked_device,
        protocol=protocol or RunProtocol(),
        timeout=trial_timeout,
    )
    harness.source(config)  # a configuration that does not fit the workload is an error before anything runs
    rules = validation_rules(
        harness.protocol,
        replicates=replicates,
        max_replicates=max_replicates,
        precision=precision,
        seconds=measure_seconds,
    )
    rules = replace(rules, cold_compiles=cold_compiles)
    campaign = measure(
        harness,
        [*Subject.baselines(), Subject(name="config", config=config)],
        objective=Throughput(),
        rules=rules,
        on_run=on_run,
        on_replicate=on_replicate,
    )
    return ValidationReport(path=str(path), model=spec, description=description, config=config, campaign=campaign)


def design_text(campaign: Campaign) -> str:
    """How a campaign measured, in two sentences: its replicates and windows, and why it stopped."""
    if not campaign.replicates:
        # Everything failed before a replicate (each subject's cold run, say): there is no design to describe.
        return f"Nothing was measured side by side. Stopped: {campaign.stopped or 'not measured'}."
    design = campaign.design()
    windows = design["windows_per_replicate"]
    shown = f"{windows[0]}" if len(set(windows)) == 1 else f"{min(windows)} to {max(windows)}" if windows else "no"
    parts = design.get("components") or {}
    if parts.get("replicates", 0) < 2:
        parts = {}  # one replicate shows nothing of the variation between replicates
    spent = sum(r.seconds for r in campaign.replicates)
    cold = sum(r.cold_seconds for r in campaign.replicates)
    before = f" after {cold:.0f} s of cold compiles before them" if cold else ""
    text = (
        f"Measured in {design['replicates']} replicate(s), {spent:.0f} s in all{before}, of {shown} paired window(s) per "
        f"subject ({design['batches_per_window']} batch(es) of the fresh stream each, subjects alive "
        f"{design['co_residence']})"
    )
    if parts:
        text += (
            f"; a window's paired log-ratio varied by {parts['window_sd']:.3f} (sd), a replicate's beyond its "
            f"windows by {parts['replicate_sd']:.3f}"
        )
    retired = design.get("retired") or {}
    if retired:
        text += ". Left out of later replicates: " + "; ".join(f"{name} ({why})" for name, why in retired.items())
    return text + f". Stopped: {campaign.stopped or 'not measured'}."
