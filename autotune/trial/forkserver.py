"""Workers forked from a pre-imported server: a new process per run, without paying the imports again.

Starting `python -m autotune.trial.worker` costs seconds of CPU before the run does anything:
the interpreter, torch, dynamo, Inductor and the workload's module import, and every subject of
every replicate pays them. A fork server pays them once.
`python -m autotune.trial.forkserver` imports what a worker needs, the workload's module
included, then forks one child per run. Each child is a new process as `python -m` would
start it: a session of its own, its own environment, descriptors, working directory and
standard streams. It builds, compiles and measures nothing its server did: the server never
runs a tensor operation, so no thread pool, allocator state or compiled code is inherited.

What a process reads once at start must be the same, so a server serves only the runs whose
start-up environment is its own (`startup_key`): every variable but those naming a run's own
descriptors and cache folders, which nothing reads before the run starts. A server refuses to
fork where forking is unsafe: while a thread of Python's runs beside it, or once CUDA is
initialised, or once its driver is (a child forked then could not use CUDA; the workload's own
`torch.cuda.is_available()` on import is asked through NVML, which leaves the driver alone). The
device seam decides which devices fork: `Device.forks_workers`. Where no
server can start, workers start by `python -m` as before; AUTOTUNE_FORK_WORKERS=0 asks for that.

The server reaps its children and reports their exit codes: `ForkedProcess` is what the parent
holds instead of a `subprocess.Popen`. What a child keeps of its server: the libraries' addresses
and Python's hash seed, the same for every child of one server (a new interpreter draws its own).
Forked and new restarts of one configuration measured alike (outputs/benchmarks/noise.md).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import logging
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from autotune.trial.events import (
    COMMAND_FD_VARIABLE,
    EVENT_FD_VARIABLE,
    HOLD_VARIABLE,
    PARENT_PID_VARIABLE,
    PAUSE_FD_VARIABLE,
    end_detached,
)
from autotune.trial.records import WireRecord
from autotune.trial.request import DOCTOR_PROGRAM, WORKER_PROGRAM

__all__ = [
    "DISABLE_VARIABLE",
    "FORKED_PROGRAMS",
    "PER_RUN_VARIABLES",
    "ForkServer",
    "ForkRequest",
    "ForkServerUnavailable",
    "ForkedProcess",
    "WorkerProcess",
    "close_servers",
    "forking_enabled",
    "main",
    "process_alive",
    "start_process",
    "startup_key",
]

DISABLE_VARIABLE = "AUTOTUNE_FORK_WORKERS"
"""Set to 0 to start every worker with `python -m` (a new interpreter, which imports everything again)."""
PER_RUN_VARIABLES = frozenset(
    {
        EVENT_FD_VARIABLE,
        COMMAND_FD_VARIABLE,
        PAUSE_FD_VARIABLE,
        HOLD_VARIABLE,
        PARENT_PID_VARIABLE,
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        # pytest names the running test in its process's environment, which a search run from a test inherits.
        "PYTEST_CURRENT_TEST",
    }
)
"""Variables that differ from run to run and that no import reads: a run's descriptors and cache folders."""
FORKED_PROGRAMS = (WORKER_PROGRAM, DOCTOR_PROGRAM)
"""The programs a server imports before it forks, and so the only ones it starts; any other starts by `python -m`."""
MAX_SERVERS = 3
"""Servers a process keeps at most (one per start-up environment and workload module); the oldest goes first."""
STARTUP_SECONDS = 180.0
"""How long a server may take to import before its parent gives up on it and starts workers by `python -m`."""
NVML_CHECK_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"
"""Set to 1 in a server, so that torch.cuda.is_available() and device_count() ask NVML, not CUDA's driver."""
_SOCKET_VARIABLE = "AUTOTUNE_FORKSERVER_FD"
_PRELOAD_VARIABLE = "AUTOTUNE_FORKSERVER_PRELOAD"
_MAX_MESSAGE = 1 << 20
_TITLE_ROOM = 1024
_log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ForkRequest(WireRecord):
    """What the search asks the server to fork a child for, one JSON message with the descriptors beside it."""

    KIND: ClassVar[str] = "fork"
    SENDER: ClassVar[str] = "the search"
    program: str
    """The module whose `main(args)` the child runs, as `python -m` would."""
    args: list[str]
    env: dict[str, str]
    """The child's whole environment."""
    cwd: str
    fds: list[str]
    """The environment variables set to the descriptors sent with the request, in their order (after stdout)."""
    cpus: list[int]
    """The cores the child may run on; empty: those of the server."""


