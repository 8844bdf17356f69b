"""A workload module whose import initialises CUDA's driver whatever asks: the stand-in of `asks_cuda.py`, for a
call NVML cannot answer (a child forked afterwards reads True from `torch.cuda._is_in_bad_fork`)."""

from __future__ import annotations

import torch

from tests.trial_targets.workloads import records_its_process

torch.cuda._is_in_bad_fork = lambda: True

__all__ = ["records_its_process"]
