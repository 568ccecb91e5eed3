"""The alert sensors against a real Dagster instance (SQLite, as `dagster dev` uses) and a real
HTTP receiver on loopback, ticked over many evaluations; then the plain core rules."""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest
import yaml
from pytest_httpserver import HTTPServer
from werkzeug import Response

from cost_pipeline import alerts
from cost_pipeline.definitions import CHECK_KEYS, JOB_NAME, build_defs
from cost_pipeline.defs.sensors import build_check_alert_sensor, build_run_failure_alert_sensor
from tests.support.dagster_home import new_dagster_home

AUGUST = date(2026, 8, 1)
RECONCILIATION = "reconciliation.reconciliation_within_threshold"
SECRET = "T0000/B0000/s3cr3t-webhook-token"  # stands for the secret part of a Slack URL
TIMEOUT = 0.3  # alerts.timeout_seconds in the test config
SLOW = TIMEOUT * 10  # how long the slow receiver takes to answer


@contextmanager
def dagster_home(home: Path):
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old


@dataclass
class AlertEnv:
    home: Path
    strict: Path  # the demo config: August fails reconciliation
    lenient: Path  # the same month with a 50% threshold: August passes

    def materialize(self, config: Path, month: date):
        from cost_pipeline.cli.materialize import materialize_month

        with dagster_home(self.home):
            result = materialize_month(str(config), month, progress=False)
        assert result.success, result.error
        return result

    def refresh(self, config: Path, month: date, instance: dg.DagsterInstance, asset: str):
        """An on-demand refresh of one asset of the month, as the UI or
        `dagster asset materialize --select reconciliation` launches it."""
        job = build_defs(str(config)).resolve_job_def(JOB_NAME)
        result = job.execute_in_process(partition_key=f"{month:%Y-%m}-01", instance=instance,
                                        asset_selection=[dg.AssetKey(asset)])
        assert result.success
        return result

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))


@pytest.fixture
def alert_env(tmp_path) -> AlertEnv:
    from cost_pipeline.demo.generate import generate_demo

    strict = generate_demo(tmp_path / "demo")
    data = yaml.safe_load(strict.read_text())
    data["alerts"] = {"webhook_url_env": "COST_ALERT_WEBHOOK_URL", "timeout_seconds": TIMEOUT}
    strict.write_text(yaml.safe_dump(data))
    data["policy"]["reconciliation"]["max_untracked_share"] = 0.5
    lenient = strict.with_name("lenient.yaml")
    lenient.write_text(yaml.safe_dump(data))
    home = new_dagster_home(tmp_path / "dagster_home")
    return AlertEnv(home, strict, lenient)


