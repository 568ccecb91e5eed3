"""AWS Data Exports CUR 2.0 → the raw view `cur_raw` that `assets/billing_facts_cur2.sql`
normalizes to FOCUS columns.

Layout: `<export>/data/BILLING_PERIOD=YYYY-MM/…/*.parquet` with the month's manifest at
`<export>/metadata/BILLING_PERIOD=YYYY-MM/*-Manifest.json`. The manifest's `dataFiles` (full
`s3://` URIs) are the month's current delivery; without a manifest every parquet file below
the month's folder is the month. Only the columns the normalization needs are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import (
    SourceError,
    sql_identifier,
    sql_literal,
    text_instant_sql,
    utc_wall_clock_sql,
)
from cost_pipeline.ingest.sources.arrow_types import is_binary, is_text
from cost_pipeline.ingest.sources.local_files import confined, walk_files
from cost_pipeline.ingest.sources.map_columns import (
    entry_list_shape,
    listed_entries_sql,
    names_a_key_twice_sql,
)
from cost_pipeline.months import month_bounds

# column → DuckDB type used when the export lacks it (optional columns only)
OPTIONAL_COLUMNS: dict[str, str] = {
    "identity_time_interval": "VARCHAR",
    "bill_billing_period_start_date": "TIMESTAMP",
    "bill_invoice_id": "VARCHAR",
    "line_item_currency_code": "VARCHAR",
    "line_item_net_unblended_cost": "DOUBLE",
    "line_item_operation": "VARCHAR",
    "line_item_tax_type": "VARCHAR",
    "line_item_availability_zone": "VARCHAR",
    "line_item_usage_amount": "DOUBLE",
    "product_instance_type": "VARCHAR",
    "product_product_family": "VARCHAR",
    "product_region_code": "VARCHAR",
    "product_servicecode": "VARCHAR",
    "product_sku": "VARCHAR",
    "product": "MAP(VARCHAR, VARCHAR)",
    "pricing_unit": "VARCHAR",
    # the line at AWS's public on-demand price (ListCost) and its pricing term (Spot, OnDemand)
    "pricing_public_on_demand_cost": "DOUBLE",
    "pricing_term": "VARCHAR",
    "resource_tags": "MAP(VARCHAR, VARCHAR)",
    # every tag of the line, keyed by its source (`resourceTags/…`, `accountTag/…`,
    # `costCategory/…`, `userAttribute/…`): an export may select it instead of resource_tags
    # (`resource_tags_expr`)
    "tags": "MAP(VARCHAR, VARCHAR)",
    "reservation_reservation_a_r_n": "VARCHAR",
    "reservation_effective_cost": "DOUBLE",
    "reservation_net_effective_cost": "DOUBLE",
    "reservation_unused_amortized_upfront_fee_for_billing_period": "DOUBLE",
    "reservation_net_unused_amortized_upfront_fee_for_billing_period": "DOUBLE",
    "reservation_unused_recurring_fee": "DOUBLE",
    "reservation_net_unused_recurring_fee": "DOUBLE",
    "savings_plan_savings_plan_effective_cost": "DOUBLE",
    "savings_plan_net_savings_plan_effective_cost": "DOUBLE",
    "savings_plan_total_commitment_to_date": "DOUBLE",
    "savings_plan_used_commitment": "DOUBLE",
    # split cost allocation data (INCLUDE_SPLIT_COST_ALLOCATION_DATA): EKS pods / ECS tasks.
    # Only what the normalization reads; the unused cost is the parent's remainder.
    "split_line_item_parent_resource_id": "VARCHAR",
    "split_line_item_split_cost": "DOUBLE",
    "split_line_item_net_split_cost": "DOUBLE",
}
REQUIRED_COLUMNS: dict[str, str] = {
    "identity_line_item_id": "VARCHAR",
    "line_item_line_item_type": "VARCHAR",
    "line_item_usage_start_date": "TIMESTAMP",
    "line_item_usage_end_date": "TIMESTAMP",
    "line_item_resource_id": "VARCHAR",
    "line_item_unblended_cost": "DOUBLE",
    "line_item_usage_type": "VARCHAR",
    "line_item_product_code": "VARCHAR",
}
RESOURCE_ID_FIX = (
    "the export has no line_item_resource_id column: it was created without resource IDs. "
    "Recreate the Data Export (CUR 2.0) with 'Include resource IDs' (INCLUDE_RESOURCES) "
    "and hourly time granularity"
)
# the required columns named where a file holds none of them (`not_cur2_file`)
NAMED_REQUIRED = ("identity_line_item_id", "line_item_unblended_cost",
                  "line_item_usage_start_date")
# FOCUS's cost and charge-period columns (`focus.COST_AND_USAGE_COLUMNS`), in lower case: a
# FOCUS file listed in a CUR month is said to be one
FOCUS_COLUMNS = frozenset({"billedcost", "effectivecost", "chargeperiodstart"})
# the data files of an export whose file format is TEXT_OR_CSV (Compression GZIP or ZIP),
# read by `cur2_csv`
TEXT_EXPORT_SUFFIXES = (".csv", ".csv.gz", ".csv.zip", ".gz", ".zip")
GRANULARITY_FIX = (
    "the export is not hourly. Recreate the Data Export (CUR 2.0) with time granularity "
    "'Hourly' (TIME_GRANULARITY HOURLY) and 'Include resource IDs' (INCLUDE_RESOURCES)"
)

# a legacy Cost and Usage Report's column names (`lineItem/UnblendedCost`, its CSV's)
LEGACY_COLUMN = re.compile(r"(identity|bill|lineItem|product|pricing|reservation|savingsPlan|"
                           r"resourceTags|costCategory|discount|splitLineItem)/", re.IGNORECASE)
# the resource tags of an export whose query selects them as columns, one a key
# (`resource_tags.user_team` → `resource_tags_user_team`, as a legacy CUR's Athena parquet
# names them), where it selects no map (`flat_tags_sql`)
FLAT_TAG_PREFIX = "resource_tags_"

# the columns DuckDB's parquet reader adds for the lineage of a line (`register_raw`): a file
# holding one of its own (a copy written by DuckDB with them) is streamed instead
ENGINE_COLUMNS = frozenset({"filename", "file_row_number"})

# what a legacy Cost and Usage Report holds where a CUR 2.0 export holds data/ and metadata/:
# its Athena-ready parquet's `year=YYYY` folders, its manifests' `YYYYMMDD-YYYYMMDD` folders
LEGACY_FOLDER = re.compile(r"year=\d{4}|\d{8}-\d{8}")


@dataclass
class Delivery:
    """One month of one export as delivered: its files and where they came from."""

    source: str
    month: date
    files: list[str] = field(default_factory=list)
    manifest: str | None = None
    execution_id: str | None = None
    has_net_columns: bool = False
    has_split_columns: bool = False  # split cost allocation data (EKS pods, ECS tasks)
    columns: set[str] = field(default_factory=set)
    # timestamp columns stored as text or with a time zone in at least one file
    zoned_timestamps: set[str] = field(default_factory=set)
    # file → (bytes, modification time): the delivery's fingerprint when it has no executionId
    stats: dict[str, tuple[int, str]] = field(default_factory=dict)
    bytes_read: int | None = None  # measured where the read is remote (S3)
    # file → its row count as its footer states it, for local files (`inspect_schema`); S3
    # rows are copied into a table before any filter reads them: None there
    file_rows: dict[str, int] | None = None
    # files holding CUR 2.0's `tags` column but not `resource_tags`, in a delivery where
    # another file holds `resource_tags` (`resource_tags_expr`)
    tags_only_files: set[str] = field(default_factory=set)
    # a map column (resource_tags, tags, product) the files hold as a struct (pandas writes a
    # dict so), a list of entries (`map_columns`) or text (a JSON object), not as a map
    # (`map_value_sql`)
    map_shapes: dict[str, str] = field(default_factory=dict)
    # an amount column (a cost, the usage amount) held as text in at least one file (a CSV
    # export converted to parquet with every column a string): read as the number it spells
    # (`_amount_sql`), text that spells none refused by `check_amounts`
    text_amounts: set[str] = field(default_factory=set)
    # a text column held as binary in at least one file (parquet strings without their UTF8
    # annotation, as Impala and older Hive write them): read as UTF-8 text
    binary_text: bool = False
    # (relation, file SQL, row SQL): the files' own values, row by row, for error messages
    # (`register_raw`)
    raw_relation: tuple[str, str, str] | None = None
    # why no file of the month was found (`no_month_files`), for the warning that says so
    missing: str = ""
    # columns holding one resource tag each (`FLAT_TAG_PREFIX`), read as the lines' tags of
    # the files holding no map of them (`flat_tags_files`)
    flat_tags: list[str] = field(default_factory=list)
    # files holding tags as columns and neither resource_tags nor tags, in a delivery where
    # another file holds a map (the export's query changed within the month)
    flat_tags_files: set[str] = field(default_factory=set)
    # a file holds a column named as DuckDB's reader names its lineage columns
    # (`ENGINE_COLUMNS`, in any case): the delivery is streamed, as from S3
    engine_columns: bool = False


def _month_folder(month: date) -> str:
    return f"BILLING_PERIOD={month:%Y-%m}"


def find_delivery(source: str, export_dir: str, month: date) -> Delivery:
    """The files of `month` in a local export folder (manifest first)."""
    root = Path(export_dir)
    if not root.is_dir():
        raise SourceError(source, str(root), "export folder not found")
    delivery = Delivery(source, month)
    meta = root / "metadata" / _month_folder(month)
    # the newest manifest of the month is its current delivery
    manifests = sorted(
        meta.rglob("*Manifest.json") if meta.is_dir() else [],
        key=lambda p: (p.stat().st_mtime, str(p)),
    )
    if manifests:
        manifest = manifests[-1]
        delivery.manifest = str(manifest)
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SourceError(source, str(manifest), f"unreadable manifest: {exc}") from None
        delivery.execution_id, uris = manifest_files(source, str(manifest), doc)
        one_format(source, str(manifest), uris)
        for uri in uris:
            # confined to the export folder: `../` or a link cannot read another file
            local = _local_file(root, uri)
            confined(root, local, source, str(manifest))
            if not local.is_file():
                raise SourceError(source, str(manifest), f"dataFiles lists {uri}, "
                                  f"not found at {local}")
            delivery.files.append(str(local))
    else:
        folder = root / "data" / _month_folder(month)
        if folder.is_dir():
            found = sorted(str(p) for p, _ in walk_files(folder, source))
            delivery.files = [f for f in found if is_data_file(f)]
            one_format(source, None, delivery.files)
    for file in delivery.files:
        stat = Path(file).stat()
        delivery.stats[file] = (stat.st_size, str(stat.st_mtime))
    if not delivery.files:
        data = root / "data"
        delivery.missing = no_month_files(
            source, str(root), [p.name for p in root.iterdir() if p.is_dir()],
            [p.name for p in data.iterdir() if p.is_dir()] if data.is_dir() else [])
    return delivery


def no_month_files(source: str, where: str, folders: Collection[str],
                   data_folders: Collection[str]) -> str:
    """Why an export folder holds no file of the month, from the folders directly below it
    and below its data/ folder: a SourceError where the path is no CUR 2.0 export's folder
    (its data/ folder; a legacy Cost and Usage Report), else the reason the warning gives."""
    if any(name.startswith("BILLING_PERIOD=") for name in folders):
        raise SourceError(source, where, "this is an export's data/ folder (it holds "
                          "BILLING_PERIOD=YYYY-MM folders): the path is the folder above it, "
                          "<prefix>/<export-name>")
    legacy = sorted(name for name in folders if LEGACY_FOLDER.fullmatch(name))
    if legacy:
        raise SourceError(source, where, f"a legacy Cost and Usage Report ({legacy[0]}/): "
                          "aws_cur2 reads a CUR 2.0 export of AWS Data Exports "
                          "(<prefix>/<export-name>/data/BILLING_PERIOD=YYYY-MM/*.parquet); "
                          "create one with 'Include resource IDs', hourly, in Parquet")
    months = sorted(name.removeprefix("BILLING_PERIOD=") for name in data_folders
                    if name.startswith("BILLING_PERIOD="))
    if months:
        shown = ", ".join(months) if len(months) <= 3 else f"{months[0]} … {months[-1]}"
        return f"the export holds {len(months)} other month(s): {shown}"
    return ("no data/BILLING_PERIOD=YYYY-MM folder yet (an export's first delivery can take "
            "up to 24 hours)")


def is_text_export_file(name: str) -> bool:
    """A data file of an export whose file format is TEXT_OR_CSV."""
    return name.lower().endswith(TEXT_EXPORT_SUFFIXES)


def is_data_file(name: str) -> bool:
    """A month's data file: parquet, or the CSV of an export in that format."""
    return name.lower().endswith(".parquet") or is_text_export_file(name)


