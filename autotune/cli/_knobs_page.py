"""The knobs' reference page (docs/knobs.md), written from the registry so that it cannot drift.

python -m autotune.cli._knobs_page            # rewrite docs/knobs.md
python -m autotune.cli._knobs_page --check    # exit 1 when docs/knobs.md differs from the registry
"""

from __future__ import annotations

import sys

from autotune.cli._reference import _cell, write_page
from autotune.runtime.knobs import registered
from autotune.study.search import bundled_spaces, load_space

__all__ = ["PAGE", "REGENERATE", "main", "render"]

_NEEDS = {
    "training": "a training workload",
    "autotune's backward": "a training workload whose backward autotune calls (no step of its own)",
    "dynamic inputs": "declared dynamic inputs",
    "precision changes": "`--allow-precision-changes`",
    "one graph": "no graph break where plain `torch.compile` ran",
    "dropout in training": "a training workload whose model has dropout",
}
"""What each of a knob's needs asks of the workload or the search, in words."""

PAGE = "docs/knobs.md"
REGENERATE = "python -m autotune.cli._knobs_page"
"""The command that rewrites the page; the test that compares it names it."""

_HEADER = f"""\
# Knobs from the registry

<!-- Written by `{REGENERATE}` from autotune/runtime/knobs/; do not edit by hand. -->

Each of these search dimensions is one module of `autotune/runtime/knobs/`, which declares
everything about it: its values (the first changes nothing), what it needs, what the installed
torch must have, where it applies and the code it generates. A configuration holds each under
its own name (`best.yaml`'s `config:` section lists only those that differ from the first
value); a space file lists its choices under the same name, and a search asks it last, only
where the rest of the configuration lets it apply. [Developing](developing.md#adding-a-knob)
shows how to add one.
"""


def render() -> str:
    """The whole page, as Markdown."""
    lines = [_HEADER, "| Knob | Values | Needs | Searched by | What it does |", "| --- | --- | --- | --- | --- |"]
    # What each bundled space offers, as it is loaded: its file's list, or the knob's own `offered`.
    spaces = {space: load_space(space).knobs for space in sorted(bundled_spaces())}
    for name, entry in registered().items():
        values = ", ".join(f"`{_yaml(v)}`" for v in entry.choices)
        if entry.allowed_text() != f"one of {list(entry.choices)}":
            values = f"{_cell(entry.allowed_text())}, e.g. {values}"
        needs = [_NEEDS[entry.needs]] if entry.needs else []
        if entry.feature is not None:
            module, attribute = entry.feature
            needs.append(f"torch with `{module}.{attribute.replace(':', ' with ')}`")
        searched = ", ".join(
            f"`{space}`: {', '.join(_yaml(x) for x in knobs[name])}" for space, knobs in spaces.items() if name in knobs
        )
        needs_text = "; ".join(needs) or "nothing"
        searched = searched or "a space file that lists it"
        lines.append(f"| `{name}` | {values} | {_cell(needs_text)} | {_cell(searched)} | {_cell(entry.summary)} |")
    return "\n".join(lines) + "\n"


def _yaml(value: object) -> str:
    """A value as a space file writes it."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return repr(value)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page, or with --check say whether it is current; returns the exit code."""
    return write_page(argv, PAGE, render(), REGENERATE, "the knob registry")


if __name__ == "__main__":
    sys.exit(main())
