"""Every figure the README and Getting started quote is the one recorded in `outputs/benchmarks/`.

The README quotes a verdict, what the demo's search cost, a GPU's compile time and how often the
engine claims a false gain; Getting started quotes the latest timed run of each command. Each is
read here from the file it cites (a log, `timings.md`, the decision-error grid, the GPU check's
summaries) and compared, so that a new run recorded without its quote, or a quote edited without
a run, fails. `timings.md` is checked too: a timed search whose log prints its cost keeps, in its
row, the ratio to its cold compiles and the seconds beyond them.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "outputs" / "benchmarks"
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
MEASURING = ROOT / "docs" / "measuring.md"

DURATION = re.compile(r"(?:(\d+) h )?(?:(\d+) min )?(\d+(?:\.\d+)?) s\b")
"""'42 s', '3 min 05 s', '1 h 23 min 24 s' (the last number may carry decimals)."""
COST = re.compile(
    r"^Cost: (?P<wall>.+?) (?:from the doctor to the compile cache|in all), (?P<ratio>\d+\.\d+)x its "
    r"(?P<compiles>.+?) of (?P<count>\d+) cold compile\(s\), [^;]*; the rest: (?P<rest>.+)\.$",
    re.MULTILINE,
)
"""The line a search prints about its cost: its wall time against its cold compiles, then the rest."""
VERDICT = re.compile(
    r"^trial (?P<trial>\d+) is exported: a gain, (?P<compile>\d+\.\d+x \[\d+\.\d+, \d+\.\d+\]) \(\d+ replicates\) "
    r"plain torch\.compile and (?P<eager>\d+\.\d+x \[\d+\.\d+, \d+\.\d+\]) \(\d+ replicates\) eager\..*$",
    re.MULTILINE,
)
FRACTIONS = {"a sixth": 1 / 6, "a fifth": 1 / 5, "a quarter": 1 / 4, "a third": 1 / 3, "half": 1 / 2}
SEARCH_DESIGNS = ("quick", "default", "thorough")
EFFORT = "`autotune search --model examples.toy:model --effort"
"""The heading of timings.md's table of searches at each effort."""
"""The designs of decision-error.json that are a search's confirmation (`validate` is the other)."""


def seconds(text: str) -> float:
    match = DURATION.fullmatch(text.strip())
    assert match, f"not a duration: {text!r}"
    hours, minutes, secs = match.groups()
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(secs)


def durations(text: str) -> list[float]:
    return [seconds(m.group()) for m in DURATION.finditer(text)]


def flat(text: str) -> str:
    """Markdown as one line of words: no quote marks, emphasis or line breaks."""
    text = re.sub(r"^> ?", "", text, flags=re.MULTILINE).replace("**", "").replace("*", "")
    return " ".join(text.split())


@dataclass(frozen=True)
class Row:
    section: str
    cells: dict[str, str]

    @property
    def text(self) -> str:
        return " | ".join(self.cells.values())

    def log(self) -> Path | None:
        """The log the row's record links, if it links one."""
        found = re.search(r"\]\(([^)]+\.log)\)", self.cells.get("Record", ""))
        return RECORD / found.group(1) if found else None


def tables(path: Path) -> dict[str, list[Row]]:
    """Each `## ` section's table rows, keyed by the section's heading, in order."""
    found: dict[str, list[Row]] = {}
    section, header = "", None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section, header = line[3:].strip(), None
        elif line.startswith("| ") and not line.startswith("| ---"):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            if header is None:
                header = cells
            else:
                assert len(cells) == len(header), f"{path.name}, {section}: a row of {len(cells)} cells: {line[:80]}"
                found.setdefault(section, []).append(Row(section, dict(zip(header, cells, strict=True))))
        elif not line.startswith("|"):
            header = None if not line.strip() else header
    return found


def timings() -> dict[str, list[Row]]:
    return tables(RECORD / "timings.md")


def section(name: str) -> list[Row]:
    (rows,) = [rows for heading, rows in timings().items() if heading.startswith(name)]
    return rows


def cost_of(log: Path) -> re.Match[str] | None:
    return COST.search(log.read_text(encoding="utf-8"))


def cited(text: str, pattern: str) -> Path:
    """The one file under outputs/benchmarks/ that `text` links or names after `pattern`."""
    match = re.search(pattern + r"\(?`?(outputs/benchmarks/[^)`\s]+)", text)
    assert match, f"no citation of outputs/benchmarks/ after {pattern!r}"
    path = ROOT / match.group(1)
    assert path.exists(), f"{match.group(1)} is cited but missing"
    return path


