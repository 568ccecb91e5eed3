"""The unchanged month without starting Dagster. Importing Dagster and opening its instance
take about 2 s, the rest of an unchanged-month check ~0.3 s; so after each `materialize` of a
month the CLI leaves beside the Dagster instance what the check needs of them:

- the asset graph (each asset and its parents, in dependency order) under the code version
  that built it — the same code has the same graph;
- a watermark of the instance's own SQLite files (size and modification time of the run
  storage and the event log index): every run of the instance, from the UI, a schedule or a
  sensor, writes to them.

The next `materialize` of the month (without --force) compares fingerprints over that graph
with the recorded ones (`incremental.py`); when every one is unchanged and the instance has
not been written since, nothing that `newer_elsewhere` asks about can have changed and the
month is skipped without Dagster. Anything else — other code, an instance configured with
other storage (Postgres), its files changed, a fingerprint that differs — takes the full path.
A run of another warehouse in the same Dagster home changes the files too: the full path then
looks past that run (its `cost_pipeline/warehouse` tag names the other warehouse), skips the
month all the same and remembers the new watermark.
"""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

from cost_pipeline.cli import incremental
from cost_pipeline.config import PipelineConfig

STAMP = "cost-pipeline-quick-skip.json"
# the default SQLite instance writes these on every run (dagster.yaml without storage keys)
INSTANCE_FILES = ("history/runs.db", "history/runs/index.db")
STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")


def _home() -> Path | None:
    home = os.environ.get("DAGSTER_HOME")
    return Path(home) if home else None


def _watermark(home: Path) -> list | None:
    """(file, size, mtime) of the instance's SQLite files and their WAL; None when the
    instance is not the default SQLite one."""
    import yaml

    settings = home / "dagster.yaml"
    try:
        config = yaml.safe_load(settings.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict) or any(key in config for key in STORAGE_KEYS):
        return None
    marks = []
    for name in INSTANCE_FILES:
        for path in (home / name, home / f"{name}-wal"):
            if path.exists():
                stat = path.stat()
                marks.append([str(path), stat.st_size, stat.st_mtime_ns])
    return marks or None


def _key(cfg: PipelineConfig, month: date) -> str:
    return f"{Path(cfg.warehouse_path).resolve()}|{month.isoformat()}"


def remember(cfg: PipelineConfig, month: date, graph: list[tuple[str, list[str]]]) -> None:
    """After a `materialize` of the month: the graph and the instance's watermark now."""
    home = _home()
    if home is None:
        return
    marks = _watermark(home)
    path = home / STAMP
    try:
        stamps = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        stamps = {}
    if marks is None:
        stamps.pop(_key(cfg, month), None)
    else:
        stamps[_key(cfg, month)] = {"code": incremental.code_version(), "graph": graph,
                                    "instance": marks}
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(json.dumps(stamps), encoding="utf-8")
        partial.replace(path)
    except OSError:
        pass  # only the next unchanged month is slower


def unchanged(cfg: PipelineConfig, config_text: str, month: date
              ) -> tuple[list[str], dict[str, incremental.Recorded]] | None:
    """(the skipped assets, their records) when the whole month is unchanged and the instance
    untouched since the last `materialize`; None when the full check must decide."""
    home = _home()
    if home is None or not (home / STAMP).exists():
        return None
    try:
        stamp = json.loads((home / STAMP).read_text(encoding="utf-8")).get(_key(cfg, month))
    except (OSError, ValueError):
        return None
    if (not stamp or stamp.get("code") != incremental.code_version()
            or stamp.get("instance") != _watermark(home)):
        return None
    graph = [(name, list(parents)) for name, parents in stamp["graph"]]
    wanted = incremental.fingerprints_of(graph, cfg, config_text, month)
    before = incremental.recorded(cfg.warehouse_path, month)
    if not all(fp and name in before and before[name].fingerprint == fp
               for name, fp in wanted.items()):
        return None
    return list(wanted), {name: before[name] for name in wanted}
