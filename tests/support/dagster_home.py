"""A fresh Dagster instance home for a test: the folder and a dagster.yaml without telemetry."""

from __future__ import annotations

from pathlib import Path


def new_dagster_home(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home
