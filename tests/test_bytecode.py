"""`make install` leaves the package's own modules compiled to bytecode. An editable install
leaves them as source, and where PYTHONDONTWRITEBYTECODE is set every `cost-pipeline` command
would compile them again (docs/performance.md, twenty-ninth pass)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cost_pipeline"


def _current(source: Path) -> bool:
    """Whether `source` has a bytecode file Python would use: a timestamp-based .pyc (PEP 552)
    naming the source's modification time and size."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    flags, mtime, size = struct.unpack("<III", cached.read_bytes()[4:16])
    st = source.stat()
    return (flags == 0 and mtime == int(st.st_mtime) & 0xFFFFFFFF
            and size == st.st_size & 0xFFFFFFFF)


def test_make_install_compiles_every_module_of_the_package():
    venv = Path(sys.prefix)
    script = venv / "bin" / "cost-pipeline"
    if shutil.which("make") is None or not script.exists():
        pytest.skip("needs make and the package installed in this environment")
    if (ROOT / "pyproject.toml").stat().st_mtime > script.stat().st_mtime:
        pytest.skip("`make install` would install the package again")
    # one module's bytecode gone (as after an edit): the next install compiles it again
    victim = PACKAGE / "months.py"
    Path(importlib.util.cache_from_source(str(victim))).unlink(missing_ok=True)
    assert not _current(victim)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    subprocess.run(["make", "-s", "install", f"VENV={venv}"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=600)
    stale = [str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py")) if not _current(p)]
    assert stale == []
