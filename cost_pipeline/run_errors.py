"""A failed Dagster run's error as people read it: the innermost user error's message, one
line, without its exception class and without secrets — what the command line prints and
what the run-failure alert says."""

from __future__ import annotations

import re

from cost_pipeline.ingest.sources import redact


def root_cause(error) -> str:
    """The innermost error of a `SerializableErrorInfo` chain (its `cause`s), one line."""
    while error is not None and getattr(error, "cause", None) is not None:
        error = error.cause
    if error is None:
        return "the run failed"
    message = (error.message or "").strip().splitlines()
    text = message[0] if message else error.cls_name or "error"
    if error.cls_name:  # `SourceError: …` or `cost_pipeline.ingest.sources.SourceError: …`
        text = re.sub(rf"^(?:[\w.]+\.)?{re.escape(error.cls_name)}: ", "", text)
    return redact(text)