def one_format(source: str, manifest: str | None, names: list[str]) -> None:
    """A month's files are parquet or CSV, not both (an export delivers one format; the
    other is a stale delivery left in the folder): refused naming one of each and the
    manifest listing them, if any."""
    text = [name for name in names if is_text_export_file(name)]
    parquet = [name for name in names if not is_text_export_file(name)]
    if text and parquet:
        where = manifest or text[0]
        raise SourceError(source, where, f"the month mixes CSV ({text[0]}) and parquet "
                          f"({parquet[0]}) files: an export delivers one format; remove "
                          "the stale delivery's files" + ("" if manifest else
                                                          " or keep its manifest"))


def manifest_files(source: str, where: str, doc: object) -> tuple[str | None, list[str]]:
    """A parsed manifest's (execution id, data file URIs), its table configuration checked."""
    if not isinstance(doc, dict):
        raise SourceError(source, where, "unreadable manifest: not a JSON object")
    _check_table_configuration(source, where, doc)
    entries = doc.get("dataFiles") or doc.get("reportKeys") or []
    uris = [entry if isinstance(entry, str) else entry.get("key") or entry.get("uri", "")
            for entry in entries]
    return doc.get("executionId") or doc.get("assemblyId"), uris


def _check_table_configuration(source: str, manifest: str, doc: dict) -> None:
    """A manifest that states a daily/monthly granularity or no resource ids is refused."""
    tables = doc.get("tableConfigurations")
    conf = tables.get("COST_AND_USAGE_REPORT") if isinstance(tables, dict) else None
    if not isinstance(conf, dict):
        return
    granularity = str(conf.get("TIME_GRANULARITY", "HOURLY")).upper()
    if granularity != "HOURLY":
        raise SourceError(source, manifest, f"TIME_GRANULARITY is {granularity}: "
                          + GRANULARITY_FIX)
    if str(conf.get("INCLUDE_RESOURCES", "TRUE")).upper() != "TRUE":
        raise SourceError(source, manifest, "INCLUDE_RESOURCES is FALSE: " + RESOURCE_ID_FIX)


