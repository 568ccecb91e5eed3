"""The fast way into a runs file: a CSV or parquet file normalized by DuckDB SQL that accepts
only values whose meaning it can prove equal to `runs_file.normalize_run`'s; a file with any
other value goes through `normalize_run` record by record, which also names what is wrong.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import SourceError, csv_delimiter
from cost_pipeline.ingest.sources.runs_file import (
    FALSE_WORDS,
    MAX_GPUS,
    PURPOSES,
    REQUIRED,
    RUN_COLUMNS,
    RUN_SCHEMA,
    STATUS_ALIASES,
    STATUSES,
    TRUE_WORDS,
    file_format,
    read_records,
    read_runs,
)


def read_runs_table(path: Path, source: str) -> pa.Table:
    """`read_runs` as an Arrow table (RUN_SCHEMA): the same runs, in the same order."""
    with _collector_paused():
        table = _fast_runs(path, source)
        if table is None:
            table = pa.Table.from_pylist(read_runs(path, source), schema=RUN_SCHEMA)
    return table


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a file's records become Python objects: they
    form no cycles, and its passes over them cost a JSONL file of 100,000 runs ~0.6 s of
    ~4 s. Reference counting frees them as before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ------------------------------------------------------------------------------ fast path
# Each rule below is one of `normalize_run`'s, applied to a strict subset of what it accepts.
# A value outside that subset sets `doubt`, and one doubtful row sends the whole file down the
# record-by-record path, which knows every rule and how to word the error.

# what str.strip() removes: the characters for which str.isspace() holds
_PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003"
                  "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_PY_SPACE = "".join(f"\\x{{{ord(c):x}}}" for c in _PY_WHITESPACE)     # as an RE2 class
_MEMORY_LIMIT = "1GB"
_TIME_COLUMNS = ("start_time", "end_time")
_NUMBER_COLUMNS = ("metric_value", "gpu_utilization")
_BOOL_COLUMNS = ("keep", "deleted")
# the Arrow types the SQL reads each column from (a CSV is all text)
_KINDS = {
    **{c: {"text", "int", "float", "null"} for c in RUN_COLUMNS},
    **{c: {"text", "int", "float", "null", "time", "time_ns", "date"} for c in _TIME_COLUMNS},
    **{c: {"text", "int", "float", "null", "bool"} for c in _BOOL_COLUMNS},
    "resource_ids": {"text", "int", "float", "null", "list"},
}
# ISO 8601 as `parse_time` reads it, narrowed to a date alone, or a date and hours:minutes
# with optional seconds, 1-6 fraction digits and an offset (" UTC" is its +00:00; one blank
# may precede `Z` or the offset, as Snowflake writes a TIMESTAMP_TZ: `… 00:00:00.000 +0000`)
_ISO = (r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})"
        r"(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?( ?Z| UTC| ?([+-])([0-9]{2})(?::?([0-9]{2}))?)?)?$")
_ISO_PARTS = "['y', 'mo', 'd', 'h', 'mi', 's', 'f', 'zone', 'sign', 'zh', 'zm']"
# the commonest spelling, to the second without a zone (DuckDB's own CSV times): `_ISO` with
# neither fraction nor zone, read without its eleven captures (0.27 → 0.05–0.08 s a column at
# 100k runs); `plain_time` is `iso_time` of its parts
_PLAIN_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
# the next commonest, to the second with a fraction or a zone (`…T12:00:00.000Z`, JavaScript's
# and most JSON writers'; `…+02:00`): `_ISO`'s matches of it have their parts at fixed places,
# which `common_time` reads without the captures (~1 s a column at 100k runs)
_COMMON_TIME = _PLAIN_TIME + r"(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})?"
# a JSON array of strings without escapes or control characters, read as json.loads reads it
_JSON_STRINGS = (r'\[[ \t\n\r]*(?:"[^"\\\x00-\x1f]*"(?:[ \t\n\r]*,[ \t\n\r]*"[^"\\\x00-\x1f]*")*)?'
                 r"[ \t\n\r]*\]")
# a character of an id written without quotes
_ID_CHAR = r"[A-Za-z0-9._:/@+=-]"
# a list of unquoted ids, each starting with a letter: `[i-0a, vol-0b]`
_BARE_ITEM = rf"[A-Za-z]{_ID_CHAR}*"
_BARE_LIST = rf"\[ *(?:{_BARE_ITEM}(?: *, *{_BARE_ITEM})*)? *\]"
# ids without blanks, quotes or brackets, `,` or `;` between them (nearly every file): what
# `split_resource_ids` returns is the split itself, with nothing to strip or to doubt
_PLAIN_IDS = rf"{_ID_CHAR}+(?:[,;]{_ID_CHAR}+)*"
# the same with blanks around the separators (`i-0a, vol-0b`): split there, blanks dropped
_SPACED_IDS = rf"{_ID_CHAR}+(?: *[,;] *{_ID_CHAR}+)+"
# Python's list repr (`['i-0a', 'vol-0b']`: a list a pandas or csv writer stringified) is no
# JSON, so `_resource_ids` strips the brackets and splits it; each id a run of id characters
_REPR_LIST = rf"\[ *'{_ID_CHAR}+'(?: *, *'{_ID_CHAR}+')* *\]"
# the words Python's json reads in an unquoted list (`[true, NaN]` is JSON to it)
_JSON_WORD = "(?:true|false|null|NaN|Infinity)"
_JSON_WORDS = rf"\[ *{_JSON_WORD}(?: *, *{_JSON_WORD})* *\]"
# printable ASCII, tab included: there RE2's \s is Python's, and no case mapping surprises
_ASCII = r"[\x20-\x7e\t]*"
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_WHOLE = r"[0-9]{1,9}(?:\.0*)?"
_STATUSES = ", ".join(f"'{s}'" for s in sorted(STATUSES - set(STATUS_ALIASES)))
_STATUS_CASE = "".join(f" WHEN '{alias}' THEN '{status}'"
                       for alias, status in sorted(STATUS_ALIASES.items()))
_PURPOSES = ", ".join(f"'{p}'" for p in sorted(PURPOSES))

_MACROS = f"""
CREATE MACRO py_strip(x) AS CASE
    WHEN ord(x) BETWEEN 33 AND 126 AND ord(right(x, 1)) BETWEEN 33 AND 126 THEN x
    ELSE regexp_replace(x, '^[{_PY_SPACE}]+|[{_PY_SPACE}]+$', '', 'g') END;
