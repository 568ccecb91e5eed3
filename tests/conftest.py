"""Shared fixtures: a temporary Dagster instance home and the demo quarter materialized
once per test session through the real Dagster job."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from tests.support.dagster_home import new_dagster_home

os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


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