def _local_file(root: Path, uri: str) -> Path:
    return root / export_relative(uri, root.name)


def export_relative(uri: str, export_name: str) -> str:
    """The part of a manifest URI after `<export-name>/`, to map onto the export folder read.

    The export name is taken from the URI itself (the segment before `data/BILLING_PERIOD=`),
    so a copy of the export (local or in another bucket) may live under any name."""
    tail = uri.split("://", 1)[-1]
    match = re.search(r"(?:^|/)(data/BILLING_PERIOD=[^/]+/.+)$", tail)
    if match:
        return match.group(1)
    marker = f"/{export_name}/"
    if marker in "/" + tail:
        return ("/" + tail).rsplit(marker, 1)[1]
    # a key relative to the export folder
    return tail.lstrip("/")


_NUMERIC = (pa.types.is_floating, pa.types.is_integer, pa.types.is_decimal)


def inspect_schema(delivery: Delivery,
                   read_schema: Callable[[str], pa.Schema] | None = None) -> None:
    """Read every file's footer: a truncated or non-parquet file, a missing required column
    or a wrongly typed one is a SourceError naming the file and the column. Local files (no
    `read_schema`) also leave their row counts in `delivery.file_rows`, read by pyarrow,
    which decodes no other field: DuckDB's `parquet_file_metadata` fails on a damaged
    `created_by` string that reading the data never looks at."""
    seen: set[str] = set()
    flat: set[str] = set()  # columns of one resource tag each
    wanted = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}
    if read_schema is None:
        delivery.file_rows = {}
    delivery.tags_only_files = set()
    flat_only: set[str] = set()  # files holding tags as columns, no map of them
    shapes: dict[str, tuple[str, str]] = {}  # map column → (its shape, the first file so)
    map_types: dict[str, dict[str, pa.DataType]] = {}  # map column → file → its type
    for file in delivery.files:
        try:
            if read_schema is None:
                footer = pq.read_metadata(file)
                schema = footer.schema.to_arrow_schema()
                delivery.file_rows[file] = footer.num_rows
            else:
                schema = read_schema(file)
        except SourceError:
            raise
        except Exception as exc:  # pyarrow raises several types for broken files
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SourceError(delivery.source, file,
                              f"not a readable parquet file ({reason})") from None
        schema = lower_case_names(delivery.source, file, schema)
        names = set(schema.names)
        if "line_item_resource_id" not in names:
            legacy = [name for name in schema.names if LEGACY_COLUMN.match(name)]
            if legacy:
                raise SourceError(delivery.source, file, f"columns named as a legacy Cost and "
                                  f"Usage Report names them ({legacy[0]}): aws_cur2 reads a "
                                  "CUR 2.0 export of AWS Data Exports (line_item_resource_id); "
                                  "create one with 'Include resource IDs', hourly")
            if not names & REQUIRED_COLUMNS.keys():
                raise not_cur2_file(delivery.source, file, schema.names)
            raise SourceError(delivery.source, file, RESOURCE_ID_FIX)
        for column in REQUIRED_COLUMNS:
            if column not in names:
                raise SourceError(delivery.source, file, f"missing required column {column}")
        for column, kind in wanted.items():
            if reads_column(column, names):
                actual = schema.field(column).type
                check_type(delivery.source, file, column, kind, actual)
                if kind.startswith("MAP") and not pa.types.is_null(actual):
                    _same_map_shape(delivery.source, file, column, _map_shape(actual), shapes)
                    map_types.setdefault(column, {})[file] = actual
                if kind == "TIMESTAMP" and not (
                        pa.types.is_timestamp(actual) and actual.tz is None):
                    delivery.zoned_timestamps.add(column)
                if kind == "DOUBLE" and is_text(actual):
                    delivery.text_amounts.add(column)
                if kind == "VARCHAR" and is_binary(actual):
                    delivery.binary_text = True
        if reads_tags(names):
            delivery.tags_only_files.add(file)
        file_flat = {name for name in names if name.lower().startswith(FLAT_TAG_PREFIX)}
        if file_flat and not names & {"resource_tags", "tags"}:
            flat_only.add(file)
        flat |= file_flat
        delivery.engine_columns |= any(name.lower() in ENGINE_COLUMNS for name in names)
        seen |= names
    for column, typed in map_types.items():
        if len(set(typed.values())) > 1 and shapes[column][0] in ("map", "struct"):
            widened_map_type(delivery.source, column, typed)  # refuses what has no one type
    delivery.columns = seen
    # tags as columns are read only in the files holding no map of them
    delivery.flat_tags = sorted(flat) if flat_only else []
    delivery.flat_tags_files = flat_only if seen & {"resource_tags", "tags"} else set()
    delivery.map_shapes = {c: shape for c, (shape, _) in shapes.items() if shape != "map"}
    if "resource_tags" not in seen:
        delivery.tags_only_files = set()  # every file's tags come from `tags`
    delivery.has_net_columns = "line_item_net_unblended_cost" in delivery.columns
    delivery.has_split_columns = "split_line_item_parent_resource_id" in delivery.columns


