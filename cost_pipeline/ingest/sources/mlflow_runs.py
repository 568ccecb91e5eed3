"""An MLflow tracking server or store → tracker run rows (SPEC §4).

Runs come from a tracking URI (`http(s)://…` server or `sqlite:///…` store), from every
experiment or the named ones, paged through `search_runs` with deleted runs included (their
compute still happened). Run info gives status, times and the lifecycle stage; tags give the
section 4 columns under configurable names (`tags:` maps a column to its MLflow tag, the
default tag is the column's own name); `mlflow.parentRunId` gives the parent. Each run goes
through `runs_file.normalize_run`, so an MLflow run is validated like a runs-file record.

`run_id` is the run's `run_id` tag when it carries one (every column reads the tag of its own
name by default), else MLflow's run id; `tags: {run_id: …}` names another tag that carries the
id the rest of the company uses (e.g. `mlflow.runName`); parents are then named the same way.
Each run's MLflow run id is kept beside its row (`tracker_runs.tracker_run_uuid`): a run
renamed after a month was read is still that month's run to the write-back (mlflow_tags).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from cost_pipeline.ingest.sources import SourceError, first_named, redact
from cost_pipeline.ingest.sources.runs_file import RUN_COLUMNS, field_text, normalize_run

# MLflow phones home and retries a dead server for minutes by default; this reader retries
# on its own schedule below, so MLflow's own HTTP retries are kept short (users may override).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")

PAGE_SIZE = 1000                       # runs per search_runs call (MLflow allows up to 50,000)
HISTORY_BATCH_RUNS = 5000              # runs per metric-history query of a SQL store
HISTORY_ROWS_PER_FETCH = 20_000        # rows a SQL store's streamed history answer buffers
HISTORY_THREADS = 8                    # concurrent metric-history requests to a server
HISTORY_GROUP = 800                    # runs whose history values a server's read holds at once
SERVER_BULK_RUNS = 100                 # runs per get-history-bulk request (the server's limit)
SERVER_BULK_POINTS = 25_000            # values per get-history-bulk answer (the server's limit)
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0)   # seconds before each retry of a call
REASON_LIMIT = 300                     # characters of an error's reason in a message
EXPERIMENTS_LISTED = 10                # experiment names an unknown experiment's error lists
PARENT_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
# tables every MLflow sqlite store has (MLflow creates them in any sqlite file without them)
MLFLOW_TABLES = ("alembic_version", "experiments", "runs")
# columns that come from run tags; status, times, experiment and `deleted` come from run info
TAG_COLUMNS = (
    "run_id", "model", "purpose", "search_id", "seed", "config_id", "resource_ids", "gpus",
    "region", "dataset", "dataset_region", "input_hash", "transform_version", "metric_name",
    "keep", "parent_run_id", "team", "trigger", "restart_of", "resumed_from",
)
# params that vary between the seeds of one configuration: left out of the config hash, and
# the first of them a run has (in this order, names matched in any case) is its seed when it
# has no seed tag
SEED_PARAMS = ("seed", "random_seed", "random_state")
GPU_UTILIZATION = re.compile(r"^system/gpu_\d+_utilization_percentage$")
_TRANSIENT = re.compile(
    r"Max retries exceeded|Connection refused|Failed to establish|Connection ?(aborted|reset)"
    r"|RemoteDisconnected|timed out|timeout|too many 5\d\d|\b50[0-4]\b|Service Unavailable"
    r"|Bad Gateway|database is locked", re.IGNORECASE)
_TRANSIENT_CODES = {"TEMPORARILY_UNAVAILABLE", "SERVICE_UNDER_MAINTENANCE",
                    "REQUEST_LIMIT_EXCEEDED"}
# a server refusing the credentials sent (401) or their account's access (403)
_REFUSED_CODES = {"PERMISSION_DENIED", "UNAUTHENTICATED"}
# the HTTP status a server answered, as MLflow's errors quote it: urllib3's retry gave up on
# it (`too many 503 error responses`), or the answer was not 200 (`error code 502 != 200`)
_ANSWERED = re.compile(r"too many (\d{3}) error responses|error code (\d{3}) != 200")
# a call given up after its retries: unreachable, or the server's answer every time
_GAVE_UP = re.compile(
    r": (?:unreachable|still locked|answered HTTP \d{3}\b[^:]*) after \d+ attempt\(s\): ")

T = TypeVar("T")


def resolve_tracking_uri(uri: str, base_dir: Path) -> str:
    """A relative `sqlite:///path` made absolute against the config file's folder, its query
    (`?timeout=1`) kept; a SQLite URI (`sqlite:///file:/srv/m.db?mode=ro&uri=true`) as it is
    (its `file:` is no folder of the config's)."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path, mark, query = uri[len("sqlite:///"):].partition("?")
        if not path.startswith("file:"):
            return "sqlite:///" + str((base_dir / path).resolve()) + mark + query
    return uri


def sqlite_store_file(uri: str) -> Path:
    """The file a `sqlite:///…` tracking URI names: without its query, a SQLite URI's
    (`file:/srv/m.db`, `file:///srv/m.db`) path."""
    path = uri[len("sqlite:///"):].partition("?")[0]
    if path.startswith("file:"):
        path = unquote(urlsplit(path).path)
    return Path(path)


def tag_names(overrides: dict[str, str], source: str) -> dict[str, str]:
    """Column → MLflow tag name: the config's renames over the defaults."""
    unknown = sorted(set(overrides) - set(TAG_COLUMNS))
    if unknown:
        raise SourceError(source, "tags", f"unknown column(s) {', '.join(unknown)}; expected "
                          f"some of {', '.join(TAG_COLUMNS)}")
    names = {column: column for column in TAG_COLUMNS}
    names["parent_run_id"] = PARENT_TAG
    names.update(overrides)
    return names


def is_transient(exc: Exception) -> bool:
    code = getattr(exc, "error_code", None)
    if code in _TRANSIENT_CODES:
        return True
    text = f"{type(exc).__name__}: {exc}"
    return bool(_TRANSIENT.search(text))


def call_with_retries(call: Callable[[], T], source: str, uri: str, what: str, *,
                      delays: tuple[float, ...] | None = None,
                      log: logging.Logger | None = None, secret: str | None = None) -> T:
    """`call()`, retried with backoff (`delays`, default RETRY_DELAYS) on connection errors
    and 5xx answers; anything else, or the last failure, becomes a SourceError naming the
    tracking URI (a last failure says the status the server answered, else `unreachable`,
    `_gave_up_as`). `secret` (the URI's password) is masked wherever an error quotes it bare."""
    delays = RETRY_DELAYS if delays is None else delays
    log = log or logging.getLogger(__name__)
    for attempt in range(len(delays) + 1):
        try:
            with _store_errors_unlogged():
                return call()
        except SourceError as exc:
            if secret:
                raise SourceError(exc.source, exc.where, _mask(exc.problem, secret)) from None
            raise
        except Exception as exc:  # MLflow, requests and SQLAlchemy errors alike
            transient = is_transient(exc)
            reason = _mask(_first_line(exc), secret)
            if transient and attempt < len(delays):
                log.warning(redact(f"{source}: {what} at {uri} failed ({reason}); "
                                   f"retrying in {delays[attempt]:g} s"))
                time.sleep(delays[attempt])
                continue
            outcome = (f"{_gave_up_as(exc)} after {attempt + 1} attempt(s)" if transient
                       else "request failed")
            hint = "" if transient else _access_hint(exc)
            raise SourceError(source, uri, f"{what}: {outcome}: {reason}{hint}") from None
    raise AssertionError("unreachable")


@contextmanager
def _store_errors_unlogged() -> Iterator[None]:
    """MLflow's SQL store logs each failed query with its traceback (`mlflow.store.db.utils`,
    ERROR): a locked SQLite store printed ~400 lines of them before the one-line error. The
    retries' warnings and that error say it; `--debug` shows the last one's traceback."""
    logger = logging.getLogger("mlflow.store.db.utils")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _gave_up_as(exc: Exception) -> str:
    """What the last of a call's attempts met: the server's HTTP status when it answered one
    (`answered HTTP 503 Service Unavailable`: it was reached), a SQLite store another
    process holds locked (`still locked`), else `unreachable` (a connection refused, a
    timeout)."""
    chained: BaseException | None = exc
    seen: set[int] = set()
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        if "database is locked" in str(chained):
            return "still locked"
        match = _ANSWERED.search(str(chained))
        if match:
            code = int(match.group(1) or match.group(2))
            try:
                phrase = f" {HTTPStatus(code).phrase}"
            except ValueError:
                phrase = ""
            return f"answered HTTP {code}{phrase}"
        chained = chained.__cause__ or chained.__context__
    return "unreachable"


def _access_hint(exc: Exception) -> str:
    """What to check when the server refused the request's credentials (401, 403): the
    environment variables MLflow's client sends them from, and the account's permission."""
    code = getattr(exc, "error_code", None)
    answered = _ANSWERED.search(str(exc))
    if code not in _REFUSED_CODES and not (answered and (answered.group(1) or answered.group(2))
                                           in ("401", "403")):
        return ""
    return (": the server refused the credentials or their account: check "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) "
            "in the pipeline's environment, and the account's permission on the "
            "experiment(s) (READ to read their runs, EDIT to write tags back)")


