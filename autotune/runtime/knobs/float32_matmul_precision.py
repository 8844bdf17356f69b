"""Precision: how exactly float32 matrix multiplications are computed (`torch.set_float32_matmul_precision`).

torch's default, 'highest', computes float32 matmuls in full float32. 'high' lets them use
TensorFloat-32 (on GPUs that have it) or a split into two bfloat16 products, and 'medium' a
single bfloat16 product: faster, and less exact, so results may differ from eager beyond
rounding. A search offers it only with --allow-precision-changes, and the worker then checks
the outputs against eager within a looser tolerance.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import Knob, ProcessSetting


class Float32MatmulPrecision(Knob):
    name = "float32_matmul_precision"
    choices = (None, "high", "medium")
    summary = (
        "Precision: float32 matmuls may use faster, less exact passes (TensorFloat-32 or bfloat16 where the "
        "hardware has them; `torch.set_float32_matmul_precision`, process-wide); null keeps torch's default. "
        "Changes numerics."
    )
    needs = "precision changes"
    changes_numerics = True
    feature = ("torch", "set_float32_matmul_precision")
    example = ({}, "high")

    def allowed_text(self) -> str:
        return "null (torch's default), 'high' or 'medium'"

    def process_setting(self, value: Any) -> ProcessSetting:
        return ProcessSetting(
            comment=(
                "Changes numerics (searched only with --allow-precision-changes): float32 matmuls may\n"
                "use faster, less exact passes (TF32 or bfloat16 where the hardware has them). This is\n"
                "the process-wide setting, not the per-backend `fp32_precision` ones: Inductor reads it\n"
                "(torch.get_float32_matmul_precision), which raises once only those were set, and this\n"
                "call sets them all consistently."
            ),
            target="torch.set_float32_matmul_precision",
            value=str(value),
            call=True,
        )

    def describe(self, value: Any) -> str:
        return f"float32 matmul {value}"


KNOB = Float32MatmulPrecision()
