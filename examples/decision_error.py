"""How often the confirmation rule decides wrongly when nothing is faster than plain compile.

    python -m examples.decision_error

A simulation, not a measurement: it draws replicates' paired log-ratios from a normal
distribution with a given spread between replicates, and applies the rule the search's
confirmation applies, with autotune's own interval and outcome functions. After each replicate
from `--rounds` to `--max-rounds` (the looks), the leader (the candidate with the highest
estimate) is judged against plain compile, and the campaign stops once it is a gain, a loss or
equivalent within +/-2%. Every candidate is exactly as fast as plain compile, so every gain
decided is a false one.

Each candidate's log-ratio to plain compile shares plain compile's own replicate figure, as in
a real campaign: half of the spread is the candidate's, half is plain compile's. Subjects left
out of later replicates (racing) are not modelled: a candidate as fast as plain compile is
rarely measured slower than the leader.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections import Counter

from autotune.measure import outcome, replicate_interval

SPREADS = (0.005, 0.01, 0.02, 0.04)
"""Standard deviations of a replicate's paired log-ratio: 0.005 is the stand-ins' on a quiet machine,
0.015 to 0.076 were seen between real processes here (outputs/benchmarks/noise.md)."""


def decide(rng: random.Random, *, spread: float, candidates: int, rounds: int, max_rounds: int) -> str:
    """One campaign's outcome for its leader, with every candidate as fast as plain compile."""
    half = spread / math.sqrt(2)
    reference = [rng.gauss(0.0, half) for _ in range(max_rounds)]
    logs = [[rng.gauss(0.0, half) - r for r in reference] for _ in range(candidates)]
    said = "undecided"
    for looked in range(rounds, max_rounds + 1):
        leader = max(logs, key=lambda values: statistics.fmean(values[:looked]))
        said = outcome(replicate_interval(leader[:looked]), 0.02)
        if said != "undecided":
            break
    return said


def rates(*, spread: float, candidates: int, rounds: int, max_rounds: int, campaigns: int, seed: int) -> Counter:
    rng = random.Random(seed)
    return Counter(
        decide(rng, spread=spread, candidates=candidates, rounds=rounds, max_rounds=max_rounds)
        for _ in range(campaigns)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaigns", type=int, default=20000, help="simulated campaigns per row (default 20000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    designs = [
        ("one look, 6 replicates", 1, 6, 6),
        ("one candidate, looks after 3 to 6", 1, 3, 6),
        ("`--effort default`: 3 candidates, looks after 3 to 6", 3, 3, 6),
        ("`--effort thorough`: 5 candidates, looks after 4 to 8", 5, 4, 8),
    ]
    lines = [
        f"Every candidate exactly as fast as plain compile; {args.campaigns} simulated campaigns a row "
        f"(`python -m examples.decision_error --campaigns {args.campaigns} --seed {args.seed}`).",
        "",
        "| design | spread of a replicate's log-ratio | false gain | false loss | equivalent | undecided |",
        "|---|---|---|---|---|---|",
    ]
    for label, candidates, rounds, max_rounds in designs:
        for spread in SPREADS:
            counts = rates(
                spread=spread,
                candidates=candidates,
                rounds=rounds,
                max_rounds=max_rounds,
                campaigns=args.campaigns,
                seed=args.seed,
            )
            share = {k: counts[k] / args.campaigns for k in ("gain", "loss", "equivalent", "undecided")}
            lines.append(
                f"| {label} | {spread} | {share['gain']:.1%} | {share['loss']:.1%} | "
                f"{share['equivalent']:.1%} | {share['undecided']:.1%} |"
            )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
