"""Why a model compiles badly: its graph breaks and recompiles, each with where, why and the fix.

`diagnose` runs the workload once under dynamo in a fresh process (`autotune.trial.doctor`)
and turns what torch reported into a `Diagnosis`: graph breaks grouped by the place dynamo
broke (with the stack that led there, how often it was hit and a fix where one is known),
recompiles grouped by the input and axis whose size changed (or by the guard that failed),
and a one-paragraph verdict. `autotune doctor` prints it; every search runs it first and
keeps it in best.yaml and the report.
"""

from __future__ import annotations

import json
import os
import re
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.errors import SearchError, WorkloadError
from autotune.measure import Harness
from autotune.runtime.limits import printable
from autotune.study.doctor._compile_time import compile_time_lines
from autotune.study.doctor._hints import break_cause, guard_hint, guard_text, size_change, value_guard
from autotune.study.doctor._padding import padding_rows, padding_table
from autotune.trial.records import DoctorFindings
from autotune.trial.request import DOCTOR_PROGRAM, RunProtocol
from autotune.trial.runner import run_trial

__all__ = ["Diagnosis", "GraphBreak", "Recompile", "diagnose"]

PAD_MULTIPLE = 8
"""The alignment the hints suggest padding a varying length to."""


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo broke the graph, with how often and why."""

    location: str
    """Where dynamo broke: "file:line" (site-packages paths shortened)."""
    function: str
    summary: str
    """Torch's reason, in one line."""
    hits: int
    """How many times dynamo broke here while compiling (each compile of the frame counts)."""
    kind: str = ""
    """The known cause ("transformers loss selection", ...), or "" when none is known."""
    hint: str = ""
    """The fix for the known cause, or torch's own hint."""
    explanation: str = ""
    stack: tuple[str, ...] = ()
    """The model's frames that led there, outermost first: "file:line in function"."""

    @property
    def fixable(self) -> bool:
        return bool(self.kind)


@dataclass(frozen=True)
class Recompile:
    """Recompiles with one cause: the size of an input's axis changing, or another failed guard."""

    what: str
    """"input_ids:1" for a size change, else the failed guard."""
    count: int
    functions: tuple[str, ...]
    """The compiled functions that recompiled: "forward (modeling_gpt2.py:645)"."""
    changes: tuple[str, ...]
    """Sizes seen: "128 → 119"."""
    hint: str
    guard: str
    """One failed guard as dynamo wrote it."""
    fresh: int = 0
    """How many of them happened on the fresh batches (the rest on the fixed ones)."""
    kind: str = "guard"
    """"size" (an input's length), "inner" (the size of a tensor the model computes), "value" (a Python value)
    or "guard" (any other guard)."""


