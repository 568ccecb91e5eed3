"""Command-line tools that run in virtual environments of their own, because their pins
conflict with the project's (the full `mlflow` server and `focus-data-toolkit` both need
pyarrow < 26). Each is created once under `.cache/<name>-venv` in the checkout, from the
package index, and reused; `make clean` removes them. They are installed by uv's pip
interface when the `uv` package is installed (the test extras), by pip otherwise or when uv
fails (a package index only pip is configured for), compiled to bytecode ahead either way:
the full mlflow takes ~18 s of uv against ~80 s of pip.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
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
        _run([sys.executable, "-m", "venv", str(venv)], requirement, venv)
        _run(lambda: install(venv / "bin" / "python", [requirement]), requirement, venv)
        if not exe.exists():
            raise ToolUnavailable(f"{requirement} installed no {executable} in {venv}")
        marker.write_text(requirement)
        return exe


# The FinOps Foundation's validator declares Python >= 3.12 and works on 3.11 once one
# f-string (a `\"` inside its braces, legal only from 3.12) is rewritten; its pyarrow must
# stay below 18 for its numpy 1.26.
FOCUS_VALIDATOR = "focus-validator==2.2.1"
_VALIDATOR_FIX = "focus_validator/config_objects/focus_to_duckdb_converter.py"


def focus_validator_site() -> Path:
    """The site-packages folder of `.cache/focus-validator-venv` holding focus-validator
    2.2.1, patched to run on this Python (the validator is run from that folder: it opens
    its bundled currency codes by a relative path)."""
    venv = CACHE / "focus-validator-venv"
    python = venv / "bin" / "python"
    marker = venv / ".requirement"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "focus-validator-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (marker.exists() and marker.read_text() == FOCUS_VALIDATOR):
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(venv)], FOCUS_VALIDATOR, venv)
            # pip installs the validator alone, ignoring the Python it declares (uv cannot),
            # then `install` its requirements as its metadata lists them: ~5 s, against ~35 s
            # for pip installing them all
            _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  "--no-deps", "--ignore-requires-python", FOCUS_VALIDATOR],
                 FOCUS_VALIDATOR, venv)
            requires = _requirements(python, FOCUS_VALIDATOR.split("==")[0])
            _run(lambda: install(python, [*requires, "pyarrow<18"]), FOCUS_VALIDATOR, venv)
            site = _site_packages(python)
            _patch_fstring(site / _VALIDATOR_FIX)
            _run([str(python), "-m", "compileall", "-q", str(site / "focus_validator")],
                 FOCUS_VALIDATOR, venv)
            marker.write_text(FOCUS_VALIDATOR)
        return _site_packages(python)


def install(python: Path, requirements: list[str],
            timeout: float = INSTALL_TIMEOUT) -> subprocess.CompletedProcess:
    """Install `requirements` into the environment of `python`: by uv's pip interface when
    the `uv` package is installed, else or when uv fails by pip; compiled to bytecode ahead,
    as pip does (where PYTHONDONTWRITEBYTECODE is set, nothing else would). Returns the last
    attempt's outcome; raises `subprocess.TimeoutExpired` if pip's times out."""
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           *requirements]
    try:
        from uv import find_uv_bin

        uv = find_uv_bin()
    except (ImportError, FileNotFoundError):
        uv = None
    if uv is not None:
        try:
            done = subprocess.run([uv, "pip", "install", "--quiet", "--compile-bytecode",
                                   "--python", str(python), *requirements],
                                  capture_output=True, text=True, timeout=timeout)
            if done.returncode == 0:
                return done
        except subprocess.TimeoutExpired:
            pass
    return subprocess.run(pip, capture_output=True, text=True, timeout=timeout)


def _run(step: list[str] | Callable[[], subprocess.CompletedProcess], requirement: str,
         venv: Path) -> None:
    """Run `step` (a command, or a function running one); remove `venv` and raise
    `ToolUnavailable` with the last error line when it fails or times out."""
    try:
        done = (step() if callable(step) else
                subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT))
    except subprocess.TimeoutExpired:
        shutil.rmtree(venv, ignore_errors=True)
        raise ToolUnavailable(f"installing {requirement} into {venv} timed out") from None
    if done.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        errors = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()
                  and not line.startswith("WARNING: Location")]
        raise ToolUnavailable(f"could not install {requirement} into {venv}: "
                              + (errors[-1] if errors else f"exit {done.returncode}"))


def _requirements(python: Path, distribution: str) -> list[str]:
    """What the installed `distribution` requires, as its metadata lists them (markers kept:
    an extra's requirements are not installed)."""
    found = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print("
                            f"json.dumps(m.requires({distribution!r}) or []))"],
                           capture_output=True, text=True, check=True)
    return json.loads(found.stdout)


def _site_packages(python: Path) -> Path:
    found = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                            "['purelib'])"], capture_output=True, text=True, check=True)
    return Path(found.stdout.strip())


def _patch_fstring(path: Path) -> None:
    """Rewrite the f-strings whose braces hold a backslash (a SyntaxError before 3.12) as
    concatenations of the same pieces."""
    import re

    text = path.read_text()
    pattern = re.compile(r'f"((?:[^"\\\n]|\\.)*?)"')
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if "f\"" not in line or "\\" not in line:
            continue
        lines[index] = pattern.sub(lambda m: _concat(m.group(0)), line)
    path.write_text("".join(lines))


def _concat(literal: str) -> str:
    """f"a{expr}b" with a backslash inside a brace → "a" + str(expr) + "b"; others unchanged."""
    body = literal[2:-1]
    parts, depth, piece, exprs = [], 0, "", False
    for char in body:
        if char == "{" and depth == 0:
            parts.append(("text", piece))
            piece, depth = "", 1
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                parts.append(("expr", piece))
                exprs = exprs or "\\" in piece
                piece = ""
                continue
        piece += char
    parts.append(("text", piece))
    if not exprs:
        return literal
    return " + ".join(f'"{p}"' if kind == "text" else f"str({p})"
                      for kind, p in parts if p or kind == "expr")
