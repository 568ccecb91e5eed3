"""Alert delivery against real local HTTP receivers: a redirect is not a delivery (301/302/303
keep the alert queued; 307/308 re-POST the same body), `timeout_seconds` bounds the whole
request even when the receiver trickles its answer, and text from the data cannot inject
Slack markup."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from cost_pipeline import alerts

ALERT = alerts.run_alert(alerts.FailedRun("r1", "monthly_costs", "monthly_close", "2026-08",
                                          1.7e9, "boom"))


@pytest.fixture
def receiver():
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def _queued_and_delivered(url: str) -> tuple[dict, list[alerts.Outcome]]:
    state = alerts.new_state()
    alerts._enqueue(state, ALERT, now=0.0)
    outcomes = alerts.deliver_due(state, 0.0, lambda p: alerts.post_json(url, p, 3.0))
    return state, outcomes


@pytest.mark.parametrize("status", [301, 302, 303])
def test_redirect_is_not_a_delivery(receiver, status):
    receiver.expect_request("/hook", method="POST").respond_with_response(
        Response(status=status, headers={"Location": receiver.url_for("/elsewhere")}))
    receiver.expect_request("/elsewhere").respond_with_data("ok")
    state, outcomes = _queued_and_delivered(receiver.url_for("/hook"))
    assert not outcomes[0].delivered and f"HTTP {status}" in outcomes[0].error
    assert [item["alert_id"] for item in state["pending"]] == [ALERT["alert_id"]]
    # nothing followed the redirect (a GET without the alert would have answered 200)
    assert [r.path for r, _ in receiver.log] == ["/hook"]


@pytest.mark.parametrize("status", [307, 308])
def test_307_308_re_post_the_same_alert(receiver, status):
    receiver.expect_request("/hook", method="POST").respond_with_response(
        Response(status=status, headers={"Location": "/moved"}))
    receiver.expect_request("/moved", method="POST").respond_with_data("ok")
    state, outcomes = _queued_and_delivered(receiver.url_for("/hook"))
    assert outcomes[0].delivered and not state["pending"]
    (moved, _), = [entry for entry in receiver.log if entry[0].path == "/moved"]
    assert json.loads(moved.data)["alert_id"] == ALERT["alert_id"]


def test_non_2xx_keeps_the_alert_queued(receiver):
    receiver.expect_request("/hook").respond_with_data("nope", status=404)
    state, outcomes = _queued_and_delivered(receiver.url_for("/hook"))
    assert outcomes[0].error == "HTTP 404" and len(state["pending"]) == 1


def _trickling_receiver(stop: threading.Event) -> int:
    """A raw HTTP receiver that answers one byte every 0.5 s (each socket read succeeds)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                for byte in answer:
                    if stop.is_set():
                        break
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(0.5)
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def test_timeout_bounds_the_whole_request():
    stop = threading.Event()
    port = _trickling_receiver(stop)
    try:
        started = time.monotonic()
        with pytest.raises(alerts.DeliveryError, match="timed out after 1 s"):
            alerts.post_json(f"http://127.0.0.1:{port}/hook", ALERT, 1.0)
        took = time.monotonic() - started
    finally:
        stop.set()
    # not one timeout per byte (the answer would take 50 s); the margin is for a loaded machine
    assert took < 10, took


def test_slack_markup_from_the_data_is_escaped():
    bait = "<!channel> <https://evil.example/login|AWS session expired: re-authenticate here>"
    check = alerts.check_alert(alerts.CheckEvaluation(
        check="reconciliation.reconciliation_within_threshold", month="2026-08", passed=False,
        severity="ERROR", evaluated_at=1.7e9, run_id="r & <1>",
        metadata={"untracked_share": 0.5, "billed_gpu_hours": 10.0, "tracked_gpu_hours": 5.0,
                  "threshold": 0.05, "currency": "USD",
                  "top_untracked": [{"resource_id": bait, "instance_type": "p4d & <x>",
                                     "gpu_hours": 5.0, "cost": 1.0}]}))
    run = alerts.run_alert(alerts.FailedRun("r2", "monthly_costs", "monthly_close", "2026-08",
                                            1.7e9, f"model {bait} failed"))
    for text in (check["text"], run["text"]):
        assert "<" not in text and ">" not in text, text
        assert "&lt;!channel&gt; &lt;https://evil.example/login|AWS" in text
    assert "p4d &amp; &lt;x&gt;" in check["text"] and "r &amp; &lt;1&gt;" in check["text"]
    assert check["text"].startswith(":rotating_light: cost-pipeline:")  # its own markup stays