CREATE MACRO py_text(x) AS nullif(py_strip(x), '');
CREATE MACRO float_doubt(x) AS NOT isnan(x) AND (abs(x) >= 9007199254740992 OR x <> trunc(x));
CREATE MACRO float_text(x) AS CASE WHEN NOT isnan(x) AND NOT float_doubt(x)
    THEN CAST(CAST(x AS BIGINT) AS VARCHAR) END;
-- a whole number of 12 or 14 digits that spells a date and time is a compact one
-- (`parse_time`, `YYYYMMDDHHMM[SS]`): NULL here, so the row reader reads it
CREATE MACRO compact_time(t) AS CASE WHEN length(t) IN (12, 14) THEN TRY_CAST(
    substr(t, 1, 4) || '-' || substr(t, 5, 2) || '-' || substr(t, 7, 2) || ' '
    || substr(t, 9, 2) || ':' || substr(t, 11, 2) || ':'
    || coalesce(nullif(substr(t, 13, 2), ''), '00') AS TIMESTAMP) END;
CREATE MACRO epoch_time(t) AS CASE WHEN regexp_full_match(t, '[0-9]{{9,14}}')
    AND compact_time(t) IS NULL THEN CASE
    WHEN CAST(t AS BIGINT) <= 100000000000 THEN epoch_ms(CAST(t AS BIGINT) * 1000)
    -- below 2^32 s the float division by 1000 in parse_time rounds back to the millisecond
    WHEN CAST(t AS BIGINT) < 4294967296000 THEN epoch_ms(CAST(t AS BIGINT)) END END;
