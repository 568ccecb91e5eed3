"""Shared fixtures: a temporary Dagster instance home and the demo quarter materialized
once per test session through the real Dagster job."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tests.support.dagster_home import new_dagster_home

os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


def _mlflow() -> None:
    from cost_pipeline.demo.mlflow_server import mlflow_executable

    mlflow_executable()


def _focus_toolkit() -> None:
    from tests.ingest.test_focus_toolkit import toolkit_executable

    toolkit_executable()


def _focus_validator() -> None:
    from cost_pipeline.demo.tool_venvs import focus_validator_site

    focus_validator_site()


def _bigquery_emulator() -> None:
    from tests.support.bq_emulator import ensure_venv

    ensure_venv()


# The side environments some tests run a tool in (`.cache/`): on a fresh checkout they take
# ~60 s to build (MLflow 25 s, the FOCUS validator 16 s, the BigQuery emulator 13 s, the FOCUS
# toolkit 6 s), each in the first test that needs it while the rest of its worker's tests
# wait. The first worker builds those its session will need in a thread from the start, beside
# the other tests. Each build holds its file lock, so a test needing one meanwhile waits for
# it (or builds it, if the thread has not begun it); a build that fails here fails again, and
# is reported, in the test that needs it.
_PREBUILDS: dict[str, Callable[[], None]] = {
    "tests/ingest/test_mlflow_source.py": _mlflow,
    "tests/ingest/test_mlflow_write_back.py": _mlflow,
    "tests/export/test_focus_export.py": _focus_validator,
    "tests/ingest/test_gcp_billing.py": _bigquery_emulator,
    "tests/ingest/test_focus_toolkit.py": _focus_toolkit,
}
_prebuild: threading.Thread | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    global _prebuild
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    modules = {item.nodeid.split("::")[0] for item in session.items}
    builds = list(dict.fromkeys(build for module, build in _PREBUILDS.items()
                                if module in modules))

    def build_all() -> None:
        for build in builds:
            try:
                build()
            except Exception:  # the test that needs it builds it again and reports it
                pass

    if builds:
        _prebuild = threading.Thread(target=build_all, name="prebuild", daemon=True)
        _prebuild.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _prebuild is not None:  # no build is cut off half-way
        _prebuild.join()


@pytest.fixture(scope="session")
def dagster_home(tmp_path_factory) -> Path:
    home = new_dagster_home(tmp_path_factory.mktemp("dagster_home"))
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = old


@pytest.fixture(scope="session")
def demo_quarter(tmp_path_factory, dagster_home):
    """(config path, {month: MonthResult}) of the demo quarter, materialized via Dagster."""
    from cost_pipeline.cli.materialize import materialize_month
    from cost_pipeline.demo.generate import generate_demo
    from cost_pipeline.demo.run import DEMO_MONTHS

    config = generate_demo(tmp_path_factory.mktemp("demo"))
    results = {m: materialize_month(str(config), m, progress=False) for m in DEMO_MONTHS}
    return config, results


@pytest.fixture
def demo_warehouse(demo_quarter):
    from cost_pipeline.config import load_config

    config, _ = demo_quarter
    with duckdb.connect(load_config(config).warehouse_path, read_only=True) as con:
        yield con


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto's server mode) on 127.0.0.1 for the session; the
    pipeline finds placeholder credentials in the standard AWS environment variables."""
    from cost_pipeline.demo.local_s3 import LocalS3, dummy_credentials

    with dummy_credentials(), LocalS3() as server:
        yield server
