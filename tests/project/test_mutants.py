"""A one-line bug planted in each part of autotune that decides something is caught by that part's fast-tier tests.

`tests/tools/mutants.py` plants each mutant in a copy of the repository and runs the tests that
must catch it there; the checkout is never changed. Finding every mutant's line is instant and
runs in the fast tier, so a change that moves a line without updating its mutant fails at once;
planting them all takes about two minutes on two cores, and runs in the full tier.
"""

from __future__ import annotations

import pytest

from tests.tools.mutants import MUTANTS, ROOT, locate, run

pytestmark = pytest.mark.parallel  # the mutants' tests rest on no timing, and run in a copy


def test_every_mutant_finds_its_line_once_and_names_existing_tests() -> None:
    for mutant in MUTANTS:
        locate(mutant)  # raises, naming the mutant, where its line is gone or found twice
        assert mutant.tests, f"mutant {mutant.name!r} names no tests"
        missing = [test for test in mutant.tests if not (ROOT / test).is_file()]
        assert missing == [], f"mutant {mutant.name!r} names tests that do not exist"
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.slow
def test_the_fast_tier_catches_every_mutant() -> None:
    said: list[str] = []
    outcomes = run(MUTANTS, report=said.append)
    escaped = [f"{o.mutant.name} ({o.mutant.why}; {o.path})" for o in outcomes if not o.caught]
    assert escaped == [], "mutants no test caught:\n" + "\n".join(said)
    assert len(outcomes) == len(MUTANTS)
