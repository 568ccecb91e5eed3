"""Alerts: a failed ERROR check of a month, or a failed scheduled run → a Slack-compatible
JSON POST to the webhook whose URL is in the environment variable the config names.

Everything the alert sensors remember lives in their cursor, a JSON document (`new_state`):
which (check, month) is in a failure episode, and the queue of alerts not yet delivered with
the time of each one's next attempt. An alert leaves the queue only on a 2xx answer, so a
receiver that is down, answers 5xx or times out loses nothing; it is retried with
exponential backoff. Each alert carries an `alert_id` a receiver can deduplicate on: an
attempt whose answer is lost after the receiver got it (a timeout) is the one way a receiver
can see an alert twice. The URL is read at delivery time and never logged nor stored.

The functions here are plain (state in → state and actions out); `defs/sensors.py` wraps
them in Dagster sensors.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import shlex
import socket
import ssl
import threading
import time
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from cost_pipeline.ingest.sources import redact
from cost_pipeline.report.money import (
    gpu_hours_alike,
    half_up,
    in_currency,
    in_percent,
    money_apart,
    smallest,
    symbol_of,
)
from cost_pipeline.text import AS_TEXT

STATE_VERSION = 1
RETRY_INITIAL_SECONDS = 30.0
RETRY_MAX_SECONDS = 30 * 60.0
# a tick must end well inside Dagster's 60 s sensor evaluation limit; the rest waits a tick
DELIVERY_BUDGET_SECONDS = 20.0
RUN_MEMORY_SECONDS = 7 * 24 * 3600.0  # how long a failed run id is remembered (dedup)
# the most of one value from the data (a resource id, a search id) an alert's text carries:
# Slack cuts a text at 40,000 characters, and a 100,000-character resource id took the run id
# and what to do next with it; the structured fields keep every value whole
VALUE_CHARS = 200
ERROR_CHARS = 500  # the most of a run's error an alert carries (the sensor cuts it at a word)

Send = Callable[[dict[str, Any]], None]


class DeliveryError(Exception):
    """A POST that did not get a 2xx answer; the message never contains the URL."""


@dataclass(frozen=True)
class CheckEvaluation:
    check: str  # "<asset>.<check name>"
    month: str  # "YYYY-MM"
    passed: bool
    severity: str  # "ERROR" | "WARN"
    evaluated_at: float  # epoch seconds of the evaluation event
    run_id: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class FailedRun:
    run_id: str
    job: str
    schedule: str
    month: str
    failed_at: float
    error: str
    sensor: str = ""  # the sensor that launched it, when no schedule did


@dataclass(frozen=True)
class Outcome:
    alert_id: str
    delivered: bool
    attempts: int
    error: str | None = None
    retry_in: float | None = None


def new_state() -> dict[str, Any]:
    return {"version": STATE_VERSION, "initialized": False, "watermark": None,
            "episodes": {}, "runs": {}, "pending": [], "delivered": 0}


def load_state(cursor: str | None) -> dict[str, Any]:
    if not cursor:
        return new_state()
    state = json.loads(cursor)
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"alert cursor version {state.get('version')!r} is not {STATE_VERSION}")
    return {**new_state(), **state}


def dump_state(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)


def backoff_seconds(attempts: int) -> float:
    return min(RETRY_INITIAL_SECONDS * 2 ** max(attempts - 1, 0), RETRY_MAX_SECONDS)


def _advance_watermark(state: dict[str, Any], timestamps: Iterable[float]) -> None:
    latest = max(timestamps, default=None)
    if latest is not None and (state["watermark"] is None or latest > state["watermark"]):
        state["watermark"] = latest


def observe_checks(state: dict[str, Any], evaluations: Iterable[CheckEvaluation],
                   now: float, config: str | None = None) -> list[dict[str, Any]]:
    """Open or close failure episodes per (check, month); queue one alert per episode
    (its commands naming the `config` file).

    The first call only records where history stands (a fresh sensor must not re-alert every
    past failure). An ERROR failure opens an episode, a pass closes it (re-arms), a WARN
    failure changes nothing. Evaluations already seen for their (check, month) are ignored.
    """
    ordered = sorted(evaluations, key=lambda e: e.evaluated_at)
    queued: list[dict[str, Any]] = []
    for e in ordered:
        key = f"{e.check}|{e.month}"
        episode = state["episodes"].get(key, {"seen": 0.0, "failing": False})
        if e.evaluated_at <= episode["seen"]:
            continue
        episode["seen"] = e.evaluated_at
        if e.passed:
            episode["failing"] = False
        elif e.severity == "ERROR" and not episode["failing"]:
            episode["failing"] = True
            if state["initialized"]:
                queued += _enqueue(state, check_alert(e, config), now)
        state["episodes"][key] = episode
    _advance_watermark(state, (e.evaluated_at for e in ordered))
    state["initialized"] = True
    return queued


def observe_runs(state: dict[str, Any], runs: Iterable[FailedRun],
                 now: float) -> list[dict[str, Any]]:
    """One alert per failed scheduled run not seen before (the first call only records)."""
    runs = list(runs)
    queued: list[dict[str, Any]] = []
    for run in sorted(runs, key=lambda r: r.failed_at):
        if run.run_id in state["runs"]:
            continue
        state["runs"][run.run_id] = run.failed_at
        if state["initialized"]:
            queued += _enqueue(state, run_alert(run), now)
    _advance_watermark(state, (r.failed_at for r in runs))
    horizon = (state["watermark"] or now) - RUN_MEMORY_SECONDS
    state["runs"] = {k: v for k, v in state["runs"].items() if v >= horizon}
    state["initialized"] = True
    return queued


def _enqueue(state: dict[str, Any], payload: dict[str, Any], now: float) -> list[dict]:
    if any(item["alert_id"] == payload["alert_id"] for item in state["pending"]):
        return []
    item = {"alert_id": payload["alert_id"], "payload": payload, "attempts": 0,
            "next_attempt": now, "last_error": None}
    state["pending"].append(item)
    return [item]


def deliver_due(state: dict[str, Any], now: float, send: Send,
                clock: Callable[[], float] = time.monotonic,
                budget_seconds: float = DELIVERY_BUDGET_SECONDS) -> list[Outcome]:
    """POST every queued alert whose next attempt is due; keep the ones that fail."""
    outcomes: list[Outcome] = []
    started = clock()
    for item in sorted(state["pending"], key=lambda i: i["next_attempt"]):
        if item["next_attempt"] > now or clock() - started > budget_seconds:
            continue
        item["attempts"] += 1
        try:
            send(item["payload"])
        except DeliveryError as exc:
            retry_in = backoff_seconds(item["attempts"])
            item["next_attempt"], item["last_error"] = now + retry_in, str(exc)
            outcomes.append(Outcome(item["alert_id"], False, item["attempts"], str(exc),
                                    retry_in))
            continue
        state["pending"].remove(item)
        state["delivered"] += 1
        outcomes.append(Outcome(item["alert_id"], True, item["attempts"]))
    return outcomes


# ---------------------------------------------------------------------------- payloads


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _num(value: Any, digits: int = 1) -> str:
    """`value` to `digits` decimals, rounded half up from its shortest form as the pages round
    (`money.half_up`): a share of 56.25% reads 56.3% here too, not Python's 56.2%."""
    if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
        return "?"
    if not math.isfinite(value):
        return f"{float(value):,.{digits}f}"
    return f"{half_up(value, Decimal(1).scaleb(-digits)):,.{digits}f}"


