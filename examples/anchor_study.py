"""Is a search's live plain compile at a level of its own, and do a search's anchors find it or add noise?

    python -m examples.anchor_study --workload examples.toy:model --sessions 3 --anchors 6

A search pairs every trial with one live plain-compile worker (the reference), and divides each
trial's ratio by the geometric mean of a few anchors: fresh warm restarts of plain compile paired
with the reference as a trial is (`LiveReference.level`). That correction is right when the
reference's own level differs from a fresh process's by more than the anchors' figures vary; when
it does not, the division adds the anchors' noise to every trial.

Each of `--sessions` sessions starts the baselines anew (a new reference) and pairs `--anchors`
anchors with it as a search does (the protocol's windows, more windows while imprecise). Prints a
JSON line per anchor (its ratio and the standard error its windows give), then:

- per session, the mean log level, the anchors' spread and the mean standard error of one anchor;
- across sessions, the spread of the session means against what the anchors' own spread alone
  predicts (`within / anchors`): what is left over is the reference's own level (`between_sd`);
- what a correction by two anchors (a search's usual count) does to a trial's error: its
  expected error with the correction (the reference's level is gone, two anchors' noise added)
  and without it (the reference's level stays).

Nothing else may run while it measures: the 1-minute load before and after is printed.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from autotune import resolve
from autotune.measure.engine import Harness
from autotune.measure.tasks import anchor_reference, measure_baselines
from autotune.study.search._loop import CONTENDER_WINDOWS
from autotune.trial.forkserver import close_servers
from examples._shared import between_loads, study_parser

SEARCH_ANCHORS = 2
"""How many anchors a search of a few trials runs (one before the first trial, one after four)."""


def session(spec: str, number: int, *, anchors: int, seed: int) -> list[dict[str, Any]]:
    """New baselines (a new live reference), then `anchors` anchors paired with it: a row per anchor."""
    workload = resolve(spec, isolated=True)
    harness = Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()))
    rng = random.Random(seed + number)
    with contextlib.ExitStack() as later:  # undone last to first: the reference, the servers, the folder
        root = Path(tempfile.mkdtemp(prefix="anchor-study-"))
        later.callback(shutil.rmtree, root, ignore_errors=True)
        later.callback(close_servers)
        baselines = measure_baselines(harness, root, windows=harness.protocol.windows, seed=seed + number)
        later.callback(baselines.close)
        reference = baselines.reference
        if reference is None or baselines.reference_name != "compile":
            raise SystemExit("anchor_study: plain compile did not run; nothing to anchor")
        windows = harness.protocol.windows
        rows = []
        for index in range(1, anchors + 1):
            ratio = anchor_reference(
                reference, windows=windows, rng=rng, more_windows=(CONTENDER_WINDOWS - 1) * windows
            )
            if ratio is None:
                raise SystemExit(f"anchor_study: anchor {index} of session {number} did not finish its windows")
            rows.append(
                {
                    "session": number,
                    "anchor": index,
                    "ratio": round(ratio, 4),
                    "standard_error": _rounded(reference.level_errors[-1]),
                    "seconds": round(reference.anchor_seconds[-1], 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        return rows


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per session and across sessions: levels, spreads, and what a two-anchor correction does."""
    sessions = sorted({r["session"] for r in rows})
    logs = {s: [math.log(r["ratio"]) for r in rows if r["session"] == s] for s in sessions}
    errors = [r["standard_error"] for r in rows if r["standard_error"] is not None]
    per_session = {
        str(s): {
            "anchors": len(values),
            "level": round(math.exp(statistics.fmean(values)), 4),
            "sd_log": round(statistics.stdev(values), 4) if len(values) > 1 else None,
        }
        for s, values in logs.items()
    }
    # The anchors' spread about their own session's mean, pooled: one anchor's error as an estimate.
    deviations = [x - statistics.fmean(values) for values in logs.values() for x in values]
    freedom = len(deviations) - len(sessions)
    within = math.sqrt(sum(d * d for d in deviations) / freedom) if freedom > 0 else None
    out: dict[str, Any] = {
        "sessions": per_session,
        "anchor_sd_log": _rounded(within),
        "mean_window_standard_error": _rounded(statistics.fmean(errors)) if errors else None,
        "overall_level": round(math.exp(statistics.fmean(x for values in logs.values() for x in values)), 4),
    }
    if within is not None and len(sessions) > 1:
        means = [statistics.fmean(values) for values in logs.values()]
        count = statistics.fmean(len(values) for values in logs.values())
        observed = statistics.variance(means)
        # What the session means would vary by if every reference ran at the same level: the anchors' own noise.
        expected = within**2 / count
        between = math.sqrt(max(observed - expected, 0.0))
        out |= {
            "session_means_sd": round(math.sqrt(observed), 4),
            "expected_from_anchor_noise_sd": round(math.sqrt(expected), 4),
            "between_sd": round(between, 4),
            f"trial_error_sd_corrected_by_{SEARCH_ANCHORS}": round(within / math.sqrt(SEARCH_ANCHORS), 4),
            "trial_error_sd_uncorrected": round(between, 4),
        }
    return out


def main() -> None:
    parser = study_parser(__doc__, "examples.toy:model")
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--anchors", type=int, default=6)
    parser.add_argument("--json", type=Path, help="also write the rows and the summary to this file")
    args = parser.parse_args()
    if args.sessions < 1 or args.anchors < 2:
        parser.error(f"--sessions must be at least 1 and --anchors at least 2, got {args.sessions} and {args.anchors}")

    def measure() -> list[dict[str, Any]]:
        sessions = range(1, args.sessions + 1)
        return [row for s in sessions for row in session(args.workload, s, anchors=args.anchors, seed=args.seed)]

    rows = between_loads(measure)
    result = summary(rows)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