def test_the_readme_verdict_is_the_one_its_log_printed() -> None:
    readme = README.read_text(encoding="utf-8")
    log = cited(readme, r"\[the whole output\]")
    printed = VERDICT.search(log.read_text(encoding="utf-8"))
    assert printed, f"{log.name} prints no verdict of a gain"
    quoted = re.search(
        r"\*\*Verdict:\*\* trial (\d+) is exported: a gain, \*\*(\S+ \[\S+ \S+\])\*\* plain torch\.compile and\s+>?\s*"
        r"(\S+ \[\S+ \S+\]) eager",
        readme,
    )
    assert quoted, "the README's verdict is not where it was"
    assert quoted.groups() == (printed["trial"], printed["compile"], printed["eager"])

    # The plain words below it say the same figures.
    ratio, low, high = re.findall(r"\d+\.\d+", printed["compile"])
    over_eager = printed["eager"].split("x")[0]
    words = flat(readme)
    assert f"run {ratio} times as fast as plain `torch.compile`" in words
    assert f"between {low} and {high} times" in words
    assert f"they are {over_eager} times as fast as no compilation" in words


def test_getting_started_quotes_the_same_verdict_and_table() -> None:
    guide = GETTING_STARTED.read_text(encoding="utf-8")
    log = cited(guide, r"the whole output is kept in\s+")
    text = log.read_text(encoding="utf-8")
    printed = VERDICT.search(text)
    assert printed
    quote = re.search(r"^> \*\*Verdict:\*\* (.+?)\n\n", guide, re.MULTILINE | re.DOTALL)
    assert quote, "Getting started's verdict is not where it was"
    assert flat(quote.group(1)) == printed.group(), "the verdict quoted is not the one printed"

    # Each row of the confirmation table: its figures, as the log's table has them for that subject.
    shown = {row.cells["subject"]: row.cells for row in tables(GETTING_STARTED).get("What the demo prints", [])}
    assert {"eager", "compile"} <= set(shown), "Getting started's confirmation table is not where it was"
    lines = {line.split("  ")[0]: line for line in text.splitlines() if re.match(r"^(eager|compile|trial \d+)  ", line)}
    for subject, cells in shown.items():
        line = lines.get(subject, "")
        assert line, f"{log.name} has no row for {subject}"
        for column in ("samples/s", "vs plain compile", "vs eager", "compile s"):
            assert cells[column] in line, f"{subject}'s {column} {cells[column]!r} is not what {log.name} printed"


def test_the_readme_search_cost_is_the_latest_demo() -> None:
    readme = flat(README.read_text(encoding="utf-8"))
    quoted = re.search(
        r"the demo's search took (?P<wall>[\d a-z]+? s) on (?P<date>\d{4}-\d\d-\d\d), (?P<ratio>\d+\.\d+) times its "
        r"(?P<compiles>[\d a-z]+? s) of cold compiles, (?P<share>[a-z ]+?) of it confirming the winner",
        readme,
    )
    assert quoted, "the README's sentence on what the demo's search cost is not where it was"
    assert "outputs/benchmarks/timings.md" in README.read_text(encoding="utf-8")
    latest = section("`bash .ci/demo`")[-1]
    assert latest.cells["Date (UTC)"].startswith(quoted["date"]), "the README does not quote the latest demo"
    phrase = f"{quoted['wall']}, {quoted['ratio']}x its {quoted['compiles']} of "
    assert phrase in latest.cells["Wall time"], f"the latest demo row does not say {phrase!r}"

    log = latest.log()
    assert log is not None and log.exists(), "the latest demo row links no log"
    cost = cost_of(log)
    assert cost, f"{log.name} prints no cost line"
    assert (cost["wall"], cost["ratio"], cost["compiles"]) == (quoted["wall"], quoted["ratio"], quoted["compiles"])
    # The checks inside it, where the log says them, follow in brackets: "confirmation 1 min 20 s (checks 5 s)".
    confirmation = re.search(r"confirmation ([\d a-z]+? s)(?: \(checks [\d a-z]+? s\))?(?:,|$)", cost["rest"])
    assert confirmation, f"{log.name}'s cost line names no confirmation"
    share = seconds(confirmation.group(1)) / seconds(cost["wall"])
    closest = min(FRACTIONS, key=lambda words: abs(FRACTIONS[words] - share))
    assert quoted["share"] == closest, f"confirming took {share:.0%} of the search, not {quoted['share']}"


