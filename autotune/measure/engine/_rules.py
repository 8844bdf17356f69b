"""The rules a campaign measures by (`CampaignRules`), and those of a search's confirmation and `autotune validate`."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.measure.stats import BAND, FLOOR_RULES, FUTILITY_CHANCE, FUTILITY_RULE, FUTILITY_RULES
from autotune.trial.request import RunProtocol

__all__ = [
    "CONFIRMATION_LAST_SHARE",
    "CONFIRMATION_LOOKS",
    "MOST_WINDOWS",
    "VALIDATION_MAX_REPLICATES",
    "VALIDATION_PRECISION",
    "VALIDATION_REPLICATES",
    "VALIDATION_SECONDS",
    "CampaignRules",
    "confirmation_rules",
    "first_windows",
    "validation_rules",
]

MOST_WINDOWS = 40
"""Windows per replicate at most: past this, a replicate is long enough for the machine's state to change."""


@dataclass(kw_only=True)
class CampaignRules:
    """The rules a campaign measures by: how many replicates and seconds it may spend (its budget: `min_replicates`,
    `max_replicates`, `seconds`), how it sizes them, and when it stops (decided, precise, or no gain left)."""

    min_replicates: int = 3
    """Replicates before the campaign may stop."""
    max_replicates: int = 9
    """Replicates at most. Nine, not eight: under the decision-error simulation's shared-machine noise a real 5% gain
    at a spread of 0.02 was exported in 88% of confirmations against 83% (`examples/decision_error.py`), at the cost
    of one replicate more in those still undecided after eight."""
    windows: int = 12
    """Windows per subject in each of the first replicates (`first_windows` gives it from the protocol)."""
    most_windows: int = MOST_WINDOWS
    """Windows per subject in a replicate at most, whatever the variance components say."""
    decide_within: float = BAND
    """The band around 1 inside which a ratio counts as no difference (equivalence)."""
    precision: float | None = None
    """Also measure until the leader's interval is at most this wide each way (0.03: +/-3%)."""
    seconds: float | None = None
    """Wall seconds of replicates (after the first runs) at most."""
    reference: str = "compile"
    race: bool = False
    """Leave out of later replicates the subjects that no longer bear on the question (see `retire`)."""
    looks: int | None = None
    """Looks to plan from `min_replicates` to `max_replicates`, evenly spaced (None: one after every replicate): a campaign
    decides, or stops for want of a gain, only at them."""
    last_share: float = 0.5
    """The share of each candidate's error its last look spends (`Looks.last_share`)."""
    stop_decided: bool = True
    """Stop at a look once the leader's ratio to `reference` is decided (a gain, a loss, equivalence). A Pareto front's
    confirmation does not: it reads every subject's compile times too, which a stop on speed alone would leave as
    wide as its first few cold compiles make them (a pick such as `fastest:2x` could then not be made)."""
    futility: bool = False
    """Stop at a look once no subject can be shown faster than `reference` any more: every one's upper bound
    (`upper_bound`) lies inside the band. It claims nothing: the campaign exports what it would have without a gain."""
    futility_rule: str = FUTILITY_RULE
    """How `futility` judges that no gain is left (`FUTILITY_RULES`): `chance`, once no subject would be claimed a gain
    at the last look in `futility_chance` of campaigns even at its upper bound; `band`, once every upper bound lies
    inside the band."""
    futility_chance: float = FUTILITY_CHANCE
    """Under the `chance` rule, the chance of a gain at the last look (were a subject as fast as its upper bound) below
    which the subject no longer keeps the campaign going."""
    floor_rule: str = "measured"
    """Where the floor under the intervals' spread comes from (`FLOOR_RULES`): `measured` from the campaign's own
    replicates on its device, at most `REPLICATE_SD_FLOOR`; `fixed`, that constant on every device."""
    reruns: int = 2
    """Replicates measured on a busy machine that are set aside and run again, at most, in a campaign
    (`autotune.measure.engine._spoiled`); 0: every replicate counts as it was measured."""
    cold_compiles: bool = False
    """Before each replicate, compile every configuration it runs again, alone and cold in an empty folder, in a new
    random order: compile time then has one measurement per replicate, paired like the throughput, and an interval
    (`Campaign.compile_ratio`, `Campaign.extra_compile`). For campaigns in which compile time decides (`time-to:N`, a
    Pareto front: `Objectives.compile_decides`) and `autotune validate --cold-compiles`. Without it, compile time is
    each subject's one first run: shown, with no interval, and deciding nothing."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicates <= self.max_replicates:
            raise ValueError(
                f"replicates: 1 <= min_replicates <= max_replicates must hold, got ({self.min_replicates=}, {self.max_replicates=})"
            )
        if self.reruns < 0:
            raise ValueError(f"reruns: {self.reruns} must be >= 0")
        if self.windows < 2:
            raise ValueError(f"windows: {self.windows} must be >= 2: a replicate's variance needs two windows")
        if self.looks is not None and self.looks < 1:
            raise ValueError(f"looks: {self.looks} must be >= 1 (None: a look after every replicate)")
        if self.floor_rule not in FLOOR_RULES:
            raise ValueError(f"floor_rule: {self.floor_rule!r} is not one of {FLOOR_RULES}")
        if self.futility_rule not in FUTILITY_RULES:
            raise ValueError(f"futility_rule: {self.futility_rule!r} is not one of {FUTILITY_RULES}")
        if not 0 < self.futility_chance < 1:
            raise ValueError(f"futility_chance: {self.futility_chance} must lie in (0, 1), e.g. 0.05")


def first_windows(protocol: RunProtocol) -> int:
    """Windows per subject in a campaign's first replicates: a search trial's paired windows, at least 4.

    Few, since a replicate's start-up costs more than its windows, and the variation between
    replicates outweighs what more windows in each would average out: on the toy (2-core CPU),
    a start-up of 16 s against 1.5 s a turn, and a replicate's own spread of 0.049 beside a
    window's 0.046, make 4 windows the best use of the time (`windows_per_replicate`), and 10
    as many cost a quarter more per replicate for a replicate 4% more precise. From the third
    replicate on, the campaign's own variance components choose.
    """
    return max(4, protocol.windows)


CONFIRMATION_LOOKS: int | None = None
"""Looks a search's confirmation plans, from its first replicate that may stop to its last (None: after every one)."""
CONFIRMATION_LAST_SHARE = 0.75
"""The share of each candidate's error a confirmation spends at its last look."""