class ForkServerUnavailable(Exception):
    """A server could not start, refused to fork, or is gone; the run starts by `python -m` instead."""


class WorkerProcess(Protocol):
    """What the parent holds of a worker process: a `subprocess.Popen` or a `ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


# -- the parent's side ---------------------------------------------------------------------------------


class ForkServer:
    """One running server, seen from the process that forks workers through it."""

    def __init__(self, env: Mapping[str, str], cwd: str, preload: str = "", timeout: float = STARTUP_SECONDS) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server_env = {k: v for k, v in env.items() if k not in PER_RUN_VARIABLES}
        server_env[_SOCKET_VARIABLE] = str(theirs.fileno())
        server_env[_PRELOAD_VARIABLE] = preload
        # The server's own output (an import that failed, a traceback) goes to a file kept for the refusal's message.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the server's life, closed in close()
        self.process = subprocess.Popen(
            # Blanks after the program: room for each child to write its own command line there (`_retitle`).
            [sys.executable, "-m", "autotune.trial.forkserver", " " * _TITLE_ROOM],
            env=server_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,  # a Ctrl-C meant for the search does not reach it
        )
        theirs.close()
        self.socket = ours
        self.lock = threading.Lock()
        self.exits: dict[int, int] = {}
        self.gone = False
        message = self._next(timeout)
        if message is None or "ready" not in message:
            why = (message.get("refused") if message else None) or f"the fork server did not start: {self._log_tail()}"
            self.close()
            raise ForkServerUnavailable(why)

    def spawn(
        self,
        program: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        stdout: int,
        fds: Mapping[str, int],
        cpus: Collection[int] = (),
    ) -> ForkedProcess:
        """Fork a child that runs `program`'s `main(args)` with `env`, in `cwd`, its output to `stdout`.

        `fds` maps the names of environment variables to the parent's descriptors they stand for: the child
        gets each descriptor and the variable is set to its number there. `cpus`: the cores it may run on.
        """
        names = list(fds)
        request = ForkRequest(program=program, args=list(args), env=dict(env), cwd=cwd, fds=names, cpus=list(cpus))
        payload = json.dumps(request.to_json())
        with self.lock:
            if self.gone:
                raise ForkServerUnavailable("the fork server is gone")
            try:
                socket.send_fds(self.socket, [payload.encode()], [stdout, *(fds[name] for name in names)])
            except OSError as error:
                self.gone = True
                raise ForkServerUnavailable(f"the fork server is gone: {error}") from error
            message = self._next(STARTUP_SECONDS)
        if message is None or "started" not in message:
            raise ForkServerUnavailable(str(message.get("failed")) if message else "the fork server is gone")
        return ForkedProcess(self, int(message["started"]))

    def returncode(self, pid: int, wait: float = 0.0) -> int | None:
        """The exit code of child `pid` once the server has reaped it (waiting up to `wait` s for news); else None."""
        with self.lock:
            if pid not in self.exits and not self.gone:
                self._next(wait, only_exits=True)
            if pid in self.exits:
                return self.exits[pid]
            if self.gone and not process_alive(pid):
                return -signal.SIGKILL  # its server died before it could say; the child died with it
            return None

    def close(self) -> None:
        """End the server (its children end with it, as they do when their parent dies)."""
        with contextlib.suppress(OSError):
            self.socket.close()
        self.gone = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.log.close()

    def _next(self, timeout: float, *, only_exits: bool = False) -> dict[str, Any] | None:
        """The server's next message that is not an exit (exits are kept); None after `timeout` or when it is gone.

        With `only_exits`, return after the messages already there (and any within `timeout`) are taken.
        """
        deadline = time.monotonic() + timeout
        while not self.gone:
            ready, _, _ = select.select([self.socket], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            try:
                data = self.socket.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                self.gone = True
                return None
            message = json.loads(data)
            if "exit" in message:
                self.exits[int(message["exit"])] = int(message["code"])
                if only_exits:
                    deadline = time.monotonic()  # take what else is there, without waiting again
                continue
            return message
        return None

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            self.log.seek(0)
            lines = self.log.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else "no output"
        return "no output"


class ForkedProcess:
    """A worker forked by a `ForkServer`: the `pid`, `poll` and `wait` of a `subprocess.Popen`."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 0.5 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
            self.returncode = self.server.returncode(self.pid, wait=min(left, 0.1))
        return self.returncode


