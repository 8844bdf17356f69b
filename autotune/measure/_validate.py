"""Re-measuring a saved configuration (best.yaml or a recipe) against eager and plain torch.compile.

One measurement campaign: the three subjects in fresh processes, in rotated rounds, with
the configuration's ratio to each baseline as a median of paired rounds and its interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from autotune.errors import ConfigError, WorkloadError
from autotune.measure._campaign import Campaign, Harness, Interval, RunCallback, Subject, measure
from autotune.measure._objective import Objective
from autotune.measure._recipes import read_recipe
from autotune.measure._tables import confirmation_table
from autotune.measure.format import interval
from autotune.runtime import tuned
from autotune.runtime.config import CompileConfig
from autotune.trial.request import Protocol, check_device
from autotune.workload import resolve

__all__ = ["ValidationReport", "read_config_file", "validate"]


@dataclass(kw_only=True)
class ValidationReport:
    """The campaign that measured a configuration file, and what it says."""

    path: str
    model: str
    description: str
    config: CompileConfig
    campaign: Campaign

    @property
    def ok(self) -> bool:
        """The configuration completed (ran and matched eager) in every round."""
        return self.campaign.failure("config") is None and bool(self.campaign.complete_runs("config"))

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
                "(median of paired rounds, 95% t-interval)"
            )
        noise = self.campaign.noise()
        if noise["noisy_runs"]:
            lines.append(
                f"warning: the machine was busy during {noise['noisy_runs']} run(s); they were measured again."
            )
        return "\n".join(lines)


def read_config_file(path: str | Path) -> tuple[str, CompileConfig, str | None]:
    """(description, config, recorded model target) from a best.yaml or a recipe file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read a plain YAML configuration: {exc}") from None
    if isinstance(data, dict) and "schema_version" in data:
        best = tuned.read(path)
        return f"tuned configuration from {best.created}", best.config, best.workload.spec
    recipe = read_recipe(path)
    return recipe.description, recipe.config, None


def validate(
    path: str | Path,
    *,
    model: str | None = None,
    device: str | None = None,
    repeats: int = 3,
    max_rounds: int | None = None,
    trial_timeout: float = 900.0,
    protocol: Protocol | None = None,
    on_run: RunCallback | None = None,
) -> ValidationReport:
    """Measure the configuration in `path` against both baselines: `repeats` rotated rounds, more if undecided."""
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: must be >= 1.")
    description, config, recorded = read_config_file(path)
    spec = model or recorded
    if not spec:
        raise WorkloadError(f"{path} records no workload; pass --model PKG.MOD:ATTR.")
    workload = resolve(spec, isolated=True)
    harness = Harness(
        spec=spec,
        summary=workload.summary(spec, workload.draw_batches()),
        device=check_device(device),
        protocol=protocol or Protocol(),
        timeout=trial_timeout,
    )
    harness.source(config)  # a configuration that does not fit the workload is an error before anything runs
    campaign = measure(
        harness,
        [*Subject.baselines(), Subject(name="config", config=config)],
        objective=Objective(),
        min_rounds=repeats,
        max_rounds=max(max_rounds or repeats, repeats),
        on_run=on_run,
    )
    return ValidationReport(path=str(path), model=spec, description=description, config=config, campaign=campaign)