def test_the_readme_gpu_compile_time_is_the_gpu_checks() -> None:
    readme = README.read_text(encoding="utf-8")
    quoted = re.search(r"on an (\w+) the toy's cold compile took (\d+) to (\d+) s", flat(readme))
    assert quoted, "the README's GPU compile time is not where it was"
    gpu, low, high = quoted[1], int(quoted[2]), int(quoted[3])
    check = cited(readme, r"\[the GPU check\]")
    assert f"The toy's cold compile took {low} to {high} s" in flat(check.read_text(encoding="utf-8"))

    # Plain torch.compile's cold compiles in the check's summaries: the search's seeded trial and the validation.
    compiles, devices = [], set()
    for summary in sorted(check.parent.glob("*/summary.json")):
        for stage in json.loads(summary.read_text(encoding="utf-8"))["stages"]:
            figures = stage.get("figures") or {}
            if stage["name"] == "environment" and figures.get("gpu"):
                devices.add(str(figures["gpu"]))
            for trial in figures.get("trials", []) if stage["name"] == "search" else []:
                if trial.get("recipe") == "plain" and trial.get("compile_seconds"):
                    compiles.append(trial["compile_seconds"])
            if stage["name"] == "validate" and isinstance(figures.get("compile_seconds"), dict):
                compiles.append(figures["compile_seconds"]["compile"])
    assert compiles, "the GPU check's summaries hold no cold compile of plain torch.compile"
    assert (round(min(compiles)), round(max(compiles))) == (low, high)
    assert devices and all(gpu in device for device in devices), f"the check ran on {devices}, not an {gpu}"


def _false_gains(rows: list[dict], designs: tuple[str, ...] | None = None) -> int:
    """The most campaigns of one cell that claimed a gain for candidates no faster than plain compile."""
    return max(
        round(row["claimed_gain"] * row["campaigns"])
        for row in rows
        if row["true_ratio"] <= 1.0 and (designs is None or row["design"] in designs)
    )


def test_the_readme_false_gain_claim_is_the_simulations_worst_cell() -> None:
    readme = flat(README.read_text(encoding="utf-8"))
    quoted = re.search(
        r"in a simulation of ([\d,]+) searches per case, .*?settings no faster than plain `torch\.compile` were "
        r"claimed faster in at most (\w+) searches in ([\d,]+)",
        readme,
    )
    assert quoted, "the README's sentence on false gains is not where it was"
    campaigns, claimed, out_of = (int(quoted[1].replace(",", "")), quoted[2], int(quoted[3].replace(",", "")))
    rows = json.loads((RECORD / "decision-error.json").read_text(encoding="utf-8"))
    assert {row["campaigns"] for row in rows} == {campaigns} == {out_of}
    assert "docs/measuring.md" in README.read_text(encoding="utf-8")
    assert int(claimed) == _false_gains(rows, SEARCH_DESIGNS)


def test_the_guide_and_the_grid_state_the_simulations_bounds() -> None:
    rows = json.loads((RECORD / "decision-error.json").read_text(encoding="utf-8"))
    worst_share = max(row["claimed_gain"] for row in rows if row["true_ratio"] <= 1.0)
    slower_exported = max(row["exported_count"] for row in rows if row["true_ratio"] < 1.0)
    coverage = min(row["covered"] for row in rows)
    out_of = rows[0]["campaigns"]
    share = f"{worst_share:.1%}"
    covered = f"{int(coverage * 1000) / 10:.1f}%"  # "at least": rounded down

    guide = flat(MEASURING.read_text(encoding="utf-8"))
    assert f"a gain is claimed for a candidate no faster than plain compile in at most {share} of campaigns" in guide
    assert f"exported in at most {slower_exported} of {out_of:,}" in guide
    assert f"the final interval covers the truth in at least {covered}" in guide

    grid = flat((RECORD / "decision-error.md").read_text(encoding="utf-8"))
    assert f"claimed or exported in at most {share} of campaigns in any row" in grid
    assert f"exported in at most {slower_exported} campaigns of {out_of:,} in any row" in grid
    assert f"in at least {covered} of campaigns" in grid


