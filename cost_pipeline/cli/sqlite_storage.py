"""The command line's Dagster instance on Dagster's SQLite files, with pooled connections.

Dagster's SQLite storages create a new SQLAlchemy engine for every connection they open and
dispose of it after one transaction: a new `sqlite3` connection each time, and every
statement compiled again (an engine's compiled-statement cache goes with it). A month's run
stores ~140 events, each in its own connection (asset events twice, in the run's file and the
index), and reads the index for each step's input data versions: ~1.5 s of a command-line
run that computes nothing large. Here each database file keeps one engine with a small
connection pool, disposed of with the instance. The files, their schema and every query are
Dagster's own: `dagster dev`, the daemon and a plain `DagsterInstance.get()` read what these
write. Dagster is pinned (pyproject.toml): the subclasses override `connect` / `_connect`,
which are not public API, and tests/cli/test_sqlite_storage.py fails if they change.

Only a home whose storage is Dagster's default SQLite one (no `storage` in `dagster.yaml`, or
`storage: sqlite:`) is opened this way; any other configuration (Postgres, legacy per-storage
keys, a custom class) gets `DagsterInstance.get()` unchanged."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.base_storage import DagsterStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import (
    SqliteScheduleStorage,
)
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine

DEFAULT_STORAGE = ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage")
# a run touches the index and its own file; reading older runs' files opens a few more
MAX_SHARD_ENGINES = 8


def pooled_engine(conn_string: str, **connect_args) -> Engine:
    """An engine keeping its `sqlite3` connections (SQLAlchemy's default pool for a file
    database: up to 5 kept, usable from any thread, rolled back when returned)."""
    return create_engine(conn_string, connect_args=connect_args)


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


class _OneEngine:
    """A storage on one database file (`self._conn_string`), through one pooled engine."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None):
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        super().__init__(conn_string, inst_data)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine_lock:
            if self._engine is None:
                self._engine = pooled_engine(self._conn_string)
            engine = self._engine
        with _transaction(engine) as conn:
            yield conn

    def dispose(self) -> None:
        with self._engine_lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None
        super().dispose()


class PooledSqliteRunStorage(_OneEngine, SqliteRunStorage):
    """Dagster's run storage (`history/runs.db`)."""


class PooledSqliteScheduleStorage(_OneEngine, SqliteScheduleStorage):
    """Dagster's schedule and sensor storage (`schedules/schedules.db`)."""


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's event log (one file per run and `index.db`), one pooled engine per file, the
    `MAX_SHARD_ENGINES` most recently used kept."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables_found: set[str] = set()
        super().__init__(base_dir, inst_data)

    def has_table(self, table_name: str) -> bool:
        """Dagster's answer, remembered once a table is found: it asks before storing each
        asset event's tags, each time through a new engine and connection; a table does not go
        away while the storage lives, but with `wipe`."""
        if table_name not in self._tables_found:
            if not super().has_table(table_name):
                return False
            self._tables_found.add(table_name)
        return True

    def _engine_for(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is None:
            engine = pooled_engine(self.conn_string_for_shard(shard),
                                   timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
            self._engines[shard] = engine
            while len(self._engines) > MAX_SHARD_ENGINES:
                _, oldest = self._engines.popitem(last=False)
                oldest.dispose()
        else:
            self._engines.move_to_end(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:  # as Dagster's: the watchers' threads share the storage
            engine = self._engine_for(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with _transaction(engine) as conn:
                yield conn

    def _dispose_engines(self) -> None:
        while self._engines:
            _, engine = self._engines.popitem()
            engine.dispose()

    def wipe(self) -> None:
        with self._db_lock:  # no pooled connection to a file about to be deleted
            self._dispose_engines()
            self._tables_found.clear()
        super().wipe()

    def dispose(self) -> None:
        with self._db_lock:
            self._dispose_engines()
        super().dispose()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's default SQLite storage (the same folders and files) with the pooled
    storages above."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # not DagsterSqliteStorage.__init__: it would open Dagster's own storages first
        self.base_dir = base_dir
        self._run_storage = PooledSqliteRunStorage.from_local(_runs_directory(base_dir))
        self._event_log_storage = PooledSqliteEventLogStorage(_event_logs_directory(base_dir))
        self._schedule_storage = PooledSqliteScheduleStorage.from_local(
            _schedule_directory(base_dir))
        self._inst_data = inst_data
        DagsterStorage.__init__(self)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData,
                          config_value: dict) -> PooledSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


def instance_of_home() -> dg.DagsterInstance:
    """The instance of $DAGSTER_HOME (`DagsterInstance.get()`), on pooled connections when
    its storage is Dagster's default SQLite one."""
    home = os.path.expanduser(os.environ.get("DAGSTER_HOME") or "")
    if not (home and os.path.isabs(home) and os.path.isdir(home)):
        return dg.DagsterInstance.get()  # its own error for a missing or relative home
    ref = InstanceRef.from_dir(home)
    stored = ref.storage_data
    if stored is None or (stored.module_name, stored.class_name) != DEFAULT_STORAGE:
        return dg.DagsterInstance.from_ref(ref)
    pooled = ConfigurableClassData(__name__, PooledSqliteStorage.__name__, stored.config_yaml)
    return dg.DagsterInstance.from_ref(ref._replace(storage_data=pooled))