def _gave_up(problem: str) -> bool:
    """Whether a SourceError's problem is a call given up after its retries (the server
    unreachable, or answering 5xx every time), not a request the server refused."""
    return bool(_GAVE_UP.search(problem))


def _mask(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].strip() if text and text[0].strip() else type(exc).__name__


def _innermost(exc: BaseException) -> BaseException:
    """The exception at the bottom of `exc`'s chain (what raised it, what that handled …)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc


def _first_line(exc: Exception) -> str:
    """The error's first line within REASON_LIMIT characters. A longer one (MLflow quotes the
    URL, urllib3's pool and its wrapped errors: ~390 characters, the reason last) is cut
    to end with its innermost cause's reason (`[Errno 111] Connection refused`), the part
    that says why."""
    line = _line(exc)
    if len(line) <= REASON_LIMIT:
        return line
    innermost = _innermost(exc)
    reason = _line(innermost)[:REASON_LIMIT // 2] if innermost is not exc else ""
    if not reason or reason in line[:REASON_LIMIT]:
        return line[:REASON_LIMIT]
    return f"{line[:REASON_LIMIT - len(reason) - 3]} … {reason}"


def _not_a_store(path: Path) -> str | None:
    """What the sqlite file at `path` is when it is not an MLflow store (None when it is):
    read through a read-only connection, so nothing is written into the file."""
    import sqlite3

    if path.stat().st_size == 0:
        return "an empty file"
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
            tables = {name for (name,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            return "not a SQLite database"
        raise                  # e.g. `database is locked`: retried like any transient error
    missing = sorted(set(MLFLOW_TABLES) - tables)
    if missing:
        return f"a SQLite database without MLflow's tables {', '.join(missing)}"
    return None


def _client(uri: str, source: str):
    from mlflow import MlflowClient  # heavy import: only when an mlflow tracker is configured

    if uri.startswith("sqlite:///"):
        path = sqlite_store_file(uri)
        # MLflow would silently create a new store at a mistyped path, and in any sqlite file
        # without its tables (an empty file, another application's database): it writes its
        # schema and a Default experiment into it, and the month's runs read as none
        if not path.is_file():
            raise SourceError(source, uri, "no MLflow sqlite store at this path")
        found = _not_a_store(path)
        if found:
            raise SourceError(source, uri, f"not an MLflow store ({found})")
    return MlflowClient(tracking_uri=uri)


def _experiments(client, names: list[str] | None, source: str, uri: str) -> dict[str, str]:
    """experiment id → name: the named experiments, else every one (deleted ones too: their
    runs' compute was billed all the same)."""
    if not names:
        return _all_experiments(client, source, uri)
    found: dict[str, str] = {}
    for name in names:
        experiment = call_with_retries(lambda n=name: client.get_experiment_by_name(n),
                                       source, uri, f"experiment {name!r}")
        if experiment is None:
            try:
                known: dict[str, str] | None = _all_experiments(client, source, uri)
            except SourceError:         # an account that may read some experiments only
                known = None
            raise SourceError(source, uri, _not_found(name, known))
        found[experiment.experiment_id] = experiment.name
    return found


def _not_found(name: str, experiments: dict[str, str] | None) -> str:
    """What a configured experiment name no experiment has says: how names are matched (the
    config takes names only), the name it differs from in case or the experiment whose id
    it is, and the tracker's experiments (the first EXPERIMENTS_LISTED by name)."""
    said = [f"experiment {name!r} not found (names are matched exactly, case-sensitive; "
            "experiment ids are not accepted)."]
    if experiments is None:
        return said[0] + " The tracker's experiments could not be listed"
    alike = sorted(n for n in experiments.values() if n.lower() == name.lower())
    if alike:
        said.append(f"Did you mean {alike[0]!r}?")
    elif name in experiments:
        said.append(f"{name!r} is the id of experiment {experiments[name]!r}: name it instead.")
    listed = sorted(experiments.values())
    said.append("The tracker's experiments: "
                + (first_named(listed, EXPERIMENTS_LISTED) if listed else "none"))
    return " ".join(said)


def _all_experiments(client, source: str, uri: str) -> dict[str, str]:
    """experiment id → name of every experiment, deleted ones too."""
    from mlflow.entities import ViewType

    found, token = {}, None
    while True:
        page = call_with_retries(
            lambda t=token: client.search_experiments(view_type=ViewType.ALL, max_results=1000,
                                                      page_token=t),
            source, uri, "search_experiments")
        found.update((e.experiment_id, e.name) for e in page)
        token = page.token
        if not token:
            return found


def search_all_runs(client, experiment_ids: list[str], source: str, uri: str,
                    page_size: int = PAGE_SIZE) -> Iterator[list]:
    """Every run of the experiments, active and deleted, one page at a time, each once.

    MLflow pages by offset. In its default order (newest start first) a run started while
    the pages were read shifted every later page by one: the last run of a page came again
    on the next, and the read failed on a run id "shared by more than one run". Oldest first,
    a new run lands on the last page; a run the pages hand over twice anyway (one created
    with a past start) is kept once."""
    from mlflow.entities import ViewType

    seen: set[str] = set()
    for experiment_id in experiment_ids:
        token = None
        while True:
            page = call_with_retries(
                lambda t=token, e=experiment_id: client.search_runs(
                    [e], run_view_type=ViewType.ALL, max_results=page_size, page_token=t,
                    order_by=["attributes.start_time ASC"]),
                source, uri, f"search_runs (experiment {experiment_id})")
            runs = [run for run in page if run.info.run_id not in seen]
            seen.update(run.info.run_id for run in runs)
            yield runs
            token = page.token
            if not token:
                break


def seed_param(params: dict[str, str]) -> str | None:
    """The seed a run's params give: the first of SEED_PARAMS it has. Each is left out of the
    config hash, so a `random_seed` not read as the seed made a config's seeds one run with
    no seed (search_costs counted 1 seed where search_shape counted 3)."""
    by_name = {key.lower(): value for key, value in sorted(params.items())}
    return next((by_name[name] for name in SEED_PARAMS if field_text(by_name.get(name))),
                None)


def params_hash(params: dict[str, str]) -> str | None:
    """A stable id of a hyperparameter configuration: the params without the seed."""
    config = {k: v for k, v in params.items() if k.lower() not in SEED_PARAMS}
    if not config:
        return None
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    return "params:" + digest[:16]


def _batch_runs(dialect: str) -> int:
    """Runs per SQL history query: each run id is one bound variable, and SQLite before
    3.32 allows 999 of them."""
    import sqlite3

    if dialect == "sqlite" and sqlite3.sqlite_version_info < (3, 32):
        return 900
    return HISTORY_BATCH_RUNS


_RUN_INDEX = "index_metrics_run_uuid_key_step"   # MLflow's metrics index on (run, key, step)


def _sql_means(store, keys_of: dict[str, list[str]], source: str, uri: str,
               ) -> Iterator[tuple[str, float]]:
    """(run id, the mean of its GPU utilization histories) from an MLflow SQL store, a batch
    of runs per query, the rows streamed in run order (one run's values held at a time).
    Read as plain columns through the store's own engine and table model: MLflow's
    `get_metric_history_bulk` builds an ORM object per value (~37 µs each, 4.5 s for 120,000
    values) and its per-run query scans the metric's whole key in a SQLite store."""
    from mlflow.store.tracking.dbmodels.models import SqlMetric
    from sqlalchemy import bindparam, select, text

    engine = getattr(store, "read_engine", None) or store.engine   # a read replica, if any
    dialect = engine.dialect.name
    if dialect == "sqlite" and _RUN_INDEX in {i.name for i in SqlMetric.__table__.indexes}:
        # SQLite would scan the metric's whole key (the primary key starts with it) for
        # every batch and sort the rows; told to use the run index it seeks each run's rows,
        # already in run order (100,000 runs × 4 GPUs × 60 values: 18.9 s against 51.5 s
        # for the scan in batches of 30,000 runs)
        query = text("SELECT run_uuid, key, value, is_nan FROM metrics INDEXED BY "
                     f"{_RUN_INDEX} WHERE run_uuid IN :ids AND key IN :keys "
                     "ORDER BY run_uuid").bindparams(bindparam("ids", expanding=True),
                                                      bindparam("keys", expanding=True))
    else:
        query = (select(SqlMetric.run_uuid, SqlMetric.key, SqlMetric.value, SqlMetric.is_nan)
                 .where(SqlMetric.run_uuid.in_(bindparam("ids", expanding=True)),
                        SqlMetric.key.in_(bindparam("keys", expanding=True)))
                 .order_by(SqlMetric.run_uuid))
    run_ids = sorted(keys_of)
    batch = _batch_runs(dialect)
    for at in range(0, len(run_ids), batch):
        ids = run_ids[at:at + batch]
        keys = sorted({key for run_id in ids for key in keys_of[run_id]})

        def read(ids=ids, keys=keys) -> list[tuple[str, float]]:
            found: list[tuple[str, float]] = []
            # a plain connection: an ORM session buffers the whole answer (+450 MiB at 20,000
            # runs) or, told to yield it in parts, takes twice as long; stream_results keeps
            # PostgreSQL's and MySQL's drivers from fetching it all at once
            with engine.connect().execution_options(
                    stream_results=True, max_row_buffer=HISTORY_ROWS_PER_FETCH) as connection:
                current, values = None, []
                for run_id, key, value, is_nan in connection.execute(
                        query, {"ids": ids, "keys": keys}):
                    if key not in keys_of.get(run_id, ()):
                        continue          # another run's key, asked for in the same batch
                    if run_id != current:
                        if values:
                            found.append((current, _mean(values)))
                        current, values = run_id, []
                    values.append(float("nan") if is_nan else value)
                if values:
                    found.append((current, _mean(values)))
            return found

        yield from call_with_retries(read, source, uri,
                                     f"GPU utilization histories of {len(ids)} run(s)")


def _history(client, run_id: str, key: str, source: str, uri: str) -> list[float]:
    history = call_with_retries(lambda: client.get_metric_history(run_id, key),
                                source, uri, f"metric history {key} of run {run_id}")
    return [m.value for m in history]


def _grouped_means(run_ids: list[str], tasks: Callable[[list[str]], list[T]],
                   ask: Callable[[T], list[tuple[str, list[float]]]],
                   ) -> Iterator[tuple[str, float]]:
    """(run id, the mean of its values) for HISTORY_GROUP runs at a time: `tasks(group)` the
    requests a group needs, `ask(task)` one request's (run id, values), HISTORY_THREADS
    requests at once; a run's values may come from several requests."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(HISTORY_THREADS, thread_name_prefix="mlflow-history") as pool:
        for at in range(0, len(run_ids), HISTORY_GROUP):
            values: dict[str, list[float]] = {}
            for answer in pool.map(ask, tasks(run_ids[at:at + HISTORY_GROUP])):
                for run_id, history in answer:
                    values.setdefault(run_id, []).extend(history)
            yield from ((run_id, _mean(run_values)) for run_id, run_values in values.items()
                        if run_values)


def _threaded_means(client, keys_of: dict[str, list[str]], source: str, uri: str,
                    ) -> Iterator[tuple[str, float]]:
    """(run id, the mean of its GPU utilization histories) asked one run and metric at a
    time through MLflow's public API (`_grouped_means`)."""
    return _grouped_means(
        list(keys_of),
        lambda group: [(run_id, key) for run_id in group for key in keys_of[run_id]],
        lambda pair: [(pair[0], _history(client, *pair, source, uri))])


def _bulk_request(store, key: str, run_ids: list[str], source: str, uri: str
                  ) -> list[tuple[str, float]]:
    """(run id, value) of the `key` histories of up to SERVER_BULK_RUNS runs, grouped by run,
    from the server's `metrics/get-history-bulk` (the endpoint MLflow's own UI charts with;
    at most SERVER_BULK_POINTS values per answer)."""
    from mlflow.utils.rest_utils import http_request, verify_rest_response

    def ask() -> list[tuple[str, float]]:
        endpoint = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"
        response = http_request(store.get_host_creds(), endpoint, "GET",
                                params={"run_id": run_ids, "metric_key": key,
                                        "max_results": SERVER_BULK_POINTS})
        verify_rest_response(response, endpoint)
        return [(m["run_id"], float(m["value"])) for m in response.json()["metrics"]]

    return call_with_retries(ask, source, uri,
                             f"metric histories {key} of {len(run_ids)} run(s)")


def _bulk_histories(client, store, key: str, run_ids: list[str], source: str, uri: str,
                    ) -> list[tuple[str, list[float]]]:
    """(run id, its `key` history) for up to SERVER_BULK_RUNS runs. An answer cut off at
    SERVER_BULK_POINTS values holds its runs whole but the last one it reached; the rest
    are asked again, and a run whose history alone fills an answer is read by itself, paged
    by MLflow."""
    found: list[tuple[str, list[float]]] = []
    pending = run_ids
    while pending:
        rows = _bulk_request(store, key, pending, source, uri)
        by_run: dict[str, list[float]] = {}
        for run_id, value in rows:
            by_run.setdefault(run_id, []).append(value)
        if len(rows) < SERVER_BULK_POINTS:
            found.extend((run_id, by_run.get(run_id, [])) for run_id in pending)
            break
        whole = [run_id for run_id in by_run if run_id != rows[-1][0]]
        if not whole:                     # one run's history fills an answer by itself
            by_run[rows[-1][0]] = _history(client, rows[-1][0], key, source, uri)
            whole = [rows[-1][0]]
        found.extend((run_id, by_run[run_id]) for run_id in whole)
        done = set(whole)
        pending = [run_id for run_id in pending if run_id not in done]
    return found


def _server_means(client, store, keys_of: dict[str, list[str]], source: str, uri: str,
                  log: logging.Logger) -> Iterator[tuple[str, float]]:
    """(run id, the mean of its GPU utilization histories) from a tracking server, by its
    bulk endpoint (SERVER_BULK_RUNS runs per request, `_grouped_means`); a server without
    that endpoint is asked one run and metric at a time."""
    probe = next(iter(keys_of))
    try:
        _bulk_request(store, keys_of[probe][0], [probe], source, uri)
    except SourceError as exc:
        if _gave_up(exc.problem):
            raise
        log.info(f"{source}: {redact(uri)} has no bulk metric-history endpoint "
                 f"({exc.problem}); asking one run at a time")
        yield from _threaded_means(client, keys_of, source, uri)
        return

    def tasks(group: list[str]) -> list[tuple[str, list[str]]]:
        """(key, up to SERVER_BULK_RUNS runs having it) for the group's runs."""
        runs_of: dict[str, list[str]] = {}
        for run_id in group:
            for key in keys_of[run_id]:
                runs_of.setdefault(key, []).append(run_id)
        return [(key, ids[i:i + SERVER_BULK_RUNS]) for key, ids in sorted(runs_of.items())
                for i in range(0, len(ids), SERVER_BULK_RUNS)]

    yield from _grouped_means(
        list(keys_of), tasks,
        lambda task: _bulk_histories(client, store, *task, source, uri))


def _mean(values: list[float]) -> float:
    """The mean, its sum correctly rounded whatever order the values came in (so a store
    and a server give the same bits); NaN when a value is NaN or the sum overflows."""
    try:
        return math.fsum(values) / len(values)
    except (ValueError, OverflowError):   # inf - inf, or beyond the largest float
        return float("nan")


def gpu_utilizations(client, keys_of: dict[str, list[str]], source: str, uri: str, *,
                     log: logging.Logger | None = None) -> dict[str, float]:
    """MLflow run id → the mean of its `system/gpu_N_utilization_percentage` histories, all
    GPUs' values together; `keys_of` names each run's keys (those its latest values have).

    An MLflow SQL store is read a batch of runs per query (`_sql_means`): asked one run at a
    time, a SQLite store scans the metric's whole key for each (its key-first primary key),
    which made 2,000 runs of 4 GPUs take 113 s. A tracking server is asked through its bulk
    endpoint (`_server_means`), any other store one run and metric at a time."""
    log = log or logging.getLogger(__name__)
    keys_of = {run_id: keys for run_id, keys in keys_of.items() if keys}
    if not keys_of:
        return {}
    started = time.monotonic()
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:                   # a client without the SQL stores' modules
        SqlAlchemyStore = ()              # noqa: N806
    from mlflow.store.tracking.rest_store import RestStore

    if isinstance(store, SqlAlchemyStore):
        means = dict(_sql_means(store, keys_of, source, uri))
    elif isinstance(store, RestStore):
        means = dict(_server_means(client, store, keys_of, source, uri, log))
    else:
        means = dict(_threaded_means(client, keys_of, source, uri))
    log.info(f"{source}: GPU utilization histories of {len(means)} run(s) "
             f"({sum(map(len, keys_of.values()))} metric(s)) read in "
             f"{time.monotonic() - started:.1f} s")
    return means


def warehouse_run_id(run, id_tag: str) -> str:
    """The id the warehouse knows an MLflow run by: its `id_tag` tag (`tags: run_id:`), its
    run name when that tag is `mlflow.runName` and the run has no such tag (MLflow keeps the
    name in the run's info too), else its MLflow run id. Normalized as `normalize_run` keeps
    a run id (`field_text`: blanks stripped, a blank tag is no tag), so the reader and the
    write-back (mlflow_tags) name a run the same way."""
    tags = run.data.tags
    found = run.info.run_name if id_tag == RUN_NAME_TAG and id_tag not in tags \
        else tags.get(id_tag)
    return field_text(found) or run.info.run_id


def raw_run(run, experiment: str, tags_of: dict[str, str], metric: str | None,
            gpu_utilization: float | None) -> dict[str, Any]:
    """An MLflow run → a runs-file-shaped record (before normalization)."""
    tags = dict(run.data.tags)
    if run.info.run_name and RUN_NAME_TAG not in tags:
        tags[RUN_NAME_TAG] = run.info.run_name
    raw: dict[str, Any] = {column: tags.get(tag) for column, tag in tags_of.items()}
    raw["run_id"] = warehouse_run_id(run, tags_of["run_id"])
    raw["experiment"] = experiment
    raw["status"] = run.info.status
    raw["start_time"] = run.info.start_time
    raw["end_time"] = run.info.end_time
    raw["deleted"] = run.info.lifecycle_stage == "deleted"
    if not raw["seed"]:
        raw["seed"] = seed_param(run.data.params)
    raw["config_id"] = raw["config_id"] or params_hash(dict(run.data.params))
    metric_name = metric or raw["metric_name"]
    raw["metric_name"] = metric_name
    raw["metric_value"] = run.data.metrics.get(metric_name) if metric_name else None
    raw["gpu_utilization"] = gpu_utilization
    return raw


def _tag_named(problem: str, tags_of: dict[str, str]) -> str:
    """A run's validation error (`gpus: 'two' is not a whole number`, named by its column)
    with the MLflow tag the column is read from (`gpus (tag 'cloud.gpus'): …`): the tag
    is what the tracker shows and what is to be fixed."""
    column, mark, rest = problem.partition(": ")
    if not mark or column not in tags_of:
        return problem
    return f"{column} (tag {tags_of[column]!r}): {rest}"


def read_mlflow_runs(tracking_uri: str, source: str, **options: Any) -> list[dict[str, Any]]:
    """Every run the tracking URI knows (of the named experiments) as `tracker_runs` rows:
    `read_mlflow_runs_with_ids` (its options) without the MLflow run ids."""
    return read_mlflow_runs_with_ids(tracking_uri, source, **options)[0]


def read_mlflow_runs_with_ids(
    tracking_uri: str,
    source: str,
    experiments: list[str] | None = None,
    metric: str | None = None,
    tags: dict[str, str] | None = None,
    page_size: int = PAGE_SIZE,
    log: logging.Logger | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """`read_mlflow_runs`, and each row's MLflow run id in the rows' order (what
    `tracker_runs.tracker_run_uuid` keeps; the rows keep RUN_COLUMNS, as every reader's)."""
    log = log or logging.getLogger(__name__)
    tags_of = tag_names(tags or {}, source)
    client = call_with_retries(lambda: _client(tracking_uri, source), source, tracking_uri,
                               "connect")
    names = _experiments(client, experiments, source, tracking_uri)
    # each page's runs become records at once: MLflow's run objects (every tag, param and
    # metric) are several times their size and are not kept
    mlflow_ids: list[str] = []
    raws: list[dict[str, Any]] = []
    gpu_keys: dict[str, list[str]] = {}
    pages = 0
    for page in search_all_runs(client, list(names), source, tracking_uri, page_size):
        pages += 1
        for run in page:
            mlflow_ids.append(run.info.run_id)
            raws.append(raw_run(run, names[run.info.experiment_id], tags_of, metric, None))
            keys = sorted(k for k in run.data.metrics if GPU_UTILIZATION.match(k))
            if keys:
                gpu_keys[run.info.run_id] = keys
    utilizations = gpu_utilizations(client, gpu_keys, source, tracking_uri, log=log)
    for mlflow_id, raw in zip(mlflow_ids, raws, strict=True):
        raw["gpu_utilization"] = utilizations.get(mlflow_id)
    # a parent is named like its children name runs (MLflow id → the chosen run_id)
    chosen = {mlflow_id: raw["run_id"] for mlflow_id, raw in zip(mlflow_ids, raws, strict=True)}
    chosen_ids = set(chosen.values())
    rows: dict[str, dict[str, Any]] = {}
    uuids: list[str] = []   # the MLflow run id of each row, in the rows' order
    uuid_of: dict[str, str] = {}   # run_id → the MLflow run id of the run that bears it
    for mlflow_id, raw in zip(mlflow_ids, raws, strict=True):
        if raw["parent_run_id"] in chosen and tags_of["parent_run_id"] == PARENT_TAG:
            raw["parent_run_id"] = chosen[raw["parent_run_id"]]
        # a restart may name the interrupted run by its MLflow id: named as runs are named
        restart_of = raw.get("restart_of")
        if restart_of in chosen and restart_of not in chosen_ids:
            raw["restart_of"] = chosen[restart_of]
        # a run the warehouse knows by another id is named by both
        where = f"{redact(tracking_uri)} run {mlflow_id}" + (
            "" if raw["run_id"] == mlflow_id else f" (run_id {raw['run_id']!r})")
        if raw["start_time"] is None:
            log.warning(f"{source}: {where} never started (no start time): skipped")
            continue
        try:
            row = normalize_run(raw, source)
        except ValueError as exc:
            raise SourceError(source, where, _tag_named(str(exc), tags_of)) from None
        if row["run_id"] in rows:
            raise SourceError(source, where, (
                f"run_id {row['run_id']!r} (tag {tags_of['run_id']!r}) is shared by MLflow "
                f"runs {uuid_of[row['run_id']]} and {mlflow_id}: rename one of them, or key "
                "runs on another tag (tags: {run_id: …})"))
        rows[row["run_id"]] = row
        uuids.append(mlflow_id)
        uuid_of[row["run_id"]] = mlflow_id
    log.info(f"{source}: {len(rows)} run(s) of {len(names)} experiment(s) from "
             f"{redact(tracking_uri)} in {pages} page(s)")
    assert all(set(r) == set(RUN_COLUMNS) for r in rows.values())
    return list(rows.values()), uuids