@pytest.mark.parametrize(
    ("command", "table", "level"),
    [
        ("`bash .ci/demo`", "`bash .ci/demo`", None),
        ("`autotune search --effort quick` (toy)", EFFORT, "`quick`"),
        ("`autotune search --effort default` (toy)", EFFORT, "`default`"),
        ("`bash .ci/test` (the fast tier, fresh clone)", "`bash .ci/test`", None),
    ],
)
def test_getting_started_quotes_the_latest_row_of_each_table(command: str, table: str, level: str | None) -> None:
    quoted = {row.cells["Command"]: row.cells for row in tables(GETTING_STARTED).get("Timings", [])}
    assert command in quoted, f"Getting started's timings have no row for {command}"
    rows = [row for row in section(table) if level is None or row.cells.get("Level") == level]
    latest = rows[-1]
    assert quoted[command]["Date (UTC)"] == latest.cells["Date (UTC)"], f"{command}: not the latest row"
    wall = latest.cells.get("Wall time") or latest.cells["Tier"]
    first = DURATION.search(wall.replace("**", ""))
    assert first and first.group() in quoted[command]["Wall time"], f"{command}: not the latest row's wall time"


def test_getting_started_quotes_the_latest_full_tier() -> None:
    quoted = {row.cells["Command"]: row.cells for row in tables(GETTING_STARTED).get("Timings", [])}
    full = [row for row in section("`bash .ci/run`") if "full tier" in row.cells["Machine"]]
    latest = full[-1]
    cells = quoted["`bash .ci/test --full` (the full tier, fresh clone)"]
    assert cells["Date (UTC)"] == latest.cells["Date (UTC)"]
    first = DURATION.search(latest.cells["Wall time"].replace("**", ""))
    assert first and first.group() in cells["Wall time"]


def test_each_timed_search_keeps_its_cost_beside_its_compiles() -> None:
    checked = 0
    for heading, rows in timings().items():
        for row in rows:
            log = row.log()
            if log is None:
                continue
            assert log.exists(), f"timings.md, {heading}, {row.cells['Date (UTC)']}: {log.name} is missing"
            cost = cost_of(log)
            if cost is None:
                continue  # logs from before a search printed its cost
            where = f"timings.md, {heading}, {row.cells['Date (UTC)']}"
            phrase = f"{cost['wall']}, {cost['ratio']}x its {cost['compiles']} of {cost['count']} cold compiles"
            assert phrase in row.text, f"{where}: the row does not say {phrase!r} as {log.name} does"
            beyond = row.text.split("beyond the compiles:", 1)
            assert len(beyond) == 2, f"{where}: the row gives no seconds beyond the compiles"
            wanted = Counter(s for s in durations(cost["rest"]) if s)
            missing = wanted - Counter(durations(beyond[1]))
            assert not missing, f"{where}: beyond the compiles, {sorted(missing)} s of {log.name} are not in the row"
            checked += 1
    assert checked >= 2, "no timed search with a cost line was found: the scan is broken"


def _entries() -> list[str]:
    """The record's top-level entries the repository holds: a run's own output folders (runs/, gpu-bench/) are not."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            cwd=RECORD,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return sorted(path.name for path in RECORD.iterdir() if path.name != "runs")
    return sorted({name.split("/")[0] for name in listed.split("\0") if name})


def test_the_record_has_few_entries_and_its_readme_names_each() -> None:
    entries = _entries()
    assert "timings.md" in entries, "the record's listing is broken"
    assert len(entries) <= 25, f"outputs/benchmarks/ holds {len(entries)} entries: move older ones to archive/"
    guide = (RECORD / "README.md").read_text(encoding="utf-8")
    unnamed = [name for name in entries if name != "README.md" and name not in guide]
    assert unnamed == [], f"outputs/benchmarks/README.md does not say what {unnamed} hold"


def _record_paths(text: str) -> list[str]:
    return re.findall(r"outputs/benchmarks/([\w./-]+\.(?:md|log|json))", text)


def test_every_file_of_the_record_that_the_project_names_exists() -> None:
    texts = [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "CHANGELOG.md"]
    texts += sorted((ROOT / "autotune").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in texts
        for name in _record_paths(path.read_text(encoding="utf-8"))
        if "*" not in name and not (RECORD / name).exists()
    ]
    assert missing == []

    # Links between the record's own pages.
    for page in sorted(RECORD.glob("*.md")):
        for target in re.findall(r"\]\(([^)#:]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name} links {target}, which is missing"