def not_cur2_file(source: str, file: str, names: list[str]) -> SourceError:
    """A file of none of CUR 2.0's required columns (another export's file listed in the
    month): its own columns named, not refused as an export created without resource IDs."""
    listed = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    problem = (f"not a CUR 2.0 data file: none of its columns ({listed}) is one of CUR 2.0's "
               f"({', '.join(NAMED_REQUIRED)}, …)" if names
               else "not a CUR 2.0 data file: it has no columns")
    if any(name.lower() in FOCUS_COLUMNS for name in names):
        problem += ("; they are FOCUS columns: read FOCUS files with a billing source of "
                    "kind: focus")
    return SourceError(source, file, problem)


def lower_case_names(source: str, file: str, schema: pa.Schema) -> pa.Schema:
    """A file's schema with the columns the normalization reads named in lower case, as CUR
    2.0 names them: a copy unloaded from a warehouse may name them in capitals (Snowflake's
    `LINE_ITEM_UNBLENDED_COST`); DuckDB binds them either way, so only the checks and the S3
    reader's column selection need the names folded. A column named in two cases (an
    ambiguous copy) is refused."""
    wanted = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}
    if all(name in wanted or name.lower() not in wanted for name in schema.names):
        return schema  # nothing to fold: the export's own spelling
    spelled: dict[str, str] = {}
    fields = []
    for column in schema:
        name = column.name.lower()
        if name in wanted:
            if name in spelled:
                raise SourceError(source, file, f"columns {spelled[name]} and {column.name} "
                                  f"both name {name}: keep one")
            spelled[name] = column.name
            column = column.with_name(name)
        fields.append(column)
    return pa.schema(fields)


def file_columns(schema: pa.Schema) -> dict[str, str]:
    """A file's columns the normalization reads, as CUR 2.0 names them → the file's own
    spelling (`lower_case_names`); other columns as they are."""
    wanted = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}
    return {name.lower() if name.lower() in wanted else name: name for name in schema.names}


def reads_tags(names: Collection[str]) -> bool:
    """A file (its column names) whose resource tags are read from CUR 2.0's `tags` column:
    it has no resource_tags column (`resource_tags_expr`)."""
    return "tags" in names and "resource_tags" not in names


def reads_column(column: str, names: Collection[str]) -> bool:
    """Whether a file (its column names) has `column` read: every column it has, but `tags`
    only where it is the file's resource tags (`reads_tags`): beside resource_tags it holds
    the same ones."""
    return column in names and (column != "tags" or reads_tags(names))


def _tags_only_in(delivery: Delivery) -> list[str]:
    """The delivery's files read from `tags` beside files read from resource_tags."""
    return sorted(f for f in delivery.files if f in delivery.tags_only_files)


def check_type(source: str, file: str, column: str, kind: str, actual: pa.DataType) -> None:
    """Refuse a column whose type holds no value of `kind` (a list of doubles for a cost),
    naming it, rather than with DuckDB's cast error (the FOCUS reader's parquet columns too)."""
    text = is_text(actual)
    ok = True
    if kind == "DOUBLE":
        ok = any(test(actual) for test in _NUMERIC) or pa.types.is_null(actual) or text
    elif kind == "TIMESTAMP":
        ok = (pa.types.is_timestamp(actual) or pa.types.is_date(actual) or text
              or pa.types.is_null(actual))
    elif kind.startswith("MAP"):
        ok = (pa.types.is_map(actual) or pa.types.is_struct(actual) or pa.types.is_null(actual)
              or text or entry_list_shape(actual) is not None)
    elif kind == "VARCHAR":  # binary: a string without its UTF8 annotation
        ok = not pa.types.is_nested(actual)
    if not ok:
        expected = {"DOUBLE": "a number", "TIMESTAMP": "a timestamp",
                    "VARCHAR": "a string"}.get(kind, kind)
        raise SourceError(source, file, f"column {column} is {actual}, expected {expected}")


