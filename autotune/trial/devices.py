"""Where a search's workers go on the host: whether a device may be shared by several, and each one's cores.

The parent decides these before any worker starts, without initialising CUDA; what a single
device allows is asked of its `autotune.runtime.device.Device`.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.errors import ConfigError
from autotune.runtime.device import SHARED_MODES, parse_device

__all__ = ["compute_mode", "core_sets", "refuse_shared_exclusive"]


def compute_mode(device: str, visible: str | None) -> str | None:
    """What the driver says of sharing `device` under the parent's CUDA_VISIBLE_DEVICES `visible` (see
    `Device.compute_mode`): 'Default', 'Exclusive_Process', 'Prohibited', or None where nothing restricts it."""
    return parse_device(device).compute_mode(visible)


def refuse_shared_exclusive(
    devices: list[str],
    workers: int,
    visible: str | None,
    mode_of: Callable[[str, str | None], str | None] = compute_mode,
) -> None:
    """Raise ConfigError when `workers` would put two worker processes on a device whose compute mode forbids it."""
    if workers <= len(devices):
        return  # one worker per device: nothing is shared
    for device in sorted(set(devices)):
        mode = mode_of(device, visible)
        if mode is not None and mode not in SHARED_MODES:
            raise ConfigError(
                f"--workers {workers}: {device} is in compute mode {mode!r}, in which only one process at a time "
                f"may use it, and {workers} workers on {len(devices)} device(s) would share it. Use --workers "
                f"{len(devices)} (one per device), or a GPU in compute mode 'Default'."
            )


def core_sets(devices: list[str], cpus: list[int]) -> dict[str, tuple[int, ...]]:
    """Disjoint sets of the host's `cpus`, one per distinct device of `devices`, in order; {} to leave them shared.

    Workers on different GPUs run at once: without a share of its own, one worker's compile
    (Inductor uses every core it may) takes the cores another needs to launch its kernels while
    it measures. Workers of one device measure one at a time and share its set. With one device,
    or fewer CPUs than devices, nothing is split.
    """
    distinct = list(dict.fromkeys(devices))
    if len(distinct) < 2 or len(cpus) < len(distinct):
        return {}
    ordered = sorted(cpus)
    size, extra = divmod(len(ordered), len(distinct))
    sets, start = {}, 0
    for index, device in enumerate(distinct):
        end = start + size + (1 if index < extra else 0)
        sets[device] = tuple(ordered[start:end])
        start = end
    return sets
