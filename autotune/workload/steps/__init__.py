"""What one step of a workload runs: inference, autotune's training step, or the user's own step.

Each kind is one module with a `Step` subclass decorated with `register_step`; `step_of` is the one
place that picks a workload's kind, asking each registered kind whether it `serves` the workload.
A kind defined outside this package (in the module that defines a workload, say) registers the same
way. The worker, the accuracy references, the doctor and the compile check run a step through
`StepRunner` and never ask which kind it is.
"""

from autotune.workload.steps import infer, own, train  # noqa: F401  (each registers its kind)
from autotune.workload.steps._kinds import register_step, step_kinds, step_of
from autotune.workload.steps._runner import StepRunner
from autotune.workload.steps._step import Step, StepState, tensor_leaves

__all__ = ["Step", "StepRunner", "StepState", "register_step", "step_kinds", "step_of", "tensor_leaves"]
