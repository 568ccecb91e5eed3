"""A Dagster logger that prints one short line per step, user message and check to stderr:
the command line's progress output (Dagster's own console logger is far noisier).

The lines go to stderr as it was when the run started (`direct_stderr`), not through file
descriptor 2 during the run: Dagster's compute-log capture points that descriptor at a file
that a `tail -F` process copies back to the terminal, and it stops that process when the run
ends, sometimes before the last lines were copied (dagster-io/dagster#23336) — the last
step's `✓` line went missing in about one run in four under load."""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import dagster as dg
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR

_direct: TextIO | None = None  # the run's own stderr stream, while `direct_stderr` holds it


@contextmanager
def direct_stderr() -> Iterator[None]:
    """For the body (a run): progress lines written to a duplicate of stderr's descriptor as
    it is now, which Dagster's capture of descriptor 2 does not touch. A stderr without a
    descriptor (a test's in-memory stream) is written to as it is."""
    global _direct
    try:
        sys.stderr.flush()
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield
        return
    stream = os.fdopen(fd, "w", encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
                       errors="backslashreplace", buffering=1)
    previous, _direct = _direct, stream
    try:
        yield
    finally:
        _direct = previous
        stream.close()


class ProgressHandler(logging.Handler):
    def __init__(self, stream=None):
        super().__init__(logging.DEBUG)
        self.stream = stream  # None: the stderr of the moment (tests swap it between runs)
        self.started: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, LOG_RECORD_METADATA_ATTR, None) or {}
        event = meta.get("dagster_event")
        step = meta.get("step_key") or ""
        line = None
        if event is not None:
            kind = event.event_type_value
            if kind == "STEP_START":
                self.started[step] = time.monotonic()
                line = f"… {step}"
            elif kind == "STEP_SUCCESS":
                took = time.monotonic() - self.started.get(step, time.monotonic())
                line = f"✓ {step} ({took:.1f} s)"
            elif kind == "STEP_FAILURE":
                line = f"✗ {step} failed"
            elif kind == "ASSET_MATERIALIZATION":
                metadata = event.event_specific_data.materialization.metadata
                shown = {k: v.value for k, v in metadata.items()
                         if k in ("rows", "runs", "objects", "total_effective_cost")}
                if shown:
                    line = "  " + ", ".join(f"{k} {v}" for k, v in shown.items())
        elif (record.levelno >= logging.INFO and meta.get("orig_message")
              # one per step a failure stopped: the failure itself is the news
              and not str(meta["orig_message"]).startswith("Dependencies for step")):
            prefix = "warning: " if record.levelno >= logging.WARNING else ""
            line = f"  {prefix}{meta['orig_message']}"
        if line:
            # one write of the whole line: a signal between `print`'s two writes (text, then
            # newline) left the line open and glued the next message ("error: …") onto it
            stream = self.stream or _direct or sys.stderr
            stream.write(line + "\n")
            stream.flush()


@dg.logger(description="Short progress lines on stderr.")
def progress_logger(_init_context) -> logging.Logger:
    log = logging.getLogger("cost_pipeline.cli.progress")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    if not log.handlers:
        log.addHandler(ProgressHandler())
    return log