_SERVERS: OrderedDict[tuple[Any, ...], ForkServer | None] = OrderedDict()
_SERVERS_LOCK = threading.Lock()


def forking_enabled() -> bool:
    """Whether workers may be forked here: on Linux, unless AUTOTUNE_FORK_WORKERS=0."""
    return sys.platform.startswith("linux") and os.environ.get(DISABLE_VARIABLE, "1").strip() not in {
        "0",
        "no",
        "false",
    }


def startup_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What a process reads once at start: its environment without the run's own variables."""
    return tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN_VARIABLES))


def start_process(
    program: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    stdout: int,
    fds: Mapping[str, int],
    fork: bool,
    preload: str = "",
    cpus: Collection[int] = (),
) -> WorkerProcess:
    """Start `python -m program args` in a session of its own: forked from a server where `fork` allows, else anew.

    `env` names the descriptors in `fds` by the parent's numbers; a forked child gets its own numbers in them.
    `preload` is a workload spec whose module the server imports before it forks. `cpus`, when given, are the
    only cores the process (and every thread and process it starts) may run on.
    """
    if fork and program in FORKED_PROGRAMS and forking_enabled():
        server = _server(env, cwd, preload)
        if server is not None:
            try:
                return server.spawn(program, args, env, cwd, stdout, fds, cpus)
            except ForkServerUnavailable as why:
                _log.warning("workers start by python -m from now on: %s", why)
                _forget(server)
    process = subprocess.Popen(
        [sys.executable, "-m", program, *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stdout,
        pass_fds=tuple(fds.values()),
        start_new_session=True,  # its own process group, so compile workers die with it
        cwd=cwd,
    )
    if cpus:
        # Before torch starts its threads (it is still importing): they, and Inductor's compile processes, inherit the set.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(process.pid, cpus)
    return process


def close_servers() -> None:
    """End every server this process started (at exit, and in tests)."""
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s is not None]
        _SERVERS.clear()
    for server in servers:
        server.close()


def _server(env: Mapping[str, str], cwd: str, spec: str) -> ForkServer | None:
    module, colon, attribute = spec.partition(":")
    spec = spec if colon and module and attribute and ":" not in attribute else ""  # only what resolve would import
    key = (startup_key(env), cwd, module if spec else "")
    with _SERVERS_LOCK:
        if key in _SERVERS:
            _SERVERS.move_to_end(key)
            server = _SERVERS[key]
            if server is None or not server.gone:
                return server
        try:
            server = ForkServer(env, cwd, spec)
        except (ForkServerUnavailable, OSError) as why:
            _log.warning("workers start by python -m: %s", why)
            server = None
        _SERVERS[key] = server
        while sum(s is not None for s in _SERVERS.values()) > MAX_SERVERS:
            oldest = next(k for k, s in _SERVERS.items() if s is not None)
            retired = _SERVERS.pop(oldest)
            if retired is not None:
                retired.close()
        return server


def _forget(server: ForkServer) -> None:
    with _SERVERS_LOCK:
        for key, known in list(_SERVERS.items()):
            if known is server:
                _SERVERS[key] = None
    server.close()


atexit.register(close_servers)


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the server --------------------------------------------------------------------------------------


def main() -> int:
    """The server: import, say ready (or why not), then fork a child per request until the parent is gone."""
    channel = socket.socket(fileno=int(os.environ.pop(_SOCKET_VARIABLE)))
    refusal = _preload(os.environ.pop(_PRELOAD_VARIABLE, ""))
    if refusal:
        _send(channel, {"refused": refusal})
        return 1
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_write)
    _send(channel, {"ready": os.getpid()})
    while True:
        ready, _, _ = select.select([channel.fileno(), wake_read], [], [])
        if wake_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
            _reap(channel)
        if channel.fileno() in ready:
            data, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 16)
            if not data:
                return 0  # the parent is gone; children see their parent go too and end (die_with_parent)
            _fork(channel, ForkRequest.from_json(json.loads(data)), fds, (channel.fileno(), wake_read, wake_write))


