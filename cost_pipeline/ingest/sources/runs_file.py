"""A runs file (CSV, parquet or JSONL; W&B exports, in-house trackers) → tracker run rows.

Only `run_id`, `status` and `start_time` are required. Timestamps with offsets are converted
to UTC; naive ones are read as UTC. Every problem names the file, the row and the field.

This is the record-by-record reader: it knows every rule and words every error.
`runs_file_sql.read_runs_table` is the fast way in, and falls back to it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import SourceError, csv_delimiter

REQUIRED = ("run_id", "status", "start_time")
# the tracker states a runs file may spell, beyond SPEC §4's four: MLflow's SCHEDULED and
# W&B's exports' (`crashed`, `pending`, `preempting`, `preempted`), as the four they mean
STATUS_ALIASES = {"SCHEDULED": "RUNNING", "PENDING": "RUNNING", "PREEMPTING": "RUNNING",
                  "CRASHED": "FAILED", "PREEMPTED": "KILLED"}
STATUSES = {"RUNNING", "FINISHED", "FAILED", "KILLED", *STATUS_ALIASES}
PURPOSES = {"production", "search", "preprocess", "eval", "adhoc"}
RUN_COLUMNS = (
    "run_id", "source", "experiment", "model", "purpose", "search_id", "seed", "config_id",
    "status", "start_time", "end_time", "resource_ids", "gpus", "region", "dataset",
    "dataset_region", "input_hash", "transform_version", "metric_name", "metric_value",
    "keep", "deleted", "parent_run_id", "team", "gpu_utilization",
    "trigger", "restart_of", "resumed_from",
)
RUN_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("source", pa.string()), ("experiment", pa.string()),
    ("model", pa.string()), ("purpose", pa.string()), ("search_id", pa.string()),
    ("seed", pa.string()), ("config_id", pa.string()), ("status", pa.string()),
    ("start_time", pa.timestamp("us")), ("end_time", pa.timestamp("us")),
    ("resource_ids", pa.list_(pa.string())), ("gpus", pa.int32()), ("region", pa.string()),
    ("dataset", pa.string()), ("dataset_region", pa.string()), ("input_hash", pa.string()),
    ("transform_version", pa.string()), ("metric_name", pa.string()),
    ("metric_value", pa.float64()), ("keep", pa.bool_()), ("deleted", pa.bool_()),
    ("parent_run_id", pa.string()), ("team", pa.string()), ("gpu_utilization", pa.float64()),
    ("trigger", pa.string()), ("restart_of", pa.string()), ("resumed_from", pa.string()),
])
assert tuple(RUN_SCHEMA.names) == RUN_COLUMNS
TRUE_WORDS = {"true", "1", "yes", "y", "t"}
# accelerators one run may use: far above any cluster, far below int32 (the column's type)
MAX_GPUS = 1_000_000
FALSE_WORDS = {"false", "0", "no", "n", "f", ""}


Record = tuple[str, dict[str, Any]]  # (where in the file, the raw record)


def _decode(path: Path, source: str) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SourceError(source, str(path), "file not found") from None
    except OSError as exc:
        raise SourceError(source, str(path), f"unreadable: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise SourceError(source, f"{path} line {line}",
                          f"not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})") from None


def _csv_records(path: Path, source: str) -> tuple[list[str], list[Record]]:
    """A CSV's records; `row N` is the line of the file the record starts on (the header is
    row 1), as a spreadsheet numbers it."""
    text = _decode(path, source)
    if not text.strip():
        raise SourceError(source, str(path), "empty file: no header")
    reader = csv.reader(io.StringIO(text, newline=""),
                        delimiter=csv_delimiter(text, RUN_COLUMNS))
    records: list[Record] = []
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        repeated = repeated_column(header, RUN_COLUMNS)
        if repeated:
            raise SourceError(source, str(path), repeated)
        while True:
            first_line = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                break
            if not any(cell.strip() for cell in row):
                continue
            where = f"row {first_line}"
            if len(row) > len(header) and any(cell.strip() for cell in row[len(header):]):
                raise SourceError(source, f"{path} {where}",
                                  f"{len(row)} fields, the header has {len(header)}")
            records.append((where, dict(zip(header, row, strict=False))))
    except csv.Error as exc:
        raise SourceError(source, f"{path} row {reader.line_num}", f"bad CSV: {exc}") from None
    return header, records


def repeated_column(header: list[str], read: Collection[str]) -> str | None:
    """What is wrong with a header naming a column the reader reads more than once (names
    as the reader compares them), else None: read by name, one copy won over the other
    without a word. A column it does not read may repeat."""
    places: dict[str, list[int]] = {}
    for number, name in enumerate(header, start=1):
        if name in read:
            places.setdefault(name, []).append(number)
    for name, numbers in places.items():
        if len(numbers) > 1:
            times = "twice" if len(numbers) == 2 else f"{len(numbers)} times"
            listed = ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"
            return f"column {name} appears {times} in the header (columns {listed}): keep one"
    return None


def _json_records(path: Path, source: str, loads: Callable[[str], Any] = json.loads
                  ) -> tuple[list[str], list[Record]]:
    text = _decode(path, source)
    records: list[Record] = []
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            items = loads(text)
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            raise SourceError(source, f"{path} line {line}" if line else str(path),
                              f"bad JSON: {_json_reason(exc)}") from None
        located = [(f"row {i}", item) for i, item in enumerate(items, start=1)]
    else:
        located = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                located.append((f"line {number}", loads(line)))
            except ValueError as exc:
                raise SourceError(source, f"{path} line {number}",
                                  f"bad JSON: {_json_reason(exc)}") from None
    columns: dict[str, None] = {}
    keys = None
    for where, item in located:
        if not isinstance(item, dict):
            raise SourceError(source, f"{path} {where}", "expected a JSON object per run")
        if item.keys() != keys:     # a new set of keys (rarely): the columns in first-seen order
            columns.update(dict.fromkeys(item))
            keys = item.keys()
        records.append((where, item))
    return list(columns), records


def _json_reason(exc: ValueError) -> str:
    """The parser's reason and column, without its own line count: it counts the lines of
    the text it was handed (a JSONL line is its line 1), the message names the file's line."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


