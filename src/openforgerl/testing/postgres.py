"""A throwaway PostgreSQL server for tests: `initdb` in a temp dir, served on a free loopback port.

Run as root (CI, the dev boxes) the cluster belongs to the `postgres` user, as PostgreSQL refuses to
run as root; otherwise to whoever runs the tests. The server is a direct child of the test process,
with a parent-death signal (SIGINT: PostgreSQL's fast shutdown), so it dies with pytest even when
pytest is killed; `stop` shuts it down and removes the directory.
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def find_bindir() -> Path | None:
    """The directory of `initdb` and `postgres` (Debian keeps them out of PATH), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "postgres").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TempPostgres:
    bindir: Path
    root: Path
    port: int
    password: str
    proc: subprocess.Popen[bytes]

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"{prefix}_{secrets.token_hex(6)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: clients are disconnected
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def _as_owner(uid: int | None, gid: int | None) -> None:
    """In the child before exec: drop to the cluster's owner, then ask to die with the parent
    (set after the uid change, which clears it)."""
    os.setsid()
    if uid is not None and gid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)


def start(bindir: Path, *, settings: dict[str, str] | None = None, timeout_s: float = 60.0) -> TempPostgres:
    """initdb + postgres on a free loopback port (password auth over TCP: a wrong one is refused)."""
    uid = gid = None
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        uid, gid = owner.pw_uid, owner.pw_gid
    root = Path(tempfile.mkdtemp(prefix="openforgerl-pg-"))
    data, sockets = root / "data", root / "sock"
    password = secrets.token_hex(12)
    (root / "pw").write_text(password + "\n")
    sockets.mkdir()
    if uid is not None and gid is not None:
        for path in (root, sockets, root / "pw"):
            os.chown(path, uid, gid)
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--pwfile",
                str(root / "pw"),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=lambda: _as_owner(uid, gid),
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {exc.stderr.decode(errors='replace').strip()[-500:]}") from None
    port = _free_port()
    options = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(sockets),
        "max_connections": "200",
        "shared_buffers": "32MB",
        **(settings or {}),
    }
    args = [str(bindir / "postgres"), "-D", str(data)]
    for key, value in options.items():
        args += ["-c", f"{key}={value}"]
    log = open(root / "server.log", "wb")  # the server writes it until it stops
    proc = subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=lambda: _as_owner(uid, gid)
    )
    log.close()
    server = TempPostgres(bindir, root, port, password, proc)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            text = (root / "server.log").read_text(errors="replace")[-500:]
            server.stop()
            raise RuntimeError(f"postgres exited at start: {text}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            import psycopg

            with psycopg.connect(server.admin_url, connect_timeout=2):
                return server
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.1)
