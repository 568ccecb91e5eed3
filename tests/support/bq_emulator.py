"""A real BigQuery emulator (PyPI `bqemulator`) for the tests, run as a server on loopback.

It lives in its own virtual environment under `.cache/bq-venv` (kept between sessions): it
needs duckdb 1.5.5 while the project runs duckdb 2, and it registers a pytest plugin of its
own. At start it loads DuckDB's `spatial` extension, which it would try to download: the
extension comes from PyPI `duckdb-extension-spatial` and is installed beforehand into the
DuckDB extension folder of the HOME the server runs with.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cost_pipeline.demo.tool_venvs import install

PINS = ("bqemulator==1.4.0", "duckdb==1.5.5", "duckdb-extension-spatial==1.5.5",
        "numpy>=2,<3")  # numpy: the emulator's UDFs need it, its metadata does not say so
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "bq-venv"
PROJECT = "test-project"
_INSTALL_SPATIAL = """
import pathlib, duckdb, duckdb_extension_spatial
ext = (pathlib.Path(duckdb_extension_spatial.__file__).parent / "extensions"
       / f"v{duckdb.__version__}" / "spatial.duckdb_extension")
con = duckdb.connect()
con.execute(f"INSTALL '{ext}'")
con.execute("LOAD spatial")
"""


class EmulatorUnavailable(RuntimeError):
    """The emulator's environment could not be built or the server did not start."""


@dataclass
class Emulator:
    endpoint: str
    process: subprocess.Popen
    log: Path


def _run(args: list[str], env: dict | None = None, timeout: float = 900) -> None:
    _succeeded(subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout),
               f"{' '.join(args[:4])}…")


def _succeeded(done: subprocess.CompletedProcess, what: str) -> None:
    """Raise `EmulatorUnavailable` with the last lines of its output when `done` failed."""
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise EmulatorUnavailable(f"{what} failed: {tail}")


def ensure_venv(cache: Path = CACHE) -> tuple[Path, Path]:
    """(venv, home): built once, reused while its stamp matches PINS. A lock keeps two test
    sessions from building it at once."""
    cache.mkdir(parents=True, exist_ok=True)
    venv, home, stamp = cache / "venv", cache / "home", cache / "ready"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == "\n".join(PINS):
            return venv, home
        shutil.rmtree(venv, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        _run([sys.executable, "-m", "venv", str(venv)])
        _succeeded(install(venv / "bin" / "python", list(PINS)), f"installing {' '.join(PINS)}")
        _run([str(venv / "bin" / "python"), "-c", _INSTALL_SPATIAL],
             env={**os.environ, "HOME": str(home)})
        stamp.write_text("\n".join(PINS))
    return venv, home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(
                f"{endpoint}/bigquery/v2/projects/{PROJECT}/datasets", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


@contextmanager
def running(workdir: Path, startup_timeout: float = 60):
    """Start the emulator on free loopback ports; stop it (its process group) on exit."""
    venv, home = ensure_venv()
    log = workdir / "bqemulator.log"
    rest, grpc = _free_port(), _free_port()
    endpoint = f"http://127.0.0.1:{rest}"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(venv / "bin" / "bqemulator"), "start", "--rest-host", "127.0.0.1",
             "--rest-port", str(rest), "--grpc-host", "127.0.0.1", "--grpc-port", str(grpc),
             "--project", PROJECT, "--ephemeral", "--log-level", "warning"],
            env={**os.environ, "HOME": str(home)}, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while not _ready(endpoint):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                raise EmulatorUnavailable("bqemulator did not start: " + " | ".join(tail))
            time.sleep(0.2)
        yield Emulator(endpoint, process, log)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