def widened_type(types: list[pa.DataType]) -> pa.DataType | None:
    """One type the given struct, map or list types all cast to: a struct of every field any
    of them has (a field typed apart widened the same way, a scalar one to text), a map of
    text to text, a list of the widened items (a list of entries whose values the files type
    apart); None where there is none (a list beside a struct, a struct beside a number)."""
    if not types:
        return pa.null()
    if all(pa.types.is_list(t) or pa.types.is_large_list(t) for t in types):
        items = [t.value_type for t in types if not pa.types.is_null(t.value_type)]
        item = widened_type(items) if len(set(items)) > 1 else (items or [pa.null()])[0]
        return None if item is None else pa.list_(item)
    if all(pa.types.is_map(t) for t in types):
        scalar = all(not pa.types.is_nested(t.key_type) and not pa.types.is_nested(t.item_type)
                     for t in types)
        return pa.map_(pa.string(), pa.string()) if scalar else None
    if all(pa.types.is_struct(t) for t in types):
        fields: dict[str, list[pa.DataType]] = {}  # field → its non-null types
        for kind in types:
            for field in kind:
                typed = fields.setdefault(field.name, [])
                if not pa.types.is_null(field.type):
                    typed.append(field.type)
        widened = []
        for name, kinds in fields.items():
            kind = widened_type(kinds) if len(set(kinds)) > 1 else (kinds or [pa.null()])[0]
            if kind is None:
                return None
            widened.append(pa.field(name, kind))
        return pa.struct(widened)
    if not any(pa.types.is_nested(t) for t in types):
        return pa.string()
    return None


def widened_map_type(source: str, column: str, typed: dict[str, pa.DataType]) -> pa.DataType:
    """A map column (file → its type) whose entries the files type apart, e.g. a struct
    field that is a number in one file and text in another: the type every file's column
    casts to (`widened_type`, as DuckDB unifies them reading local files), or a SourceError
    naming two files where there is none."""
    present = {file: kind for file, kind in typed.items() if not pa.types.is_null(kind)}
    widened = widened_type(list(present.values()))
    if widened is None:
        (first, first_type), *rest = present.items()
        other, other_type = next((file, kind) for file, kind in rest if kind != first_type)
        raise SourceError(source, other, f"column {column} is {other_type} here but "
                          f"{first_type} in {first}: the delivery's files must type it alike")
    return widened


def _map_shape(actual: pa.DataType) -> str:
    if pa.types.is_map(actual):
        return "map"
    if pa.types.is_struct(actual):
        return "struct"
    return entry_list_shape(actual) or "text"


def _same_map_shape(source: str, file: str, column: str, shape: str,
                    shapes: dict[str, tuple[str, str]]) -> None:
    """Every file of a delivery holds a map column the same way (`_SHAPE_NAMES`)."""
    first = shapes.setdefault(column, (shape, file))
    if first[0] != shape:
        raise SourceError(source, file, f"column {column} is {_SHAPE_NAMES[shape]} here but "
                          f"{_SHAPE_NAMES[first[0]]} in {first[1]}: the delivery's files must "
                          "hold it the same way")


_SHAPE_NAMES = {"map": "a map", "struct": "a struct", "text": "text",
                "pairs": "a list of pairs", "entries": "a list of entries"}


# the keys of `product` the normalization reads (`product['gpu']`, … in
# assets/ingest/billing_facts_cur2.sql): a `product` held as JSON text (every line of a CSV
# export holds ~35 attributes) is cut to them before it is read as a map (`slim_product_sql`)
PRODUCT_KEYS = ("gpu", "servicename", "product_name")


def slim_product_sql(text: str) -> str:
    """SQL for the text `text` of a `product` column: a JSON object cut to PRODUCT_KEYS (a
    key it lacks null), other text as it is (`map_value_sql` reads a map literal or refuses
    it). Reading a 35-attribute object as a map costs ~20 times reading three keys of it:
    2M lines 21.7 s against 1.1 s."""
    paths = ", ".join(sql_literal(f"$.{key}") for key in PRODUCT_KEYS)
    pairs = ", ".join(f"{sql_literal(key)}, v[{i}]" for i, key in enumerate(PRODUCT_KEYS, 1))
    return (f"CASE WHEN json_type(TRY_CAST({text} AS JSON)) = 'OBJECT' THEN list_transform("
            f"[json_extract_string({text}, [{paths}])], "
            f"lambda v: CAST(json_object({pairs}) AS VARCHAR))[1] ELSE {text} END")


def map_value_sql(column: str, delivery: Delivery) -> str:
    """A map column's value as MAP(VARCHAR, VARCHAR), however the files hold it: a map as it
    is; a struct (a dict written by pandas) as its non-null fields; a list of entries (a map
    read and written back by pandas or polars, `map_columns`) as those entries whose key is
    not NULL (a list naming a key twice is refused); text as a JSON object
    (`{"user_team": "vision"}`) or DuckDB's map literal (`{user_team=vision}`), a value that
    is neither refused by `refuse_unreadable_values`."""
    name, kind = sql_identifier(column), "MAP(VARCHAR, VARCHAR)"
    shape = delivery.map_shapes.get(column)
    if shape == "struct":
        return (f"map_from_entries(list_filter(map_entries(TRY_CAST(to_json({name}) AS {kind})), "
                f"lambda e: e.value IS NOT NULL))")
    if shape in ("pairs", "entries"):
        return f"map_from_entries({listed_entries_sql(name, shape)})"
    if shape == "text":
        text = slim_product_sql(name) if column == "product" else name
        return (f"CASE WHEN {_blank_text_sql(name)} THEN NULL ELSE coalesce("
                f"TRY_CAST(TRY_CAST({text} AS JSON) AS {kind}), TRY_CAST({name} AS {kind})) END")
    return f"TRY_CAST({name} AS {kind})"


