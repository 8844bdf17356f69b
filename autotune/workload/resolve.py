"""Resolving a `"pkg.mod:attr"` target into a `Workload`: a Workload, a module, or a factory of either."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from torch import nn

from autotune.errors import Terminated, WorkloadError
from autotune.runtime.limits import printable
from autotune.runtime.processes import (
    adopt_orphans,
    command_line,
    descendants,
    group_processes,
    kill_descendants,
    running,
    signal_group,
)
from autotune.workload import hf, lightning, trainer  # noqa: F401  (each registers its kind of target)
from autotune.workload.contract import Workload
from autotune.workload.module import module_workload, refusal
from autotune.workload.targets import target_kinds, target_of

__all__ = ["preimport", "resolve", "split_inputs", "with_inputs"]


def resolve(spec: str, *, isolated: bool = False) -> Workload:
    """Turn a `"pkg.mod:attr"` target into a Workload; the target may be a Workload, a module or a factory.

    With `isolated`, the target is first built once in a child process, so that a module or
    factory that kills its process (`os.abort()`, a crash in native code) is reported as a
    WorkloadError instead of taking the caller with it. The orchestrating commands use it;
    a worker, which is such a child already, does not.
    """
    model_spec, inputs_spec = split_inputs(spec)
    _split_spec(model_spec)
    if inputs_spec is not None:
        _split_spec(inputs_spec, flag="--inputs")
    if isolated:
        _builds_in_a_child(spec, os.getcwd())
    target = _imported(model_spec, "--model")
    inputs = None if inputs_spec is None else _imported(inputs_spec, "--inputs")
    return _as_workload(target, spec, called=False, inputs=inputs)


INPUTS_SEPARATOR = ",inputs="
"""Joins a module's target and its example inputs' into one target string, which every process resolves alike."""


def with_inputs(model: str, inputs: str | None) -> str:
    """The target string of `--model MODEL --inputs INPUTS`: 'MODEL,inputs=INPUTS' (MODEL alone without inputs)."""
    if inputs is None:
        return model
    _split_spec(inputs, flag="--inputs")
    return f"{model}{INPUTS_SEPARATOR}{inputs}"


def split_inputs(spec: str) -> tuple[str, str | None]:
    """(the model's 'pkg.mod:attr', the example inputs' or None) of a target string."""
    if not isinstance(spec, str) or INPUTS_SEPARATOR not in spec:
        return spec, None
    model, inputs = spec.split(INPUTS_SEPARATOR, 1)
    return model, inputs


def _imported(part: str, flag: str) -> Any:
    """The object `part` ('pkg.mod:attr', given as `flag`) names, its module imported from the working directory."""
    module_name, attr = _split_spec(part, flag=flag)
    _working_directory_on_path()
    try:
        module = importlib.import_module(module_name)
    except Terminated:
        raise  # the command is being stopped, not the module failing
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        hint = _missing_extra(exc)
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            hint = (
                f" Python looks for {exc.name!r} in the working directory ({os.getcwd()}) and on PYTHONPATH: run "
                f"autotune from the folder that contains it, or add that folder to PYTHONPATH."
            )
        raise WorkloadError(f"{flag} {part!r}: cannot import {module_name!r}: {detail}.{hint}") from None
    target: Any = module
    for name in attr.split("."):
        if not hasattr(target, name):
            raise WorkloadError(
                f"{flag} {part!r}: {module_name!r} has no attribute {attr!r}; "
                f"what it defines that could be one: {_public_callables(module)}."
            )
        target = getattr(target, name)
    return target


EXTRAS = {"transformers": "hf", "accelerate": "hf", "lightning": "lightning", "pytorch_lightning": "lightning"}
"""The libraries of the targets autotune knows (a transformers Trainer or model, a Lightning module) and the
autotune extra that installs each; a plain PyTorch model needs none of them."""


def _missing_extra(exc: BaseException) -> str:
    """For a library of EXTRAS that is not installed, the sentence that says how to install it; else ''."""
    name = exc.name if isinstance(exc, ModuleNotFoundError) else None
    extra = EXTRAS.get((name or "").partition(".")[0])
    if extra is None:
        return ""
    return (
        f" {name!r} is not installed: autotune installs it with its {extra!r} extra, "
        f"pip install 'autotune[{extra}]' (from a clone: pip install -e '.[{extra}]')."
    )


def preimport(spec: str) -> None:
    """Import the module `spec` names, as `resolve` would, only to pay its import early.

    Nothing is built. A spec or module that fails is left alone: `resolve` fails on it again and says why.
    """
    try:
        module_name, _ = _split_spec(split_inputs(spec)[0])
    except WorkloadError:
        return
    _working_directory_on_path()
    with contextlib.suppress(Exception, SystemExit):
        importlib.import_module(module_name)


def _working_directory_on_path() -> None:
    """Targets are found from the working directory, as `python -m` finds them."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


