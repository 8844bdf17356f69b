"""Where a search's workers go on the host: whether a device may be shared by several, and each one's cores.

The parent decides these before any worker starts, without initialising CUDA; what a single
device allows is asked of its `autotune.runtime.device.Device`.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.errors import ConfigError
from autotune.runtime.device import CORES_PER_COMPILE, MAX_COMPILES_AT_ONCE, SHARED_MODES, parse_device

__all__ = ["compute_mode", "core_sets", "default_workers", "refuse_shared_exclusive"]


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


def default_workers(
    devices: list[str],
    cores: int,
    visible: str | None,
    mode_of: Callable[[str, str | None], str | None] = compute_mode,
) -> tuple[int, str]:
    """The workers a search runs when --workers is not given, and why in words ('' when one per device).

    Each device gets as many as it compiles at once with its share of the host's `cores`
    (`Device.compiles_at_once`): on a GPU host compiles are CPU work and measurements GPU work,
    so several trials compile side by side while one at a time measures. Workers go round-robin
    over the devices, so every device gets the fewest any of them allows; a GPU whose compute
    mode lets one process at a time use it gets one.
    """
    share = max(cores // max(len(devices), 1), 1)
    each = []
    for device in dict.fromkeys(devices):
        count = parse_device(device).compiles_at_once(share)
        if count > 1 and (mode := mode_of(device, visible)) is not None and mode not in SHARED_MODES:
            count = 1
        each.append(count)
    per_device = min(each, default=1)
    if per_device <= 1:
        return len(devices), ""
    why = (
        f"{per_device * len(devices)} workers, chosen for {cores} cores and {len(devices)} GPU(s): {per_device} per GPU "
        f"compile side by side (one per {CORES_PER_COMPILE} cores, at most {MAX_COMPILES_AT_ONCE}) and measure one at "
        "a time; --workers N chooses another number"
    )
    return per_device * len(devices), why