def _in_percent(fraction: Any) -> Any:
    """A fraction from the metadata in percent (`money.in_percent`); what is not a number
    stays as it is (and reads `?`)."""
    if isinstance(fraction, int | float) and not isinstance(fraction, bool):
        return in_percent(fraction)
    return fraction


def figures_apart(value: Any, limit: Any, digits: int = 1) -> tuple[str, str]:
    """`value` and `limit` with the fewest digits (from `digits`, up to 6) that tell them
    apart when they differ: a share of 5.004% failing a 5% threshold read "5.0% … threshold
    5.0%" under a FAILED heading. A share goes in as `money.in_percent` of it, the percent
    from its own digits as the pages write it, never as the double `100 * share`."""
    for more in range(digits, 7):
        shown = _num(value, more), _num(limit, more)
        if shown[0] != shown[1] or value == limit:
            return shown
    return shown


def _gpu_hours(*hours: Any) -> list[str]:
    """GPU-hour figures of one statement with one number of decimals, as the report writes
    them (money.gpu_hours_alike: `2,728` beside the page's `2,728`, `0.04` not `0.0`); a
    figure the metadata lacks or holds as no number reads `?`."""
    known = [h if isinstance(h, int | float) and not isinstance(h, bool) else None
             for h in hours]
    return [text if h is not None else "?" for h, text in zip(known, gpu_hours_alike(*known),
                                                               strict=True)]


