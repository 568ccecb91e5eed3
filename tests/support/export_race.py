"""Two writers of one export path at once, each held at its final rename until both have
written (a barrier in `os.replace`), so the collision the export must survive happens every
time rather than by chance."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import cost_pipeline.export


def write_twice_at_once(write: Callable[[], Path], monkeypatch, timeout: float = 120) -> list:
    """What each of two concurrent `write()` calls returned, or the exception it raised."""
    both_written = threading.Barrier(2, timeout=60)
    replace = cost_pipeline.export.os.replace

    def replace_together(source, destination):
        both_written.wait()
        replace(source, destination)

    monkeypatch.setattr(cost_pipeline.export.os, "replace", replace_together)
    outcomes: list = []

    def export() -> None:
        try:
            outcomes.append(write())
        except Exception as exc:  # the outcome is what the test checks
            outcomes.append(exc)

    writers = [threading.Thread(target=export) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout)
    return outcomes