def test_http_proxy_from_the_environment_is_used(receiver, monkeypatch):
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{receiver.port}")
    receiver.expect_request("/hook", method="POST").respond_with_data("ok")
    alerts.post_json("http://webhook.invalid/hook", ALERT, 3.0)  # reachable only via the proxy
    ((request, _),) = receiver.log
    assert json.loads(request.data)["alert_id"] == ALERT["alert_id"]


def _reconciliation_alert(resource_id: str, instance_type: str = "g5.xlarge") -> dict:
    return alerts.check_alert(alerts.CheckEvaluation(
        check="reconciliation.reconciliation_within_threshold", month="2026-08", passed=False,
        severity="ERROR", evaluated_at=1.7e9, run_id="r9",
        metadata={"untracked_share": 0.5, "billed_gpu_hours": 10.0, "tracked_gpu_hours": 5.0,
                  "threshold": 0.05, "currency": "USD",
                  "top_untracked": [{"resource_id": resource_id, "instance_type": instance_type,
                                     "gpu_hours": 5.0, "cost": 12.5}]}))


def test_bidirectional_controls_from_the_data_do_not_reverse_the_alert():
    """A right-to-left override (U+202E) in a resource id went into the text as it was: all
    after it — the figures, the run id — displayed reversed. Bidirectional controls are
    taken out of what the data puts in the text, a line break reads as a space, and a value
    written right to left is isolated (U+2068 … U+2069) so it cannot reorder its
    neighbours; the structured fields keep the values as they were."""
    rlo = "i-1\u202e\u2066evil\u2069\u200f\n:ok:"
    alert = _reconciliation_alert(rlo, "\u05d2\u05d3\u05d5\u05dc")
    assert alert["text"].startswith(
        ":rotating_light: cost-pipeline: reconciliation.reconciliation_within_threshold "
        "FAILED for 2026-08 — 50.0% of 10 billed GPU-hours untracked (tracked 5, "
        "threshold 5.0%); largest untracked: i-1evil :ok: "
        "(\u2068\u05d2\u05d3\u05d5\u05dc\u2069) 5 GPU-hours $12.50. Dagster run r9. Chase it: ")
    assert alert["top_untracked_resources"][0]["resource_id"] == rlo
    run = alerts.run_alert(alerts.FailedRun("r2", "monthly_costs", "monthly_close", "2026-08",
                                            1.7e9, "no such file: a\u202etxt.exe"))
    assert run["text"].endswith("failed (schedule monthly_close): no such file: atxt.exe. "
                                "Dagster run r2")
    assert run["error"] == "no such file: a\u202etxt.exe"


def test_a_huge_value_from_the_data_is_cut_in_the_alert_text():
    """A 100,000-character resource id made a 100,571-character text, which Slack cuts at
    40,000: the run id and what to do next were lost. Each value the data puts in the text
    is cut at 200 characters, ending with "…"; the field keeps it whole."""
    huge = "i-" + "x" * 99_998
    alert = _reconciliation_alert(huge)
    assert "; largest untracked: i-" + "x" * 197 + "… (g5.xlarge) 5 GPU-hours $12.50. " \
        "Dagster run r9. Chase it: untracked_usage for 2026-08" in alert["text"]
    # as long as the alert of a three-character id, and 197 characters more
    assert len(alert["text"]) == len(_reconciliation_alert("i-1")["text"]) + 197
    assert alert["top_untracked_resources"][0]["resource_id"] == huge
    # a value the generic text lists (a WARN check's search ids) likewise
    budget = alerts.check_alert(alerts.CheckEvaluation(
        "search_costs.searches_within_estimate", "2026-08", False, "ERROR", 1.0, "r3",
        {"without_estimate": "s" * 1000, "searches": 3}))
    assert budget["text"] == (":rotating_light: cost-pipeline: search_costs."
                              "searches_within_estimate FAILED for 2026-08 — without_estimate "
                              + "s" * 199 + "…, searches 3. Dagster run r3")
