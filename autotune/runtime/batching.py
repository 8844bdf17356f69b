"""Padding dynamic inputs to an alignment and marking axes dynamic, for one batch.

These functions are copied verbatim into every generated `apply_compilation.py` (codegen
reads their source), so they may use only `torch` and the standard library, and the
worker runs them through that generated file: what is measured is what ships.
"""

import torch


def padded_length(length, alignment, longest=None, buckets=()):
    """The length an axis of `length` is padded to under `alignment`: None, a multiple, 'pow2', 'max' or 'buckets'.

    'buckets': the smallest of `buckets` that fits; above the last one, `longest` when it is
    known (the declared maximum), else the length as it is (a new shape, which compiles).
    """
    if alignment is None:
        return length
    if alignment == "pow2":
        return 1 << max(length - 1, 0).bit_length()
    if alignment == "buckets":
        for bound in buckets:
            if length <= bound:
                return bound
        return max(length, longest or length)
    if alignment == "max":
        return max(length, longest or length)
    return -(-length // alignment) * alignment


def pad_axis(tensor, axis, length, value):
    """`tensor` extended along `axis` to `length` with `value` (returned as is when already that long)."""
    missing = length - tensor.shape[axis]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[axis] = missing
    filler = torch.full(shape, value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, filler], dim=axis)


def prepare_inputs(
    batch, dynamic_dims, pad_values, alignment, max_lengths, mark_dynamic, mark_as="dynamic", buckets=None
):
    """Pad each declared dynamic axis, then mark the chosen (input, axis) pairs dynamic (or unbacked).

    With mark_as 'sources' the pairs are marked by name when compiling, not on the batch's tensors.
    `buckets` holds each padded axis's boundaries (input -> axis -> lengths) under 'buckets' alignment.
    """
    if isinstance(batch, torch.Tensor):
        single = (batch,)
        return prepare_inputs(single, dynamic_dims, pad_values, alignment, max_lengths, mark_dynamic, mark_as, buckets)[
            0
        ]
    is_mapping = hasattr(batch, "keys")
    inputs = dict(batch) if is_mapping else dict(enumerate(batch))
    for key, axes in dynamic_dims.items():
        tensor = inputs[key]
        default = False if tensor.dtype == torch.bool else 0
        for axis in axes:
            longest = max_lengths.get(key, {}).get(axis)
            bounds = (buckets or {}).get(key, {}).get(axis, ())
            length = padded_length(tensor.shape[axis], alignment, longest, bounds)
            tensor = pad_axis(tensor, axis, length, pad_values.get(key, default))
        inputs[key] = tensor
    # mark_unbacked also drops dynamo's specialization of sizes 0 and 1. 'sources' marks by name,
    # once for the process (apply_compilation sets torch.compiler.config.dynamic_sources): nothing per batch.
    if mark_as != "sources":
        mark = torch._dynamo.decorators.mark_unbacked if mark_as == "unbacked" else torch._dynamo.mark_dynamic
        for key, axis in mark_dynamic:
            mark(inputs[key], axis)
    if is_mapping:
        return inputs
    values = [inputs[i] for i in range(len(batch))]
    return values if isinstance(batch, list) else tuple(values)
