"""`make dev` starts `dagster dev` on the Dagster home the command line uses: a relative
`DAGSTER_HOME` (`DAGSTER_HOME=relhome make dev`) is the folder it names, made absolute for
Dagster, which refuses a relative one (docs/dagster.md). The recipe runs for real; only
`dagster dev` is a script that prints what it was given."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_make_dev_hands_dagster_the_home_made_absolute(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("needs make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "dagster").write_text(
        '#!/bin/sh\necho "home=$DAGSTER_HOME"\necho "config=$COST_PIPELINE_CONFIG"\n'
        'echo "args=$*"\n')
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    home = tmp_path / "relhome"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["DAGSTER_HOME"] = os.path.relpath(home, ROOT)          # relative to the repository
    env.pop("COST_PIPELINE_CONFIG", None)
    done = subprocess.run(["make", "-s", "-o", "install", "dev", f"BIN={bin_dir}"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"home={home}", f"config={ROOT / 'demo' / 'config.yaml'}", "args=dev -w workspace.yaml"]
    assert (home / "dagster.yaml").exists()             # the home the CLI would make
