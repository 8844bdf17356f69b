"""The compile modes and Inductor options autotune knows how to search, and what an option needs to change anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "INFERENCE_ONLY_OPTIONS",
    "KNOWN_MODES",
    "KNOWN_OPTIONS",
    "KnownOption",
    "known_option_needs",
    "option_needs",
]

INFERENCE_ONLY_OPTIONS = ("freezing",)
"""Inductor options that only make sense without autograd (freezing folds weights into constants)."""
KNOWN_MODES = ("default", "lite", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""Modes a space may list; one the installed torch lacks (lite in older releases) is dropped with a note."""


@dataclass(frozen=True)
class KnownOption:
    """An Inductor option autotune knows how to search: what it needs. On which devices it exists is the device's
    to say (`autotune.runtime.device.OPTION_NEEDS`)."""

    needs: str | None = None
    """An option that must be on for this one to change anything (e.g. max_autotune), or None."""
    inference_only: bool = False
    """Options that only make sense without autograd."""


KNOWN_OPTIONS: Mapping[str, KnownOption] = {
    "shape_padding": KnownOption(),
    "coordinate_descent_tuning": KnownOption(),
    "epilogue_fusion": KnownOption(),
    "aggressive_fusion": KnownOption(),
    "cpp_wrapper": KnownOption(),
    "combo_kernels": KnownOption(),
    "max_autotune_gemm_backends": KnownOption(needs="max_autotune"),
    "triton.cudagraph_trees": KnownOption(needs="triton.cudagraphs"),
    "triton.cudagraph_skip_dynamic_graphs": KnownOption(needs="triton.cudagraphs"),
    "freezing": KnownOption(inference_only=True),
    "cpp.weight_prepack": KnownOption(needs="freezing", inference_only=True),
    "cpp.dynamic_threads": KnownOption(),
    "cpp.min_chunk_size": KnownOption(),
    "cpp.enable_unsafe_math_opt_flag": KnownOption(),
}
"""Options a space may list even when the installed torch lacks them: those are dropped with a note."""


def option_needs(option: str) -> str | None:
    known = KNOWN_OPTIONS.get(option)
    return known.needs if known else None


def known_option_needs() -> dict[str, str]:
    """Each known option that changes nothing without another, with that other: a narrowing removes them together."""
    return {name: known.needs for name, known in KNOWN_OPTIONS.items() if known.needs is not None}
