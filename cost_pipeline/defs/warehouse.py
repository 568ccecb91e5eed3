"""The warehouse resource: dagster-duckdb's DuckDBResource, plus a lock held for the whole
run so that two materializations of the same warehouse (CLI, schedule, UI) never interleave
their writes — the second waits, then fails clearly — and connections that are always
closed, also when a step fails."""

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr


class WarehouseBusyError(RuntimeError):
    """Another materialization holds the warehouse for longer than we wait."""


class Warehouse(DuckDBResource):
    lock_timeout_seconds: float = 900.0
    _lock: Any = PrivateAttr(default=None)

    @property
    def lock_path(self) -> Path | None:
        if not self.database or self.database.startswith(":memory:"):
            return None
        return Path(self.database + ".lock")

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        path = self.lock_path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115 - held until teardown
        deadline = time.monotonic() + self.lock_timeout_seconds
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                if time.monotonic() >= deadline:
                    handle.close()
                    raise WarehouseBusyError(
                        f"warehouse {self.database} is being written by another "
                        f"materialization ({holder}); waited {self.lock_timeout_seconds:.0f} s"
                    ) from None
                if not told and context.log is not None:
                    context.log.warning(f"waiting for another materialization of "
                                        f"{self.database} ({holder}) to finish")
                    told = True
                time.sleep(0.25)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._lock = handle

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    @contextmanager
    def get_connection(self):
        with super().get_connection() as conn:
            try:
                yield conn
            finally:
                conn.close()


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown process"
    except OSError:
        return "unknown process"


__all__ = ["Warehouse", "WarehouseBusyError", "duckdb"]