@functools.lru_cache(maxsize=16)
def _builds_in_a_child(spec: str, cwd: str) -> None:
    """Resolve `spec` in a fresh interpreter; raise a WorkloadError if that fails, dies or leaves processes behind."""
    done = _run_alone([sys.executable, "-c", _CHILD, spec], cwd)
    left = _left_behind(done.pid)
    if left:
        raise WorkloadError(_left_running(spec, left))
    tail = "\n".join(done.stderr.strip().splitlines()[-15:])
    if done.returncode == 0 and done.stdout.rstrip().endswith(_BUILT):
        return
    if done.returncode == 0:
        # os._exit(0), or a library's sys.exit(0) caught by nothing: the process "succeeded" without a workload,
        # and the same call in the search's own process would end it quietly, with exit code 0.
        raise WorkloadError(
            f"--model {spec!r}: the process building the workload ended with exit code 0 before the workload was "
            f"built (importing the module or calling the factory ended it, e.g. with os._exit(0)); its last "
            f"output:\n{printable(tail) or '(none)'}"
        )
    if done.returncode == _CHILD_WORKLOAD_ERROR:
        raise WorkloadError(tail.removeprefix("autotune: error: "))
    if done.returncode < 0:
        how = f"was killed by {signal.Signals(-done.returncode).name}"
    else:
        how = f"exited with code {done.returncode}"
    raise WorkloadError(
        f"--model {spec!r}: the process building the workload {how} (importing the module or calling the "
        f"factory ended it); its last output:\n{printable(tail) or '(none)'}"
    )


@dataclasses.dataclass(frozen=True)
class _Done:
    pid: int
    returncode: int
    stdout: str
    stderr: str


def _run_alone(argv: list[str], cwd: str) -> _Done:
    """Run `argv` in a process group of its own and wait for it alone, not for processes it started.

    Its output goes to files, not pipes: a process it leaves behind would hold a pipe open, and reading
    to its end would wait for that process too. Stopped while waiting, the whole group is killed.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        try:
            returncode = child.wait()
        except BaseException:
            signal_group(child.pid, signal.SIGKILL)
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        return _Done(
            child.pid,
            returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


_LINGER_SECONDS = 2.0
"""How long processes the build started may take to end after it: a pool's workers stop a moment later."""


def _left_running(spec: str, left: list[str]) -> str:
    """What is wrong with a target that left the processes `left` ('pid N: command line') running once built."""
    return (
        f"--model {spec!r}: building the workload started {len(left)} process(es) that were still running after it "
        f"was built: {'; '.join(left)}. autotune builds the workload once per trial, so they would pile up; they "
        "were killed. End every process the module or the factory starts before the factory returns, detached ones "
        "(a new session, a daemon) included (a DataLoader used to read the batches: num_workers=0, or read them all "
        "first)."
    )


def _left_behind(group: int) -> list[str]:
    """'pid N: command line' of the processes of `group` still alive after a grace period; they are then killed."""
    alive = _lingering(lambda: [pid for pid, fields in group_processes(group) if running(fields)])
    described = _described(alive)
    signal_group(group, signal.SIGKILL)
    return described


def _descendants_left() -> list[str]:
    """'pid N: command line' of this process's descendants still alive after a grace period; they are then killed.

    Detached ones included, where this process adopted them (`adopt_orphans`): a daemon that started a
    session of its own has left the process group the parent checks after this process ends.
    """
    me = os.getpid()
    alive = _lingering(lambda: [pid for pid, fields in descendants(me) if running(fields)])
    described = _described(alive)
    kill_descendants(me)
    return described


def _lingering(alive: Callable[[], list[int]]) -> list[int]:
    """What `alive()` lists once it lists nothing or the grace period (`_LINGER_SECONDS`) is over."""
    deadline = time.monotonic() + _LINGER_SECONDS
    while True:
        found = alive()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _described(pids: list[int]) -> list[str]:
    return [f"pid {pid}: {printable(command_line(pid)) or '(gone)'}" for pid in pids]


