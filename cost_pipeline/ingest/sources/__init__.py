"""Source readers: each turns one configured input into rows of the normalized tables."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

# `scheme://user:password@` or `scheme://token@`: the user info of any URI in a text
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:?#]*)"
                       r"(?::[^\s/@?#]*)?@")
# `?token=…`, `&access_token=…`, `"password": "…"`, `secret: …`, `Bearer …`
_SECRET_VALUE = re.compile(
    r"(?i)(?P<key>(?:\b(?:[a-z0-9_-]*(?:token|secret|password|passwd)|api[_-]?key|apikey|"
    r"x-amz-signature|x-amz-credential|x-amz-security-token|authorization)[\"']?\s*[:=]|"
    r"[?&](?:key|sig|signature|code|auth)=)\s*[\"']?(?:bearer\s+|basic\s+)?)"
    r"(?P<value>[^\s\"'&#,;)}\]]+)")
_BEARER = re.compile(r"(?i)\b(?P<kind>bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")


def redact(text: str) -> str:
    """`text` with the secrets a URI or header may carry replaced by `***`: the password of
    the user info (`http://alice:***@host/`; a user info without a password is all secret:
    `https://***@host/`), token-like query and key-value parameters (`?token=***`,
    `access_token=***`, `X-Amz-Signature=***`), and `Bearer ***`. Every message, log line,
    metadata value and alert that may quote a configured URI passes through it."""
    if not text:
        return text

    def userinfo(m: re.Match) -> str:
        has_password = m.group(0)[len(m["scheme"]) + len(m["user"]):].startswith(":")
        user = m["user"] if has_password and m["user"] else "***"
        return f"{m['scheme']}{user}:***@" if has_password and m["user"] else \
            f"{m['scheme']}{user}@"

    text = _USERINFO.sub(userinfo, str(text))
    text = _SECRET_VALUE.sub(lambda m: f"{m['key']}***", text)
    return _BEARER.sub(lambda m: f"{m['kind']} ***", text)


class SourceError(ValueError):
    """Bad input: names the source, the file or table, and the row or field. Its message
    never shows a URI's credentials (`redact`)."""

    def __init__(self, source: str, where: str | None, problem: str):
        where = redact(where) if where else where
        problem = redact(problem)
        self.source, self.where, self.problem = source, where, problem
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def source_names(entries: list, default: str = "") -> list[str]:
    """A distinct, stable name per configured entry: its `name`, else its kind (+ index)."""
    names: list[str] = []
    for i, entry in enumerate(entries):
        name = base = getattr(entry, "name", None) or entry.kind
        n = i + 1
        while name in names:  # `focus3` may be an entry's own name: the next free one
            name, n = f"{base}{n}", n + 1
        names.append(name)
    return names



def first_named(names: list[str], limit: int) -> str:
    """`names` for a message: the first `limit`, then how many more (`a, b, … and 3 more`)."""
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f", … and {more} more" if more > 0 else "")

# the largest cost or quantity the warehouse sums exactly (the report's DECIMAL(38, 10)): an
# amount at or beyond it, or not finite (inf, NaN), is refused where it is read, named by its
# file, row and field, never left to fail a later step
MAX_AMOUNT = 1e28
MAX_AMOUNT_TEXT = "1e28"
# accelerators of one resource or run: far above any machine, far below INTEGER's range
MAX_ACCELERATORS = 1_000_000


def utc_wall_clock_sql(instant: str) -> str:
    """SQL for a TIMESTAMPTZ `instant` as the naive UTC timestamp the tables hold. Its epoch
    read back: exact, and without `timezone('UTC', …)`'s calendar arithmetic, which costs
    ~0.1 s per column per 2M lines. An infinite instant has no epoch: it becomes NULL, which
    the required-value checks then name."""
    return f"make_timestamp(epoch_us({instant}))"


def csv_delimiter(text: str, known: Collection[str]) -> str:
    """The delimiter of a CSV file (its text, or its header line): among comma, semicolon (a
    spreadsheet's CSV where the decimal mark is a comma), tab and bar, the one that splits
    its header line into the most `known` (lower-case) column names; a comma where none
    does better."""
    line = re.match(r"[^\r\n]*", text).group(0)  # (the reader words a header it cannot read)
    found = [(sum(h.strip().strip('"').lower() in known for h in line.split(d)), -rank, d)
             for rank, d in enumerate((",", ";", "\t", "|"))]
    return max(found)[2]


def text_instant_sql(text: str) -> str:
    """SQL for the text `text` as the instant it spells (TIMESTAMPTZ; NULL where it spells
    none): ISO 8601 as DuckDB reads it (`…T00:00:00Z`, `…+02:00`, `… 00:00:00 UTC`), and
    with a blank before its offset, as Snowflake writes a TIMESTAMP_TZ by default
    (`2026-07-01 00:00:00.000 +0000`). The second reading runs only where the first fails."""
    return (f"coalesce(TRY_CAST({text} AS TIMESTAMPTZ), TRY_CAST(regexp_replace("
            f"CAST({text} AS VARCHAR), '(\\d)\\s+([+-]\\d\\d(:?\\d\\d)?|Z)$', '\\1\\2') "
            "AS TIMESTAMPTZ))")


def sql_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier (a file's column, whatever its spelling)."""
    return '"' + name.replace('"', '""') + '"'


def sql_literal(text: str) -> str:
    """`text` as a SQL string literal (a path or name written into a statement or a view)."""
    return "'" + text.replace("'", "''") + "'"


def bad_amount_sql(expr: str) -> str:
    """SQL true when `expr` (a DOUBLE) is not a finite amount below MAX_AMOUNT."""
    return f"(NOT isfinite({expr}) OR abs({expr}) >= {MAX_AMOUNT_TEXT})"


def bad_amount(value: float) -> bool:
    """`bad_amount_sql` of a value in hand: not a finite amount below MAX_AMOUNT."""
    return not math.isfinite(value) or abs(value) >= MAX_AMOUNT
