"""The report's imports and template, prepared in a thread once a run shows it will draw the
page again: the report step then only draws and writes.

Preparing them costs ~0.6 s of the interpreter. While DuckDB computes (it releases the
interpreter) that is free, but started with the run it competed with Dagster's own start
(creating the run, the ingest step's Python), and in a run that keeps every table it was
spent for a page that is kept too. So the thread starts at the first materialization that
says it wrote new rows: `kept` false (the runs, a decision table) or an attribution `mode`
other than kept. From there the attribution or the decision tables keep DuckDB busy for
the next seconds. A run with no such materialization draws its page, if at all, without
the head start."""

from __future__ import annotations

import logging
import threading
from contextlib import suppress

import dagster as dg
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR


def start_report_warm_up() -> threading.Thread:
    """`cost_pipeline.report.render.warm_up` in a thread. A failure there is the report step's
    to raise, not this thread's. Not a daemon: a run that fails or is interrupted can end the
    process while the thread still imports the chart backends (C++ extensions), and the
    interpreter's exit stops a daemon thread wherever it is — inside such code that aborts the
    process ("terminate called without an active exception", SIGABRT instead of exit 130).
    The exit waits for it instead (~0.6 s at most)."""
    def warm() -> None:
        with suppress(Exception):
            from cost_pipeline.report.render import warm_up

            warm_up()

    thread = threading.Thread(target=warm, name="report-warm-up", daemon=False)
    thread.start()
    return thread


def wrote_new_rows(metadata: dict) -> bool:
    """Whether a materialization's metadata says the asset wrote new rows."""
    if "kept" in metadata:
        return metadata["kept"].value is False
    return "mode" in metadata and metadata["mode"].value != "kept"


class WarmUpTrigger(logging.Handler):
    """Calls `start` once, at the first materialization that `wrote_new_rows` (`handle` holds
    the handler's lock around `emit`). Whatever goes wrong here is logging's to report, never
    the run's."""

    def __init__(self, start=None):
        super().__init__(logging.DEBUG)
        self.start = start  # None: `start_report_warm_up`, looked up when it fires
        self.started = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.started:
            return
        try:
            event = (getattr(record, LOG_RECORD_METADATA_ATTR, None) or {}).get("dagster_event")
            if event is None or event.event_type_value != "ASSET_MATERIALIZATION":
                return
            if not wrote_new_rows(event.event_specific_data.materialization.metadata):
                return
            self.started = True
            (self.start or start_report_warm_up)()
        except Exception:
            self.handleError(record)


@dg.logger(description="Starts preparing the report once a materialization wrote new rows.")
def report_warm_up_logger(_init_context) -> logging.Logger:
    # a logger of its own per run (Dagster calls this once per run): the trigger fires once
    log = logging.Logger("cost_pipeline.cli.warm_up", logging.DEBUG)
    log.addHandler(WarmUpTrigger())
    return log
