"""The command line prepares the report's imports in a thread only once a run has written new
rows (cli/warm_up.py): not at the start of every run, and not in a run that keeps every table
and the page."""

from __future__ import annotations

import csv
import logging
import os
from datetime import date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR

from cost_pipeline.cli import warm_up
from cost_pipeline.cli.materialize import materialize_month
from tests.cli.test_cli import copy_demo

JULY = date(2026, 7, 1)


def _meta(**values) -> dict:
    return {k: dg.MetadataValue.text(v) if isinstance(v, str) else dg.MetadataValue.bool(v)
            for k, v in values.items()}


@pytest.mark.parametrize(("metadata", "new"), [
    (_meta(kept=False, rows="3"), True),       # a decision table written again
    (_meta(kept=True), False),                 # kept rows, a kept page
    (_meta(mode="partial"), True),             # the attribution, partly redone
    (_meta(mode="full"), True),
    (_meta(mode="kept"), False),
    (_meta(trackers="none with write_back: true"), False),  # says nothing about rows
])
def test_which_materializations_say_they_wrote_new_rows(metadata, new):
    assert warm_up.wrote_new_rows(metadata) is new


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The warm-ups the runs start (recorded, not run)."""
    calls: list[str] = []
    monkeypatch.setattr(warm_up, "start_report_warm_up", lambda: calls.append("started"))
    return calls


def _end_an_hour_earlier(runs: Path) -> str:
    """A later delivery of the runs file in which one finished run ended an hour earlier."""
    with runs.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    row = next(r for r in rows if r["end_time"] and r["status"] == "FINISHED")
    end = datetime.fromisoformat(row["end_time"].replace("Z", "+00:00")) - timedelta(hours=1)
    row["end_time"] = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    with runs.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return row["run_id"]


def test_the_warm_up_starts_once_a_run_writes_new_rows(demo_quarter, tmp_path, dagster_home,
                                                       started):
    config = copy_demo(demo_quarter, tmp_path)
    first = materialize_month(str(config), JULY)
    assert first.success and started == ["started"]  # once, though every table is new

    # the same runs delivered again: every table and the page are kept, nothing to prepare
    runs = config.parent / "runs.csv"
    os.utime(runs, (runs.stat().st_atime, runs.stat().st_mtime + 10))
    same = materialize_month(str(config), JULY)
    assert same.success and same.run_id and started == ["started"]

    # one run ended earlier: the attribution is redone and the page drawn again
    _end_an_hour_earlier(runs)
    changed = materialize_month(str(config), JULY)
    assert changed.success and started == ["started", "started"]

    # without the progress output (the library's callers) no thread is started at all
    again = materialize_month(str(config), JULY, progress=False, force=True)
    assert again.success and started == ["started", "started"]


def _record(kind: str, **metadata) -> logging.LogRecord:
    """A log record as Dagster's log manager hands it to a logger: the event in its metadata."""
    event = SimpleNamespace(event_type_value=kind, event_specific_data=SimpleNamespace(
        materialization=SimpleNamespace(metadata=_meta(**metadata))))
    record = logging.LogRecord("run", logging.DEBUG, __file__, 1, "event", None, None)
    setattr(record, LOG_RECORD_METADATA_ATTR, {"dagster_event": event})
    return record


def test_the_trigger_fires_once_and_never_breaks_the_run(capsys):
    calls: list[int] = []
    trigger = warm_up.WarmUpTrigger(start=lambda: calls.append(1))
    trigger.handle(_record("STEP_START"))
    trigger.handle(_record("ASSET_MATERIALIZATION", kept=True))
    assert calls == []
    trigger.handle(_record("ASSET_MATERIALIZATION", mode="partial"))
    trigger.handle(_record("ASSET_MATERIALIZATION", kept=False))
    assert calls == [1]

    def broken():
        raise RuntimeError("no thread today")

    failing = warm_up.WarmUpTrigger(start=broken)
    failing.handle(_record("ASSET_MATERIALIZATION", kept=False))  # reported, not raised
    assert "no thread today" in capsys.readouterr().err


def test_a_process_ending_while_the_warm_up_runs_waits_for_it():
    # an interrupted or failed run can end the process while the thread still imports the
    # chart backends (C++ extensions). A daemon thread is stopped by the interpreter's exit
    # wherever it is, and inside such code that aborts the whole process after it said its
    # error ("terminate called without an active exception", SIGABRT instead of exit 130):
    # the exit waits for the thread (~0.6 s at most), nothing is left running for it to stop
    import subprocess
    import sys

    script = ("import atexit, sys, threading\n"
              "from cost_pipeline.cli.warm_up import start_report_warm_up\n"
              "atexit.register(lambda: print(sorted(t.name for t in threading.enumerate())))\n"
              "start_report_warm_up()\n"
              "sys.exit(130)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout.strip()) == (130, "['MainThread']"), done.stderr
