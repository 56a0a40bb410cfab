"""A PgBouncer in transaction mode on a loopback port (Debian's ``pgbouncer``), started and stopped by the
caller: the fleet benchmark's pooler, and the tests that check the store works behind one.

Every database of the server is reachable through it under its own name (``* =`` entry), with trust
authentication as the server itself uses here. ``pool_size`` is the number of server connections per
database and user: what 1000 sidecars share. It runs as the ``postgres`` user when started by root (PgBouncer
refuses root).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARY = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
MISSING = "pgbouncer is not installed (apt-get install pgbouncer)"

CONFIG = """[databases]
* = host={host} port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = {max_clients}
max_db_connections = {pool_size}
ignore_startup_parameters = extra_float_digits
server_reset_query =
server_check_delay = 30
log_connections = 0
log_disconnections = 0
stats_period = 60
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """``with PgBouncer(pool_size=40) as bouncer: bouncer.url("test")``."""

    def __init__(self, pool_size: int = 40, max_clients: int = 2000, host: str = "127.0.0.1",
                 server_port: int = 5432, user: str = "postgres"):
        if BINARY is None:
            raise RuntimeError(MISSING)
        self.pool_size, self.user = pool_size, user
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        (self.folder / "users.txt").write_text(f'"{user}" ""\n')
        (self.folder / "pgbouncer.ini").write_text(CONFIG.format(
            host=host, server_port=server_port, port=self.port, pool_size=pool_size, max_clients=max_clients,
            folder=self.folder))
        self.process: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> "PgBouncer":
        command = [BINARY, str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            account = pwd.getpwnam(self.user)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            for f in self.folder.iterdir():
                os.chown(f, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", self.user]
        # Its log goes to the logfile; a pipe nobody reads would fill and stop it.
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log()[-800:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on 127.0.0.1:{self.port}: {self.log()[-800:]}")

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "PgBouncer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
