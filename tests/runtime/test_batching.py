"""Padding and marking helpers: lengths, padded values, batch forms, and that they need only torch."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch

from autotune.runtime import batching
from autotune.runtime.batching import pad_axis, padded_length, prepare_inputs

pytestmark = pytest.mark.parallel


@pytest.mark.parametrize(
    ("length", "alignment", "longest", "expected"),
    [
        (13, None, None, 13),
        (13, 8, None, 16),
        (16, 8, None, 16),
        (1, 8, None, 8),
        (13, 3, None, 15),
        (13, "pow2", None, 16),
        (16, "pow2", None, 16),
        (17, "pow2", None, 32),
        (1, "pow2", None, 1),
        (13, "max", 40, 40),
        (50, "max", 40, 50),  # longer than anything tuned on: left as is, never cut
        (13, "max", None, 13),
    ],
)
def test_padded_length(length: int, alignment: object, longest: int | None, expected: int) -> None:
    assert padded_length(length, alignment, longest) == expected


def test_pad_axis_appends_the_value() -> None:
    tensor = torch.arange(6).view(2, 3)
    padded = pad_axis(tensor, 1, 5, -100)
    assert padded.shape == (2, 5) and padded.dtype == tensor.dtype
    assert torch.equal(padded[:, :3], tensor)
    assert (padded[:, 3:] == -100).all()
    assert pad_axis(tensor, 1, 3, 0) is tensor
    assert pad_axis(tensor, 0, 4, 7).shape == (4, 3)


def test_prepare_inputs_pads_a_dict_with_declared_values() -> None:
    batch = {
        "input_ids": torch.ones(2, 13, dtype=torch.long),
        "mask": torch.ones(2, 13, dtype=torch.bool),
        "labels": torch.ones(2, 13, dtype=torch.long),
        "other": torch.ones(2, 13),
    }
    dims = {"input_ids": (1,), "mask": (1,), "labels": (1,)}
    out = prepare_inputs(batch, dims, {"labels": -100}, 8, {}, ())
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "input_ids": (2, 16),
        "mask": (2, 16),
        "labels": (2, 16),
        "other": (2, 13),
    }
    assert (out["input_ids"][:, 13:] == 0).all()
    assert out["mask"].dtype == torch.bool and not out["mask"][:, 13:].any()
    assert (out["labels"][:, 13:] == -100).all()
    assert out["other"] is batch["other"]
    assert batch["input_ids"].shape == (2, 13)  # the caller's batch is left alone


def test_prepare_inputs_keeps_tuple_list_and_tensor_forms() -> None:
    x, y = torch.ones(2, 5), torch.zeros(2)
    tup = prepare_inputs((x, y), {0: (1,)}, {}, "pow2", {}, ())
    assert isinstance(tup, tuple) and tup[0].shape == (2, 8) and tup[1] is y
    lst = prepare_inputs([x, y], {0: (1,)}, {}, 4, {}, ())
    assert isinstance(lst, list) and lst[0].shape == (2, 8)
    single = prepare_inputs(x, {0: (0, 1)}, {0: 2.5}, 4, {}, ())
    assert isinstance(single, torch.Tensor) and single.shape == (4, 8)
    assert single[2:].eq(2.5).all() and single[:, 5:].eq(2.5).all()


def test_prepare_inputs_pads_to_the_longest_length_tuned_on() -> None:
    out = prepare_inputs({"ids": torch.ones(2, 13)}, {"ids": (1,)}, {}, "max", {"ids": {1: 40}}, ())
    assert out["ids"].shape == (2, 40)


def test_prepare_inputs_marks_chosen_axes_dynamic() -> None:
    batch = {"ids": torch.ones(2, 13), "mask": torch.ones(2, 13)}
    out = prepare_inputs(batch, {"ids": (1,), "mask": (1,)}, {}, None, {}, (("ids", 1),))
    assert out["ids"]._dynamo_dynamic_indices == {1}
    assert not hasattr(out["mask"], "_dynamo_dynamic_indices")
    padded = prepare_inputs(batch, {"ids": (1,)}, {}, 8, {}, (("ids", 1),))
    assert padded["ids"].shape == (2, 16) and padded["ids"]._dynamo_dynamic_indices == {1}


def test_helpers_need_only_torch() -> None:
    """They are copied verbatim into generated files, so they may import nothing but torch."""
    tree = ast.parse(inspect.getsource(batching))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"torch"}
    # Their copied source alone, with nothing but torch around it, does the job.
    namespace: dict = {"torch": torch}
    for helper in (padded_length, pad_axis, prepare_inputs):
        exec(inspect.getsource(helper), namespace)
    out = namespace["prepare_inputs"]({"ids": torch.ones(1, 5)}, {"ids": (1,)}, {"ids": 3}, 4, {}, (("ids", 1),))
    assert out["ids"].tolist() == [[1, 1, 1, 1, 1, 3, 3, 3]]
