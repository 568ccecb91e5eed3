"""The alert queue survives daemon restarts. Between every two ticks the "daemon" restarts:
the sensor's cursor is stored where dagster-daemon keeps it (the sensor's InstigatorState in
the instance's schedule storage under DAGSTER_HOME), the instance object and the sensor
definition are dropped, and the next tick builds both anew and reads the cursor back. Under
a receiver that fails (503), times out, is down, then answers slowly, the one alert is
retried with backoff and delivered exactly once."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteInstigatorOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.scheduler.instigation import (
    InstigatorState,
    InstigatorStatus,
    InstigatorType,
    SensorInstigatorData,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from werkzeug import Response

from cost_pipeline import alerts
from cost_pipeline.definitions import CHECK_KEYS, JOB_NAME, build_defs
from cost_pipeline.defs.sensors import build_check_alert_sensor
from tests.defs.test_sensors import RECONCILIATION, TIMEOUT, Clock, Receiver
from tests.support.dagster_home import new_dagster_home
from tests.support.warehouse_dump import copy_with_warehouse

AUGUST = date(2026, 8, 1)
ORIGIN = RemoteInstigatorOrigin(
    RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="cost_pipeline.definitions",
                                                         attribute="defs"),
                                    location_name="cost_pipeline"),
        "__repository__"),
    "check_failure_alerts")


class SlowReceiver(Receiver):
    """Adds `sluggish`: a 200 answer that takes half the sender's timeout."""

    def _handle(self, request) -> Response:
        if self.mode == "sluggish":
            time.sleep(TIMEOUT / 2)
        return super()._handle(request)


class RestartingDaemon:
    """One sensor tick per `tick()`, each on a fresh instance object and sensor definition,
    the cursor read from and written to the instance's storage as the daemon does."""

    def __init__(self, home: Path, config: Path, clock: Clock) -> None:
        self.home, self.config, self.clock, self.ticks = home, config, clock, 0

    def _stored(self, instance: dg.DagsterInstance) -> InstigatorState | None:
        probe = InstigatorState(ORIGIN, InstigatorType.SENSOR, InstigatorStatus.RUNNING)
        return instance.get_instigator_state(probe.instigator_origin_id, probe.selector_id)

    def tick(self) -> str:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            stored = self._stored(instance)
            cursor = stored.instigator_data.cursor if stored and stored.instigator_data else None
            sensor = build_check_alert_sensor(str(self.config), CHECK_KEYS, clock=self.clock)
            context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                              definitions=build_defs(str(self.config)))
            data = sensor.evaluate_tick(context)
            new = InstigatorState(ORIGIN, InstigatorType.SENSOR, InstigatorStatus.RUNNING,
                                  SensorInstigatorData(cursor=data.cursor,
                                                       last_tick_timestamp=self.clock()))
            if stored is None:
                instance.add_instigator_state(new)
            else:
                instance.update_instigator_state(new)
        self.ticks += 1
        return data.skip_message or ""

    def state(self) -> dict:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            return alerts.load_state(self._stored(instance).instigator_data.cursor)


@pytest.fixture
def slow_receiver(monkeypatch):
    import logging

    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.ERROR)
    receiver = SlowReceiver()
    monkeypatch.setenv("COST_ALERT_WEBHOOK_URL", receiver.url)
    yield receiver
    if receiver.server.is_running():
        receiver.server.stop()


def test_pending_alert_survives_daemon_restarts_and_is_delivered_once(demo_quarter, tmp_path,
                                                                      slow_receiver):
    receiver = slow_receiver
    config = copy_with_warehouse(Path(demo_quarter[0]), tmp_path / "demo")
    data = yaml.safe_load(config.read_text())
    data["alerts"] = {"webhook_url_env": "COST_ALERT_WEBHOOK_URL", "timeout_seconds": TIMEOUT}
    config.write_text(yaml.safe_dump(data))
    home = new_dagster_home(tmp_path / "dagster_home")
    clock = Clock()
    daemon = RestartingDaemon(home, config, clock)
    assert "initialized" in daemon.tick()

    # August's reconciliation is evaluated again (a refresh from the UI): it fails
    with dg.DagsterInstance.from_config(str(home)) as instance:
        refresh = build_defs(str(config)).resolve_job_def(JOB_NAME).execute_in_process(
            partition_key="2026-08-01", instance=instance,
            asset_selection=[dg.AssetKey("reconciliation")])
    assert refresh.success

    receiver.mode = "503"
    assert "1 new alert(s), 0 delivered, 1 waiting" in daemon.tick()
    for mode, wait, error in (("slow", 31, f"timed out after {TIMEOUT:g} s"),
                              ("down", 61, "cannot connect")):
        clock.advance(wait - 20)
        daemon.tick()  # restarted before the backoff ended: nothing is sent
        clock.advance(20)
        if mode == "down":
            receiver.down()
        else:
            receiver.mode = mode
        assert "0 delivered, 1 waiting" in daemon.tick()
        [item] = daemon.state()["pending"]  # the queue as stored under DAGSTER_HOME
        assert item["last_error"].startswith(error)
    receiver.up()
    receiver.mode = "sluggish"
    clock.advance(121)
    assert "1 delivered, 0 waiting" in daemon.tick()
    for _ in range(3):
        clock.advance(3600)
        daemon.tick()

    time.sleep(TIMEOUT * 3)  # let the timed-out handler record its request
    assert [mode for mode, _ in receiver.requests] == ["503", "slow", "sluggish"]
    assert len({body["alert_id"] for _, body in receiver.requests}) == 1
    [(_, alert)] = [r for r in receiver.requests if r[0] == "sluggish"]
    assert alert["check"] == RECONCILIATION and alert["month"] == "2026-08"
    assert alert["run_id"] == refresh.run_id
    final = daemon.state()
    assert final["pending"] == [] and final["delivered"] == 1
    assert daemon.ticks == 10
