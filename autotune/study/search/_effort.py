"""Effort levels: how much a search tries, as one choice instead of five flags.

`--effort quick|default|thorough` sets the search space, the trial budget and the
confirmation budget together; any of those flags given explicitly overrides its level's
value. The README gives the time each level took on the example workloads.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import SearchError
from autotune.study.search._options import SearchOptions

__all__ = ["EFFORTS", "Effort", "effort"]


@dataclass(frozen=True)
class Effort:
    """How much a search tries: its space, trial budget and confirmation budget, chosen together."""

    space: str
    trials: int
    confirm: int
    replicates: int
    max_replicates: int
    explain_failures: bool = False
    """Narrow each failure a setting can cause to its settings (`--explain-failures`)."""

    def describe(self) -> str:
        """One line for --help and the README."""
        explained = ", failures explained" if self.explain_failures else ""
        return (
            f"space {self.space}, {self.trials} trials, the best {self.confirm} confirmed in "
            f"{self.replicates}-{self.max_replicates} replicates{explained}"
        )


EFFORTS: dict[str, Effort] = {
    "quick": Effort(space="quick", trials=8, confirm=2, replicates=2, max_replicates=5),
    # The default level is what `SearchOptions` holds when no flag is given.
    "default": Effort(
        space=SearchOptions.space,
        trials=SearchOptions.trials,
        confirm=SearchOptions.confirm,
        replicates=SearchOptions.replicates,
        max_replicates=SearchOptions.max_replicates,
        explain_failures=SearchOptions.explain_failures,
    ),
    "thorough": Effort(space="thorough", trials=60, confirm=5, replicates=4, max_replicates=9, explain_failures=True),
}
"""`--effort` levels; a flag given explicitly (--space, --trials, ...) overrides its level's value."""


def effort(name: str) -> Effort:
    """The effort level `name`, or an error listing the levels."""
    if name not in EFFORTS:
        raise SearchError(f"--effort {name!r} is not a level; use one of {list(EFFORTS)}.")
    return EFFORTS[name]