CREATE MACRO iso_time(p) AS CASE
    WHEN p.y <> '' AND coalesce(TRY_CAST(p.h AS INT), 0) < 24
        AND coalesce(TRY_CAST(p.mi AS INT), 0) < 60 AND coalesce(TRY_CAST(p.s AS INT), 0) < 60
        AND coalesce(TRY_CAST(p.zh AS INT), 0) < 24 AND coalesce(TRY_CAST(p.zm AS INT), 0) < 60
    THEN TRY_CAST(p.y || '-' || p.mo || '-' || p.d || ' ' || coalesce(nullif(p.h, ''), '00')
                  || ':' || coalesce(nullif(p.mi, ''), '00') || ':'
                  || coalesce(nullif(p.s, ''), '00') || '.' || coalesce(nullif(p.f, ''), '0')
                  AS TIMESTAMP)
        - to_minutes(CASE p.sign WHEN '' THEN 0 ELSE (CASE p.sign WHEN '-' THEN -1 ELSE 1 END)
                     * (CAST(p.zh AS INT) * 60 + coalesce(TRY_CAST(p.zm AS INT), 0)) END) END;
-- a `_COMMON_TIME` read by place: `iso_time` of what `_ISO`'s captures would hold (the
-- zone: none, `Z`, or ±hh:mm in its last six characters)
CREATE MACRO zone_length(t) AS CASE WHEN ends_with(t, 'Z') THEN 1
    WHEN substr(t, -6, 1) IN ('+', '-') THEN 6 ELSE 0 END;
CREATE MACRO common_time(t) AS CASE
    WHEN CAST(substr(t, 12, 2) AS INT) < 24 AND CAST(substr(t, 15, 2) AS INT) < 60
        AND CAST(substr(t, 18, 2) AS INT) < 60 AND (zone_length(t) < 6
            OR CAST(substr(t, -5, 2) AS INT) < 24 AND CAST(substr(t, -2, 2) AS INT) < 60)
    THEN TRY_CAST(substr(t, 1, 10) || ' ' || substr(t, 12, length(t) - 11 - zone_length(t))
                  AS TIMESTAMP)
        - to_minutes(CASE WHEN zone_length(t) = 6
                     THEN (CASE substr(t, -6, 1) WHEN '-' THEN -1 ELSE 1 END)
                          * (CAST(substr(t, -5, 2) AS INT) * 60 + CAST(substr(t, -2, 2) AS INT))
                     ELSE 0 END) END;
CREATE MACRO plain_time(t) AS CASE
    WHEN CAST(substr(t, 12, 2) AS INT) < 24 AND CAST(substr(t, 15, 2) AS INT) < 60
        AND CAST(substr(t, 18, 2) AS INT) < 60
    THEN TRY_CAST(substr(t, 1, 10) || ' ' || substr(t, 12, 8) AS TIMESTAMP) END;
CREATE MACRO py_list(xs) AS list_filter(list_transform(xs, lambda x: py_strip(x)),
                                        lambda x: x IS NOT NULL AND x <> '');
