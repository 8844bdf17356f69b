"""What validate says of a campaign's design (autotune.measure.tasks' design_text), measured by the engine
with stand-ins for its workers.
"""

from __future__ import annotations

import pytest

from autotune import cli, measure
from autotune.measure import CampaignRules
from autotune.measure.engine import Campaign
from autotune.measure.engine import _engine as engine
from autotune.measure.tasks import ValidationReport, design_text
from tests.measure.stands import REGIONAL, THROUGHPUT, campaign, racers

pytestmark = pytest.mark.parallel


def test_the_design_text_names_who_left_the_race_and_why(harness, stand) -> None:
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0], "trial 8": [90.0]}
    stand(rates)
    # Looks after replicates 2 and 3: eager leaves at the first, a claim made where the campaign looks.
    result = engine.measure(
        harness, racers(), objective=THROUGHPUT, rules=CampaignRules(min_replicates=2, max_replicates=3, race=True)
    )
    text = design_text(result)
    eager = result.retired["eager"]  # on the campaign's simultaneous interval, with its floor: not a point
    assert eager.startswith("after replicate 2: slower than compile, 0.50x [") and eager.endswith("(simultaneous)")
    assert "0.50x [0.50, 0.50]" not in eager
    assert f"Left out of later replicates: eager ({eager}); " in text
    assert "trial 8 (after replicate 2: slower than trial 7, 0.90x [0.90, 0.90] (95% at this look))" in text


def test_a_campaign_that_measured_nothing_says_so_without_empty_figures() -> None:
    # A validation whose configuration failed its first run: it printed "None batch(es) ... subjects alive []".
    campaign = Campaign(objective=THROUGHPUT, stopped="every run of the configuration failed")
    assert design_text(campaign) == (
        "Nothing was measured side by side. Stopped: every run of the configuration failed."
    )


@pytest.mark.parametrize(("config", "code", "said"), [([80, 81, 80], 3, True), ([100, 101, 99], 0, False)])
def test_validate_exits_3_for_a_configuration_decided_slower_than_plain_compile(
    monkeypatch, capsys, config: list[float], code: int, said: bool
) -> None:
    measured = campaign(eager=[50, 51, 50], compile=[100, 101, 99], config=config)
    report = ValidationReport(
        path="regional.yaml", model="examples.toy:model", description="regional", config=REGIONAL, campaign=measured
    )
    assert report.ok and report.slower is said
    monkeypatch.setattr(measure, "validate", lambda *args, **kwargs: report)
    assert cli.main(["validate", "regional.yaml", "-q"]) == code
    out = capsys.readouterr().out
    assert ("It is decided slower than plain torch.compile: plain torch.compile serves better here." in out) is said


def test_a_failing_configuration_still_exits_1_whatever_its_speed(monkeypatch) -> None:
    measured = campaign(eager=[50, 51, 50], compile=[100, 101, 99], config=[None, None, None])
    report = ValidationReport(
        path="regional.yaml", model="examples.toy:model", description="regional", config=REGIONAL, campaign=measured
    )
    assert not report.ok and not report.slower
    monkeypatch.setattr(measure, "validate", lambda *args, **kwargs: report)
    assert cli.main(["validate", "regional.yaml"]) == cli.EXIT_FINDINGS
