"""The examples' workloads, with every compile in a worker on dynamo's eager backend (`dynamo_only`): trials of them
that test what the check and the search do, not Inductor's code, take seconds."""

from __future__ import annotations

from examples.nanogpt_loop import workload as nanogpt_loop
from tests.trial_targets import dynamo_only  # noqa: F401  (workers compile on the eager backend)

__all__ = ["nanogpt_loop"]
