"""Padding strategies side by side on one workload: what each wastes, how many shapes it leaves, how fast it runs.

For each declared group of varying lengths it reports, over the fixed and fresh batches, the
share of positions each strategy pads and the shapes it leaves (as `autotune doctor` does).
Then it measures, with the engine `autotune search` confirms with, plain torch.compile and static
shapes (`dynamic=False`) padded four ways: to a multiple of 8, to a power of two, to the
declared maximum, and to 4 buckets learned from the lengths, each first alone and cold (which
runs the fresh stream: its recompiles are counted there) and then in replicates of paired
windows. It writes a Markdown table and the raw JSON to outputs/benchmarks/.

    python -m examples.padding_benchmark                                   # the captioning example, tiny
    python -m examples.padding_benchmark --model mypkg.tune:model --buckets 8
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from autotune.measure import CampaignRules, Harness, Subject, Throughput, confirmation_table, measure
from autotune.measure.format import interval
from autotune.runtime.buckets import choose_buckets
from autotune.runtime.config import CompileConfig
from autotune.study.doctor import padding_rows
from autotune.study.search import observed_lengths, shared_length_groups
from autotune.trial.request import RunProtocol, check_device
from autotune.workload import resolve
from examples.benchmark import _machine, machine_text

DEFAULT_MODEL = "examples.captioning:captioning_dynamic"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.padding_benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the workload (default: {DEFAULT_MODEL})")
    parser.add_argument("--buckets", type=int, default=4, help="how many buckets to learn (default: 4)")
    parser.add_argument("--replicates", type=int, default=3, help="least replicates (default: 3)")
    parser.add_argument("--max-replicates", type=int, default=5, help="most replicates (default: 5)")
    parser.add_argument("--device", help="default: cuda when available, else cpu")
    parser.add_argument("--out", default="outputs/benchmarks", help="where the files go (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.buckets < 1:
        parser.error(f"--buckets {args.buckets}: must be 1 or more")
    device = check_device(args.device)
    started, load = time.monotonic(), os.getloadavg()[0]
    protocol = RunProtocol()
    workload = resolve(args.model)
    fixed = workload.draw_batches(seed=0)
    fresh = workload.fresh_batches(seed=0, count=protocol.fresh_batches)
    summary = workload.summary(args.model, fixed)
    lengths = observed_lengths(summary, [*fixed, *fresh])
    waste = padding_rows({f"{k}:{a}": v for (k, a), v in lengths.items()})
    subjects = [*Subject.baselines(), *_padded(summary, lengths, fixed, args.buckets)]
    print(f"padding: measuring {[s.name for s in subjects]} on {args.model} ({device})", file=sys.stderr, flush=True)
    campaign = measure(
        Harness(spec=args.model, summary=summary, device=device, protocol=protocol),
        subjects,
        objective=Throughput(),
        rules=CampaignRules(min_replicates=args.replicates, max_replicates=args.max_replicates),
    )
    rows = _rows(campaign, subjects)
    results = {
        "model": args.model,
        "date": dt.date.today().isoformat(),
        "machine": _machine(device),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "seconds": round(time.monotonic() - started, 1),
        "waste": waste,
        "subjects": rows,
        "design": campaign.design(),
        "stopped": campaign.stopped,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"padding-{args.model.split(':')[-1]}"
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2))
    (out / f"{stem}.md").write_text(_markdown(results, confirmation_table(campaign, markdown=True), argv))
    print(f"padding: wrote {out / stem}.md and .json", file=sys.stderr)
    return 0


def _padded(summary: Any, lengths: dict[Any, list[int]], fixed: list[Any], count: int) -> list[Subject]:
    """Static shapes padded to a multiple of 8, pow2, the declared maximum (when declared), and learned buckets."""
    buckets: dict[Any, dict[int, tuple[int, ...]]] = {}
    for group in shared_length_groups(summary, fixed):
        bounds = choose_buckets(lengths[group[0]], count)
        for key, axis in group:
            buckets.setdefault(key, {})[axis] = bounds
    declared = all(a in summary.max_lengths.get(k, {}) for k, axes in summary.dynamic_dims.items() for a in axes)
    configs = {
        "pad 8": CompileConfig(dynamic=False, padding_alignment=8),
        "pad pow2": CompileConfig(dynamic=False, padding_alignment="pow2"),
        **({"pad max": CompileConfig(dynamic=False, padding_alignment="max")} if declared else {}),
        f"buckets {count}": CompileConfig(dynamic=False, padding_alignment="buckets", padding_buckets=buckets),
    }
    return [Subject(name=name, config=config) for name, config in configs.items()]


def _rows(campaign: Any, subjects: list[Subject]) -> list[dict[str, Any]]:
    rows = []
    for subject in subjects:
        cold = campaign.cold.get(subject.name)
        versus = campaign.ratio(subject.name, "compile") if subject.name != "compile" else None
        rows.append(
            {
                "subject": subject.name,
                "configuration": subject.description,
                "fresh_recompiles": cold.fresh_recompiles if cold is not None else None,
                "compile_seconds": campaign.compile_seconds(subject.name),
                "vs_compile": versus.to_dict() if versus else None,
            }
        )
    return rows


def _markdown(results: dict[str, Any], confirmation: str, argv: list[str] | None) -> str:
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m examples.padding_benchmark" + "".join(f" {a}" for a in given)
    lines = [
        f"# Padding strategies on `{results['model']}`",
        "",
        f"`{command}` on {results['date']}: {machine_text(results['machine'])}; 1-minute load "
        f"{results['load_before']} before, {results['load_after']} after (nothing else running); "
        f"{results['seconds']:.0f} s in all.",
        "",
        "## What each strategy pads, over the fixed and fresh batches",
        "",
        "| inputs | strategy | share of positions padded | shapes (static graphs) | buckets |",
        "|---|---|---|---|---|",
    ]
    for row in results["waste"]:
        bounds = ", ".join(map(str, row.get("buckets", [])))
        lines.append(f"| {row['inputs']} | {row['strategy']} | {row['waste']:.1%} | {row['shapes']} | {bounds} |")
    lines += [
        "",
        "## Measured: each subject cold first (its pass over the fresh stream), then paired replicates",
        "",
        "| subject | recompiles on the fresh stream | vs plain compile |",
        "|---|---|---|",
    ]
    for row in results["subjects"]:
        recompiles = "–" if row["fresh_recompiles"] is None else str(row["fresh_recompiles"])
        lines.append(f"| {row['subject']} | {recompiles} | {interval(row['vs_compile'])} |")
    lines += ["", confirmation, "", f"Stopped: {results['stopped']}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