def confirmation_rules(protocol: RunProtocol, *, min_replicates: int, max_replicates: int) -> CampaignRules:
    """How a search confirms its best trials: `min_replicates` to `max_replicates` replicates, racing, looking
    after every one (`CONFIRMATION_LOOKS`), until decided or no gain is left to find.

    Its looks and the share of the error its last look spends were chosen on the simulation of the engine
    (outputs/benchmarks/decision-error.md): half the error at the last look found a real 5% gain at a spread of
    0.02 in 87% of `--effort default` campaigns, three quarters in 91%. Three looks (after 3, 6 and 8) were
    chosen before a campaign could stop for want of a gain; with that stop every look is also a chance to end
    a campaign with nothing to find, and a look after every replicate decides a real 10% gain half a replicate
    to a replicate sooner and stops a null campaign sooner at wide spreads, with the same bounds and power."""
    return CampaignRules(
        min_replicates=min_replicates,
        max_replicates=max_replicates,
        windows=first_windows(protocol),
        race=True,
        looks=CONFIRMATION_LOOKS,
        last_share=CONFIRMATION_LAST_SHARE,
        futility=True,
    )


VALIDATION_REPLICATES = 3
VALIDATION_MAX_REPLICATES = 20
VALIDATION_PRECISION = 0.03
VALIDATION_SECONDS = 180.0


def validation_rules(
    protocol: RunProtocol,
    *,
    replicates: int = VALIDATION_REPLICATES,
    max_replicates: int = VALIDATION_MAX_REPLICATES,
    precision: float | None = VALIDATION_PRECISION,
    seconds: float | None = VALIDATION_SECONDS,
) -> CampaignRules:
    """How `autotune validate` measures: from `replicates` replicates until +/-`precision` (None: until decided),
    `max_replicates` replicates, or `seconds` of replicates, racing."""
    return CampaignRules(
        windows=first_windows(protocol),
        min_replicates=replicates,
        max_replicates=max(max_replicates, replicates),
        precision=precision,
        seconds=seconds,
        race=True,
    )
