"""A throw-away PostgreSQL server for the tests: its own data folder, 127.0.0.1 on a free port, stopped afterwards.

The server's programs come from the system's packages (`.ci/test` installs them when they
are missing). Debian keeps them in /usr/lib/postgresql/VERSION/bin, off PATH, so that is
searched too. `initdb` and `postgres` refuse to run as root; as root they run as the
`postgres` user (or `nobody`), which owns the data folder.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresMissing", "Server", "find_binaries", "running_server"]

USER = "autotune"
"""The database role the tests connect as (trusted: the server listens on the loopback only)."""


class PostgresMissing(RuntimeError):
    """PostgreSQL's server programs, or a user to run them as, cannot be found."""


def find_binaries() -> Path:
    """The folder holding initdb and postgres: PATH first, then the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres", path=str(Path(found).parent)):
        return Path(found).parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(Path(f).parent.name.split(".")[0]))
    for folder in reversed(folders):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "postgres").exists():
            return Path(folder)
    raise PostgresMissing(
        "PostgreSQL's initdb and postgres were found neither on PATH nor in /usr/lib/postgresql/*/bin; "
        "install the server (`apt-get install postgresql`, which `.ci/test` does when run as root)."
    )


def _run_as() -> list[str]:
    """The command prefix that runs a program as an unprivileged user when this process is root."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PostgresMissing(
            "running as root, and `runuser` (util-linux) is missing to start PostgreSQL as another user"
        )
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return [runuser, "-u", name, "--"]
    raise PostgresMissing("running as root, and neither a `postgres` nor a `nobody` user exists to start PostgreSQL")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A throw-away PostgreSQL server: its own data folder, 127.0.0.1 on a free port; it can be stopped and started
    again on the same folder and port, as a database server restarts under its clients."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.binaries = find_binaries()
        self.prefix = _run_as()
        self.timeout = timeout
        # Not pytest's tmp_path: its parent folders are private to root, where the server's user cannot reach.
        self.folder = Path(tempfile.mkdtemp(prefix="autotune-postgres-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.data.mkdir()
        self.user = pwd.getpwnam(self.prefix[2]) if self.prefix else None
        if self.user is not None:
            for path in (self.folder, self.data):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        try:
            subprocess.run(
                [*self.prefix, str(self.binaries / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust",
                 "--no-sync", "-E", "UTF8", "--no-locale"],
                check=True,
                capture_output=True,
                text=True,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise PostgresMissing(f"initdb failed ({exc.returncode}): {exc.stderr.strip()[-2000:]}") from None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def start(self) -> str:
        """Start the server and wait until it accepts connections; returns its URL."""
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.folder),
            "fsync": "off",  # a test's database need not survive a power cut
            "max_connections": "100",
        }
        argv = [*self.prefix, str(self.binaries / "postgres"), "-D", str(self.data)]
        for key, value in options.items():
            argv += ["-c", f"{key}={value}"]
        with open(self.log, "a") as out:
            if self.user is not None:
                os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_until_ready(self.port, self.process, self.log, self.timeout)
        return self.url

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop the server: SIGINT is PostgreSQL's fast shutdown (clients are disconnected), SIGQUIT its immediate
        one (no clean-up at all, as a crash), SIGKILL a crash of the machine's own."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def running_server(timeout: float = 60.0) -> Iterator[str]:
    """Start a server in a new temporary folder and yield its URL (`postgresql://autotune@127.0.0.1:PORT/postgres`)."""
    server = Server(timeout)
    try:
        yield server.start()
    finally:
        server.remove()


def _wait_until_ready(port: int, server: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise PostgresMissing(f"the PostgreSQL server exited ({server.returncode}): {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            if "ready to accept connections" in log.read_text():
                return
        time.sleep(0.2)
    raise PostgresMissing(
        f"the PostgreSQL server did not accept connections within {timeout:.0f} s: {log.read_text()[-2000:]}"
    )
