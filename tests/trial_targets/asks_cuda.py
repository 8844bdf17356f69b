"""A workload module that asks `torch.cuda.is_available()` on import, as many do to pick their device.

On a GPU host that call initialises CUDA's driver unless torch asks NVML instead
(PYTORCH_NVML_BASED_CUDA_CHECK=1), and every child forked afterwards is "in a bad fork": CUDA
cannot be used there. This torch has no CUDA, so the module does to `torch.cuda._is_in_bad_fork`
what the driver's initialisation does on a GPU host: a child forked after it reads True.
"""

from __future__ import annotations

import os

import torch

from tests.trial_targets.workloads import records_its_process

if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1":
    torch.cuda._is_in_bad_fork = lambda: True

__all__ = ["records_its_process"]
