"""The anchor study's arithmetic: what is left of the session means' spread once the anchors' own noise is out."""

from __future__ import annotations

import math

import pytest

from examples.anchor_study import summary

pytestmark = pytest.mark.parallel


def rows(levels: dict[int, list[float]]) -> list[dict]:
    return [
        {"session": s, "anchor": i, "ratio": r, "standard_error": 0.03}
        for s, ratios in levels.items()
        for i, r in enumerate(ratios, 1)
    ]


def test_references_within_the_anchors_noise_leave_no_level_of_their_own() -> None:
    # Every session's anchors spread alike about 1.00: the session means differ less than the noise predicts.
    out = summary(rows({1: [0.96, 1.04, 1.0], 2: [1.04, 0.96, 1.0], 3: [1.0, 0.96, 1.04]}))
    assert out["between_sd"] == 0.0 and out["trial_error_sd_uncorrected"] == 0.0
    assert out["anchor_sd_log"] == pytest.approx(0.04, abs=2e-3)
    assert out["trial_error_sd_corrected_by_2"] == pytest.approx(out["anchor_sd_log"] / math.sqrt(2), abs=1e-4)
    assert out["overall_level"] == pytest.approx(1.0, abs=2e-3)


def test_references_far_apart_have_a_level_that_a_correction_takes_out() -> None:
    # The same spread inside each session, about levels 0.90, 1.00 and 1.10.
    out = summary(rows({1: [0.87, 0.93, 0.9], 2: [0.97, 1.03, 1.0], 3: [1.07, 1.13, 1.1]}))
    assert out["sessions"]["1"]["level"] == pytest.approx(0.9, abs=2e-3)
    assert out["between_sd"] > 0.08, out
    assert out["trial_error_sd_uncorrected"] > out["trial_error_sd_corrected_by_2"]