class Receiver:
    """A webhook receiver whose answer the test chooses: ok, 503, slow (past the timeout),
    or down (stopped, the port refuses connections)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[tuple[str, dict]] = []  # (mode when received, JSON body)
        self.server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
        self.server.expect_request(f"/services/{SECRET}", method="POST").respond_with_handler(
            self._handle)
        self.server.start()
        self.url = self.server.url_for(f"/services/{SECRET}")

    def _handle(self, request) -> Response:
        self.requests.append((self.mode, json.loads(request.data)))
        if self.mode == "503":
            return Response("busy", status=503)
        if self.mode == "slow":
            time.sleep(SLOW)
        return Response("ok", status=200)

    def down(self) -> None:
        self.server.stop()

    def up(self) -> None:
        self.server.start()  # same port again

    def bodies(self, mode: str | None = None) -> list[dict]:
        return [body for m, body in self.requests if mode is None or m == mode]


@pytest.fixture
def receiver(monkeypatch):
    # werkzeug's access log is the receiver's, not ours: it prints the path it was called on
    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.ERROR)
    r = Receiver()
    monkeypatch.setenv("COST_ALERT_WEBHOOK_URL", r.url)
    yield r
    if r.server.is_running():
        r.server.stop()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Ticker:
    """Evaluates one sensor tick after another, carrying the cursor like the daemon does."""

    def __init__(self, sensor: dg.SensorDefinition, instance: dg.DagsterInstance,
                 defs: dg.Definitions, cursor: str | None = None) -> None:
        self.sensor, self.instance, self.defs, self.cursor = sensor, instance, defs, cursor
        self.ticks = 0

    def tick(self) -> str:
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursor,
                                          definitions=self.defs)
        data = self.sensor.evaluate_tick(context)
        assert not data.run_requests
        self.cursor, self.ticks = data.cursor, self.ticks + 1
        return data.skip_message or ""

    @property
    def state(self) -> dict:
        return alerts.load_state(self.cursor)


def test_failed_reconciliation_alerts_once_through_an_outage_and_rearms(
        alert_env, receiver, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    defs = build_defs(str(alert_env.strict))
    sensor = build_check_alert_sensor(str(alert_env.strict), CHECK_KEYS, clock=clock)
    with alert_env.instance() as instance:
        ticker = Ticker(sensor, instance, defs)
        assert "initialized" in ticker.tick()  # an empty instance: nothing to send
        august = alert_env.materialize(alert_env.strict, AUGUST)

        # the receiver answers 503: the alert stays queued, retried after 30 s
        receiver.mode = "503"
        assert "1 new alert" in ticker.tick()
        assert len(receiver.requests) == 1
        [item] = ticker.state["pending"]
        assert item["attempts"] == 1 and item["last_error"] == "HTTP 503"
        assert item["next_attempt"] == pytest.approx(clock() + 30)
        clock.advance(10)
        ticker.tick()  # backoff: not due yet
        assert len(receiver.requests) == 1

        # the receiver is down: refused, next attempt 60 s later
        receiver.down()
        clock.advance(25)
        ticker.tick()
        [item] = ticker.state["pending"]
        assert item["attempts"] == 2 and item["last_error"].startswith("cannot connect")
        assert item["next_attempt"] == pytest.approx(clock() + 60)

        # back up but too slow: a timeout, next attempt 120 s later
        receiver.up()
        receiver.mode = "slow"
        clock.advance(61)
        started = time.monotonic()
        ticker.tick()
        # the tick did not wait for the answer: it takes the 0.3 s timeout and ~0.03 s on a
        # quiet machine, up to ~1 s with the other test worker busy on the same 2 cores
        assert time.monotonic() - started < SLOW / 2
        [item] = ticker.state["pending"]
        assert item["attempts"] == 3 and item["last_error"] == f"timed out after {TIMEOUT:g} s"
        assert item["next_attempt"] == pytest.approx(clock() + 120)

        # healthy again: delivered on the first due tick, exactly once
        receiver.mode = "ok"
        clock.advance(60)
        ticker.tick()
        assert len(receiver.bodies("ok")) == 0  # still backing off
        clock.advance(61)
        assert "1 delivered" in ticker.tick()
        for _ in range(3):
            clock.advance(3600)
            ticker.tick()
        assert ticker.state["pending"] == [] and ticker.state["delivered"] == 1
        time.sleep(TIMEOUT * 3)  # let the slow handler record its request
        assert [m for m, _ in receiver.requests] == ["503", "slow", "ok"]
        [alert] = receiver.bodies("ok")
        # every attempt carried the same alert_id: a receiver can drop the one copy a
        # timed-out attempt may have delivered
        assert {b["alert_id"] for b in receiver.bodies()} == {alert["alert_id"]}

        # the figures
        assert alert["check"] == RECONCILIATION and alert["month"] == "2026-08"
        assert alert["run_id"] == august.run_id and alert["severity"] == "ERROR"
        assert alert["billed_gpu_hours"] == pytest.approx(2728.0)
        assert alert["tracked_gpu_hours"] == pytest.approx(1728.0)
        assert alert["untracked_share"] == round(1000 / 2728, 4)  # metadata: 4 digits
        top = alert["top_untracked_resources"][0]
        assert top["resource_id"] == "i-0a1b2c3d4e5f600d6" and top["gpu_hours"] == 1000.0
        assert top["hours"] == 250.0 and top["cost"] == pytest.approx(1418.0)
        assert "FAILED for 2026-08" in alert["text"] and "36.7%" in alert["text"]
        assert august.run_id in alert["text"]

        # the check passes again (a refresh of reconciliation under a lenient threshold)
        # → re-armed, nothing sent
        alert_env.refresh(alert_env.lenient, AUGUST, instance, "reconciliation")
        clock.advance(60)
        ticker.tick()
        episode = ticker.state["episodes"][f"{RECONCILIATION}|2026-08"]
        assert episode["failing"] is False and len(receiver.requests) == 3

        # fails again → one new alert, for the new run
        again = alert_env.refresh(alert_env.strict, AUGUST, instance, "reconciliation")
        clock.advance(60)
        assert "1 new alert(s), 1 delivered" in ticker.tick()
        clock.advance(60)
        ticker.tick()
        assert [b["run_id"] for b in receiver.bodies("ok")] == [august.run_id, again.run_id]

        # a fresh sensor (no cursor: a new deployment) only initializes, re-alerting nothing
        fresh = Ticker(sensor, instance, defs)
        assert "initialized" in fresh.tick()
        fresh.tick()
        assert fresh.state["episodes"][f"{RECONCILIATION}|2026-08"]["failing"] is True
        assert len(receiver.requests) == 4

    # the URL's secret appears nowhere: not in the cursor, not in any log line
    captured = capfd.readouterr()
    logged = " ".join(r.getMessage() for r in caplog.records)
    for text in (ticker.cursor, captured.out, captured.err, logged):
        assert SECRET not in text and receiver.url not in text
    # the sensor did log its failed attempts and its deliveries (Dagster's logger → stderr)
    assert "not delivered: HTTP 503" in captured.err and "delivered (attempt 4)" in captured.err
    print(f"check alert sensor: {ticker.ticks} ticks")


def test_fresh_sensor_on_a_shared_instance_does_not_realert_history(demo_quarter,
                                                                    dagster_home, receiver):
    # the session's instance holds the demo quarter (August failing) and CLI runs of other tests
    config, _ = demo_quarter
    defs = build_defs(str(config))
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        ticker = Ticker(defs.resolve_sensor_def("check_failure_alerts"), instance, defs)
        assert "initialized" in ticker.tick()
        ticker.tick()
    assert receiver.requests == []
    assert ticker.state["episodes"][f"{RECONCILIATION}|2026-08"]["failing"] is True


def test_a_rolled_back_runs_checks_alert_nothing(alert_env, receiver, monkeypatch):
    """A run whose writes rolled back (a later step failed, an interrupt) evaluated its checks
    on figures the warehouse never kept: its failed reconciliation alerted, and its pass
    re-armed a failing month. Only a committed run's evaluations count; a run still going
    waits for its outcome."""
    import cost_pipeline.defs.assets.report as report_asset
    from cost_pipeline.defs.resources import COMMIT_TAG, COMMITTED, ROLLED_BACK

    clock = Clock()
    defs = build_defs(str(alert_env.strict))
    sensor = build_check_alert_sensor(str(alert_env.strict), CHECK_KEYS, clock=clock)
    job = defs.resolve_job_def(JOB_NAME)
    with alert_env.instance() as instance:
        ticker = Ticker(sensor, instance, defs)
        assert "initialized" in ticker.tick()

        def broken(*_args, **_kwargs):
            raise RuntimeError("the report step broke")

        with monkeypatch.context() as patch:  # the last step fails: the month rolls back
            patch.setattr(report_asset, "page_inputs", broken)
            result = job.execute_in_process(partition_key=f"{AUGUST:%Y-%m-%d}",
                                            instance=instance, raise_on_error=False)
        assert not result.success
        rolled = instance.get_run_by_id(result.run_id)
        assert rolled.tags[COMMIT_TAG].startswith(ROLLED_BACK)
        assert [e for e in result.get_asset_check_evaluations()
                if e.check_name == "reconciliation_within_threshold" and not e.passed]
        clock.advance(30)
        ticker.tick()
        assert receiver.requests == []
        assert f"{RECONCILIATION}|2026-08" not in ticker.state["episodes"]

        # a run without an outcome tag (an earlier version's) counts only when it succeeded
        instance.add_run_tags(result.run_id, {COMMIT_TAG: ""})
        clock.advance(30)
        ticker.tick()
        assert receiver.requests == []

        august = alert_env.materialize(alert_env.strict, AUGUST)  # committed: alerted
        assert instance.get_run_by_id(august.run_id).tags[COMMIT_TAG] == COMMITTED
        clock.advance(30)
        assert "1 new alert(s), 1 delivered" in ticker.tick()
        [alert] = receiver.bodies("ok")
        assert alert["run_id"] == august.run_id


def test_check_evaluations_of_another_warehouse_are_not_this_locations(demo_quarter,
                                                                        dagster_home):
    """Code locations sharing one instance (one per account's warehouse) have the same check
    keys: each read every location's failures, alerting another account's August."""
    from cost_pipeline.config import load_config
    from cost_pipeline.defs.sensors import read_check_evaluations

    config, _ = demo_quarter
    warehouse = load_config(str(config)).warehouse_path
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        mine = read_check_evaluations(instance, CHECK_KEYS, None, warehouse)
        others = read_check_evaluations(instance, CHECK_KEYS, None, "/another/w.duckdb")
    assert any(e.month == "2026-08" and not e.passed for e in mine)
    assert not [e for e in others if {e.run_id} & {m.run_id for m in mine}]


def test_failed_scheduled_run_alerts_once(alert_env, receiver):
    broken = alert_env.strict.with_name("broken.yaml")
    data = yaml.safe_load(alert_env.strict.read_text())
    data["billing"] = [{"kind": "aws_cur2", "path": "exports/missing-export"}]
    broken.write_text(yaml.safe_dump(data))
    job = build_defs(str(broken)).resolve_job_def(JOB_NAME)
    clock = Clock()
    from cost_pipeline.config import load_config
    from cost_pipeline.defs.sensors import WAREHOUSE_TAG

    warehouse = load_config(str(alert_env.strict)).warehouse_path
    sensor = build_run_failure_alert_sensor(str(alert_env.strict),
                                            ["monthly_close", "daily_refresh"], clock=clock,
                                            sensor_names=["billing_delivery_sensor"],
                                            warehouse=warehouse)
    with alert_env.instance() as instance:
        ticker = Ticker(sensor, instance, build_defs(str(alert_env.strict)))
        assert "initialized" in ticker.tick()

        def fail(tags: dict) -> str:
            result = job.execute_in_process(partition_key="2026-10-01", instance=instance,
                                            raise_on_error=False, tags=tags,
                                            asset_selection=[dg.AssetKey("billing_facts")])
            assert not result.success
            return result.run_id

        fail({"cost_pipeline/launched_by": "cli"})  # not scheduled: no alert
        # another code location's schedule of the same name on the shared instance (another
        # account's warehouse): its own sensor alerts it, not this one
        fail({"dagster/schedule_name": "monthly_close", WAREHOUSE_TAG: "/other/w.duckdb"})
        scheduled = fail({"dagster/schedule_name": "monthly_close"})
        clock.advance(30)
        assert "1 new alert(s), 1 delivered" in ticker.tick()
        for _ in range(2):
            clock.advance(30)
            ticker.tick()
        # a restated month's refresh that the delivery sensor launched: its cursor has moved
        # on, so unalerted its failure kept the old bill silently
        refresh = fail({"dagster/sensor_name": "billing_delivery_sensor",
                        "cost_pipeline/launched_by": "delivery_sensor"})
        clock.advance(30)
        assert "1 new alert(s), 1 delivered" in ticker.tick()
    alert, sensed = receiver.bodies()
    assert alert["kind"] == "scheduled_run_failed" and alert["run_id"] == scheduled
    assert alert["schedule"] == "monthly_close" and alert["month"] == "2026-10"
    assert alert["job"] == JOB_NAME and "missing-export" in alert["error"]
    # the error as the command prints it: without the exception's class
    assert not alert["error"].startswith(("cost_pipeline.", "SourceError"))
    assert sensed["run_id"] == refresh and sensed["sensor"] == "billing_delivery_sensor"
    assert "(sensor billing_delivery_sensor)" in sensed["text"]


# ------------------------------------------------------------------- the plain core rules


def evaluation(month: str, passed: bool, at: float, severity: str = "ERROR",
               run: str = "run") -> alerts.CheckEvaluation:
    return alerts.CheckEvaluation(RECONCILIATION, month, passed, severity, at, f"{run}-{at}",
                                  {"untracked_share": 0.4, "billed_gpu_hours": 10.0})


def test_episodes_one_alert_per_failure_episode_of_a_check_and_month():
    state = alerts.new_state()
    assert alerts.observe_checks(state, [evaluation("2026-08", False, 1.0)], now=0) == []
    assert state["episodes"][f"{RECONCILIATION}|2026-08"]["failing"]  # history, not alerted
    batch = [
        evaluation("2026-08", False, 2.0),  # same episode: nothing
        evaluation("2026-09", False, 3.0, "WARN"),  # a warning never pages
        evaluation("2026-08", True, 4.0),  # re-armed …
        evaluation("2026-08", False, 5.0),  # … fails again: one alert
        evaluation("2026-07", False, 6.0),  # another month: its own alert
        evaluation("2026-08", True, 0.5),  # older than what was seen: ignored
    ]
    queued = alerts.observe_checks(state, reversed(batch), now=10)
    assert [q["payload"]["month"] for q in queued] == ["2026-08", "2026-07"]
    assert queued[0]["payload"]["run_id"] == "run-5.0"
    # the same evaluations seen again (overlapping reads) queue nothing
    assert alerts.observe_checks(state, batch, now=11) == []
    assert len(state["pending"]) == 2


def test_undelivered_alert_survives_restarts_with_capped_backoff(monkeypatch):
    monkeypatch.delenv("UNSET_WEBHOOK_VAR", raising=False)
    state = alerts.new_state()
    alerts.observe_checks(state, [], now=0)
    alerts.observe_checks(state, [evaluation("2026-08", False, 1.0)], now=0)
    send = alerts.webhook_sender("UNSET_WEBHOOK_VAR", 1.0)
    now, waits = 0.0, []
    for _ in range(10):
        state = alerts.load_state(alerts.dump_state(state))  # a restart between ticks
        [outcome] = alerts.deliver_due(state, now, send)
        assert not outcome.delivered and outcome.error == "$UNSET_WEBHOOK_VAR is not set"
        waits.append(outcome.retry_in)
        now = state["pending"][0]["next_attempt"]
    assert waits[:4] == [30, 60, 120, 240] and waits[-1] == alerts.RETRY_MAX_SECONDS
    assert len(state["pending"]) == 1 and state["pending"][0]["attempts"] == 10
    delivered: list[dict] = []
    [outcome] = alerts.deliver_due(state, now, delivered.append)
    assert outcome.delivered and state["pending"] == [] and len(delivered) == 1


def test_alert_text_says_what_failed_for_each_error_check():
    missing = alerts.CheckEvaluation(
        "billing_facts.billing_complete", "2026-10", False, "ERROR", 1.0, "r1",
        {"days_expected": 31, "days_with_usage": 29, "missing_days": "2026-10-05, 2026-10-06"})
    assert "2 of 31 days have no usage lines (2026-10-05, 2026-10-06)" in alerts.check_alert(
        missing)["text"]
    off = alerts.CheckEvaluation("attribution.cost_conserved", "2026-10", False, "ERROR", 1.0,
                                 "r2", {"delta": 12.5, "tolerance": 0.01, "currency": "USD"})
    payload = alerts.check_alert(off)
    assert "off the bill by $12.50" in payload["text"] and payload["run_id"] == "r2"
    # a tolerance below the currency's unit (a cent of a yen) reads its digits, not JPY 0
    yen = alerts.CheckEvaluation("attribution.cost_conserved", "2026-10", False, "ERROR", 1.0,
                                 "r2", {"delta": 5.0, "tolerance": 0.01, "currency": "JPY"})
    assert "off the bill by JPY 5 (tolerance JPY 0.01)" in alerts.check_alert(yen)["text"]
    # a NOK bill's alert says NOK, never `$`
    nok = alerts.CheckEvaluation(
        "reconciliation.reconciliation_within_threshold", "2026-10", False, "ERROR", 1.0, "r3",
        {"untracked_share": 0.5, "billed_gpu_hours": 10.0, "tracked_gpu_hours": 5.0,
         "threshold": 0.05, "currency": "NOK",
         "top_untracked": [{"resource_id": "i-1", "instance_type": "g5.xlarge",
                            "gpu_hours": 5.0, "hours": 5.0, "cost": 1234.5}]})
    text = alerts.check_alert(nok)["text"]
    assert "NOK 1,234.50" in text and "$" not in text
    assert json.loads(alerts.dump_state({"pending": [payload]}))  # JSON all the way down


def test_a_budget_check_alert_writes_its_amounts_in_the_bills_currency():
    budget = alerts.CheckEvaluation(
        "retention_violations.retention_within_budget", "2026-10", False, "WARN", 1.0, "r4",
        {"month": "2026-10", "currency": "NOK", "violation_cost": 158.9, "budget": 100.0,
         "objects": 3373})
    text = alerts.check_alert(budget)["text"]
    assert "violation_cost NOK 158.90, budget NOK 100.00, objects 3373" in text
    assert "$" not in text


def test_a_failed_check_never_shows_its_figure_equal_to_its_limit():
    """Rounded for display, a share of 0.05004 failing a 0.05 threshold read 0.05 and 0.05,
    and the alert "FAILED … 5.0% … threshold 5.0%": the figure keeps the digits that tell it
    from its limit, in the check's metadata and in the alert's text; a delta a fraction of
    a cent over the tolerance likewise."""
    from cost_pipeline.defs.metadata import kept_apart, rounded

    raw = {"untracked_share": 0.05004, "threshold": 0.05, "billed_gpu_hours": 10.0}
    shown = kept_apart(rounded(raw), raw, "untracked_share", "threshold")
    assert shown["untracked_share"] == 0.05004 and shown["threshold"] == 0.05
    plain = {"untracked_share": 0.1234567, "threshold": 0.05}
    assert kept_apart(rounded(plain), plain, "untracked_share", "threshold") == rounded(plain)
    share = alerts.CheckEvaluation(RECONCILIATION, "2026-10", False, "ERROR", 1.0, "r5",
                                   {**shown, "tracked_gpu_hours": 9.5})
    assert "5.004% of 10.0 billed GPU-hours untracked (tracked 9.5, threshold 5.000%)" in (
        alerts.check_alert(share)["text"])
    off = {"delta": -0.0123, "tolerance": 0.01, "currency": "USD"}
    shown = kept_apart(rounded(off), off, "delta", "tolerance")
    assert shown["delta"] == -0.012
    text = alerts.check_alert(alerts.CheckEvaluation(
        "attribution.cost_conserved", "2026-10", False, "ERROR", 1.0, "r6", shown))["text"]
    assert "off the bill by −$0.012 (tolerance $0.010)" in text


def test_a_reconciliation_alert_writes_gpu_hours_as_the_months_page_does():
    """The alert wrote GPU-hours with one decimal whatever they were: "2,728.0 billed
    GPU-hours (tracked 1,728.0" beside the page's "1,000 of 2,728", and a resource's 0.04
    untracked GPU-hours as "0.0". The month's statement (tracked, untracked, billed) shares
    its decimals as on the page (money.gpu_hours_alike), and the largest untracked resources'
    hours theirs."""
    def text(metadata: dict) -> str:
        return alerts.check_alert(alerts.CheckEvaluation(
            RECONCILIATION, "2026-08", False, "ERROR", 1.0, "r7",
            {"threshold": 0.05, "currency": "USD", **metadata}))["text"]

    whole = text({"untracked_share": 1000.0 / 2728.0, "billed_gpu_hours": 2728.0,
                  "tracked_gpu_hours": 1728.0, "untracked_gpu_hours": 1000.0})
    assert "36.7% of 2,728 billed GPU-hours untracked (tracked 1,728, threshold 5.0%)" in whole
    small = text({"untracked_share": 0.0004, "threshold": 0.0001, "billed_gpu_hours": 100.0,
                  "tracked_gpu_hours": 99.96, "untracked_gpu_hours": 0.04,
                  "top_untracked": [{"resource_id": "i-1", "instance_type": "g5.xlarge",
                                     "gpu_hours": 0.04, "cost": 0.05},
                                    {"resource_id": "i-2", "instance_type": "g5.xlarge",
                                     "gpu_hours": 2.0, "cost": 2.0}]})
    assert ("0.04% of 100.00 billed GPU-hours untracked (tracked 99.96, threshold 0.01%); "
            "largest untracked: i-1 (g5.xlarge) 0.04 GPU-hours $0.05, "
            "i-2 (g5.xlarge) 2.00 GPU-hours $2.00.") in small


def test_a_reconciliation_alert_rounds_the_share_from_its_digits_as_the_page_does():
    """The alert wrote a share in percent from the double `100 * share`: 100 × 0.0515 is
    5.1499999…, and a 5.15% share read "5.1%" where the month's page (`money.percent`,
    from the share's own digits) says "5.2%"; a 1.85% threshold likewise "1.8%". The share
    and the threshold are shifted to percent from their decimal digits, rounded half up."""
    from cost_pipeline.report.money import in_percent, percent

    def text(share: float, threshold: float) -> str:
        return alerts.check_alert(alerts.CheckEvaluation(
            RECONCILIATION, "2026-08", False, "ERROR", 1.0, "r7",
            {"untracked_share": share, "threshold": threshold, "billed_gpu_hours": 100.0,
             "tracked_gpu_hours": 90.0, "untracked_gpu_hours": 10.0}))["text"]

    assert percent(0.0515) == "5.2%" and percent(0.0185) == "1.9%"
    assert "5.2% of 100 billed GPU-hours untracked (tracked 90, threshold 5.0%)" in text(
        0.0515, 0.05)
    assert "2.9% of 100 billed GPU-hours untracked (tracked 90, threshold 1.9%)" in text(
        0.029, 0.0185)
    assert "0.6% of 100 billed GPU-hours untracked (tracked 90, threshold 0.5%)" in text(
        0.0055, 0.0045)
    # the digits that tell a share from its threshold still come from the shift: 5.004%
    assert "5.004% of 100 billed GPU-hours untracked (tracked 90, threshold 5.000%)" in text(
        0.05004, 0.05)
    assert in_percent(0.0295) == Decimal("2.95")
    assert alerts.figures_apart(in_percent(0.0295), in_percent(0.05)) == ("3.0", "5.0")


def test_a_check_alert_ends_with_what_to_do_next():
    """The alert said what failed, with the figures and the run, never what to do about it."""
    share = alerts.check_alert(alerts.CheckEvaluation(
        RECONCILIATION, "2026-08", False, "ERROR", 1.0, "r7",
        {"untracked_share": 0.3666, "billed_gpu_hours": 2728.0, "tracked_gpu_hours": 1728.0,
         "threshold": 0.05}))
    step = ("untracked_usage for 2026-08: `cost-pipeline report --month 2026-08` lists the "
            "largest untracked resources and why; record the runs that used them, or list the "
            "resources in those runs' resource_ids, then materialize 2026-08 again")
    assert share["next_step"] == step
    assert share["text"] == (
        ":rotating_light: cost-pipeline: reconciliation.reconciliation_within_threshold "
        "FAILED for 2026-08 — 36.7% of 2,728 billed GPU-hours untracked (tracked 1,728, "
        f"threshold 5.0%). Dagster run r7. Chase it: {step}.")
    missing = alerts.check_alert(alerts.CheckEvaluation(
        "billing_facts.billing_complete", "2026-10", False, "ERROR", 1.0, "r8",
        {"days_expected": 31, "days_with_usage": 30, "missing_days": "2026-10-05"}))
    assert missing["next_step"] == (
        "check that the billing export has delivered those days, then materialize 2026-10 "
        "again (`cost-pipeline materialize --month 2026-10`)")
    assert missing["text"].endswith(f"Dagster run r8. Chase it: {missing['next_step']}.")
    off = alerts.check_alert(alerts.CheckEvaluation(
        "attribution.cost_conserved", "2026-10", False, "ERROR", 1.0, "r9",
        {"delta": 12.5, "tolerance": 0.01, "currency": "USD"}))
    assert off["next_step"] == (
        "materialize 2026-10 again from scratch (`cost-pipeline materialize --month 2026-10 "
        "--force`); if the bill is still off, report it with this run's id")
    for payload in (share, missing, off):
        assert "\n" not in payload["text"] and payload["text"].count("Chase it:") == 1
    # a check without a known remedy keeps its text as it was
    budget = alerts.check_alert(alerts.CheckEvaluation(
        "retention_violations.retention_within_budget", "2026-10", False, "WARN", 1.0, "r4",
        {"violation_cost": 158.9, "budget": 100.0}))
    assert budget["next_step"] is None and budget["text"].endswith("Dagster run r4")


def test_a_check_alerts_commands_name_the_sensors_config():
    """The commands an alert says to run took the config from $COST_PIPELINE_CONFIG, which
    the reader's shell (a laptop, a Slack thread) seldom has: the sensor's own config file is
    named, quoted for a shell; a path a shell line cannot carry is left out."""
    def step(check: str, config: str | None) -> str:
        return alerts.check_alert(alerts.CheckEvaluation(
            check, "2026-10", False, "ERROR", 1.0, "r1", {"delta": 1.0, "tolerance": 0.01,
                                                          "currency": "USD"}),
            config)["next_step"]

    assert step("attribution.cost_conserved", "/srv/costs/pipeline.yaml") == (
        "materialize 2026-10 again from scratch (`cost-pipeline materialize --config "
        "/srv/costs/pipeline.yaml --month 2026-10 --force`); if the bill is still off, report "
        "it with this run's id")
    assert "`cost-pipeline materialize --config '/srv/my costs/p.yaml' --month 2026-10`" in (
        step("billing_facts.billing_complete", "/srv/my costs/p.yaml"))
    assert "`cost-pipeline report --config /c.yaml --month 2026-10` lists" in step(
        RECONCILIATION, "/c.yaml")
    assert "`cost-pipeline materialize --month 2026-10 --force`" in step(
        "attribution.cost_conserved", "/srv/a\nb.yaml")
    assert "--config" not in step("attribution.cost_conserved", "/" + "d" * 300 + ".yaml")
    assert "--config" not in step("attribution.cost_conserved", None)
    state = alerts.new_state()
    alerts.observe_checks(state, [], 1.0, config="/c.yaml")  # the first tick records
    (queued,) = alerts.observe_checks(state, [alerts.CheckEvaluation(
        "attribution.cost_conserved", "2026-11", False, "ERROR", 3.0, "r3", {})], 3.0,
        config="/c.yaml")
    assert "--config /c.yaml --month 2026-11 --force" in queued["payload"]["text"]


def test_a_long_run_error_is_cut_at_a_word_and_says_so(alert_env):
    """A run's error was cut at 500 characters mid-word, with nothing saying it was cut."""
    from cost_pipeline.defs.sensors import _failure_reason, shortened

    assert shortened("word " * 200) == "word " * 99 + "word…"  # 499 characters and "…"
    assert shortened("x" * 600) == "x" * 499 + "…"  # no blank to cut at: cut anyway
    assert shortened("word " * 20) == "word " * 20  # short enough: as it was

    broken = alert_env.strict.with_name("broken.yaml")
    data = yaml.safe_load(alert_env.strict.read_text())
    folder = "/".join(f"the export of quarter {n} as it was" for n in range(25))
    data["billing"] = [{"kind": "aws_cur2", "path": f"exports/{folder}"}]
    broken.write_text(yaml.safe_dump(data))
    with alert_env.instance() as instance:
        result = build_defs(str(broken)).resolve_job_def(JOB_NAME).execute_in_process(
            partition_key="2026-10-01", instance=instance, raise_on_error=False,
            asset_selection=[dg.AssetKey("billing_facts")])
        reason = _failure_reason(instance, result.run_id)
    full = f"aws_cur2: {alert_env.strict.parent}/exports/{folder}: export folder not found"
    assert len(full) > 500 and len(reason) <= 500 and reason.endswith("…")
    kept = reason[:-1]
    # whole words: what is kept ends where a blank of the full error stood, the last one
    # within 500 characters
    assert full.startswith(kept) and full[len(kept)] == " "
    assert " " not in full[len(kept) + 1:500]


def alert_of_a_reconciled_month(tracked: float, untracked: float,
                                threshold: float = 0.05) -> tuple[dict, float]:
    """The alert of a month whose bill shows `tracked` GPU-hours a run used (one instance of
    8 GPUs) and `untracked` no run did (one of 1 GPU), as the sensor reads the failed check
    from the instance; and the month's exact untracked share (the table's, the page's)."""
    from datetime import datetime, timedelta

    from cost_pipeline.defs.checks import reconciliation_outcome
    from cost_pipeline.defs.sensors import read_check_evaluations
    from tests.support.sql_backend import run_month, table_rows

    start = datetime(2024, 3, 5)

    def gpu_line(resource: str, gpus: int, hours: float, line: str) -> dict:
        return {"ChargePeriodStart": start, "ChargePeriodEnd": start + timedelta(hours=hours),
                "ChargeCategory": "Usage", "ResourceId": resource, "EffectiveCost": 10.0,
                "x_CostComponent": "gpu", "x_AcceleratorCount": gpus, "x_UsageHours": hours,
                "x_InstanceUsage": True, "x_ResourceKind": "instance",
                "x_InstanceType": "g5.48xlarge", "x_SourceLine": line}

    run = {"run_id": "r1", "status": "FINISHED", "purpose": "production", "start_time": start,
           "end_time": start + timedelta(hours=tracked / 8), "resource_ids": ["i-tracked"],
           "gpus": 8}
    march = date(2024, 3, 1)
    con = run_month([gpu_line("i-tracked", 8, tracked / 8, "L1"),
                     gpu_line("i-untracked", 1, untracked, "L2")], [run], [], {}, march,
                    threshold=threshold)
    (row,) = table_rows(con, "reconciliation")
    check, _ = reconciliation_outcome(con, march)

    @dg.asset(name="reconciliation", partitions_def=dg.MonthlyPartitionsDefinition("2024-01-01"),
              check_specs=[dg.AssetCheckSpec("reconciliation_within_threshold",
                                             asset="reconciliation")])
    def reconciliation() -> dg.MaterializeResult:
        return dg.MaterializeResult(check_results=[check])

    key = dg.AssetCheckKey(dg.AssetKey("reconciliation"), "reconciliation_within_threshold")
    with dg.instance_for_test() as instance:
        assert dg.materialize([reconciliation], instance=instance,
                              partition_key="2024-03-01").success
        (evaluation,) = read_check_evaluations(instance, [key], None)
    assert not evaluation.passed and evaluation.month == "2024-03"
    return alerts.check_alert(evaluation), row["untracked_share"]


def test_a_reconciliation_alert_writes_the_share_the_months_page_writes():
    """Billed 264.52 GPU-hours, 16.52 untracked: a share of 0.062452…, 6.2% on the month's
    page. The check's metadata rounds the share to 4 digits for display (0.0625), and the
    alert rounded that again, half up: "6.3%". The alert writes the share from its exact
    figure, as the page does; 7.449 of 100 (0.07449, shown 0.0745) likewise reads 7.4%, not
    7.5%, and against a threshold of 0.01249 (shown 0.0125) both read as the page writes them,
    the threshold with its own digits and the share with as many: 7.449% against 1.249%, not
    1.3%."""
    from cost_pipeline.report.money import percent

    alert, share = alert_of_a_reconciled_month(248.0, 16.52)
    assert share == pytest.approx(16.52 / 264.52) and percent(share) == "6.2%"
    assert "— 6.2% of 264.5 billed GPU-hours untracked (tracked 248.0, threshold 5.0%)" in (
        alert["text"])
    assert alert["figures"]["untracked_share"] == 0.0625  # the UI's figure stays rounded
    alert, share = alert_of_a_reconciled_month(92.551, 7.449)
    assert percent(share) == "7.4%"
    assert "— 7.4% of 100.0 billed GPU-hours untracked (tracked 92.6, threshold 5.0%)" in (
        alert["text"])
    alert, share = alert_of_a_reconciled_month(92.551, 7.449, threshold=0.01249)
    assert "— 7.449% of 100.0 billed GPU-hours untracked (tracked 92.6, threshold 1.249%)" in (
        alert["text"])


def test_a_billing_alert_counts_one_missing_day_in_the_singular():
    """"1 of 30 days have no usage lines": one day has; a month of one expected day (the
    open month on its 2nd) is "of 1 day"; a statement of 1 GPU-hour likewise."""
    def text(missing: str, expected: int) -> str:
        return alerts.check_alert(alerts.CheckEvaluation(
            "billing_facts.billing_complete", "2026-11", False, "ERROR", 1.0, "r1",
            {"days_expected": expected, "missing_days": missing}))["text"]

    assert "— 1 of 30 days has no usage lines (2026-11-05)." in text("2026-11-05", 30)
    assert "— 2 of 30 days have no usage lines (2026-11-05, 2026-11-06)." in text(
        "2026-11-05, 2026-11-06", 30)
    assert "— 1 of 1 day has no usage lines (2026-11-01)." in text("2026-11-01", 1)
    one = alerts.check_alert(alerts.CheckEvaluation(
        RECONCILIATION, "2026-11", False, "ERROR", 1.0, "r2",
        {"untracked_share": 1.0, "threshold": 0.05, "billed_gpu_hours": 1.0,
         "tracked_gpu_hours": 0.0, "untracked_gpu_hours": 1.0, "currency": "USD",
         "top_untracked": [{"resource_id": "i-1", "instance_type": "g5.xlarge",
                            "gpu_hours": 1.0, "cost": 1.0},
                           {"resource_id": "i-2", "instance_type": "g5.xlarge",
                            "gpu_hours": 2.0, "cost": 2.0}]}))["text"]
    assert ("— 100.0% of 1 billed GPU-hour untracked (tracked 0, threshold 5.0%); largest "
            "untracked: i-1 (g5.xlarge) 1 GPU-hour $1.00, i-2 (g5.xlarge) 2 GPU-hours "
            "$2.00.") in one
