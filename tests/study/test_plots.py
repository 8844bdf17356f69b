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


def test_the_decision_plot_shows_every_interval_with_room_for_its_label_and_readable_ticks(
    tmp_path, monkeypatch
) -> None:
    from autotune.study.report import _plots

    drawn = {}
    original = _plots._save

    def keep(plt, ax, out_dir, name):
        drawn["xlim"], drawn["ticks"] = ax.get_xlim(), list(ax.get_xticks())
        return original(plt, ax, out_dir, name)

    monkeypatch.setattr(_plots, "_save", keep)
    rows = [
        {"subject": "eager", "vs_compile": {"median": 0.88, "low": 0.78, "high": 1.01}},
        {"subject": "trial 2", "vs_compile": {"median": 1.15, "low": 0.98, "high": 1.36}},
    ]
    title, shown = _plots.decision(tmp_path, rows, 0.02, "trial 2")
    assert shown == "decision.png" and (tmp_path / "decision.png").stat().st_size > 0
    left, right = drawn["xlim"]
    assert left < 0.78 and right > 1.36 * 1.3, "the widest interval and the label beside it fit"
    visible = [t for t in drawn["ticks"] if left <= t <= right]
    assert 1.0 in visible, f"plain compile's 1x is labelled on the axis: {drawn['ticks']}"
    assert len(visible) >= 4, f"a reader needs labelled ratios on the axis: {drawn['ticks']}"


def test_a_subject_that_left_the_later_replicates_says_on_how_many_it_rests(tmp_path, monkeypatch) -> None:
    from autotune.study.report import _plots

    texts = {}
    original = _plots._save

    def keep(plt, ax, out_dir, name):
        texts["labels"] = [t.get_text() for t in ax.texts]
        return original(plt, ax, out_dir, name)

    monkeypatch.setattr(_plots, "_save", keep)
    rows = [
        {"subject": "eager", "vs_compile": {"median": 0.91, "low": 0.90, "high": 0.92, "rounds": 2}},
        {"subject": "trial 2", "vs_compile": {"median": 1.14, "low": 1.08, "high": 1.21, "rounds": 3}},
    ]
    _plots.decision(tmp_path, rows, 0.02, "trial 2")
    assert texts["labels"] == ["0.91x [0.90, 0.92] (2 replicates)", "1.14x [1.08, 1.21]"]


def test_a_retune_history_without_a_figure_says_so_instead_of_an_empty_legend(tmp_path, monkeypatch) -> None:
    import warnings

    from matplotlib import pyplot

    from autotune.study.report import _plots

    shown: list[str] = []
    real = pyplot.Axes.text

    def text(ax, x, y, s, *args, **kwargs):
        shown.append(s)
        return real(ax, x, y, s, *args, **kwargs)

    monkeypatch.setattr(pyplot.Axes, "text", text)
    retunes = [{"date": "2026-11-28", "decision": "regression", "incumbent": {"median": None}}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns of a legend with nothing in it
        assert _plots.retune_history(tmp_path, retunes) == ("Retune history", "retune_history.png")
    assert shown == ["no retune measured a figure"]
    assert (tmp_path / "retune_history.png").stat().st_size > 0


def test_importances_from_fewer_than_10_trials_come_with_a_caveat() -> None:
    import optuna

    from autotune.study.report._plots import ROUGH_IMPORTANCES, importance_caveat

    study = optuna.create_study(direction="maximize")
    distribution = {"mode": optuna.distributions.CategoricalDistribution(["default", "max-autotune"])}
    for number in range(ROUGH_IMPORTANCES):
        if number == 4:
            said = importance_caveat(study)
            assert said.startswith("Rough: estimated from 4 completed trial(s), fewer than 10"), said
        mode = "default" if number % 2 else "max-autotune"
        study.add_trial(optuna.trial.create_trial(params={"mode": mode}, distributions=distribution, value=number))
    assert importance_caveat(study) == "", "ten trials: no caveat"
