"""Where the slow state of a small shared machine lives, measured on the toy workload.

    python -m examples.noise_study --out outputs/benchmarks/noise.md

Runs eager training steps of `examples.toy:model` in half-second windows and records, with
every window, what could explain a slow one: the calibration probe (a fixed matrix product
that autotune times on every window), the CPU time the hypervisor gave to other machines
(steal, /proc/stat), this process's involuntary context switches and page faults
(/proc/self/status, /proc/self/stat), and the 1-minute load. Four designs:

* `alone`: one process, both cores (torch's default threads), 80 windows;
* `one-thread`: the same with one torch thread;
* `pinned`: both threads pinned to their own core (OMP_PROC_BIND=close, OMP_PLACES=cores);
* `alternating`: two identical processes alive together, taking turns window by window, the
  idle one stopped with SIGSTOP, as autotune's measurement sessions run them; ratios of
  adjacent windows (which should be 1) show what pairing leaves of the noise.

Nothing else may run while it measures: it refuses to start when the 1-minute load is above 0.5.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WINDOW_SECONDS = 0.5


def _steal_ticks() -> tuple[int, int]:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(v) for v in fields]
    return ticks[7], sum(ticks[:8])


def _process_counters() -> tuple[int, int]:
    """(involuntary context switches, minor page faults) of this process so far."""
    switches = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            switches = int(line.split()[1])
    faults = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])
    return switches, faults


def _child(threads: int, windows: int, commanded: bool) -> None:
    """Measure eager training windows, printing one JSON line per window; with `commanded`, one per line read."""
    import torch

    from autotune.runtime.device import CPUDevice
    from examples._shared import eager_training

    if threads:
        torch.set_num_threads(threads)
    one_pass, batches = eager_training("examples.toy:model", warm_passes=3)
    samples = sum(int(b["input_ids"].shape[0]) for b in batches)
    print(json.dumps({"ready": True}), flush=True)
    for index in range(windows):
        if commanded and not sys.stdin.readline():
            return
        probe = CPUDevice().calibration_probe()
        steal_before, switches_before = _steal_ticks(), _process_counters()
        started, passes = time.perf_counter(), 0
        while time.perf_counter() - started < WINDOW_SECONDS:
            one_pass()
            passes += 1
        seconds = time.perf_counter() - started
        steal_after, switches_after = _steal_ticks(), _process_counters()
        total = steal_after[1] - steal_before[1]
        print(
            json.dumps(
                {
                    "index": index,
                    "samples_per_second": samples * passes / seconds,
                    "probe_ms": probe * 1e3,
                    "steal": (steal_after[0] - steal_before[0]) / total if total else 0.0,
                    "involuntary_switches": switches_after[0] - switches_before[0],
                    "minor_faults": switches_after[1] - switches_before[1],
                    "load": os.getloadavg()[0],
                }
            ),
            flush=True,
        )


def _spawn(threads: int, windows: int, commanded: bool, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "examples.noise_study", "--child", str(threads), str(windows), str(int(commanded))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _read_ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line or not json.loads(line).get("ready"):
        raise SystemExit(f"the measuring process did not start: {line!r}")


def _alone(threads: int, windows: int, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    process = _spawn(threads, windows, commanded=False, env=env)
    _read_ready(process)
    assert process.stdout is not None
    rows = [json.loads(line) for line in process.stdout]
    process.wait()
    return rows


def _alternating(windows: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Two identical processes, windows A B B A ..., the idle one stopped; one (A, B) pair per turn."""
    a, b = _spawn(0, windows, commanded=True), _spawn(0, windows, commanded=True)
    for process in (a, b):
        _read_ready(process)
        os.kill(process.pid, signal.SIGSTOP)
    pairs = []
    for turn in range(windows):
        order = (a, b) if turn % 2 == 0 else (b, a)
        results = {}
        for process in order:
            assert process.stdin is not None and process.stdout is not None
            os.kill(process.pid, signal.SIGCONT)
            process.stdin.write("go\n")
            process.stdin.flush()
            results[process.pid] = json.loads(process.stdout.readline())
            os.kill(process.pid, signal.SIGSTOP)
        pairs.append((results[a.pid], results[b.pid]))
    for process in (a, b):
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait()
    return pairs


