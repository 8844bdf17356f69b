"""A failure's standalone reproduction: `repro.py`, which needs only torch and the user's own module, and its README.

The script holds the generated `apply_compilation` code of the culprit settings alone (the
code a trial runs, built from the validated configuration), then builds the user's workload
from their module, runs its first steps eagerly and compiled from the same weights on the same
batches, and exits 1 while they disagree or the compiled run raises. It reads the workload's
fields by name (`model`, `batches`, `task`, `optimizer`, `loss`, `forward`, `autocast`), so the
user's module may build a `Workload`; the script itself imports nothing of autotune.
"""

from __future__ import annotations

import ast
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from autotune.runtime import environment

__all__ = ["REPRO", "ReproFacts", "repro_readme", "repro_script", "write_repro"]

REPRO = "repro.py"
"""The script's name in its folder."""

_STEPS = 8
"""Steps (batches) each run takes: the whole-step check's number."""


@dataclass(frozen=True, kw_only=True)
class ReproFacts:
    """What a reproduction says about itself."""

    spec: str
    """The workload target, 'pkg.mod:attr'."""
    trial: int
    reason: str
    message: str
    culprit: tuple[str, ...]
    """The culprit settings as people read them."""
    against: str
    """'plain compile' or 'eager'."""
    device: str = "cpu"
    tolerance: float = 5e-3
    """The relative error allowed between eager and compiled."""
    stage: str = ""
    """The first failing compiler stage, where it was found."""


def repro_script(source: str, facts: ReproFacts) -> str:
    """The text of repro.py: `source` (generated apply_compilation code, its docstring dropped), then the driver."""
    module = ast.parse(source)
    body = source.splitlines()
    first = module.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    code = "\n".join(body[first.end_lineno or 0 :] if docstring else body).strip("\n")
    settings = ", ".join(facts.culprit) or "plain torch.compile"
    head = (
        f'"""Reproduces a {facts.reason} failure of torch.compile on {facts.spec}, under {settings}\n'
        f"(relative to {facts.against}).\n\n"
        "Run it from the folder where the model's module imports (the project's root): python repro.py\n"
        "It runs the first steps eagerly and compiled, from the same weights on the same batches, and\n"
        "exits 1 while the compiled run raises or disagrees with eager (0 once they agree).\n"
        "PyTorch's own bisector runs it as it is: python -m torch._inductor.compiler_bisector run python repro.py\n"
        '"""\n\n'
    )
    constants = (
        f"TARGET = {facts.spec!r}\nDEVICE = {facts.device!r}\nSTEPS = {_STEPS}\n"
        f"TOLERANCE = {facts.tolerance!r}\nREASON = {facts.reason!r}\n"
    )
    return (
        head
        + code
        + "\n\n\n# The reproduction: eager, then compiled with the settings above.\n\n"
        + constants
        + _DRIVER
    )


def repro_readme(facts: ReproFacts) -> str:
    """The README beside repro.py: what fails, under which settings, and the versions, for a bug report."""
    versions = environment.fingerprint("cpu")
    lines = [
        f"# torch.compile: {facts.reason} on {facts.spec}",
        "",
        f"Found by narrowing trial {facts.trial}'s configuration against {facts.against}.",
        "",
        f"- Failure: {facts.reason}: {facts.message.strip()[:600] or '(no message)'}",
        f"- Settings that cause it: {', '.join(facts.culprit) or 'plain torch.compile itself'}",
        f"- First failing compiler stage: {facts.stage or 'not found'}",
        "",
        "## Reproduce",
        "",
        "From the folder where the model's module imports (the project's root):",
        "",
        "```bash",
        f"python {REPRO}          # exits 1 while the failure holds",
        f"python -m torch._inductor.compiler_bisector run python {REPRO}   # which stage of the compiler",
        "```",
        "",
        "## Versions",
        "",
        f"- torch {torch.__version__}",
        f"- Python {platform.python_version()}",
        f"- CUDA {versions.get('cuda') or 'none'}, Triton {versions.get('triton') or 'none'}",
        f"- Platform {platform.platform()}",
        f"- Device {facts.device} ({versions.get('device_name') or '?'})",
        "",
    ]
    return "\n".join(lines)