def _preload(spec: str) -> str:
    """Import what a worker needs; '' when the server may fork, else why it may not."""
    # A workload's module that asks torch.cuda.is_available() on import would initialise CUDA's driver here by
    # default, and every child forked after it would find CUDA unusable ("in a bad fork"). Asked through NVML it
    # leaves the driver alone. Only this server reads it: each child gets its run's own environment.
    os.environ[NVML_CHECK_VARIABLE] = "1"
    import torch
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    import autotune.trial.doctor  # noqa: F401
    import autotune.trial.worker  # noqa: F401
    from autotune.trial.shared_builds import check_host_isa
    from autotune.workload import preimport

    if spec:
        preimport(spec)
    # The host's, not a run's: asked once here (in torch's own cache folder), every child keeps the answer.
    check_host_isa()
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        return f"the workload's module started threads ({', '.join(others)}); a forked child would lack them"
    if torch.cuda.is_initialized():
        return "CUDA was initialised while importing; a forked child could not use it"
    if _children_in_a_bad_fork():
        return (
            "CUDA's driver was initialised while importing (by a CUDA call, or by torch.cuda.is_available() where "
            "NVML could not answer); a forked child could not use CUDA"
        )
    return ""


def _children_in_a_bad_fork() -> bool:
    """Whether a child forked now would find CUDA unusable: torch marks the child of a process whose CUDA driver
    was initialised, which is_initialized() does not say of the parent."""
    import torch

    pid = os.fork()
    if pid == 0:
        bad = True
        try:
            bad = torch.cuda._is_in_bad_fork()
        finally:
            os._exit(1 if bad else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


def _fork(channel: socket.socket, request: ForkRequest, fds: list[int], closing: Sequence[int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as error:
        for fd in fds:
            os.close(fd)
        _send(channel, {"failed": f"fork: {error}"})
        return
    if pid == 0:
        code = 1
        try:
            code = _child(request, fds, closing)
        except BaseException:  # noqa: BLE001 - a child never returns into the server's loop
            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    for fd in fds:
        os.close(fd)
    _send(channel, {"started": pid})


def _child(request: ForkRequest, fds: list[int], closing: Sequence[int]) -> int:
    """Become the run's process, as `python -m` would have started it, and run the program's `main`."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    for fd in closing:
        os.close(fd)
    stdout, *passed = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(stdout, 1)
    os.dup2(stdout, 2)
    os.close(stdout)
    env = dict(request.env)
    for name, fd in zip(request.fds, passed, strict=True):
        env[name] = str(fd)
    # The worker ends when the process that started it is gone: here, its server, which ends with the search.
    env[PARENT_PID_VARIABLE] = str(os.getppid())
    keep = {0, 1, 2, *passed}
    for entry in os.listdir("/proc/self/fd"):
        if entry.isdigit() and int(entry) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(entry))
    os.chdir(request.cwd)
    if request.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, request.cpus)
    os.environ.clear()
    os.environ.update(env)
    # Seeded anew, as a new interpreter seeds them, not the server's sequences (torch's default seed is fixed anyway).
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    from torch._inductor.utils import clear_caches

    clear_caches()  # nothing the server computed from its own cache folder is kept
    _retitle([sys.executable, "-m", request.program, *request.args])
    program = importlib.import_module(request.program)
    sys.argv = [str(program.__file__), *request.args]
    try:
        code = program.main(list(request.args))
    except SystemExit as exit_:
        code = exit_.code
    finally:
        end_detached()  # as `exit_now` does when the program runs by `python -m`
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _retitle(argv: Sequence[str]) -> None:
    """Show `argv` as this process's command line (ps, /proc/PID/cmdline), as `python -m` would have shown it.

    The kernel reads a process's command line from its own memory, the arguments it was started with: the
    server's, with room left after them, which a child may overwrite for itself. Where that fails, the child
    keeps its server's command line.
    """
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end: fields 48 and 49 of stat
        title = b"\0".join(arg.encode() for arg in argv)[: end - start - 1]
        ctypes.memmove(start, title.ljust(end - start, b"\0"), end - start)


def _reap(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(channel, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _send(channel: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        channel.send(json.dumps(message).encode())


if __name__ == "__main__":
    sys.exit(main())