def _replicated(replicates: int, turns: int) -> dict[str, Any]:
    """New process pairs, each taking `turns` turns: how far pairs of processes differ beyond their windows."""
    means, within = [], []
    for _ in range(replicates):
        logs = [math.log(a["samples_per_second"] / b["samples_per_second"]) for a, b in _alternating(turns)]
        means.append(statistics.fmean(logs))
        within.append(statistics.variance(logs))
    window_variance = statistics.fmean(within)
    between = max(statistics.variance(means) - window_variance / turns, 0.0)
    return {
        "process pairs": replicates,
        "turns each": turns,
        "sd of a window's log-ratio": round(math.sqrt(window_variance), 3),
        "sd between process pairs": round(math.sqrt(between), 4),
        "sd of a pair's mean": round(statistics.stdev(means), 4),
        "mean ratio (should be 1)": round(math.exp(statistics.fmean(means)), 3),
    }


def _correlation(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy) if sx and sy else 0.0


def _describe(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["samples_per_second"] for r in rows]
    logs = [math.log(v) for v in rates]
    probes = [math.log(r["probe_ms"]) for r in rows]
    return {
        "design": name,
        "windows": len(rows),
        "median samples/s": round(statistics.median(rates), 1),
        "cv %": round(100 * statistics.stdev(rates) / statistics.fmean(rates), 1),
        "slowest/fastest": round(min(rates) / max(rates), 2),
        "corr(log rate, log probe)": round(_correlation(logs, probes), 2),
        "corr(log rate, steal)": round(_correlation(logs, [r["steal"] for r in rows]), 2),
        "corr(log rate, switches)": round(_correlation(logs, [r["involuntary_switches"] for r in rows]), 2),
        "steal max %": round(100 * max(r["steal"] for r in rows), 1),
        "switches/window": round(statistics.fmean(r["involuntary_switches"] for r in rows), 1),
        "probe ms": f"{min(r['probe_ms'] for r in rows):.1f}-{max(r['probe_ms'] for r in rows):.1f}",
    }


def _paired(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    logs = [math.log(a["samples_per_second"] / b["samples_per_second"]) for a, b in pairs]
    both = [p["samples_per_second"] for pair in pairs for p in pair]
    means_of_8 = [statistics.fmean(logs[i : i + 8]) for i in range(0, len(logs) - 7, 8)]
    return {
        "pairs": len(logs),
        "cv % of single windows": round(100 * statistics.stdev(both) / statistics.fmean(both), 1),
        "sd of paired log-ratio": round(statistics.stdev(logs), 3),
        "sd of the mean of 8 pairs": round(statistics.stdev(means_of_8), 3) if len(means_of_8) > 1 else None,
        "mean ratio (should be 1)": round(math.exp(statistics.fmean(logs)), 3),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks/noise.md"))
    parser.add_argument("--windows", type=int, default=80)
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child[:2], commanded=bool(args.child[2]))
        return 0
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"noise_study: the 1-minute load is {load_before:.2f}; wait for a quiet machine", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    alone = [
        _describe("alone", _alone(0, args.windows)),
        _describe("one-thread", _alone(1, args.windows)),
        _describe("pinned", _alone(0, args.windows, env={"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})),
    ]
    paired = _paired(_alternating(args.windows))
    replicated = _replicated(5, 16)
    load_after = os.getloadavg()[0]
    import torch

    text = "\n".join(
        [
            "# Where the noise of this machine lives",
            "",
            f"`python -m examples.noise_study` on {started}: torch {torch.__version__}, {os.cpu_count()} CPUs, "
            f"1-minute load {load_before:.2f} before and {load_after:.2f} after (its own work), nothing else running.",
            "",
            f"Eager training steps of `examples.toy:model`, windows of {WINDOW_SECONDS} s, {args.windows} per design.",
            "",
            _table(alone),
            "",
            "Two identical processes taking turns (ABBA, the idle one stopped):",
            "",
            _table([paired]),
            "",
            "New pairs of processes (replicates), each taking turns; the variance between pairs beyond what their",
            "windows explain is what only more replicates can average out:",
            "",
            _table([replicated]),
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
