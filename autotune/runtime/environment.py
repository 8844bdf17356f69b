"""Fingerprints of where a configuration was tuned: software, device and model.

A tuned configuration is only trusted in the environment it was measured in; this is the
one place that says what that environment is and how two of them differ.
"""

from __future__ import annotations

import hashlib
import json
import platform
import socket
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from typing import Any

import torch
from torch import nn

from autotune.runtime.compile_cache import running_fingerprint
from autotune.runtime.device import recorded_device

__all__ = [
    "KEYS_THAT_MATTER",
    "RETUNE_KEYS",
    "batch_shapes",
    "differences",
    "fingerprint",
    "host_key",
    "model_fingerprint",
    "version",
]

KEYS_THAT_MATTER = ("torch", "cuda", "device_name")
"""Differences in these make a tuned configuration suspect (`autotune.load` warns)."""
RETUNE_KEYS = ("autotune", "python", "torch", "triton", "cuda", "driver", "device_name")
"""What `autotune retune` compares and reports, besides the model."""


def version() -> str:
    """autotune's own version."""
    try:
        return dist_version("autotune")
    except PackageNotFoundError:
        return "0+unknown"


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """Versions of python, torch, triton, CUDA and the driver, and the device's name.

    Reading the CUDA device initialises CUDA, so the search parent calls this with 'cpu'
    and takes the device fields from a worker. The fields a compile cache depends on come
    from `compile_cache.running_fingerprint`, the code generated files check them with.
    """
    running = running_fingerprint(device)
    return {
        "autotune": version(),
        "python": running["python"],
        # torch.__version__ is a str subclass that yaml.safe_dump refuses to write.
        "torch": running["torch"],
        "triton": running["triton"],
        "cuda": running["cuda"],
        "platform": platform.platform(terse=True),
        "device": device,
        "device_name": running["device_name"],
        "driver": recorded_device(device).driver_version(),
    }


def model_fingerprint(model: nn.Module, batch_shapes: Sequence[Any] = ()) -> dict[str, Any]:
    """The model's class, parameter count and a hash of parameter shapes and batch shapes."""
    shapes = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    digest = hashlib.sha256(repr((shapes, list(batch_shapes))).encode()).hexdigest()[:16]
    return {
        "model_class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "shapes_sha256": digest,
    }


def batch_shapes(batches: Sequence[Any]) -> list[Any]:
    """The shape of every tensor in every batch (dict inputs by key), as `model_fingerprint` takes them."""

    def shapes(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return list(value.shape)
        if isinstance(value, Mapping):
            return {str(k): shapes(v) for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
        if isinstance(value, (tuple, list)):
            return [shapes(v) for v in value]
        return type(value).__name__

    return [shapes(batch) for batch in batches]


def differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any], keys: Sequence[str] | None = None
) -> dict[str, tuple[Any, Any]]:
    """Fields whose values differ, as name -> (recorded, current)."""
    names = keys if keys is not None else sorted(set(recorded) | set(current))
    return {k: (recorded.get(k), current.get(k)) for k in names if recorded.get(k) != current.get(k)}


def host_key(environment: Mapping[str, Any]) -> str:
    """This host and its environment in one short name, e.g. 'gpu-a-3f2c91d0': whose baselines a speedup compares with.

    Two hosts with one name but other software or devices get different keys, and so do two
    hosts with the same environment.
    """
    digest = hashlib.sha256(json.dumps(dict(environment), sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{socket.gethostname()}-{digest}"
