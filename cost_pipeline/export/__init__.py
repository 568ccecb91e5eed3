"""Datasets written for tools outside the pipeline (FOCUS for FinOps tools)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_atomically(path: str | Path) -> Iterator[Path]:
    """A partial file beside `path` (`.<name>.partial`) for the block to write; it becomes
    `path` when the block ends, and is removed on any failure — the block's or the rename's
    (`path` a directory) — so a reader never sees half a file and nothing is left behind."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory: name the file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
