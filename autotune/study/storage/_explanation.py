"""What narrowing a failed trial found: `Explanation`, kept in the study's record by trial number."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from autotune.errors import RecordError

__all__ = ["COMPILER_FAILURES", "Explanation"]

COMPILER_FAILURES = ("compile_error", "accuracy", "recompile_limit", "oom", "graph_break")
"""Failure reasons a setting can cause: only these are narrowed. A workload error, a hang (`timeout`) or a crash of
the user's code are not the compiler's doing."""


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """A failed trial narrowed to the settings that cause its failure, and the compiler stage that fails."""

    trial: int
    reason: str
    """The trial's failure reason (compile_error, accuracy, recompile_limit, oom, graph_break)."""
    settings: list[str] = field(default_factory=list)
    """The culprit settings by name (a `CompileConfig` field, `mode`, `options.NAME` or a knob); empty where plain compile
    fails too."""
    described: list[str] = field(default_factory=list)
    """The same settings as people read them, e.g. 'compile_optimizer=True'."""
    config: dict[str, Any] = field(default_factory=dict)
    """The configuration of the culprit settings alone (`CompileConfig.to_dict`)."""
    against: str = "plain compile"
    """What the culprit is relative to: 'plain compile', or 'eager' where plain compile fails too; 'not reproduced'
    where no short run failed."""
    complete: bool = True
    """False where the budget ran out first: the settings still fail, but may not be the fewest."""
    stage: str = ""
    """The first compiler stage that fails (PyTorch's bisector: a backend, and where it says, a pass); '' if unknown."""
    stage_note: str = ""
    """Why there is no stage: not bisected (a failure no one stage causes, the budget spent), or none failed."""
    message: str = ""
    """The failure's message, from the last probe that failed (else the trial's)."""
    probes: int = 0
    """Short runs made."""
    seconds: float = 0.0
    """Seconds spent narrowing and bisecting."""
    budget: float = 0.0
    """The seconds it was allowed."""
    repro: str = ""
    """The reproduction's path, relative to the study's output folder ('' where none was written)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the study's record."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: object) -> Explanation:
        """The inverse of `to_dict`; a field this version lacks is a RecordError naming it."""
        if not isinstance(data, Mapping):
            raise RecordError(f"an explanation must be a mapping, got {type(data).__name__}: {data!r:.200}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise RecordError(
                f"an explanation has unknown field(s) {', '.join(unknown)}; its fields are {sorted(names)}"
            )
        return cls(**dict(data))

    @property
    def stage_text(self) -> str:
        """The failing stage, or why there is none."""
        return self.stage or self.stage_note or "not found"

    @property
    def culprit_text(self) -> str:
        """The culprit in one phrase."""
        if self.against == "eager" and not self.described:
            return "plain torch.compile itself (it fails without any setting)"
        if self.against == "not reproduced":
            return "unknown: no short run failed, the whole configuration's included"
        return ", ".join(self.described) + ("" if self.complete else " (narrowing cut short by its budget)")
