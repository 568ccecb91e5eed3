"""Resources: the validated config, and the DuckDB warehouse — dagster-duckdb's DuckDBResource
plus
- a lock held for the whole run, so that two materializations of the same warehouse (CLI,
  schedule, UI) never interleave their writes — the second waits, then fails clearly;
- one connection and one transaction for the whole run: every step's writes commit together
  when the run ends without an error, and roll back together otherwise — a run that fails or
  is killed (SIGKILL) leaves every table of the month as it was."""


import fcntl
import os
import time
from contextlib import contextmanager
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from cost_pipeline.config import PipelineConfig, load_config
from cost_pipeline.months import parse_month
from cost_pipeline.warehouse import WarehouseBusyError, begin_run_transaction, lock_path


@lru_cache(maxsize=8)
def _load(path: str, mtime_marker: float) -> PipelineConfig:
    return load_config(path)


class PipelineSettings(dg.ConfigurableResource):
    """The pipeline's YAML config (SPEC §9), validated on use."""

    config_path: str

    def load(self) -> PipelineConfig:
        import os

        try:
            marker = os.stat(self.config_path).st_mtime
        except OSError:
            marker = 0.0
        return _load(self.config_path, marker)


def month_of(context: dg.AssetExecutionContext) -> date:
    return parse_month(context.partition_key[:7])


class Warehouse(DuckDBResource):
    lock_timeout_seconds: float = 900.0
    run_transaction: bool = True
    _lock: Any = PrivateAttr(default=None)
    _run_con: Any = PrivateAttr(default=None)
    _failed: bool = PrivateAttr(default=False)

    @property
    def lock_path(self) -> Path | None:
        return lock_path(self.database)

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
        if self.run_transaction:
            self._run_con = self._open()
            begin_run_transaction(self._run_con)
            self._failed = False

    def _open(self) -> duckdb.DuckDBPyConnection:
        """The run's own connection, retried while another process (a reader) holds the file."""
        config = {"custom_user_agent": "dagster", **self.connection_config}
        delay = 0.1
        for attempt in range(12):
            try:
                con = duckdb.connect(self.database, read_only=False, config=config)
                # long queries would draw DuckDB's progress bar: the CLI prints its own
                con.execute("SET enable_progress_bar = false")
                return con
            except duckdb.IOException:
                if attempt == 11:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._run_con is not None:
            try:
                self._run_con.execute("ROLLBACK" if self._failed else "COMMIT")
            except duckdb.Error:
                self._run_con.execute("ROLLBACK")
                raise
            finally:
                self._run_con.close()
                self._run_con = None
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    @contextmanager
    def get_connection(self):
        if self._run_con is not None:
            try:
                yield self._run_con
            except BaseException:
                self._failed = True  # the run's writes roll back at teardown
                raise
            finally:
                self._run_con.abort()  # drop any unread result before the next step
            return
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