@dataclass
class Diagnosis:
    """The doctor's findings for one workload on one device."""

    spec: str
    device: str
    breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    graphs: int = 0
    fixed_batches: int = 0
    fresh_batches: int = 0
    recompile_limit: int = 8
    torch: str = ""
    seconds: float = 0.0
    padding: list[dict[str, Any]] = field(default_factory=list)
    """Per group of declared axes and padding strategy: the share of positions padded and the shapes left."""
    compile_seconds: float | None = None
    """Plain torch.compile's compile time over the fixed batches (when measured)."""
    compile_split: dict[str, float] = field(default_factory=dict)
    """Where that time went, in seconds per part (`autotune.trial.compile_split.SPLIT_PARTS`)."""
    blocks: list[str] = field(default_factory=list)
    """The repeated-block lists the regional scope would compile."""

    @property
    def clean(self) -> bool:
        return not self.breaks and not self.recompiles

    @property
    def recompile_count(self) -> int:
        return sum(r.count for r in self.recompiles)

    def verdict(self) -> str:
        """The findings in a few sentences: what is wrong and what to do first."""
        batches = f"{self.fixed_batches} fixed and {self.fresh_batches} fresh batches"
        if self.clean:
            return (
                f"Clean: no graph breaks and no recompiles over {batches}; the model compiles to "
                f"{self.graphs} graph{'s' if self.graphs != 1 else ''}."
            )
        parts = []
        if self.breaks:
            fixable = sum(b.fixable for b in self.breaks)
            count = len(self.breaks)
            which = {count: "all fixable" if count > 1 else "fixable", 0: "no known fix"}.get(
                fixable, f"{fixable} fixable"
            )
            causes = "; ".join(f"{b.kind or b.summary} at {b.location}" for b in self.breaks[:3])
            more = f"; and {count - 3} more" if count > 3 else ""
            parts.append(f"{count} graph break{'s' if count != 1 else ''}, {which}: {causes}{more}.")
        if self.recompiles:
            total = self.recompile_count
            fixes: list[str] = []
            declared = {row["inputs"].split(", ")[0]: row["inputs"] for row in self.padding}
            grouped = {axis for inputs in declared.values() for axis in inputs.split(", ")}
            sizes = [r.what for r in self.recompiles if r.kind == "size" and r.what not in grouped]
            if sizes:
                them = "them" if len(sizes) > 1 else "it"
                fixes.append(
                    f"on the length of {', '.join(sizes)}: mark {them} dynamic or pad to a multiple of {PAD_MULTIPLE}"
                )
            by_group: dict[str, list[str]] = {}
            for what in dict.fromkeys(r.what for r in self.recompiles if r.kind == "size" and r.what in grouped):
                inputs = next(i for i in declared.values() if what in i.split(", "))
                by_group.setdefault(inputs, []).append(what)
            fixes += [self._declared_fix(inputs, axes) for inputs, axes in by_group.items()]
            inner = [r.what for r in self.recompiles if r.kind == "inner"]
            if inner and not any(r.kind == "size" for r in self.recompiles):
                fixes.append(f"on the size of tensors the model computes ({', '.join(inner[:3])}): see the breaks")
            values = [r.what for r in self.recompiles if r.kind == "value"]
            if values:
                them = "them tensors" if len(values) > 1 else "it a tensor"
                fixes.append(f"on changing Python values ({'; '.join(values[:3])}): keep {them}")
            fixes += [f"on {r.what}: {r.hint}" for r in self.recompiles if r.kind == "guard"][:2]
            parts.append(f"{total} recompile{'s' if total != 1 else ''}, " + "; ".join(fixes).rstrip(".") + ".")
        return " ".join(parts)

    def _declared_fix(self, inputs: str, axes: Sequence[str]) -> str:
        """For axes the workload declares dynamic: what the search tries, and what learned buckets would waste."""
        rows = {row["strategy"]: row for row in self.padding if row["inputs"] == inputs}
        buckets = rows.get("buckets (4)")
        multiple = rows.get(f"multiple of {PAD_MULTIPLE}")
        them = "them" if len(axes) > 1 else "it"
        said = (
            f"on the length of {', '.join(axes)}, which the workload declares dynamic: the search tries marking "
            f"{them} and padding {them}"
        )
        if buckets and multiple:
            said += (
                f" (4 learned buckets would leave {buckets['shapes']} shapes and pad {buckets['waste']:.0%} of positions; "
                f"a multiple of {PAD_MULTIPLE}, {multiple['shapes']} and {multiple['waste']:.0%})"
            )
        return said

    def _shorter(self) -> list[str]:
        """What would shorten the compile, for this workload."""
        ways = []
        if self.blocks:
            ways.append(
                f"regional compilation: {', '.join(self.blocks)} repeat, and compiling one block for all of them "
                "compiles a fraction of the model (the search tries scope=regional)"
            )
        ways.append(
            "a warm compile cache: every search exports compile_cache.bin; load_compile_cache() before the first "
            "step loads Inductor's artifacts instead of generating and compiling them again"
        )
        if self.recompile_count:
            ways.append(
                f"fewer recompiles: each of the {self.recompile_count} above compiled the model again (marking the "
                "varying axes dynamic, or padding them, removes them)"
            )
        return ways

    def render(self) -> str:
        """The verdict, then every break and recompile with its location, cause and fix."""
        lines = [self.verdict()]
        if self.breaks:
            lines += ["", "Graph breaks"]
            for number, item in enumerate(self.breaks, 1):
                hits = f"hit {item.hits} time{'s' if item.hits != 1 else ''}"
                lines.append(
                    f"  {number}. {item.location} in {item.function} ({hits}): {item.kind or 'cause not known to autotune'}"
                )
                lines.append(f"     torch: {item.summary}")
                if item.explanation:
                    lines.append(f"     why: {item.explanation}")
                if item.stack:
                    lines.append(f"     from: {' -> '.join(item.stack)}")
                if item.hint:
                    lines.append(f"     fix: {item.hint}")
        if self.recompiles:
            lines += ["", "Recompiles"]
            for number, group in enumerate(self.recompiles, 1):
                where = ", ".join(group.functions)
                sizes = f", sizes {', '.join(group.changes)}" if group.changes else ""
                fresh = f", {group.fresh} on fresh batches" if group.fresh else ""
                lines.append(f"  {number}. {group.what}: {group.count} recompile(s) of {where}{sizes}{fresh}")
                lines.append(f"     guard: {group.guard}")
                lines.append(f"     fix: {group.hint}")
        if self.compile_split:
            lines += ["", *compile_time_lines(self.compile_seconds, self.compile_split, self._shorter())]
        if self.padding:
            lines += [
                "",
                "Padding the varying lengths, beyond what the batches hold already (each shape is a graph a static "
                "compile builds)",
            ]
            lines += padding_table(self.padding)
        limited = [r for r in self.recompiles if r.count >= self.recompile_limit - 1]
        if limited:
            lines += [
                "",
                f"Dynamo stops recompiling a function after {self.recompile_limit} versions and runs it eagerly.",
            ]
        return printable("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON- and YAML-safe)."""
        data = json.loads(json.dumps(asdict(self)))  # tuples as lists, as YAML's safe dumper and JSON want them
        data["clean"] = self.clean
        data["verdict"] = self.verdict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The inverse of to_dict (what a study or best.yaml kept)."""
        breaks = [GraphBreak(**{**b, "stack": tuple(b.get("stack", ()))}) for b in data.get("breaks", [])]
        recompiles = [
            Recompile(**{**r, "functions": tuple(r["functions"]), "changes": tuple(r["changes"])})
            for r in data.get("recompiles", [])
        ]
        plain = {
            k: data[k]
            for k in ("graphs", "fixed_batches", "fresh_batches", "recompile_limit", "torch", "seconds")
            if k in data
        }
        padding = [dict(row) for row in data.get("padding", [])]
        return cls(
            spec=data["spec"],
            device=data["device"],
            breaks=breaks,
            recompiles=recompiles,
            padding=padding,
            compile_seconds=data.get("compile_seconds"),
            compile_split=dict(data.get("compile_split") or {}),
            blocks=list(data.get("blocks") or []),
            **plain,
        )


def diagnose(
    spec: str,
    device: str = "cpu",
    *,
    seed: int = 0,
    protocol: RunProtocol | None = None,
    timeout: float = 900.0,
    measure_compile: bool = False,
) -> Diagnosis:
    """Run the workload once under dynamo in a fresh process and explain its graph breaks and recompiles.

    With `measure_compile`, it then compiles with plain torch.compile and splits where that time went.

    Raises WorkloadError when the workload cannot be built or its own step fails eagerly (no trial could run it),
    SearchError when the analysis fails (with why).
    """
    harness = Harness(
        spec=spec, summary=None, device=device, seed=seed, protocol=protocol or RunProtocol(), timeout=timeout
    )
    request = harness.request(None, program=DOCTOR_PROGRAM, measure_compile=measure_compile)
    run = run_trial(request)
    if run.state != "complete":
        detail = f"\n{run.stderr_tail}" if run.stderr_tail else ""
        if run.reason == "workload_error":
            raise WorkloadError(f"--model {spec!r}: {run.message}{detail}")
        raise SearchError(f"the doctor could not run {spec!r}: {run.reason}: {run.message}{detail}")
    if run.findings is None:
        raise SearchError(f"the doctor could not run {spec!r}: its process ended without its findings")
    return from_findings(spec, device, run.findings, seconds=run.wall_seconds)


def from_findings(spec: str, device: str, found: DoctorFindings, seconds: float = 0.0) -> Diagnosis:
    """The diagnosis of what the doctor's process reported (`autotune.trial.doctor`)."""
    inputs = set(found.inputs)
    declared = {k: list(v) for k, v in found.dynamic_dims.items()}
    return Diagnosis(
        spec=spec,
        device=device,
        breaks=_group_breaks(found.breaks),
        recompiles=_group_recompiles(found.recompiles, inputs, declared),
        graphs=found.graphs,
        fixed_batches=found.fixed_batches,
        fresh_batches=found.fresh_batches,
        recompile_limit=found.recompile_limit,
        torch=found.torch,
        seconds=round(seconds, 1),
        padding=padding_rows(found.lengths),
        compile_seconds=found.compile_seconds,
        compile_split=dict(found.compile_split),
        blocks=list(found.blocks),
    )


def _group_breaks(records: Sequence[Mapping[str, Any]]) -> list[GraphBreak]:
    groups: dict[tuple[str, int, str], list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(
            (str(record.get("file", "")), int(record.get("line", 0)), str(record.get("summary", ""))), []
        ).append(record)
    breaks = []
    for (file, line, summary), group in groups.items():
        detailed = next((r for r in group if r.get("stack")), group[0])
        stack = [f for f in detailed.get("stack", []) if _model_frame(f["file"])]
        functions = [f["function"] for f in detailed.get("stack", [])]
        text = " ".join(str(detailed.get(k, "")) for k in ("summary", "explanation", "context"))
        cause = break_cause(text, functions)
        torch_hints = list(detailed.get("torch_hints", []))
        breaks.append(
            GraphBreak(
                location=f"{_short(file)}:{line}",
                function=_function(stack[-1]["function"] if stack else (functions[-1] if functions else "?")),
                summary=summary,
                hits=len(group),
                kind=cause.kind if cause else "",
                hint=cause.hint if cause else " ".join(torch_hints[:2]),
                explanation=str(detailed.get("explanation", "")),
                stack=tuple(f"{_short(f['file'])}:{f['line']} in {_function(f['function'])}" for f in stack[-4:-1]),
            )
        )
    return sorted(breaks, key=lambda b: (-b.hits, b.location))


def _group_recompiles(
    records: Sequence[Mapping[str, Any]], inputs: set[str], declared: Mapping[str, Sequence[int]]
) -> list[Recompile]:
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        reason = str(record.get("reason", "")).strip()
        function = str(record.get("function", "?"))
        change = size_change(reason)
        guard = guard_text(reason)
        value = value_guard(guard)
        if change is not None:
            shown = _name(change.name, function)
            what = f"{shown}:{change.axis}" if shown == change.name else f"{shown} (axis {change.axis})"
            kind = "inner" if inputs and change.name not in inputs else "size"
            hint = _size_hint(change.name, change.axis, declared) if kind == "size" else _INNER_HINT
        elif value is not None:
            what, kind, hint = _name(value[0], function), "value", guard_hint(guard)
        else:
            what, kind, hint = guard or "a guard this torch does not name", "guard", guard_hint(guard)
        group = groups.setdefault(
            what,
            {"count": 0, "functions": [], "changes": [], "guard": guard, "fresh": 0, "kind": kind, "hint": hint},
        )
        group["count"] += 1
        group["fresh"] += record.get("phase") == "fresh"
        file = os.path.basename(str(record.get("file", "")))
        where = f"{_function(function)} ({file}:{record.get('line', 0)})" if file else _function(function)
        if where not in group["functions"]:
            group["functions"].append(where)
        if change is not None and len(group["changes"]) < 4:
            shown = f"{change.expected} → {change.actual}"
            if shown not in group["changes"]:
                group["changes"].append(shown)
    recompiles = [
        Recompile(
            what=printable(what)[:120],
            count=group["count"],
            functions=tuple(group["functions"]),
            changes=tuple(group["changes"]),
            hint=group["hint"],
            guard=printable(group["guard"])[:200],
            fresh=group["fresh"],
            kind=group["kind"],
        )
        for what, group in groups.items()
    ]
    return sorted(recompiles, key=lambda r: -r.count)


_INNER_HINT = (
    "a tensor the model computes changes size: it follows the inputs' lengths or their data (a boolean mask, "
    "nonzero); fixing those recompiles or breaks fixes it."
)


def _size_hint(name: str, axis: int, declared: Mapping[str, Sequence[int]]) -> str:
    mark = f"`torch._dynamo.mark_dynamic(batch[{name!r}], {axis})` before the first call"
    if axis in declared.get(name, []):
        return (
            f"its length varies from batch to batch. Mark it dynamic up front ({mark}) so one compile covers every "
            f"length, or pad it (to a multiple of {PAD_MULTIPLE}, or to buckets learned from its lengths: see "
            "Padding below); the Workload declares it dynamic, so `autotune search` tries each."
        )
    return (
        f"its length varies from batch to batch. Mark it dynamic up front ({mark}), or pad it to a multiple of "
        f"{PAD_MULTIPLE}; declare it in the Workload (`dynamic_dims={{{name!r}: [{axis}]}}`) so `autotune search` "
        "tries both."
    )


_LIBRARIES = tuple(
    os.path.normpath(p) + os.sep for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} if p
)


def _short(path: str) -> str:
    """A path as a user reads it: below site-packages for libraries, relative to the working directory for theirs."""
    normal = os.path.normpath(path) if path else path
    for library in _LIBRARIES:
        if normal.startswith(library):
            return normal[len(library) :]
    if "site-packages" + os.sep in normal:
        return normal.split("site-packages" + os.sep, 1)[1]
    try:
        relative = os.path.relpath(normal)
    except ValueError:
        return normal
    return normal if relative.startswith("..") else relative


_STDLIB = os.path.normpath(sysconfig.get_paths()["stdlib"]) + os.sep


def _model_frame(path: str) -> bool:
    """Whether a stack frame is the model's code rather than Python's, torch's module machinery or autotune's step."""
    normal = os.path.normpath(path)
    in_library = any(normal.startswith(library) for library in _LIBRARIES) or "site-packages" in normal
    if path.startswith("<") or (normal.startswith(_STDLIB) and not in_library):
        return False
    short = _short(path).replace(os.sep, "/")
    return not (short.startswith(("torch/", "autotune/")) or "/autotune/" in path.replace(os.sep, "/"))


def _name(name: str, function: str) -> str:
    """A guarded name; dynamo's `___stackN` (a value on the stack when the graph broke) as the user sees it."""
    if not name.startswith("___stack"):
        return name
    match = re.fullmatch(r"torch_dynamo_resume_in_\w+?_at_(?P<line>\d+)", function)
    return f"the value computed on line {match['line']}" if match else "a value on the stack at a graph break"


def _function(name: str) -> str:
    """A function's name as the user wrote it: dynamo's resume functions become "forward after line 23"."""
    match = re.fullmatch(r"torch_dynamo_resume_in_(?P<name>\w+?)_at_(?P<line>\d+)", name)
    return f"{match['name']} after line {match['line']}" if match else name