-- `split_resource_ids`: split on `,` and `;` only, each id stripped of blanks and quotes; a
-- part with a blank or `|` inside (an Azure id with a space, or ids run together) is NULL,
-- a doubt: the record-by-record path keeps it whole or says it is ambiguous
CREATE MACRO id_part(part) AS py_strip(trim(py_strip(part), '''"'));
CREATE MACRO py_split(x) AS CASE
    WHEN len(list_filter(regexp_split_to_array(x, '[,;]'),
                         lambda part: regexp_matches(id_part(part), '[{_PY_SPACE}|]'))) = 0
    THEN list_filter(list_transform(regexp_split_to_array(x, '[,;]'), lambda part: id_part(part)),
                     lambda part: part <> '') END;
CREATE MACRO resource_list(t) AS CASE
    WHEN t IS NULL THEN []::VARCHAR[]
    WHEN regexp_full_match(t, '{_PLAIN_IDS}') THEN regexp_split_to_array(t, '[,;]')
    WHEN regexp_full_match(t, '{_JSON_STRINGS}')
        THEN py_list(regexp_extract_all(t, '"([^"]*)"', 1))
    -- the common spellings below by a pattern alone: `py_split`'s lambdas cost ~1 s per
    -- 100,000 runs, a pattern ~0.1 s
    WHEN regexp_full_match(t, '{_SPACED_IDS}') THEN regexp_split_to_array(t, ' *[,;] *')
    WHEN regexp_full_match(t, '{_REPR_LIST.replace("'", "''")}')
        THEN regexp_extract_all(t, '{_ID_CHAR}+')
    -- an unquoted list (DuckDB's own CSV spelling, `[i-0a, vol-0b]`) with an item that is no
    -- JSON word cannot be JSON: `_resource_ids` strips the brackets and splits it
    WHEN regexp_full_match(t, '{_BARE_LIST}') AND NOT regexp_full_match(t, '{_JSON_WORDS}')
        THEN regexp_extract_all(t, '{_ID_CHAR}+')
    -- a PostgreSQL array (`{{i-0a,i-0b}}`, as psql and COPY write a text[]): the row reader
    WHEN starts_with(t, '{{') AND ends_with(t, '}}') THEN NULL
    WHEN regexp_full_match(t, '{_ASCII}') AND NOT starts_with(t, '[') THEN py_split(t)
    -- a '[' list quoted with ' and never with " cannot be JSON: `_resource_ids` splits it
    WHEN regexp_full_match(t, '{_ASCII}') AND contains(t, '''') AND NOT contains(t, '"')
        THEN py_split(trim(t, '[]')) END;
CREATE MACRO py_number(t) AS CASE WHEN regexp_full_match(t, '{_NUMBER}')
    THEN TRY_CAST(t AS DOUBLE) END;
CREATE MACRO py_bool(t) AS CASE WHEN t IS NULL THEN false
    WHEN NOT regexp_full_match(t, '[A-Za-z0-9]+') THEN NULL
    WHEN lower(t) IN ({", ".join(f"'{v}'" for v in sorted(TRUE_WORDS))}) THEN true
    WHEN lower(t) IN ({", ".join(f"'{v}'" for v in sorted(FALSE_WORDS - {""}))}) THEN false END;
"""


def _arrow_kind(type_: pa.DataType) -> str | None:
    """How the SQL reads a parquet column of this type; None: it does not."""
    if pa.types.is_dictionary(type_):
        return "text" if _arrow_kind(type_.value_type) == "text" else None
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or (
            pa.types.is_string_view(type_)):
        return "text"
    if pa.types.is_integer(type_):
        return "int"
    if pa.types.is_float32(type_) or pa.types.is_float64(type_):
        return "float"
    if pa.types.is_boolean(type_):
        return "bool"
    if pa.types.is_null(type_):
        return "null"
    if pa.types.is_timestamp(type_):
        return "time_ns" if type_.unit == "ns" else "time"
    if pa.types.is_date32(type_):
        return "date"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        value = type_.value_type
        return "list" if pa.types.is_string(value) or pa.types.is_large_string(value) else None
    return None


def _column_sql(column: str, kind: str) -> tuple[str, str, list[str]]:
    """One column's text as `field_text` sees it (or its typed value), its run value, and what
    makes a row doubtful: SQL over `raw`, over stage 1 (`t_…`) and over both stages."""
    raw, t = f"raw.{column}", f"t_{column}"
    text = {"text": f"py_text({raw})", "int": f"CAST({raw} AS VARCHAR)",
            "float": f"float_text({raw})", "null": "NULL::VARCHAR"}.get(kind, raw)
    doubts = [f"float_doubt({t}_raw)"] if kind == "float" else []
    if column in _TIME_COLUMNS and kind in ("time", "time_ns", "date"):
        value = f"CAST({t} AS TIMESTAMP)"
        doubts += [f"epoch_ns({t}) % 1000 <> 0"] if kind == "time_ns" else []
    elif column in _TIME_COLUMNS:
        value = (f"CASE WHEN regexp_full_match({t}, '{_PLAIN_TIME}') THEN plain_time({t}) "
                 f"WHEN regexp_full_match({t}, '{_COMMON_TIME}') "
                 f"THEN common_time({t}) "
                 f"ELSE coalesce(epoch_time({t}), "
                 f"iso_time(regexp_extract({t}, '{_ISO}', {_ISO_PARTS}))) END")
        doubts.append(f"{t} IS NOT NULL AND {column} IS NULL")
    elif column == "resource_ids" and kind == "float":     # pandas' NaN for "no list"
        text, value, doubts = raw, "[]::VARCHAR[]", [f"NOT isnan({t})"]
    elif column == "resource_ids":
        value = f"py_list(coalesce({t}, []))" if kind == "list" else f"resource_list({t})"
        doubts.append(f"{column} IS NULL")
    elif column in _NUMBER_COLUMNS and kind == "float":
        text, doubts = raw, [f"isinf({t})"]
        value = f"CASE WHEN isnan({t}) THEN NULL WHEN {t} = 0 THEN 0.0 ELSE {t}::DOUBLE END"
    elif column in _NUMBER_COLUMNS:
        value = f"py_number({t})"
        doubts.append(f"{t} IS NOT NULL AND ({column} IS NULL OR isinf({column}))")
    elif column in _BOOL_COLUMNS:
        value = f"coalesce({t}, false)" if kind == "bool" else f"py_bool({t})"
        doubts.append(f"{column} IS NULL")
    elif column == "gpus":
        value = f"CASE WHEN regexp_full_match({t}, '{_WHOLE}') " \
                f"THEN CAST(split_part({t}, '.', 1) AS INTEGER) END"
        doubts += [f"{t} IS NOT NULL AND gpus IS NULL", f"gpus > {MAX_GPUS}"]
    elif column == "status":
        value = f"CASE upper({t}){_STATUS_CASE} ELSE upper({t}) END"
        doubts.append(f"NOT coalesce(regexp_full_match({t}, '[A-Za-z]+') "
                      f"AND status IN ({_STATUSES}), false)")
    elif column == "purpose":
        value = f"coalesce(lower({t}), CASE WHEN t_search_id IS NOT NULL THEN 'search' END)"
        doubts.append(f"{t} IS NOT NULL AND NOT (regexp_full_match({t}, '[A-Za-z]+') "
                      f"AND lower({t}) IN ({_PURPOSES}))")
    elif column == "trigger":
        # lower case as Python writes it: ASCII here (`data-drift`, `cron job`), the rest
        # record by record (one such row sends the whole file there)
        value = f"lower({t})"
        doubts.append(f"{t} IS NOT NULL AND NOT regexp_full_match({t}, '[\x00-\x7F]*')")
    elif column == "source":
        value = f"coalesce({t}, $source)"
    else:
        value = t
    doubts += {
        "run_id": ["run_id IS NULL"],
        "start_time": ["start_time IS NULL", "year(start_time) NOT BETWEEN 1000 AND 9000"],
        "end_time": ["end_time < start_time", "year(end_time) NOT BETWEEN 1000 AND 9000"],
        "gpu_utilization": ["NOT gpu_utilization BETWEEN 0 AND 100"],
    }.get(column, [])
    return text, value, doubts


def _normalize_sql(kinds: dict[str, str]) -> str:
    """A SELECT over the table `raw` (the file's columns under their RUN_COLUMNS names, rows
    in file order) giving the runs' RUN_COLUMNS, `n` (the row's place) and `doubt`."""
    texts, values, doubts = [], [], []
    for column in RUN_COLUMNS:
        kind = kinds.get(column, "null")
        text, value, column_doubts = _column_sql(column, kind)
        texts.append(f"{text} AS t_{column}")
        if kind == "float":
            texts.append(f"raw.{column} AS t_{column}_raw")
        values.append(f"{value} AS {column}")
        doubts += column_doubts
    return f"""
        WITH texts AS (SELECT raw.n, {", ".join(texts)} FROM raw),
        runs AS (SELECT *, {", ".join(values)} FROM texts)
        SELECT n, {", ".join(RUN_COLUMNS)}, {" OR ".join(f"({d}) IS TRUE" for d in doubts)}
            AS doubt
        FROM runs ORDER BY n"""


# a quoted CSV field as Python's csv module and DuckDB both read it: quotes inside doubled,
# closing the field (`_unquoted` checks that it opens one). Starting on the quote itself lets
# the scan jump from quote to quote: 0.11 s for a 9 MB runs file, where a look-behind for the
# field's start in the pattern took 0.52 s
_QUOTED_FIELD = re.compile(r'"(?:[^"]|"")*+"(?=,|\r?\n|\Z)')


def _unquoted(text: str) -> str | None:
    """`text` without its quoted fields, or None when one does not open its field (at the
    start of the text, or after `,` or a line break)."""
    kept, last = [], 0
    for field in _QUOTED_FIELD.finditer(text):
        if field.start() and text[field.start() - 1] not in ",\n":
            return None
        kept.append(text[last:field.start()])
        last = field.end()
    kept.append(text[last:])
    return "".join(kept)


def _csv_raw(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str] | None:
    text = path.read_bytes().decode("utf-8-sig")
    if csv_delimiter(text, RUN_COLUMNS) != ",":
        return None  # semicolons, tabs, bars: read record by record (`read_runs`)
    if '"' in text or "\r" in text:
        # DuckDB reads a quote after a blank, a quote ending a field early or a lone \r
        # otherwise than Python does
        unquoted = _unquoted(text)
        if unquoted is None or '"' in unquoted or re.search(r"\r(?!\n)", unquoted):
            return None
    header = next(csv.reader(io.StringIO(text, newline="")), [])
    names = [h.strip().lower() for h in header]
    places = {name: i for i, name in enumerate(names) if name in RUN_COLUMNS}
    if len(places) != len([n for n in names if n in RUN_COLUMNS]) or any(
            c not in places for c in REQUIRED):
        return None
    cells = [f"c{i}" for i in range(len(header))]
    con.execute("""CREATE TABLE cells AS SELECT * FROM read_csv(
        $path, columns = $columns, header = false, all_varchar = true, auto_detect = false,
        delim = ',', quote = '"', escape = '"', comment = '', null_padding = true,
        strict_mode = true)""", {"path": str(path), "columns": dict.fromkeys(cells, "VARCHAR")})
    first = con.execute("SELECT * FROM cells WHERE rowid = 0").fetchall()
    if [[cell or "" for cell in row] for row in first] != [header]:
        return None
    # csv refuses a field of csv.field_size_limit() characters; DuckDB keeps it
    # (a line break by `contains`, not a regular expression: 0.05 s against 0.13 at 100k runs)
    odd = " OR ".join(f"strlen({c}) >= {csv.field_size_limit()} OR contains({c}, chr(13)) "
                      f"OR contains({c}, chr(10))" for c in cells)
    if con.execute(f"SELECT coalesce(bool_or({odd}), false) FROM cells").fetchall()[0][0]:
        return None
    # a row with a cell that is not blank (an OR: the first such cell decides, 0.3 s against
    # 0.5-0.7 s for NOT of every cell blank at 100k runs)
    filled = " OR ".join(f"coalesce(py_strip({c}), '') <> ''" for c in cells)
    con.execute(f"""CREATE TABLE raw AS
        SELECT rowid AS n, {", ".join(f"{cells[i]} AS {name}" for name, i in places.items())}
        FROM cells WHERE rowid > 0 AND ({filled}) ORDER BY rowid""")
    return dict.fromkeys(places, "text")


def _parquet_raw(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str] | None:
    # the types `_parquet_records` sees, without the start-up cost of pq.read_table's datasets
    table = pq.ParquetFile(path).read()
    names = table.column_names
    if len(set(names)) != len(names) or any(c not in names for c in REQUIRED):
        return None
    kinds = {c: _arrow_kind(table.schema.field(c).type) for c in RUN_COLUMNS if c in names}
    if any(kind not in _KINDS[c] for c, kind in kinds.items()):
        return None
    # 1, 2, … by DuckDB: a Python scalar handed to pyarrow (fill_null(1)) makes it import
    # pandas, 0.2–0.4 s of a re-run that reads only the runs
    order = con.sql(f"SELECT range AS n FROM range(1, {table.num_rows + 1})").to_arrow_table()
    con.register("raw", table.select(list(kinds)).append_column("n", order["n"]))
    return kinds


# a JSON value's Python type → how the SQL reads a column of it, and as what Arrow type
_JSON_KINDS = {str: "text", bool: "bool", int: "int", float: "float", list: "list"}
_JSON_ARROW = {"text": pa.string(), "bool": pa.bool_(), "int": pa.int64(),
               "float": pa.float64(), "list": pa.list_(pa.string())}


def _json_column(values: list) -> tuple[str, pa.Array] | None:
    """One column of JSON records as the Arrow array a parquet file of the same values would
    hold, and its kind; None when its values are of mixed types, objects, lists of other than
    text, or integers beyond 64 bits — or floats of 2^63 and more: orjson reads an integer
    beyond 64 bits as a float, where json reads it as the integer."""
    types = set(map(type, values)) - {type(None)}
    if not types:
        return "null", pa.nulls(len(values))
    if types == {int, float}:       # a writer that prints 1.0 as 1: exact as a float below 2^53
        if any(type(v) is int and abs(v) >= 2**53 for v in values):
            return None
        values, types = [float(v) if type(v) is int else v for v in values], {float}
    if types == {float} and any(v is not None and abs(v) >= 2**63 for v in values):
        return None
    kind = _JSON_KINDS.get(types.pop()) if len(types) == 1 else None
    if kind is None or kind == "list" and any(
            type(item) is not str for value in values if value for item in value
            if item is not None):
        return None
    return kind, pa.array(values, _JSON_ARROW[kind])


def _json_raw(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str] | None:
    """A JSONL file (or a JSON array) as `raw`: the records `read_runs` reads, column by
    column in the types a parquet file would give them, so the parquet rules apply. orjson
    parses them (2.5× json's speed): where it parses a line at all, it gives what json gives
    but for integers beyond 64 bits (`_json_column` refuses those). What it refuses but json
    reads (`NaN`, which Python's json writes for a missing metric; `1e400`; lone surrogates)
    json parses again here."""
    for loads in (orjson.loads, json.loads):
        try:
            names, records = read_records(path, "", loads=loads)
            break
        except SourceError:
            continue
    else:                           # bad JSON: `read_runs` words the error
        return None
    present = set(names)
    if not records or any(c not in present for c in REQUIRED):
        return None
    columns, kinds = {}, {}
    for column in RUN_COLUMNS:
        if column not in present:
            continue
        try:
            found = _json_column([record.get(column) for _, record in records])
        except (pa.ArrowException, OverflowError, TypeError, ValueError):   # a lone surrogate
            return None
        if found is None or found[0] not in _KINDS[column]:
            return None
        kinds[column], columns[column] = found
    order = con.sql(f"SELECT range AS n FROM range(1, {len(records) + 1})").to_arrow_table()
    con.register("raw", pa.table(columns).append_column("n", order["n"]))
    return kinds


def _fast_runs(path: Path, source: str) -> pa.Table | None:
    """The file's runs by SQL, or None when SQL cannot vouch for every row (or the file)."""
    raw = {"json": _json_raw, "parquet": _parquet_raw, "csv": _csv_raw}[file_format(path)]
    with duckdb.connect() as con:
        try:
            con.execute(f"SET memory_limit = '{_MEMORY_LIMIT}'; SET TimeZone = 'UTC';")
            con.execute(_MACROS)
            kinds = raw(con, path)
            if kinds is None:
                return None
            runs = con.sql(_normalize_sql(kinds), params={"source": source}).to_arrow_table()
            if pc.any(runs["doubt"]).as_py():
                return None
            if pc.count_distinct(runs["run_id"]).as_py() < runs.num_rows:
                runs = _collapse_duplicates(con, runs)
        except (duckdb.Error, pa.ArrowException, OSError, ValueError):
            return None
    return None if runs is None else runs.drop_columns(["n", "doubt"]).cast(RUN_SCHEMA)


def _collapse_duplicates(con: duckdb.DuckDBPyConnection, runs: pa.Table) -> pa.Table | None:
    """A run listed twice alike is kept once, where it first appears; listed twice unlike,
    None: `read_runs` names the row."""
    con.register("runs", runs)
    (alike,) = con.execute("""
        SELECT count(DISTINCT run_id) = (SELECT count(*) FROM (
            SELECT DISTINCT * EXCLUDE (n, doubt) FROM runs))
        FROM runs""").fetchall()[0]
    if not alike:
        return None
    return con.sql("""SELECT * FROM runs
        QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY n) = 1 ORDER BY n
        """).to_arrow_table()