def _blank_text_sql(name: str) -> str:
    return f"coalesce(lower(trim({name})), '') IN ('', 'null')"


def refuse_unreadable_values(con: duckdb.DuckDBPyConnection, delivery: Delivery,
                             relation: str, file_sql: str, row_sql: str) -> None:
    """Refuse a map column's value the files hold otherwise than AWS writes it that reads as
    nothing: text that is neither a JSON object nor a map literal, a list of entries naming
    a key twice (no map holds it), naming the file, the row and the column (`relation` holds
    the files' own columns; `file_sql` and `row_sql` name a row there). Nothing to check, no
    query. (An amount's text that spells no number is refused by `check_amounts`.)"""
    checks = []
    for column, shape in sorted(delivery.map_shapes.items()):
        if shape == "text":
            checks.append((column, f"NOT {_blank_text_sql(sql_identifier(column))} AND "
                           f"{map_value_sql(column, delivery)} IS NULL",
                           "text that is neither a JSON object nor a map"))
        elif shape in ("pairs", "entries"):
            checks.append((column, names_a_key_twice_sql(sql_identifier(column), shape),
                           "a list of entries naming a key twice"))
    for column, unread, what in checks:
        where = ""
        if column == "tags" and "resource_tags" in delivery.columns:
            # read only from the files without resource_tags (`resource_tags_expr`)
            files = _tags_only_in(delivery)
            if not files:
                continue
            where = f"{file_sql} IN ({', '.join(sql_literal(f) for f in files)}) AND "
        name = sql_identifier(column)
        bad = con.execute(
            f"SELECT {file_sql}, {row_sql}, CAST({name} AS VARCHAR) FROM {relation} WHERE "
            f"{where}{unread} ORDER BY 1, 2 LIMIT 1").fetchone()
        if bad:
            raise SourceError(delivery.source, f"{bad[0]} row {bad[1]}",
                              f"column {column} is {what}: {bad[2][:80]!r}")


def _amount_sql(column: str) -> str:
    """An amount column held as text as the number it spells (NULL for empty text or
    `null`, as a CSV export's empty field); text that spells no number is NaN, which
    `check_amounts` refuses in the scan it makes of every amount anyway."""
    text = f"CAST({sql_identifier(column)} AS VARCHAR)"  # (a file of numbers reads too)
    return (f"CASE WHEN {_blank_text_sql(text)} THEN NULL "
            f"ELSE coalesce(TRY_CAST(trim({text}) AS DOUBLE), CAST('NaN' AS DOUBLE)) END")


def _column_expr(column: str, kind: str, delivery: Delivery) -> str:
    """A present column as its contract type. Timestamps end up naive UTC: zoned or textual
    ones (`…Z`, `…+02:00`) are converted, naive ones are taken as UTC."""
    name = sql_identifier(column)
    if kind == "TIMESTAMP" and column in delivery.zoned_timestamps:
        return f"{utc_wall_clock_sql(text_instant_sql(name))} AS {name}"
    if kind.startswith("MAP"):
        return f"{map_value_sql(column, delivery)} AS {name}"
    if column in delivery.text_amounts:
        return f"{_amount_sql(column)} AS {name}"
    if kind == "TIMESTAMP":
        return f"TRY_CAST({name} AS {kind}) AS {name}"
    return f"CAST({name} AS {kind}) AS {name}"


def register_raw(con: duckdb.DuckDBPyConnection, delivery: Delivery, view: str) -> None:
    """Create `view` over the delivery's files with every column the normalization reads:
    present ones cast to their contract type, absent optional ones as typed NULLs, plus
    `_file` and `_row` (1-based row within the file) for error messages."""
    con.execute("SET TimeZone = 'UTC'")
    if not delivery.files:
        # no file, no column: every column a typed NULL (`raw_columns`)
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT {', '.join(raw_columns(delivery))}, "
            "NULL::VARCHAR AS _file, NULL::BIGINT AS _row WHERE false"
        )
        return
    select = raw_columns(delivery)
    select.append("filename AS _file")
    select.append("file_row_number + 1 AS _row")
    files = "[" + ", ".join(sql_literal(f) for f in delivery.files) + "]"
    relation = (f"read_parquet({files}, union_by_name = true, filename = true, "
                "file_row_number = true"
                + (", binary_as_string = true)" if delivery.binary_text else ")"))
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT {', '.join(select)} "
                f"FROM {relation}")
    delivery.raw_relation = (relation, "filename", "file_row_number + 1")
    refuse_unreadable_values(con, delivery, *delivery.raw_relation)


def raw_columns(delivery: Delivery, file_column: str = "filename") -> list[str]:
    """The `cur_raw` select list over a relation holding the export's own columns (`tags`
    only inside `resource_tags`); `file_column` names each row's file there."""
    return [
        resource_tags_expr(delivery, file_column) if column == "resource_tags"
        else _column_expr(column, kind, delivery) if column in delivery.columns
        else f"CAST(NULL AS {kind}) AS {sql_identifier(column)}"
        for column, kind in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items()
        if column != "tags"
    ]


RESOURCE_TAGS_PREFIX = "resourceTags/"


def resource_tags_expr(delivery: Delivery, file_column: str = "filename") -> str:
    """`resource_tags` as the lines' Tags: the column as the export has it; from CUR 2.0's
    `tags` column when the export selected that one instead. There every tag of a line is
    keyed by its source (`resourceTags/…`, `accountTag/…`, `costCategory/…`,
    `userAttribute/…`): the resource's own are taken, their prefix dropped
    (`resourceTags/user:team` → `user:team`, which `user_tag` reads); an account's tag or a
    cost category applies to every line of the account, and is no run's claim on a line. An
    export selecting both columns holds the same resource tags twice: resource_tags alone is
    read (taking them from `tags` costs ~1 s per 1.5M lines of five tags). A delivery whose
    files differ (the export's columns changed within the month) reads each file's lines
    from the column that file has: `tags` only in the files without resource_tags, the tag
    columns only in the files holding neither (named by `file_column`)."""
    tags = _map_tags_sql(delivery, file_column)
    if delivery.flat_tags_files:  # files of tags as columns beside files of a map
        tags = _in_files_sql(file_column, sorted(delivery.flat_tags_files),
                             flat_tags_sql(delivery.flat_tags), tags)
    return f"{tags} AS resource_tags"


