"""Re-measuring a saved configuration (best.yaml or a recipe) next to eager and plain torch.compile.

Each round runs eager, plain torch.compile and the configuration in fresh processes one
after the other, so the speedups compare runs made minutes apart on the same machine.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autotune import codegen, environment
from autotune.config import CompileConfig
from autotune.errors import ConfigError, WorkloadError
from autotune.measure import Protocol
from autotune.runner import TrialRequest, check_device, record_of, run_trial
from autotune.workload import resolve

__all__ = ["ValidationReport", "measure_interleaved", "read_config_file", "validate"]

SUBJECTS = ("eager", "compile", "config")


@dataclass(kw_only=True)
class ValidationReport:
    """Every run of every subject, and the figures derived from them."""

    path: str
    model: str
    description: str
    config: CompileConfig
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The configuration completed (ran and matched eager) in every round."""
        return bool(self.runs.get("config")) and all(r["state"] == "complete" for r in self.runs["config"])

    def throughput(self, subject: str) -> float | None:
        """Median samples/s over the subject's complete runs."""
        values = [r["samples_per_second"] for r in self.runs.get(subject, []) if r["state"] == "complete"]
        return statistics.median(values) if values else None

    def speedup(self, over: str) -> float | None:
        """The configuration's throughput over a baseline's."""
        mine, theirs = self.throughput("config"), self.throughput(over)
        return mine / theirs if mine and theirs else None

    def render(self) -> str:
        """A short table for the terminal."""
        lines = [
            f"{self.path}: {self.description}",
            f"workload {self.model}; configuration: {self.config.describe()}",
            "",
        ]
        lines.append(f"{'':>10} {'samples/s':>11} {'compile s':>10}  runs")
        for subject in SUBJECTS:
            runs = self.runs.get(subject, [])
            compile_s = [r.get("compile_seconds") for r in runs if r["state"] == "complete"]
            shown = ", ".join(
                f"{r['samples_per_second']:.4g}" if r["state"] == "complete" else f"{r['state']}: {r['reason']}"
                for r in runs
            )
            rate = self.throughput(subject)
            lines.append(
                f"{subject:>10} {(f'{rate:.4g}' if rate else '–'):>11} "
                f"{(f'{statistics.median(compile_s):.1f}' if compile_s else '–'):>10}  {shown}"
            )
        for run in self.runs.get("config", []):
            if run["state"] != "complete":
                lines += ["", f"The configuration failed ({run['reason']}): {run['message']}"]
                break
        else:
            lines += [
                "",
                f"speedup: {_x(self.speedup('eager'))} over eager, {_x(self.speedup('compile'))} over plain torch.compile",
            ]
        return "\n".join(lines)


def read_config_file(path: str | Path) -> tuple[str, CompileConfig, str | None]:
    """(description, config, recorded model target) from a best.yaml or a recipe file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read a plain YAML configuration: {exc}") from None
    if isinstance(data, dict) and "schema_version" in data:
        from autotune import tuned

        best = tuned.read(path)
        return f"tuned configuration from {best.created}", best.config, best.workload.spec
    from autotune.recipe import read_recipe

    recipe = read_recipe(path)
    return recipe.description, recipe.config, None


def validate(
    path: str | Path,
    *,
    model: str | None = None,
    device: str | None = None,
    repeats: int = 1,
    trial_timeout: float = 900.0,
    protocol: Protocol | None = None,
) -> ValidationReport:
    """Measure the configuration in `path` against both baselines, `repeats` interleaved rounds."""
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: must be >= 1.")
    description, config, recorded = read_config_file(path)
    spec = model or recorded
    if not spec:
        raise WorkloadError(f"{path} records no workload; pass --model PKG.MOD:ATTR.")
    workload = resolve(spec)
    summary = workload.summary(spec, workload.draw_batches())
    created = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    sources = {
        "eager": None,
        "compile": codegen.generate(CompileConfig(), summary, created=created, version=environment.version()),
        "config": codegen.generate(config, summary, created=created, version=environment.version()),
    }
    report = ValidationReport(path=str(path), model=spec, description=description, config=config)
    subjects = {
        "eager": (None, False),
        "compile": (sources["compile"], False),
        "config": (sources["config"], config.uses_cuda_graphs),
    }
    report.runs = measure_interleaved(
        spec, subjects, rounds=repeats, device=device, trial_timeout=trial_timeout, protocol=protocol
    )
    return report


def measure_interleaved(
    spec: str,
    subjects: Mapping[str, tuple[str | None, bool]],
    *,
    rounds: int = 1,
    device: str | None = None,
    trial_timeout: float = 900.0,
    protocol: Protocol | None = None,
    on_run: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Run each subject (name -> (generated source or None for eager, uses CUDA graphs)) once per round, in turn.

    Interleaving puts every subject's runs next to each other's in time, so the ratios
    between them survive a machine whose speed drifts.
    """
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in subjects}
    for _ in range(rounds):
        for name, (source, cuda_graphs) in subjects.items():
            request = TrialRequest(
                spec=spec,
                source=source,
                device=check_device(device),
                protocol=(protocol or Protocol()).to_dict(),
                uses_cuda_graphs=cuda_graphs,
                timeout=trial_timeout,
            )
            record = record_of(run_trial(request))
            runs[name].append(record)
            if on_run:
                on_run(name, record)
    return runs


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value else "–"
