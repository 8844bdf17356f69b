"""Which GPU a worker sees, and whether a GPU may be shared: read from the parent's environment and nvidia-smi.

The parent decides these before any worker starts, without initialising CUDA.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.errors import ConfigError
from autotune.runtime import environment

__all__ = ["SHARED_MODES", "compute_mode", "core_sets", "refuse_shared_exclusive", "visible_device"]

SHARED_MODES = ("Default",)
"""nvidia-smi compute modes in which several processes may use one GPU at once."""


def visible_device(device: str, visible: str | None) -> str:
    """The worker's CUDA_VISIBLE_DEVICES for `device` ('cuda' or 'cuda:N') under the parent's `visible` (None: unset).

    'cuda:N' means the parent's N-th visible GPU, as torch numbers them in the parent: under
    CUDA_VISIBLE_DEVICES=4,5 'cuda:0' is physical GPU 4. The entry is passed on as the parent
    has it, so GPU and MIG UUIDs work alike. 'cuda' is the parent's first visible GPU.
    """
    index = int(device.partition(":")[2] or 0)
    if visible is None:
        return str(index)
    entries = [e.strip() for e in visible.split(",")]
    # CUDA stops at the first entry it cannot parse; an empty value hides every GPU.
    entries = entries[: next((i for i, e in enumerate(entries) if not e or e.startswith("-")), len(entries))]
    if index >= len(entries):
        raise ConfigError(
            f"--device {device!r}: CUDA_VISIBLE_DEVICES={visible!r} makes {len(entries)} GPU(s) visible"
            + (f", cuda:0 to cuda:{len(entries) - 1}." if entries else "; set it to the GPUs autotune may use.")
        )
    return entries[index]


def compute_mode(device: str, visible: str | None) -> str | None:
    """The compute mode nvidia-smi reports for `device` ('Default', 'Exclusive_Process', 'Prohibited'), or None
    where it cannot say (no nvidia-smi, a MIG instance, an error)."""
    entry = visible_device(device, visible)
    if entry.startswith("MIG-"):
        return None
    return environment.query_gpu("compute_mode", entry)


def refuse_shared_exclusive(
    devices: list[str],
    workers: int,
    visible: str | None,
    mode_of: Callable[[str, str | None], str | None] = compute_mode,
) -> None:
    """Raise ConfigError when `workers` would put two worker processes on a GPU whose compute mode forbids it."""
    if workers <= len(devices):
        return  # one worker per device: nothing is shared
    for device in sorted(set(d for d in devices if d.startswith("cuda"))):
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
