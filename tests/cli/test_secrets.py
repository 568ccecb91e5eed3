"""A tracking URI with credentials (`http://alice:PASSWORD@…`) whose MLflow server is down:
the materialization fails with one clear line, and the password appears nowhere — not on
stdout/stderr, not in Dagster's event log, run storage or compute logs (every file of the
instance's home is searched), not in the scheduled-run failure alert the webhook receives."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import yaml

from cost_pipeline import alerts
from cost_pipeline.definitions import build_defs
from cost_pipeline.defs.sensors import build_run_failure_alert_sensor
from cost_pipeline.ingest.sources import SourceError, redact
from tests.cli.test_cli import copy_demo
from tests.defs.test_sensors import Clock, Receiver, Ticker
from tests.support.dagster_home import new_dagster_home

PASSWORD = "PASSWORD-hunter2"
TOKEN = "tok-5ecr3t"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redact_rules():
    assert redact(f"http://alice:{PASSWORD}@h:5000/x") == "http://alice:***@h:5000/x"
    assert redact(f"https://{TOKEN}@h/x") == "https://***@h/x"
    assert redact(f"https://h/x?a=1&token={TOKEN}&b=2") == "https://h/x?a=1&token=***&b=2"
    assert redact(f'{{"access_token": "{TOKEN}"}}') == '{"access_token": "***"}'
    assert redact(f"Authorization: Bearer {TOKEN}") == "Authorization: Bearer ***"
    assert redact("sqlite:////tmp/m.db and s3://bucket/a@b") == \
        "sqlite:////tmp/m.db and s3://bucket/a@b"
    assert PASSWORD not in str(SourceError("mlflow", f"http://a:{PASSWORD}@h/", "down"))


def test_tracker_password_never_shown(demo_quarter, tmp_path, monkeypatch):
    config = copy_demo(demo_quarter, tmp_path)
    data = yaml.safe_load(config.read_text())
    uri = f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}/?access_token={TOKEN}"
    data["tracker"] = [{"kind": "mlflow", "tracking_uri": uri}]
    data["alerts"] = {"webhook_url_env": "COST_ALERT_WEBHOOK_URL", "timeout_seconds": 5}
    config.write_text(yaml.safe_dump(data))
    home = new_dagster_home(tmp_path / "dagster_home")
    receiver = Receiver()
    monkeypatch.setenv("COST_ALERT_WEBHOOK_URL", receiver.url)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sensor = build_run_failure_alert_sensor(str(config), ["monthly_close"], clock=Clock())
    try:
        with dg.DagsterInstance.get() as instance:
            ticker = Ticker(sensor, instance, build_defs(str(config)))
            assert "initialized" in ticker.tick()

            done = subprocess.run(
                [sys.executable, "-m", "cost_pipeline.cli", "materialize", "--config",
                 str(config), "--month", "2026-08"], capture_output=True, text=True,
                timeout=300, env={**os.environ, "DAGSTER_HOME": str(home)})
            assert done.returncode == 1, done.stderr
            (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
            assert "alice:***@127.0.0.1" in error, error
            for text in (done.stdout, done.stderr):
                assert PASSWORD not in text and TOKEN not in text, text

            # the same run as the schedule's: the failure alert quotes the error
            (run,) = instance.get_runs()
            instance.add_run_tags(run.run_id, {"dagster/schedule_name": "monthly_close"})
            logs = instance.all_logs(run.run_id)
            assert any(e.dagster_event and e.dagster_event.is_step_failure for e in logs)
            for entry in logs:
                text = entry.message + repr(entry.dagster_event)
                assert PASSWORD not in text and TOKEN not in text, text
            ticker.tick()
    finally:
        receiver.down()
    (alert,) = receiver.bodies()
    assert alert["kind"] == "scheduled_run_failed" and "alice:***@" in alert["error"]
    assert PASSWORD not in repr(alert) and TOKEN not in repr(alert)
    assert alerts.redact(alert["text"]) == alert["text"]
    for path in Path(home).rglob("*"):  # event log, run storage, compute logs
        if path.is_file():
            content = path.read_bytes()
            assert PASSWORD.encode() not in content and TOKEN.encode() not in content, path