def _parquet_records(path: Path, source: str) -> tuple[list[str], list[Record]]:
    try:
        # a column read named twice is refused as in a CSV (pyarrow's "Multiple matches
        # for FieldRef.Name(model)" said neither what nor how to mend it)
        repeated = repeated_column(pq.ParquetFile(path).schema_arrow.names, RUN_COLUMNS)
        table = None if repeated else pq.read_table(path)
    except FileNotFoundError:
        raise SourceError(source, str(path), "file not found") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise SourceError(source, str(path), f"unreadable: {str(exc).splitlines()[0]}") from None
    if table is None:
        raise SourceError(source, str(path), repeated)
    return table.column_names, [(f"row {i}", r) for i, r in enumerate(table.to_pylist(), 1)]


def file_format(path: Path) -> str:
    """How a runs file is read, by its name: `parquet`, `json` (JSON or JSONL) or `csv`."""
    suffix = "".join(path.suffixes[-2:]).lower()
    if suffix.endswith(".parquet"):
        return "parquet"
    if suffix.endswith((".jsonl", ".ndjson", ".json")):
        return "json"
    return "csv"


def read_records(path: Path, source: str, loads: Callable[[str], Any] = json.loads
                 ) -> tuple[list[str], list[Record]]:
    """The file's column names and its records, each with its place in the file (JSON parsed
    by `loads`)."""
    read = {"parquet": _parquet_records, "json": partial(_json_records, loads=loads),
            "csv": _csv_records}[file_format(path)]
    return read(path, source)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def field_text(value: Any) -> str | None:
    """A record's field as the warehouse keeps it: stripped of blanks, None when empty (a
    whole float as an integer). The one spelling of a run id: the MLflow write-back matches
    runs by it too."""
    if value is None or _is_nan(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return text or None


def _compact_time(value: Any) -> datetime | None:
    """A whole number of 12 or 14 digits spelling a date and time (`202607011000`,
    `20260701100000`: `%Y%m%d%H%M[%S]`, UTC), else None. As epoch milliseconds such a number
    is a moment of 1973–2001 (12 digits) or after 2286 (14): the run moved decades and
    dropped out of its month, its cost untracked without a word."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    text = str(value).strip()
    if len(text) not in (12, 14) or not text.isascii() or not text.isdigit():
        return None
    parts = [int(text[at:at + width]) for at, width in ((0, 4), (4, 2), (6, 2), (8, 2),
                                                        (10, 2), (12, 2)) if at < len(text)]
    try:
        return datetime(*parts)  # type: ignore[arg-type]
    except ValueError:
        return None


def parse_time(value: Any) -> datetime | None:
    """ISO 8601 (offsets and `Z` honoured, naive = UTC), a compact `YYYYMMDDHHMM[SS]` (UTC),
    or epoch seconds/ms → naive UTC."""
    if value is None or _is_nan(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a timestamp")
    compact = _compact_time(value)
    if isinstance(value, datetime):
        moment = value
    elif compact is not None:
        moment = compact
    elif isinstance(value, int | float) or re.fullmatch(r"\d{9,14}(\.\d+)?", str(value).strip()):
        number = float(value)
        moment = datetime.fromtimestamp(number / 1000 if number > 1e11 else number, UTC)
    else:
        # one blank may precede `Z` or the offset, as Snowflake writes a TIMESTAMP_TZ
        text = re.sub(r"(\d) ([+-]\d\d(?::?\d\d)?|Z)$", r"\1\2", str(value).strip())
        moment = datetime.fromisoformat(text.replace(" UTC", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _as_written(value: Any, instant: datetime) -> str:
    """A time as the file wrote it and the UTC instant it was read as, to the millisecond (the
    microsecond where it has one) when it has a fraction (`'…03:00:00+02:00' (…01:00:00Z)`):
    a refusal's two times, side by side."""
    read = instant.isoformat(timespec="milliseconds" if instant.microsecond % 1000 == 0
                             else "microseconds") if instant.microsecond else \
        instant.isoformat(timespec="seconds")
    read = read.removesuffix("+00:00") + "Z"
    return f"{value!r} ({read})" if isinstance(value, str) else read


def _resource_ids(value: Any) -> list[str]:
    if value is None or _is_nan(value):
        return []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    text = str(value).strip()
    if text.startswith("["):
        try:
            return _resource_ids(json.loads(text))
        except ValueError:
            text = text.strip("[]")
    elif text.startswith("{") and text.endswith("}"):
        # a PostgreSQL array, as psql and COPY write a text[] (`{i-0a,i-0b}`, an item with a
        # blank or a comma double-quoted): split as the CSV reader splits a record
        return [item.strip() for item in next(csv.reader([text[1:-1]], skipinitialspace=True))
                if item.strip()] if text[1:-1].strip() else []
    return split_resource_ids(text)


# A token that is a whole cloud resource id by itself: AWS (`i-0a…`, `vol-…`, an ARN), GCP
# (`projects/…`, `//compute.googleapis.com/…`), Azure (`/subscriptions/…`), a bucket URI.
_WHOLE_ID = re.compile(r"(?i)^(?:[a-z][a-z0-9]{0,15}-[0-9a-z]+|arn:\S+|projects/\S+|//\S+"
                       r"|/subscriptions/\S+|[a-z0-9]+://\S+)$")


def split_resource_ids(text: str) -> list[str]:
    """A text list of resource ids: separated by `,` or `;` (what the docs promise), each id
    stripped of blanks and quotes. Never split on blanks or `|`: an Azure id such as
    `…/metricAlerts/CPU Alert` keeps its space. A part that reads as several whole ids run
    together with blanks or `|` (`i-0a i-0b`) is ambiguous: an error says how to write it."""
    ids = [p for p in (part.strip().strip("'\"").strip() for part in re.split(r"[,;]", text))
           if p]
    for part in ids:
        tokens = [t for t in (t.strip("'\"") for t in re.split(r"[\s|]+", part)) if t]
        if len(tokens) > 1 and all(_WHOLE_ID.match(t) for t in tokens):
            raise ValueError(
                f"resource_ids: {part!r} is ambiguous: {len(tokens)} ids separated by blanks "
                "or '|'? Separate ids with ',' or ';', or give a JSON list (an id itself may "
                "contain blanks or '|')")
    return ids


def _bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    text = (field_text(value) or "").lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError(f"{field}: {value!r} is not true/false")


def normalize_run(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """One record of a tracker → a `tracker_runs` row (raises ValueError naming the field)."""
    run: dict[str, Any] = {c: None for c in RUN_COLUMNS}
    for column in ("run_id", "experiment", "model", "search_id", "seed", "config_id", "region",
                   "dataset", "dataset_region", "input_hash", "transform_version", "metric_name",
                   "parent_run_id", "team", "restart_of", "resumed_from"):
        run[column] = field_text(raw.get(column))
    if not run["run_id"]:
        raise ValueError("run_id: empty")
    run["source"] = field_text(raw.get("source")) or source
    status = (field_text(raw.get("status")) or "").upper()
    if status not in STATUSES:
        raise ValueError(f"status: {raw.get('status')!r} is not one of RUNNING, FINISHED, "
                         "FAILED, KILLED")
    run["status"] = STATUS_ALIASES.get(status, status)
    purpose = (field_text(raw.get("purpose")) or "").lower() or None
    if purpose is not None and purpose not in PURPOSES:
        raise ValueError(f"purpose: {raw.get('purpose')!r} is not one of "
                         f"{', '.join(sorted(PURPOSES))}")
    run["purpose"] = purpose or ("search" if run["search_id"] else None)
    # why a production run (a retrain) was launched, kept as written (lower case): a word
    # other than schedule, drift, manual counts as unknown in `retrain_cadence` (an optional
    # field refused the whole month's runs)
    run["trigger"] = (field_text(raw.get("trigger")) or "").lower() or None
    for column in ("start_time", "end_time"):
        try:
            run[column] = parse_time(raw.get(column))
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{column}: {raw.get(column)!r} is not a timestamp") from None
    if run["start_time"] is None:
        raise ValueError("start_time: empty")
    if run["end_time"] is not None and run["end_time"] < run["start_time"]:
        said = {c: _as_written(raw.get(c), run[c]) for c in ("end_time", "start_time")}
        raise ValueError(f"end_time {said['end_time']} is before start_time "
                         f"{said['start_time']}")
    run["resource_ids"] = _resource_ids(raw.get("resource_ids"))
    gpus = field_text(raw.get("gpus"))
    try:
        number = None if gpus is None else float(gpus)
    except ValueError:
        number = math.nan
    if number is not None and not number.is_integer():
        raise ValueError(f"gpus: {gpus!r} is not a whole number")
    run["gpus"] = None if number is None else int(number)
    if run["gpus"] is not None and run["gpus"] < 0:
        raise ValueError(f"gpus: {gpus!r} is negative")
    if run["gpus"] is not None and run["gpus"] > MAX_GPUS:
        raise ValueError(f"gpus: {gpus!r} is more than {MAX_GPUS:,} accelerators for one run")
    metric = field_text(raw.get("metric_value"))
    try:
        run["metric_value"] = None if metric is None else float(metric)
    except ValueError:
        raise ValueError(f"metric_value: {metric!r} is not a number") from None
    utilization = field_text(raw.get("gpu_utilization"))   # mean GPU utilization, percent
    try:
        run["gpu_utilization"] = None if utilization is None else float(utilization)
    except ValueError:
        raise ValueError(f"gpu_utilization: {utilization!r} is not a number") from None
    if run["gpu_utilization"] is not None and not 0 <= run["gpu_utilization"] <= 100:
        raise ValueError(f"gpu_utilization: {utilization!r} is not a percentage (0-100)")
    run["keep"] = _bool(raw.get("keep"), "keep")
    run["deleted"] = _bool(raw.get("deleted"), "deleted")
    _check_unicode(run)
    return run


def _check_unicode(run: dict[str, Any]) -> None:
    """Text the warehouse can store: a JSON `\\udcff` escape decodes to a lone surrogate,
    which no UTF-8 column (nor Arrow) accepts."""
    for column, value in run.items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise ValueError(f"{column}: {text!r} is not valid Unicode text (character "
                                     f"{exc.start + 1} is a lone surrogate)") from None


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two records of a run are identical, a `nan` metric equal to a `nan` (as the
    SQL reader compares them): the same row twice with `metric_value` nan was "conflicting"."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (_is_nan(a[k]) and _is_nan(b[k])) for k in a)


def read_runs(path: Path, source: str) -> list[dict[str, Any]]:
    columns, records = read_records(path, source)
    missing = [c for c in REQUIRED if c not in columns]
    if missing and (records or not path.suffix.lower().endswith(("json", "jsonl", "ndjson"))):
        raise SourceError(source, str(path), f"missing required column(s) {', '.join(missing)}")
    runs: dict[str, dict[str, Any]] = {}
    for where, raw in records:
        try:
            run = normalize_run(raw, source)
        except ValueError as exc:
            raise SourceError(source, f"{path} {where}", str(exc)) from None
        previous = runs.get(run["run_id"])
        if previous is not None and not _same_run(previous, run):
            raise SourceError(source, f"{path} {where}",
                              f"run_id {run['run_id']!r} appears twice with different values")
        runs[run["run_id"]] = run
    return list(runs.values())
