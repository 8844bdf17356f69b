"""Dynamo's counters inside the worker: frames and graphs compiled, graph breaks, recompiles and CUDA graph recordings.

A timed step that moved one of these compiled something; the trial's record carries the totals.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.utils import counters

__all__ = ["dynamo_counts", "fail_on_recompile_limit", "frames_compiled", "watch_compiles"]


def fail_on_recompile_limit() -> None:
    """Make dynamo raise when it hits its recompile limit, instead of running the frame eagerly from then on.

    A run in that state would look fast or slow for the wrong reason; raising turns it into a
    `recompile_limit` failure.
    """
    config = getattr(torch.compiler, "config", None)
    if config is not None and hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True
    else:  # older torch: the flag lives in dynamo's own config
        torch._dynamo.config.fail_on_recompile_limit_hit = True


_RECORDINGS = [0]
"""CUDA graphs recorded so far in this process (counted once `watch_compiles` ran)."""
_COMPILES = [0]
"""Compiles dynamo ran so far in this process, fullgraph or not (counted once `watch_compiles` ran)."""


def _count_compile(args: Any) -> None:
    trigger = getattr(getattr(args, "callback_trigger", None), "name", None)
    if trigger == "CUDAGRAPH_RECORDING":
        _RECORDINGS[0] += 1
    elif trigger == "DYNAMO":
        _COMPILES[0] += 1


def watch_compiles() -> None:
    """Count every compile dynamo runs and every CUDA graph recording from now on (once per process; harmless on a
    torch without compile callbacks).

    Dynamo calls its compile callbacks around each compile it runs, whichever way the frame was compiled, and around
    each CUDA graph recording (CUDA-graph trees warm a compiled function up on its first call and record it on the
    next, and again for each new input shape). Its frame counter (`counters["frames"]["ok"]`) misses compiles:
    under `fullgraph=True` torch.compile converts frames without it, so a fullgraph model's recompile for a new
    shape moved no counter, and a warm-up pass that recompiled the toy's forward for new lengths looked settled, its
    seconds left out of the compile time.
    """
    handler = getattr(torch._dynamo, "callback_handler", None)
    if handler is not None and _count_compile not in handler.end_callbacks:
        handler.register_end_callback(_count_compile)


def frames_compiled() -> int:
    """Compile events so far in this process: compiles dynamo ran and CUDA graphs recorded (`watch_compiles`, which a
    first read starts; on a torch without compile callbacks, the frames dynamo counted).

    One counter read, cheap enough for every timed step. A warm-up pass, a settle window or a
    step of the fresh stream that moved it compiled (or recorded) something and is treated so.
    """
    handler = getattr(torch._dynamo, "callback_handler", None)
    if handler is None:
        return int(counters["frames"]["ok"]) + _RECORDINGS[0]
    if _count_compile not in handler.end_callbacks:
        watch_compiles()  # not yet, or torch._dynamo.reset() cleared the callbacks: count from now on
    return _COMPILES[0] + _RECORDINGS[0]


def dynamo_counts() -> dict[str, int]:
    """Graphs compiled, graph breaks, recompiles and frames compiled so far in this process."""

    graph_breaks = sum(counters["graph_break"].values())
    recompiles = 0
    get_metrics = getattr(torch._dynamo.utils, "get_compilation_metrics", None)
    if get_metrics is not None:
        recompiles = sum(1 for m in get_metrics() if m.compile_id and not str(m.compile_id).endswith("/0"))
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(graph_breaks),
        "recompiles": int(recompiles),
        "frames": int(counters["frames"]["ok"]),
        "cuda_graph_recordings": _RECORDINGS[0],
        "cuda_graph_skips": int(counters["inductor"]["cudagraph_skips"]),
    }