def counted(count: Any, noun: str) -> str:
    """`noun` as a count of it reads: singular after exactly one (`1 day`, `1 GPU-hour`),
    plural after any other figure (`0 days`, `1.0 GPU-hours`, `? days`)."""
    return noun if str(count) == "1" else f"{noun}s"


def _money(value: Any, currency: Any) -> str:
    """An amount in the bill's currency (the check's `currency` metadata)."""
    if not isinstance(value, int | float):
        return "?"
    return plain(in_currency(value, currency if isinstance(currency, str) else None))


def plain(value: Any, limit: int = VALUE_CHARS) -> str:
    """A value from the data as the alert's text shows it: without bidirectional controls,
    a line break as a space, at most `limit` characters (the last one `…` when cut), and
    isolated (U+2068 … U+2069) when written right to left, so its letters cannot reorder the
    text around it."""
    text = str(value).translate(AS_TEXT)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    if any(unicodedata.bidirectional(c) in ("R", "AL") for c in text):
        return f"\u2068{text}\u2069"
    return text


def slack_escape(text: str) -> str:
    """`&`, `<`, `>` as Slack's entities: a resource id, model or error message from the data
    (`<!channel>`, `<https://evil.example|log in here>`) shows as typed instead of pinging a
    channel or posting a link. The text's own markup (`:rotating_light:`) uses none of them."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _is_amount(key: str, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and any(
        word in key for word in ("cost", "budget", "amount"))


def check_alert(e: CheckEvaluation, config: str | None = None) -> dict[str, Any]:
    """The alert of a failed check: Slack's `text` plus the figures as fields; the commands
    of its next step name the `config` file the sensor reads."""
    m = e.metadata
    top = [
        {k: r.get(k) for k in ("resource_id", "instance_type", "gpu_hours", "hours", "cost")}
        for r in (m.get("top_untracked") or [])
    ]
    if "untracked_share" in m:
        # as the check wrote them in percent from the exact figures (an evaluation recorded
        # before it did has the rounded ones alone): 0.062452… shown 0.0625 read 6.3% here,
        # rounded twice, where the month's page says 6.2%
        if isinstance(m.get("untracked_percent"), str):
            share, threshold = (str(m.get(key) or "?").removesuffix("%")
                                for key in ("untracked_percent", "threshold_percent"))
        else:
            share, threshold = (figures_apart(_in_percent(m["untracked_share"]),
                                              _in_percent(m.get("threshold") or 0))
                                if isinstance(m["untracked_share"], int | float) else ("?", "?"))
        # the month's statement as the report writes it: tracked, untracked, billed alike
        tracked, _, billed = _gpu_hours(m.get("tracked_gpu_hours"),
                                        m.get("untracked_gpu_hours"), m.get("billed_gpu_hours"))
        detail = (f"{share}% of {billed} billed {counted(billed, 'GPU-hour')} untracked "
                  f"(tracked {tracked}, threshold {threshold}%)")
        if top:
            top_hours = _gpu_hours(*(r["gpu_hours"] for r in top[:3]))
            detail += "; largest untracked: " + ", ".join(
                f"{plain(r['resource_id'])} ({plain(r['instance_type'])}) "
                f"{hours} {counted(hours, 'GPU-hour')} "
                f"{_money(r['cost'], m.get('currency'))}"
                for r, hours in zip(top[:3], top_hours, strict=True))
    elif "missing_days" in m:
        missing = [plain(d) for d in str(m["missing_days"]).split(", ") if d]
        expected = m.get("days_expected")
        detail = (f"{len(missing)} of {expected} {counted(expected, 'day')} "
                  f"{'has' if len(missing) == 1 else 'have'} no usage lines "
                  f"({', '.join(missing[:10])}{' …' if len(missing) > 10 else ''})")
    elif "delta" in m:
        symbol = symbol_of(m.get("currency"))
        delta, tolerance = (_money(m["delta"], m.get("currency")),
                            _money(m.get("tolerance"), m.get("currency")))
        if delta.lstrip("−") == tolerance and isinstance(m["delta"], int | float) \
                and isinstance(m.get("tolerance"), int | float) \
                and abs(m["delta"]) != m["tolerance"]:  # a cent apart at most: the digits
            shown = figures_apart(abs(m["delta"]), m["tolerance"], 3)
            sign = "−" if m["delta"] < 0 else ""
            delta, tolerance = (f"{sign}{plain(symbol)}{shown[0]}",
                                f"{plain(symbol)}{shown[1]}")
        elif isinstance(m.get("tolerance"), int | float) and m["tolerance"] > 0 \
                and not smallest(m["tolerance"], symbol):
            # a tolerance below the currency's unit (a cent of a yen) read JPY 0: its digits
            tolerance = plain(money_apart(m["tolerance"], 0.0, symbol)[0])
        detail = f"attribution is off the bill by {delta} (tolerance {tolerance})"
    else:  # amounts in the bill's currency when the check names it
        detail = ", ".join(
            f"{k} "
            f"{_money(v, m['currency']) if _is_amount(k, v) and m.get('currency') else plain(v)}"
            for k, v in m.items() if isinstance(v, int | float | str) and k != "currency")
    step = next_step(e.check, e.month, config)
    text = (f":rotating_light: cost-pipeline: {e.check} FAILED for {e.month} — {detail}. "
            f"Dagster run {e.run_id}" + (f". Chase it: {step}." if step else ""))
    return {
        "text": slack_escape(text),
        "alert_id": f"check|{e.check}|{e.month}|{e.run_id}",
        "kind": "check_failed",
        "check": e.check,
        "month": e.month,
        "severity": e.severity,
        "run_id": e.run_id,
        "evaluated_at": _iso(e.evaluated_at),
        "billed_gpu_hours": m.get("billed_gpu_hours"),
        "tracked_gpu_hours": m.get("tracked_gpu_hours"),
        "untracked_gpu_hours": m.get("untracked_gpu_hours"),
        "untracked_share": m.get("untracked_share"),
        "threshold": m.get("threshold"),
        "currency": m.get("currency"),  # of every amount in the alert
        "top_untracked_resources": top,
        "figures": m,
        "next_step": step,
    }


def next_step(check: str, month: str, config: str | None = None) -> str | None:
    """What the reader of a failed check's alert does about it (one line), for the ERROR
    checks an alert is sent for; None for another check. Its commands name `config`, quoted
    for a shell, unless the path holds a character the line cannot carry or is too long to
    read (then the config comes from $COST_PIPELINE_CONFIG)."""
    name = check.rsplit(".", 1)[-1]
    usable = (config and len(config) <= VALUE_CHARS and config.translate(AS_TEXT) == config
              and not any(unicodedata.bidirectional(c) in ("R", "AL") for c in config))
    option = f"--config {shlex.quote(config)} " if usable else ""
    if name == "reconciliation_within_threshold":
        return (f"untracked_usage for {month}: `cost-pipeline report {option}--month {month}` "
                "lists the largest untracked resources and why; record the runs that used "
                "them, or list the resources in those runs' resource_ids, then materialize "
                f"{month} again")
    if name == "billing_complete":
        return ("check that the billing export has delivered those days, then materialize "
                f"{month} again (`cost-pipeline materialize {option}--month {month}`)")
    if name == "cost_conserved":
        return (f"materialize {month} again from scratch (`cost-pipeline materialize {option}"
                f"--month {month} --force`); if the bill is still off, report it with this "
                "run's id")
    return None


def run_alert(run: FailedRun) -> dict[str, Any]:
    launched = (f"schedule {run.schedule}" if run.schedule or not run.sensor
                else f"sensor {run.sensor}")
    text = (f":rotating_light: cost-pipeline: {'scheduled ' if run.schedule else ''}run of "
            f"{run.job} for {run.month or 'no partition'} failed ({launched}): "
            f"{plain(redact(run.error), ERROR_CHARS)}. "
            f"Dagster run {run.run_id}")
    return {"text": slack_escape(text), "alert_id": f"run|{run.run_id}",
            "kind": "scheduled_run_failed", "run_id": run.run_id, "job": run.job,
            "schedule": run.schedule, "sensor": run.sensor, "month": run.month,
            "failed_at": _iso(run.failed_at), "error": redact(run.error)}


# ---------------------------------------------------------------------------- delivery


def webhook_sender(env_name: str, timeout: float) -> Send:
    """POSTs to the URL in `$env_name`, read now; errors name the variable, never the URL."""
    url = os.environ.get(env_name, "").strip()

    def send(payload: dict[str, Any]) -> None:
        if not url:
            raise DeliveryError(f"${env_name} is not set")
        post_json(url, payload, timeout)

    return send


MAX_REDIRECTS = 3


def post_json(url: str, payload: dict[str, Any], timeout: float) -> None:
    """POST `payload`; delivered only on a 2xx answer within `timeout` seconds in all
    (connecting, sending, every byte of the answer: a receiver trickling its answer is cut at
    the deadline). A redirect is followed only when it keeps the method and body (307, 308);
    301/302/303 would turn the POST into a GET without the alert, so they are a failure."""
    body = json.dumps(payload, default=str).encode("utf-8")
    deadline = time.monotonic() + timeout
    target = url
    # `from None` everywhere: the chained exceptions could carry the URL into a traceback
    for _ in range(MAX_REDIRECTS + 1):
        try:
            status, location = _post_once(target, body, deadline)
        except TimeoutError:
            raise DeliveryError(f"timed out after {timeout:g} s") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if time.monotonic() >= deadline:
                raise DeliveryError(f"timed out after {timeout:g} s") from None
            if isinstance(exc, ConnectionRefusedError | socket.gaierror):
                raise DeliveryError(f"cannot connect ({type(exc).__name__})") from None
            raise DeliveryError(f"request failed ({type(exc).__name__})") from None
        if 200 <= status < 300:
            return
        if status in (307, 308) and location:
            target = urllib.parse.urljoin(target, location)
            continue
        if 300 <= status < 400:
            raise DeliveryError(f"HTTP {status}: redirect not followed (only a 2xx answer "
                                "delivers an alert; point the webhook at the final URL)")
        raise DeliveryError(f"HTTP {status}")
    raise DeliveryError(f"more than {MAX_REDIRECTS} redirects")


def _post_once(url: str, body: bytes, deadline: float) -> tuple[int, str | None]:
    """One POST; (status, Location). The socket is shut down at `deadline` whatever it is
    doing: a socket timeout alone bounds each read, not the request."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the webhook URL is not http(s)://host/…")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    # HTTP(S)_PROXY / NO_PROXY as urllib honours them: https tunnels through the proxy
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and urllib.request.proxy_bypass(parts.hostname):
        proxy = None
    via = urllib.parse.urlsplit(proxy if "://" in (proxy or "") else f"http://{proxy}") \
        if proxy else None
    host, port = (via.hostname, via.port) if via else (parts.hostname, parts.port)
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=remaining, context=ssl.create_default_context())
        if via:
            conn.set_tunnel(parts.hostname, parts.port)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=remaining)
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(remaining, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        if via and parts.scheme == "http":  # a plain-HTTP proxy takes the whole URL
            path = urllib.parse.urlunsplit(parts._replace(path=path, query="", fragment=""))
        headers = {"Content-Type": "application/json", "User-Agent": "cost-pipeline-alerts",
                   "Content-Length": str(len(body))}
        if parts.username is not None:  # https://user:pass@host/ → basic auth, as urllib did
            token = f"{urllib.parse.unquote(parts.username)}:" \
                    f"{urllib.parse.unquote(parts.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if expired.is_set():
            raise TimeoutError
        return response.status, response.getheader("Location")
    except OSError:
        if expired.is_set():
            raise TimeoutError from None
        raise
    except http.client.HTTPException:
        if expired.is_set():
            raise TimeoutError from None
        raise
    finally:
        watchdog.cancel()
        conn.close()