def write_repro(folder: Path, source: str, facts: ReproFacts) -> Path:
    """Write repro.py and README.md into `folder` (made if missing); the script's path."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / REPRO
    script.write_text(repro_script(source, facts))
    (folder / "README.md").write_text(repro_readme(facts))
    return script


_DRIVER = '''

def build_workload():
    """The object the target names, called when it is a factory: a Workload, or a module."""
    import importlib

    module, _, attr = TARGET.partition(":")
    target = getattr(importlib.import_module(module), attr)
    if callable(target) and not isinstance(target, torch.nn.Module):
        target = target()
    return target


def first_batches(workload, count):
    import itertools

    source = workload.batches() if callable(workload.batches) else workload.batches
    return [to_device(batch) for batch in itertools.islice(iter(source), count)]


def to_device(batch):
    if isinstance(batch, torch.Tensor):
        return batch.to(DEVICE)
    if isinstance(batch, dict):
        return {key: to_device(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value) for value in batch)
    return batch


def forward(workload, model, batch):
    if getattr(workload, "forward", None) is not None:
        return workload.forward(model, batch)
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def build_optimizer(workload, model):
    """The optimizer, and what else the workload's setup returned for its own step."""
    setup = getattr(workload, "setup", None)
    if setup is None:
        return workload.optimizer(model.parameters()), ()
    built = setup(model)
    if isinstance(built, tuple) and len(built) == 2:
        return built[0], (built[1],)
    return built, ()


def tensors(value):
    """Every tensor in an output (a tensor, a tuple, a dict, a model output), in order."""
    if isinstance(value, torch.Tensor):
        return [value.detach()]
    if isinstance(value, dict) or hasattr(value, "items"):
        return [t for item in value.values() for t in tensors(item)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    return []


def run(workload, pristine, batches, compiled):
    """Each step's loss (or outputs) and each parameter's update over the steps."""
    import contextlib
    import copy

    model = copy.deepcopy(pristine).to(DEVICE)
    train = getattr(workload, "task", "infer") == "train"
    optimizer, extras = build_optimizer(workload, model) if train else (None, ())
    if compiled:
        model, optimizer = apply_compilation(model, optimizer)
    before = [p.detach().clone() for p in model.parameters()]
    autocast = getattr(workload, "autocast", None)
    results = []
    for batch in batches:
        batch = prepare_batch(batch) if compiled else batch
        casting = torch.autocast(DEVICE.split(":")[0], dtype=autocast) if autocast else contextlib.nullcontext()
        if not train:
            with torch.no_grad(), casting:
                results.append(tensors(forward(workload, model, batch)))
            continue
        if getattr(workload, "step", None) is not None:  # the workload's own training step, as it runs it
            with casting:
                loss = workload.step(model, optimizer, batch, *extras)
            results.append([torch.as_tensor(loss).detach()])
            continue
        with casting:
            output = forward(workload, model, batch)
            loss = workload.loss(output, batch) if getattr(workload, "loss", None) else output.loss
        if compiled:
            backward(loss)
        else:
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        results.append([loss.detach()])
    updates = [p.detach() - b for p, b in zip(model.parameters(), before)]
    return results, updates


def relative_error(reference, candidate):
    reference, candidate = reference.double(), candidate.double()
    if reference.shape != candidate.shape or not torch.isfinite(candidate).all():
        return float("inf")
    scale = max(float(torch.linalg.vector_norm(reference)), 1e-12)
    return float(torch.linalg.vector_norm(candidate - reference)) / scale


def differences(eager, compiled):
    """What differs between the two runs beyond TOLERANCE, in words."""
    found = []
    for step, (ours, theirs) in enumerate(zip(eager[0], compiled[0]), start=1):
        for index, (a, b) in enumerate(zip(ours, theirs)):
            error = relative_error(a, b)
            if error > TOLERANCE:
                found.append(f"step {step}: output {index} differs from eager (relative error {error:.3g})")
    for index, (a, b) in enumerate(zip(eager[1], compiled[1])):
        error = relative_error(a, b)
        if error > TOLERANCE:
            found.append(f"the update of parameter {index} differs from eager (relative error {error:.3g})")
    return found


def main():
    import copy
    import traceback

    if REASON == "recompile_limit":
        torch._dynamo.config.fail_on_recompile_limit_hit = True
    torch.manual_seed(0)
    workload = build_workload()
    model = workload if isinstance(workload, torch.nn.Module) else workload.model
    pristine = copy.deepcopy(model)
    batches = first_batches(workload, min(STEPS, getattr(workload, "num_batches", STEPS)))
    eager = run(workload, pristine, batches, compiled=False)
    try:
        compiled = run(workload, pristine, batches, compiled=True)
    except Exception:
        traceback.print_exc()
        print(f"FAIL: the compiled run raised ({REASON})")
        return 1
    found = differences(eager, compiled)
    for line in found:
        print(f"FAIL: {line}")
    if found:
        return 1
    print("OK: eager and compiled agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''