_CHILD_WORKLOAD_ERROR = 2
_CHILD = "import sys; from autotune.workload.resolve import _main; sys.exit(_main(sys.argv[1:]))"
_BUILT = "autotune: the workload was built"
"""What the child says last once the workload is built: an exit code of 0 alone does not say it was."""


def _main(argv: list[str]) -> int:
    """The child's entry point: build the workload once; exit 2 with the message if it is broken or left processes
    running."""
    adopt_orphans()
    try:
        resolve(argv[0])
    except WorkloadError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return _CHILD_WORKLOAD_ERROR
    finally:
        left = _descendants_left()
    if left:
        print(f"autotune: error: {_left_running(argv[0], left)}", file=sys.stderr)
        return _CHILD_WORKLOAD_ERROR
    print(_BUILT, flush=True)
    return 0


def _split_spec(spec: object, flag: str = "--model") -> tuple[str, str]:
    example = "examples.toy_module:batches" if flag == "--inputs" else "examples.toy:model"
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise WorkloadError(f"{flag} {spec!r}: expected 'package.module:attribute', e.g. {example!r}.")
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise WorkloadError(f"{flag} {spec!r}: expected 'package.module:attribute', e.g. {example!r}.")
    return module_name, attr


def _public_callables(module: Any) -> list[str]:
    """The module's own public callables and Workloads (not names it imported, such as NamedTuple)."""
    return sorted(
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (
            isinstance(v, (Workload, nn.Module)) or (callable(v) and getattr(v, "__module__", None) == module.__name__)
        )
    )


def _as_workload(target: Any, spec: str, called: bool, inputs: Any = None) -> Workload:
    # Before plain modules: a LightningModule is one, and says itself what batches and step it runs.
    kind = target_of(target)
    if inputs is not None and (isinstance(target, Workload) or kind is not None):
        raise WorkloadError(
            f"--model {split_inputs(spec)[0]!r} gives a {type(target).__name__}, which says its own batches: "
            f"--inputs {split_inputs(spec)[1]!r} applies to a bare nn.Module; leave it out."
        )
    if isinstance(target, Workload):
        return target
    if kind is not None:
        return kind.build(target, report=_reporter())
    if isinstance(target, nn.Module):
        if inputs is not None:
            return module_workload(target, inputs, spec, report=_reporter())
        if hf.is_pretrained_model(target):
            return hf.workload_for(target)
        example = getattr(target, "example_inputs", None)
        if callable(example):
            return module_workload(target, example, spec, report=_reporter())
        raise WorkloadError(refusal(target, split_inputs(spec)[0], called))
    is_module_class = isinstance(target, type) and issubclass(target, nn.Module)
    if callable(target) and not called and (is_module_class or not isinstance(target, type)):
        try:
            parameters = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):  # some builtins have no signature; calling them tells
            parameters = []
        required = [
            p.name
            for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise WorkloadError(f"--model {spec!r}: the factory must take no arguments, but it requires {required}.")
        try:
            result = target()
        except (WorkloadError, Terminated):
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # SystemExit and KeyboardInterrupt too: a factory that calls sys.exit() is a broken workload,
            # not a reason for `autotune search` to end quietly with its exit code.
            raise WorkloadError(
                f"--model {spec!r}: calling the factory raised {type(exc).__name__}: {printable(str(exc))[:600]}"
                + _missing_extra(exc)
            ) from None
        return _as_workload(result, spec, called=True, inputs=inputs)
    what = "the factory returned" if called else "the target is"
    found = f"the class {target.__name__}" if isinstance(target, type) else f"an object of type {type(target).__name__}"
    raise WorkloadError(
        f"--model {spec!r}: {what} {found}; accepted: an autotune.Workload, a torch.nn.Module, "
        + "".join(f"{kind.name}, " for kind in target_kinds())
        + "or a zero-argument callable returning one of them."
    )


def _reporter() -> Callable[[str], None] | None:
    """Where to say what was derived from a Trainer: said once, by the process that resolves the target for the
    user; a trial's worker keeps quiet."""
    return None if "AUTOTUNE_EVENT_FD" in os.environ else _say


def _say(line: str) -> None:
    print(f"autotune: {line}", file=sys.stderr, flush=True)
