"""Command-line tools that run in virtual environments of their own, because their pins
conflict with the project's (the full `mlflow` server and `focus-data-toolkit` both need
pyarrow < 26). Each is created once under `.cache/<name>-venv` in the checkout, from the
package index, and reused; `make clean` removes them.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]
# a checkout keeps them beside the code (gitignored); an installed package in the user's cache
CACHE = (_CHECKOUT / ".cache" if (_CHECKOUT / "pyproject.toml").exists()
         else Path.home() / ".cache" / "cost-pipeline")
INSTALL_TIMEOUT = 900  # seconds: the full mlflow is ~850 MB


class ToolUnavailable(RuntimeError):
    """The tool's environment could not be created (no package index reachable …)."""


def tool_executable(name: str, requirement: str, executable: str) -> Path:
    """`executable` from the virtual environment `.cache/<name>-venv` holding `requirement`
    (created or replaced when it holds something else)."""
    venv = CACHE / f"{name}-venv"
    exe = venv / "bin" / executable
    marker = venv / ".requirement"
    CACHE.mkdir(parents=True, exist_ok=True)
    # several test sessions may want the same environment at once: one builds it
    with open(CACHE / f"{name}-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists() and marker.exists() and marker.read_text() == requirement:
            return exe
        shutil.rmtree(venv, ignore_errors=True)
        steps = ([sys.executable, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                  "--disable-pip-version-check", requirement])
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True,
                                      timeout=INSTALL_TIMEOUT)
            except subprocess.TimeoutExpired:
                shutil.rmtree(venv, ignore_errors=True)
                raise ToolUnavailable(f"installing {requirement} into {venv} timed out") from None
            if done.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                errors = [line for line in done.stderr.splitlines()
                          if line.strip() and not line.startswith("WARNING: Location")]
                raise ToolUnavailable(f"could not install {requirement} into {venv}: "
                                      + (errors[-1] if errors else f"exit {done.returncode}"))
        if not exe.exists():
            raise ToolUnavailable(f"{requirement} installed no {executable} in {venv}")
        marker.write_text(requirement)
        return exe
