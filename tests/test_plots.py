"""Plots a person reads: labels that do not print on top of each other."""

from __future__ import annotations

import pytest

from autotune.study.report._plots import _labels

pytestmark = pytest.mark.parallel


def test_points_close_together_share_one_label_and_others_keep_theirs() -> None:
    xs, ys = [18.1, 18.3, 14.4, 32.7], [772.0, 774.0, 810.0, 1089.0]
    assert _labels(xs, ys, ["#1", "#0", "#3", "#5"]) == [
        ((18.1, 772.0), "#1, #0"),
        ((14.4, 810.0), "#3"),
        ((32.7, 1089.0), "#5"),
    ]
    assert [text for _, text in _labels([1.0], [2.0], ["#7"])] == ["#7"], "a single point: no span to divide by"
