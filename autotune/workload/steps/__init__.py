"""What one step of a workload runs: inference, autotune's training step, or the user's own step.

Each kind is one module with a `Step` subclass; `step_of` is the one place that picks it from
the workload. The worker, the eager reference, the doctor and the compile check run a step
through this interface and never ask which kind it is.
"""

from autotune.workload.steps._kinds import step_of
from autotune.workload.steps._step import Step, StepState, tensor_leaves

__all__ = ["Step", "StepState", "step_of", "tensor_leaves"]