def _in_files_sql(file_column: str, files: list[str], then: str, otherwise: str) -> str:
    """`then` for the lines of `files` (`file_column` naming each line's), else `otherwise`."""
    listed = ", ".join(sql_literal(f) for f in files)
    return f"CASE WHEN {file_column} IN ({listed}) THEN {then} ELSE {otherwise} END"


def _map_tags_sql(delivery: Delivery, file_column: str) -> str:
    """`resource_tags_expr`'s value (unnamed) but in files holding tags as columns only."""
    prefix = sql_literal(RESOURCE_TAGS_PREFIX)
    from_tags = (f"map_from_entries(list_transform(list_filter(map_entries("
                 f"{map_value_sql('tags', delivery)}), lambda e: starts_with(e.key, {prefix})), "
                 f"lambda e: {{'key': e.key[{len(RESOURCE_TAGS_PREFIX) + 1}:], "
                 f"'value': e.value}}))")
    if "resource_tags" in delivery.columns:
        own = map_value_sql("resource_tags", delivery)
        tags_only = _tags_only_in(delivery)
        return _in_files_sql(file_column, tags_only, from_tags, own) if tags_only else own
    if "tags" in delivery.columns:
        return from_tags
    if delivery.flat_tags:
        return flat_tags_sql(delivery.flat_tags)
    return f"CAST(NULL AS {OPTIONAL_COLUMNS['resource_tags']})"


def flat_tags_sql(columns: list[str]) -> str:
    """The resource tags of an export that selects them as columns, one a key
    (`resource_tags_user_team`, as the query `SELECT resource_tags.user_team …` or a legacy
    CUR's Athena parquet names them), as the map a CUR 2.0 export's resource_tags holds: each
    column's key after the prefix (`user_team`, as CUR 2.0 spells the key), its non-empty
    values."""
    entries = ", ".join(
        f"{{'key': {sql_literal(column[len(FLAT_TAG_PREFIX):])}, "
        f"'value': CAST({sql_identifier(column)} AS VARCHAR)}}" for column in columns)
    return (f"map_from_entries(list_filter([{entries}], "
            "lambda e: nullif(trim(e.value), '') IS NOT NULL))")


# a line billed in another month than the delivery's: its bill_billing_period_start_date
# (naive UTC in the view: an instant written with a zone or an offset is compared as the UTC
# instant it is, so `2026-06-30T20:00:00-04:00` is July's) outside [the month's first
# instant, the next month's), both bound as parameters. AWS writes UTC midnight of the 1st;
# the month's folder and manifest name the month the lines are loaded as, and a file of
# another month copied there under its own name (still listed by the manifest) would count
# that month's bill twice. An empty one (a hand-made file without the column) is the
# delivery's. Usage dated in another month is not compared: a late line of the month's bill
# stays in it.
BILLING_PERIOD_ELSEWHERE = ("(bill_billing_period_start_date < ? "
                            "OR bill_billing_period_start_date >= ?)")


def other_billing_period(period: datetime, month: date) -> str:
    """The problem of a line whose billing period (naive UTC) is not `month`'s."""
    shown = (f"{period:%Y-%m-%d}" if period == datetime(period.year, period.month, period.day)
             else f"{period} UTC")
    return (f"bill_billing_period_start_date {shown} is not the delivery's billing period "
            f"{month:%Y-%m}: a file of another month in its folder?")


def check_amounts(con: duckdb.DuckDBPyConnection, delivery: Delivery, view: str) -> None:
    """Refuse the delivery when an amount column of a line (a cost, the usage amount, a
    commitment figure) is inf, NaN or not below MAX_AMOUNT, when a line has no
    line_item_unblended_cost (AWS writes it on every line, 0 where nothing is billed: read as
    0, a line without it would be free), when a line names no currency where another names
    one (read as USD, it was refused as a second currency, or loaded as USD beside USD lines),
    or when a line's bill_billing_period_start_date is in another month than the delivery's
    (`BILLING_PERIOD_ELSEWHERE`); a bill naming no currency on any line is in USD. Names the
    first such line's file, row and column, whether or not the line's figures would read that
    column. One scan of the month."""
    from cost_pipeline.ingest.sources import MAX_AMOUNT_TEXT, bad_amount_sql

    columns = [c for c, kind in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items()
               if kind == "DOUBLE" and c in delivery.columns]
    if not columns or not delivery.files:
        return
    amounts = (" OR ".join(bad_amount_sql(sql_identifier(c)) for c in columns)
               + " OR line_item_unblended_cost IS NULL")
    currency = "nullif(trim(line_item_currency_code), '')"
    line = "{'file': _file, 'row': _row}"
    dated = "{'file': _file, 'row': _row, 'period': bill_billing_period_start_date}"
    elsewhere, bad, unnamed, named = con.execute(
        f"SELECT min({dated}) FILTER (WHERE {BILLING_PERIOD_ELSEWHERE}), "
        f"min({line}) FILTER (WHERE {amounts}), "
        f"min({line}) FILTER (WHERE {currency} IS NULL), count({currency}) > 0 "
        f"FROM {view}", list(month_bounds(delivery.month))).fetchone()
    # (a line both of another month and with a bad figure: its month is named, the file is
    # not this month's)
    first = min((found for found in (elsewhere, bad, unnamed if named else None) if found),
                key=lambda found: (found["file"], found["row"]), default=None)
    if first is None:
        return
    where = f"{first['file']} row {first['row']}"
    if first is elsewhere:
        raise SourceError(delivery.source, where, other_billing_period(
            first["period"], delivery.month))
    if first is not bad:
        raise SourceError(delivery.source, where, "line_item_currency_code is empty")
    found = bad_amount_column(con, view, bad["file"], bad["row"])
    if found is None:  # every amount of the line is finite: its gross cost is empty
        raise SourceError(delivery.source, where, "line_item_unblended_cost is empty")
    column, value = found
    text = _unread_amount_text(con, delivery, column, bad["file"], bad["row"])
    if text is not None:
        raise SourceError(delivery.source, where,
                          f"column {column} is text that is not a number: {text[:80]!r}")
    raise SourceError(delivery.source, where,
                      f"{column} is {value}: a cost or quantity must be a finite number "
                      f"below {MAX_AMOUNT_TEXT}")


