"""What validate says of a campaign's design (autotune.measure.tasks' design_text), measured by the engine
with stand-ins for its workers.
"""

from __future__ import annotations

import pytest

from autotune.measure import Budget
from autotune.measure.engine import Campaign
from autotune.measure.engine import _engine as engine
from autotune.measure.tasks import design_text
from tests.measure.stands import THROUGHPUT, racers

pytestmark = pytest.mark.parallel


def test_the_design_text_names_who_left_the_race_and_why(harness, stand) -> None:
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0], "trial 8": [90.0]}
    stand(rates)
    result = engine.measure(
        harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=3, race=True)
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
