"""Record CUDA graphs only for the lengths that 'buckets' padding pads to (`triton.cudagraph_capture_sizes`).

Under reduce-overhead, each new length of a dynamic input records a new CUDA graph, which
takes memory and a recording step. With 'buckets' padding every batch is padded to one of a
few learned lengths; naming them as the capture sizes keeps the graphs to those lengths, and
a batch of any other length (one above the last bucket with no declared maximum) runs
without a graph instead of recording one. Inductor compares the sizes with the graph's
dynamic sizes, so the padded inputs must share one set of buckets.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import ConfigView, Knob

OPTION = "triton.cudagraph_capture_sizes"


class CudagraphCaptureSizes(Knob):
    name = "cudagraph_capture_sizes"
    choices = (False, True)
    summary = (
        "With a CUDA-graph mode (reduce-overhead) and `buckets` padding: record CUDA graphs only for the "
        f"learned bucket lengths (`{OPTION}`), so a length outside them runs without a graph instead of "
        "recording a new one. GPU only."
    )
    needs = "dynamic inputs"
    feature = ("torch._inductor.config", OPTION)
    device_setting = "triton.cudagraphs"
    offered = {"default": (False, True), "thorough": (False, True)}
    example = (
        {
            "mode": "reduce-overhead",
            "mark_dynamic": (("input_ids", 1),),
            "padding_alignment": "buckets",
            "padding_buckets": {"input_ids": {1: (16, 32, 64)}, "labels": {1: (16, 32, 64)}},
        },
        True,
    )

    def why_not(self, config: ConfigView) -> str | None:
        if config.padding_alignment != "buckets":
            return "it names the lengths of 'buckets' padding, which this configuration does not pad to"
        if not config.uses_cuda_graphs:
            return "it applies to CUDA graphs, which this configuration does not record"
        if len(_sizes(config)) != 1:
            return "the padded inputs have different buckets, and the capture sizes name one length per graph"
        return None

    def compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        import torch._inductor  # loaded already by anything that compiles; not on `import autotune`

        # torch.compile takes a mode or options: a mode is spelled as its options to add this one.
        mode = kwargs.pop("mode", "default")
        options = dict(kwargs.pop("options", None) or torch._inductor.list_mode_options(mode))
        options[OPTION] = next(iter(_sizes(config)))
        return {**kwargs, "options": options}

    def describe(self, value: Any) -> str:
        return "cudagraphs at the buckets only"


def _sizes(config: ConfigView) -> set[tuple[int, ...]]:
    return {tuple(bounds) for axes in config.padding_buckets.values() for bounds in axes.values()}


KNOB = CudagraphCaptureSizes()