# what a commitment line's EffectiveCost is read from (SPEC §5), net column first: a line
# of that type with none of them carries no amount, and would count 0
COMMITMENT_FIGURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "SavingsPlanCoveredUsage": (("savings_plan_net_savings_plan_effective_cost",
                                 "savings_plan_savings_plan_effective_cost"),),
    "DiscountedUsage": (("reservation_net_effective_cost", "reservation_effective_cost"),),
    "SavingsPlanRecurringFee": (("savings_plan_total_commitment_to_date",),
                                ("savings_plan_used_commitment",)),
    "RIFee": (("reservation_net_unused_amortized_upfront_fee_for_billing_period",
               "reservation_unused_amortized_upfront_fee_for_billing_period",
               "reservation_net_unused_recurring_fee", "reservation_unused_recurring_fee"),),
}


def check_commitment_figures(con: duckdb.DuckDBPyConnection, delivery: Delivery,
                             view: str) -> None:
    """Refuse the delivery when a savings plan's or reservation's line lacks every column
    its amortized cost is read from (an export whose query left them out, or a line with
    them empty): counted as 0, the covered usage would be free and the unused commitment
    gone. Names the file, row, line type and the columns (absent from the export or empty)."""
    cases = [(kind, names) for kind, groups in COMMITMENT_FIGURES.items() for names in groups]
    found = con.execute(
        f"SELECT _file, _row, line_item_line_item_type FROM {view} WHERE "
        + " OR ".join(
            f"(line_item_line_item_type = '{kind}' AND "
            + " AND ".join(f"{sql_identifier(n)} IS NULL" for n in names) + ")"
            for kind, names in cases)
        + " ORDER BY _file, _row LIMIT 1").fetchone()
    if not found:
        return
    file, row, kind = found
    for names in COMMITMENT_FIGURES[kind]:
        values = con.execute(
            f"SELECT {', '.join(sql_identifier(n) for n in names)} FROM {view} "
            "WHERE _file = ? AND _row = ?", [file, row]).fetchone()
        if all(v is None for v in values or ()):
            break
    absent = [n for n in names if n not in delivery.columns]
    spelled = " / ".join(names)
    problem = (f"a {kind} line without {spelled}: "
               + ("the export has no such column; add it to the Data Export's columns "
                  "(or select every column)" if len(absent) == len(names)
                  else "the column is empty on this line")
               + ": its EffectiveCost cannot be read (SPEC §5), and 0 would make it free")
    raise SourceError(delivery.source, f"{file} row {row}", problem)


def _unread_amount_text(con: duckdb.DuckDBPyConnection, delivery: Delivery, column: str,
                        file: str, row: int) -> str | None:
    """The text of an amount column held as text at (file, row) when it spells no number
    (`_amount_sql` read it as NaN), else None (an error path only)."""
    if column not in delivery.text_amounts or delivery.raw_relation is None:
        return None
    relation, file_sql, row_sql = delivery.raw_relation
    text = f"CAST({sql_identifier(column)} AS VARCHAR)"
    found = con.execute(f"SELECT {text}, TRY_CAST(trim({text}) AS DOUBLE) IS NULL "
                        f"FROM {relation} WHERE {file_sql} = ? AND {row_sql} = ?",
                        [file, row]).fetchone()
    return found[0] if found and found[1] else None


def bad_amount_column(con: duckdb.DuckDBPyConnection, view: str, file: str,
                      row: int) -> tuple[str, float] | None:
    """The export's own column behind a bad figure of line (file, row) of `view`: the first
    amount of the line that is not finite or not below MAX_AMOUNT (an error path only)."""
    from cost_pipeline.ingest.sources import bad_amount

    columns = [c for c, kind in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items()
               if kind == "DOUBLE"]
    values = con.execute(f"SELECT {', '.join(sql_identifier(c) for c in columns)} FROM {view} "
                         "WHERE _file = ? AND _row = ?", [file, row]).fetchone()
    for column, value in zip(columns, values or (), strict=False):
        if value is not None and bad_amount(value):
            return column, value
    return None


def locate_bad_file(delivery: Delivery, message: str) -> str | None:
    """The delivery file an engine error is about: named in the message, else the first
    file whose data pages cannot be read (an error path only, so reading is affordable)."""
    for file in delivery.files:
        if file in message:
            return file
    if delivery.engine_columns or not all(Path(file).is_file() and not is_text_export_file(file)
                                          for file in delivery.files):
        return None  # streamed (remote, CSV, `ENGINE_COLUMNS`): their reader names the file
    columns = [c for c in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS} if c in delivery.columns]
    for file in delivery.files:
        try:
            parquet = pq.ParquetFile(file)
            names = file_columns(parquet.schema_arrow)
            for _batch in parquet.iter_batches(columns=[names[c] for c in columns if c in names]):
                pass
        except Exception:  # any pyarrow failure marks the file as the broken one
            return file
    # values the file stores but the engine cannot take (e.g. a timestamp out of range)
    for file in delivery.files:
        single = replace(delivery, files=[file], columns=set(file_columns(pq.read_schema(file))))
        try:
            with duckdb.connect() as con:
                register_raw(con, single, "cur_check")
                con.execute("SELECT bit_xor(hash(COLUMNS(*))) FROM cur_check").fetchall()
        except duckdb.Error:
            return file
    return None
