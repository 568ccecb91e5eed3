"""The tools' side environments are installed by uv when it is installed, by pip when uv
fails (a package index only pip is configured for), and a requirement neither can install is
a failed outcome, not an exception — from the real package index, as the tools' own are."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cost_pipeline.demo.tool_venvs import install

SMALL = "six==1.17.0"  # a single-module package, a few KB


def _venv(path, with_pip: bool):
    args = [sys.executable, "-m", "venv", str(path)] + ([] if with_pip else ["--without-pip"])
    subprocess.run(args, check=True, capture_output=True)
    return path / "bin" / "python"


def _imports_six(python) -> bool:
    return subprocess.run([str(python), "-c", "import six"], capture_output=True).returncode == 0


def test_uv_installs_into_an_environment_without_pip(tmp_path):
    python = _venv(tmp_path / "venv", with_pip=False)  # pip could not have done it
    done = install(python, [SMALL])
    offline = ("connect", "dns", "network", "timed out")
    if done.returncode != 0 and any(word in done.stderr.lower() for word in offline):
        pytest.skip(f"no package index reachable: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert _imports_six(python)


def test_pip_installs_when_uv_fails(tmp_path, monkeypatch):
    python = _venv(tmp_path / "venv", with_pip=True)
    # uv's own index setting, unreachable, and no cache to fall back on; pip's unchanged
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    no_pip = _venv(tmp_path / "no-pip", with_pip=False)
    assert install(no_pip, [SMALL]).returncode != 0  # uv failed; no pip to fall back on
    done = install(python, [SMALL])
    assert done.returncode == 0, done.stderr
    assert _imports_six(python)


def test_a_requirement_neither_can_install_is_a_failed_outcome(tmp_path):
    python = _venv(tmp_path / "venv", with_pip=True)
    done = install(python, ["cost-pipeline-no-such-distribution==0.0.1"])
    assert done.returncode != 0
    assert "cost-pipeline-no-such-distribution" in (done.stdout + done.stderr)
