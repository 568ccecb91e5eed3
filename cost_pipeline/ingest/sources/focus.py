"""FinOps FOCUS 1.x cost-and-usage files (CSV, CSV.gz or parquet; one file or a folder of
them; any provider) → the temp table `focus_raw` that `assets/billing_facts_focus.sql`
normalizes (a view over the files when they are all local parquet files).

The month is the billing period: a row belongs to the month its `BillingPeriodStart` falls
in (its `ChargePeriodStart` when a row has no billing period). FOCUS defines the billing
period as the invoice's period, and a correction of an earlier charge period is billed in
the current one (`ChargeClass = Correction`), so selecting by billing period makes a month
add up to its invoice and keeps a closed month closed — as CUR's `BILLING_PERIOD=` folders
do. Selecting by charge period would move late corrections into months already reported.

CSV files and files on S3 are streamed with pyarrow; DuckDB reads a local parquet file
itself, in parallel, numbering its rows. Only the columns the normalization reads are read,
and loaded already filtered to the month. A value that does not parse fails the month with the
file, the row (CSV: the record's line when no cell spans lines, the header being row 1;
parquet: the 1-based row) and the column. Files of other FOCUS datasets (e.g. 1.3's
contract commitments) in the folder are skipped (Azure's own cost details are refused: not
FOCUS at all), and so are the deliveries of a month a newer
one replaces (Azure export runs, AWS Data Exports deliveries: `sources/focus_deliveries.py`).
An `s3://` path is listed and read through `sources/focus_s3.py` (ranged parquet reads,
retries), then loaded the same way.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import (
    MAX_ACCELERATORS,
    MAX_AMOUNT_TEXT,
    SourceError,
    bad_amount_sql,
    csv_delimiter,
    csv_fault,
    cur2,
    cur2_s3,
    sql_identifier,
    sql_literal,
    text_instant_sql,
    utc_wall_clock_sql,
)
from cost_pipeline.ingest.sources.arrow_types import is_binary, is_text
from cost_pipeline.ingest.sources.cur2 import check_type
from cost_pipeline.ingest.sources.focus_deliveries import Listing, current_files
from cost_pipeline.ingest.sources.focus_s3 import S3Files
from cost_pipeline.ingest.sources.focus_s3 import find_files as find_s3_files
from cost_pipeline.ingest.sources.local_files import walk_files
from cost_pipeline.ingest.sources.map_columns import (
    entry_list_shape,
    listed_entries_sql,
)
from cost_pipeline.ingest.sources.s3 import S3Uri, is_s3, list_files, uri_of
from cost_pipeline.ingest.sources.streams import registered_batches
from cost_pipeline.months import month_bounds

# FOCUS column → how it is read. JSON columns become JSON text whatever their file type.
COLUMNS: dict[str, str] = {
    "BillingPeriodStart": "TIMESTAMP",
    "ChargePeriodStart": "TIMESTAMP",
    "ChargePeriodEnd": "TIMESTAMP",
    "ProviderName": "VARCHAR",
    "ServiceProviderName": "VARCHAR",   # FOCUS 1.3's successor of ProviderName
    "ServiceName": "VARCHAR",
    "ServiceCategory": "VARCHAR",
    "ServiceSubcategory": "VARCHAR",
    "ChargeCategory": "VARCHAR",
    "ChargeClass": "VARCHAR",
    # FOCUS 1.0-preview's, which had no ChargeClass nor CommitmentDiscountStatus: `Used
    # Commitment`, `Unused Commitment`, `Refund`, `On-Demand` (billing_facts_focus.sql)
    "ChargeSubcategory": "VARCHAR",
    "ResourceId": "VARCHAR",
    "ResourceType": "VARCHAR",
    "RegionId": "VARCHAR",
    "SkuId": "VARCHAR",
    "SkuMeter": "VARCHAR",
    "SkuPriceDetails": "JSON",
    "ConsumedQuantity": "DOUBLE",
    "ConsumedUnit": "VARCHAR",
    "BilledCost": "DOUBLE",
    "EffectiveCost": "DOUBLE",
    "BillingCurrency": "VARCHAR",
    "CommitmentDiscountStatus": "VARCHAR",
    # Spend (a savings plan) | Usage (a reservation): which line item type covered usage is
    "CommitmentDiscountCategory": "VARCHAR",
    "CapacityReservationStatus": "VARCHAR",  # FOCUS 1.1+: Used | Unused
    "ListCost": "DOUBLE",
    # Standard | Dynamic | Committed | Other (1.0-preview: On-Demand | Spot | Commitment-Based)
    "PricingCategory": "VARCHAR",
    "InvoiceId": "VARCHAR",
    "x_InvoiceId": "VARCHAR",           # Azure's FOCUS 1.0 export: the invoice (no InvoiceId)
    "Tags": "JSON",
    # provider extensions this normalization understands when present
    "x_InstanceType": "VARCHAR",
    "x_UsageType": "VARCHAR",           # AWS's FOCUS export: `USE1-BoxUsage:g5.4xlarge`
    "ChargeDescription": "VARCHAR",     # AWS: `$1.006 per On Demand Linux g5.xlarge …`
    "x_SkuMeterName": "VARCHAR",        # Azure's FOCUS export: `NC24ads A100 v4`
    "x_SkuMeterCategory": "VARCHAR",    # Azure: `Virtual Machines`
    "x_SkuDetails": "JSON",             # Azure: the meter's details (`ServiceType`, `VMSize`)
    "x_MachineType": "VARCHAR",         # GCP-style machine type, when an export carries it
    "x_CostComponent": "VARCHAR",
    "x_AcceleratorCount": "DOUBLE",
}
# the columns whose values the normalization and the attribution compare, with FOCUS's
# allowed values: a value in another case reads as FOCUS spells it (Google's FOCUS view for
# BigQuery writes ChargeCategory `usage`, `tax`, `adjustment` and ChargeClass `correction`,
# which compared to `Usage` made every line of the month a non-usage line)
VOCABULARY: dict[str, tuple[str, ...]] = {
    "ChargeCategory": ("Usage", "Purchase", "Tax", "Credit", "Adjustment"),
    "ChargeClass": ("Correction",),
    "CommitmentDiscountStatus": ("Used", "Unused"),
    "CommitmentDiscountCategory": ("Spend", "Usage"),
    "CapacityReservationStatus": ("Used", "Unused"),
    "ServiceCategory": (
        "AI and Machine Learning", "Analytics", "Business Applications", "Compute",
        "Databases", "Developer Tools", "Multicloud", "Identity", "Integration",
        "Internet of Things", "Management and Governance", "Media", "Migration", "Mobile",
        "Networking", "Security", "Storage", "Web", "Other"),
}
REQUIRED = ("ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "BilledCost",
            "EffectiveCost", "BillingCurrency")
# columns of the cost-and-usage dataset: a file in a folder holding any of them is a cost
# file, whose missing required columns are refused by name (one lacking ChargePeriodStart
# was skipped as another dataset, its month read as $0)
COST_AND_USAGE_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost",
                          "ChargeCategory", "ChargeClass", "ChargePeriodStart",
                          "ChargePeriodEnd", "BillingPeriodStart", "BillingPeriodEnd",
                          "ConsumedQuantity", "PricingQuantity")
# the identifying columns of FOCUS's other datasets, some of which share a few of the columns
# above (invoice details: BilledCost, ChargeCategory; SKU prices: ChargeCategory): a file with
# one of these, or with no cost-and-usage column (1.3's contract commitments), is skipped
OTHER_DATASET_COLUMNS = ("ContractCommitmentId", "InvoiceDetailId", "SkuPriceEffectiveStart",
                         "RecommendationId", "BillingPeriodStatus")
# Azure Cost Management's own cost details (actual or amortized cost: a meter's category and
# a cost column of its schema), which are not FOCUS: in a folder they were skipped as another
# dataset and the month read as $0
AZURE_METER_COLUMN = "MeterCategory"
AZURE_COST_COLUMNS = ("CostInBillingCurrency", "CostInPricingCurrency", "CostInUsd",
                      "PreTaxCost")
SUFFIXES = (".csv", ".csv.gz", ".parquet")
BATCH_ROWS = 65_536
RAW_TABLE = "focus_raw"


@dataclass
class FocusFiles:
    """What the month was read from."""

    source: str
    root: Path | str                    # a local folder, or an s3:// URI
    files: list = field(default_factory=list)    # local Paths, or s3:// URIs
    skipped: list = field(default_factory=list)
    rows: int = 0
    remote: S3Files | None = None       # set for a source on S3
    raw_kind: str = "TABLE"             # what `focus_raw` is: a TABLE, or a VIEW of the files
    # a CSV file's delimiter where it is not a comma (`_split_header`)
    delimiters: dict = field(default_factory=dict)
    # the deliveries of a month that a newer one replaces, not read (`focus_deliveries`)
    superseded: list = field(default_factory=list)


def is_data_file(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES) and not path.name.startswith((".", "_"))


def is_cost_and_usage(header: list[str]) -> bool:
    """Whether a file of these columns (any case) is of FOCUS's cost-and-usage dataset."""
    names = {name.lower() for name in header}
    return (any(c.lower() in names for c in COST_AND_USAGE_COLUMNS)
            and not any(c.lower() in names for c in OTHER_DATASET_COLUMNS))


def is_azure_cost_details(header: list[str]) -> bool:
    """Whether a file of these columns (any case) is Azure's cost details export."""
    names = {name.lower() for name in header}
    return (AZURE_METER_COLUMN.lower() in names
            and any(c.lower() in names for c in AZURE_COST_COLUMNS))


def find_files(source: str, path: str, month: date | None = None) -> FocusFiles:
    root = Path(path)
    if root.is_file():
        return FocusFiles(source, root.parent, [root])
    if not root.is_dir():
        raise SourceError(source, str(root), "FOCUS file or folder not found")
    # the sources' one rule for local folders: no link followed out of it (local_files.py)
    modified = {str(p): stat.st_mtime for p, stat in walk_files(root, source)}
    files = sorted(Path(p) for p in modified if is_data_file(Path(p)))
    listing = Listing(source, str(root), modified,
                      lambda file: Path(file).read_text(encoding="utf-8-sig"),
                      lambda export, of: cur2.find_delivery(source, export, of).files,
                      lambda folder: _local_files_below(source, Path(folder)))
    current, superseded = current_files(listing, [str(f) for f in files], month)
    return FocusFiles(source, root, [Path(f) for f in current], superseded=superseded)


def _local_files_below(source: str, folder: Path) -> list[str]:
    return [str(p) for p, _ in walk_files(folder, source)] if folder.is_dir() else []


def _csv_header(path: Path, source: str) -> str:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            return handle.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(source, str(path), f"unreadable CSV header: {exc}") from None


def _split_header(source: str, path: Path | str, line: str) -> tuple[list[str], str]:
    """A CSV header line's names and its delimiter: the one that splits it into the most
    FOCUS columns (`csv_delimiter`, in any case)."""
    delimiter = csv_delimiter(line, {c.lower() for c in COLUMNS})
    try:
        names = next(csv.reader(io.StringIO(line), delimiter=delimiter), [])
    except csv.Error as exc:
        raise SourceError(source, str(path), f"unreadable CSV header: {exc}") from None
    return [h.strip() for h in names], delimiter


def _batches(path: Path | str, source: str, spelled: dict[str, str],
             remote: S3Files | None = None, delimiter: str = ",",
             log: logging.Logger | None = None) -> tuple[pa.Schema, Iterator]:
    """The file's wanted columns (FOCUS name → the file's spelling) as record batches named
    as FOCUS names them, plus `_row`."""
    columns, names = list(spelled.values()), list(spelled)
    if str(path).lower().endswith(".parquet"):
        parquet = remote.parquet(str(path)) if remote else pq.ParquetFile(path)
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        schema = _binary_as_text(pa.schema([
            # DuckDB takes no 256-bit decimal in Arrow (BigQuery's BIGNUMERIC): as a double
            f.with_type(pa.float64()) if pa.types.is_decimal256(f.type) else f
            for f in (parquet.schema_arrow.field(c) for c in columns)]))
        first_row = 1
    else:
        options = pacsv.ConvertOptions(
            include_columns=columns, column_types={c: pa.string() for c in columns},
            # empty is null (FOCUS); `NaN`, `NA`, `N/A` stay text, so that a NaN amount is
            # refused by name instead of read as a missing one
            strings_can_be_null=True, quoted_strings_can_be_null=True,
            null_values=["", "NULL", "null"])
        try:  # the first block is parsed here: a malformed record in it fails now
            reader = pacsv.open_csv(remote.csv_stream(str(path)) if remote else path,
                                    read_options=pacsv.ReadOptions(block_size=1 << 22),
                                    parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                    convert_options=options)
        except (pa.ArrowException, OSError) as exc:
            raise SourceError(source, _record(path, remote, delimiter, str(exc), str(path),
                                              log, source),
                              f"unreadable: {str(exc).splitlines()[0]}") from None
        batches, schema = reader, reader.schema
        first_row = 2  # the header is row 1

    def numbered() -> Iterator[pa.RecordBatch]:
        row = first_row
        try:
            for batch in batches:
                batch = batch.select(columns)  # the declared order, whatever the file's
                rows = pa.array(range(row, row + batch.num_rows), pa.int64())
                row += batch.num_rows
                arrays = [array.cast(kind.type) if array.type != kind.type else array
                          for array, kind in zip(batch.columns, schema, strict=True)]
                yield pa.RecordBatch.from_arrays([*arrays, rows], names=[*names, "_row"])
        except (pa.ArrowException, OSError) as exc:
            where = _record(path, remote, delimiter, str(exc), f"{path} near row {row}",
                            log, source) if first_row == 2 else f"{path} near row {row}"
            raise SourceError(source, where, f"unreadable: {str(exc).splitlines()[0]}") from None

    named = pa.schema([f.with_name(name) for f, name in zip(schema, names, strict=True)])
    return named.append(pa.field("_row", pa.int64())), numbered()


def _record(path: Path | str, remote: S3Files | None, delimiter: str, reason: str,
            fallback: str, log: logging.Logger | None = None, source: str = "") -> str:
    """Where in the CSV file the record pyarrow's `reason` is about is (`csv_fault.where`)."""
    # one record a line: pyarrow reads FOCUS CSV without newlines in values
    return csv_fault.where(
        str(path), reason, fallback,
        lambda: (remote.csv_stream(str(path)) if remote
                 else pa.input_stream(str(path), compression="detect")),
        delimiter, newlines_in_values=False, log=log, source=source)


def _binary_as_text(schema: pa.Schema) -> pa.Schema:
    """`schema` with its binary columns as text: strings written without their UTF8
    annotation (Impala, older Hive), read as UTF-8 (which reading them checks)."""
    return pa.schema([f.with_type(pa.string()) if is_binary(f.type) else f for f in schema])


def _typed(column: str, kind: str, arrow: pa.DataType | None) -> tuple[str, str | None]:
    """(the column as its contract type, a condition true when a present value is invalid)."""
    if arrow is None:
        sql_type = "VARCHAR" if kind == "JSON" else kind
        return f"CAST(NULL AS {sql_type})", None
    c = sql_identifier(column)
    if pa.types.is_dictionary(arrow):  # parquet writers dictionary-encode repeated strings
        arrow = arrow.value_type
    text = is_text(arrow)
    if kind == "TIMESTAMP":
        if text:
            value = utc_wall_clock_sql(text_instant_sql(f"nullif(trim({c}), '')"))
            return value, f"nullif(trim({c}), '') IS NOT NULL AND {value} IS NULL"
        if pa.types.is_timestamp(arrow) and arrow.tz is not None:
            return utc_wall_clock_sql(f"CAST({c} AS TIMESTAMPTZ)"), None
        return f"CAST({c} AS TIMESTAMP)", None
    if kind == "DOUBLE":
        if text:
            value = f"TRY_CAST(nullif(trim({c}), '') AS DOUBLE)"
            return value, f"nullif(trim({c}), '') IS NOT NULL AND {value} IS NULL"
        return f"CAST({c} AS DOUBLE)", None
    if kind == "JSON":
        if pa.types.is_map(arrow):
            # a typed map is a JSON object whatever it holds: nothing to check
            return f"CAST(to_json({c}) AS VARCHAR)", None
        if pa.types.is_struct(arrow):
            # a struct (pandas writes a column of dicts so) has a field for every key of
            # any row, NULL where a row lacks it: those the merge patch leaves out
            return f"CAST(json_merge_patch('{{}}', to_json({c})) AS VARCHAR)", None
        shape = entry_list_shape(arrow)
        if shape:  # a map read and written back by pandas or polars (`map_columns`)
            entries = first_entries_sql(listed_entries_sql(c, shape))
            return f"CAST(to_json(map_from_entries({entries})) AS VARCHAR)", None
        value = (f"nullif(trim({c}), '')" if text else f"CAST(to_json({c}) AS VARCHAR)")
        valid = _json_object_sql(value)
        if column != "Tags":  # only read for hints: an unreadable one is no hint
            return f"CASE WHEN coalesce({valid}, false) THEN {value} END", None
        if text:
            # Azure's cost details write a resource's tags without their braces
            # (`"team": "nlp","env": "prod"`), and the FinOps toolkit's mapping of them to
            # FOCUS adds the braces: so does this reader, for text that is then an object
            braced = f"('{{' || {value} || '}}')"
            value = (f"CASE WHEN coalesce({valid}, false) THEN {value} "
                     f"WHEN coalesce({_json_object_sql(braced)}, false) THEN {braced} "
                     f"WHEN json_type(TRY_CAST({value} AS JSON)) = 'ARRAY' THEN "
                     f"coalesce({_entries_object_sql(value)}, {value}) ELSE {value} END")
            valid = _json_object_sql(value)
        return value, f"{value} IS NOT NULL AND NOT coalesce({valid}, false)"
    value = f"nullif(trim(CAST({c} AS VARCHAR)), '')"
    if column in VOCABULARY:
        spelled = " ".join(f"WHEN '{word.lower()}' THEN '{word}'"
                           for word in VOCABULARY[column])
        value = f"CASE lower({value}) {spelled} ELSE {value} END"
    return value, None


def first_entries_sql(entries: str) -> str:
    """The list of {key, value} structs `entries` with each key's first entry only. A
    repeated key-value record names a key more than once where its items come from several
    places: Google's FOCUS view for BigQuery lists a resource's labels, then its system
    labels, its project's labels and its tags, so a label `env` on a VM of a project labelled
    `env` comes twice, and the resource's own label (the first) is the one it carries."""
    keys = f"list_transform({entries}, lambda q: q.key)"
    return f"list_filter({entries}, lambda p, i: list_position({keys}, p.key) = i)"


def _entries_object_sql(array: str) -> str:
    """SQL for the JSON array text `array` of {key, value} objects (a repeated key-value
    record turned to text: BigQuery's TO_JSON_STRING of GCP's tags, which carry `inherited`
    and `namespace` too, not read) as the JSON object of its entries, each key's first
    (`first_entries_sql`); NULL where an item is no object with a key. Only for JSON arrays:
    `json_transform` fails on other text, and DuckDB's AND does not short-circuit."""
    entries = f"json_transform({array}, '[{{\"key\": \"VARCHAR\", \"value\": \"VARCHAR\"}}]')"
    keyed = f"list_filter({entries}, lambda p: p.key IS NOT NULL)"
    return (f"CASE WHEN len({keyed}) = json_array_length({array}) THEN CAST(to_json("
            f"map_from_entries({first_entries_sql(listed_entries_sql(entries, 'entries'))})) "
            "AS VARCHAR) END")


# FOCUS 0.5's and 1.0-preview's names of columns 1.0 renamed, read when a file has not the
# new one: Oracle Cloud's FOCUS reports (`Provider`, `Region`, `UsageQuantity`, `UsageUnit`)
# lost their hours, region and provider (every GPU hour `other`, reconciliation passing on 0)
OLDER_NAMES: dict[str, tuple[str, ...]] = {
    "ProviderName": ("Provider",),
    "RegionId": ("Region",),
    "ConsumedQuantity": ("UsageQuantity",),
    "ConsumedUnit": ("UsageUnit",),
}


def _json_object_sql(value: str) -> str:
    """SQL true when the text `value` is a JSON object, false for other JSON, NULL for text
    that is no JSON (json_type fails on malformed text, and AND does not short-circuit in
    DuckDB)."""
    return f"(CASE WHEN json_valid({value}) THEN json_type({value}) = 'OBJECT' END)"


def create_raw_table(con: duckdb.DuckDBPyConnection) -> None:
    columns = ", ".join(f"{sql_identifier(c)} {'VARCHAR' if k == 'JSON' else k}"
                        for c, k in COLUMNS.items())
    con.execute(f"CREATE OR REPLACE TEMP TABLE {RAW_TABLE} ({columns}, _file VARCHAR, "
                "_name VARCHAR, _row BIGINT, _problem VARCHAR)")


def _spelled(source: str, file: Path | str, header: list[str]) -> dict[str, str]:
    """The FOCUS columns this normalization reads that a file's header has, in COLUMNS order,
    each with the header's spelling: FOCUS's own, else the same name in another case, as a
    warehouse unloads it (Snowflake `BILLEDCOST`, Redshift `billedcost`). A column spelled
    in two cases, neither FOCUS's own, is refused (one spelling written twice:
    `_refuse_repeated`)."""
    exact, folded = set(header), {}
    for name in header:
        folded.setdefault(name.lower(), []).append(name)
    spelled = {}
    for column in COLUMNS:
        for name in (column, *OLDER_NAMES.get(column, ())):   # FOCUS's own name first
            if name in exact:
                spelled[column] = name
            elif len(set(folded.get(name.lower(), []))) > 1:
                spellings = dict.fromkeys(folded[name.lower()])
                raise SourceError(source, str(file), f"columns {' and '.join(spellings)}"
                                  f" both name FOCUS's {column}: keep one")
            elif name.lower() in folded:
                spelled[column] = folded[name.lower()][0]
            if column in spelled:
                break
    return spelled


def _refuse_repeated(source: str, file: Path | str, header: list[str],
                     spelled: dict[str, str]) -> None:
    """Refuse a file whose header names a column the normalization reads twice: which copy
    holds the cost is not the reader's guess (pyarrow's CSV reader took the first silently,
    and a parquet file's field lookup failed naming neither source nor file). A column it
    never reads (a provider's own, an older name beside FOCUS 1.0's) may come twice."""
    for name in spelled.values():
        copies = header.count(name)
        if copies > 1:
            times = "twice" if copies == 2 else f"{copies} times"
            raise SourceError(source, str(file),
                              f"column {name} appears {times} in the header: keep one")


def _check_type(source: str, path: Path | str, column: str, kind: str,
                arrow: pa.DataType | None) -> None:
    """Refuse a number or timestamp column of a type that holds none (a parquet file's list
    of doubles), naming it as the CUR source does (cur2.py `check_type`), rather than with
    DuckDB's cast error."""
    if arrow is None or kind not in ("DOUBLE", "TIMESTAMP"):
        return
    if pa.types.is_dictionary(arrow):
        arrow = arrow.value_type
    check_type(source, str(path), column, kind, arrow)


def _file_select(found: FocusFiles, path: Path | str, present: list[str], month: date,
                 rows_from: str, schema: pa.Schema) -> str:
    """The month's rows of one file as `focus_raw`'s columns (typed, with `_file`, `_name`,
    `_row` and `_problem`), read from `rows_from` (a relation with the file's `present`
    columns, as FOCUS names them, and `_row`); rows whose period cannot be read are kept
    (reported, never dropped)."""
    typed, problems = {}, []
    for column, kind in COLUMNS.items():
        arrow = schema.field(column).type if column in present else None
        _check_type(found.source, path, column, kind, arrow)
        typed[column], invalid = _typed(column, kind, arrow)
        if invalid:
            what = "a timestamp" if kind == "TIMESTAMP" else (
                "a number" if kind == "DOUBLE" else "a JSON object")
            problems.append((invalid, f"'{column} \"' || CAST({sql_identifier(column)} AS "
                             f"VARCHAR) || '\" is not {what}'"))
    problems += [(f"{typed[c]} IS NULL", f"'{c} is empty'") for c in REQUIRED]
    # inf, NaN (a CSV's `inf`, `NaN`) and overflowing amounts stop here, not at the report
    problems += [(bad_amount_sql(typed[c]), f"'{c} \"' || CAST({sql_identifier(c)} AS VARCHAR) || "
                  f"'\" is not a finite amount below {MAX_AMOUNT_TEXT}'")
                 for c, kind in COLUMNS.items() if kind == "DOUBLE" and c in present]
    if "x_AcceleratorCount" in present:
        problems.append((f"{typed['x_AcceleratorCount']} NOT BETWEEN 0 AND {MAX_ACCELERATORS}",
                         "'x_AcceleratorCount \"' || CAST(\"x_AcceleratorCount\" AS VARCHAR) "
                         f"|| '\" is not a count of accelerators (0 to {MAX_ACCELERATORS:,})'"))
    problems.append((f"{typed['ChargePeriodEnd']} < {typed['ChargePeriodStart']}",
                     "'ChargePeriodEnd is before ChargePeriodStart'"))
    problem = "CASE " + " ".join(f"WHEN {w} THEN {m}" for w, m in problems) + " END"
    period = f"coalesce({typed['BillingPeriodStart']}, {typed['ChargePeriodStart']})"
    start, end = month_bounds(month)
    select = ", ".join(f"{typed[c]} AS {sql_identifier(c)}" for c in COLUMNS)
    return (f"SELECT * EXCLUDE (_period) FROM (SELECT {select}, {sql_literal(str(path))} AS _file, "
            f"{sql_literal(_display_name(found, path))} AS _name, _row, {problem} AS _problem, "
            f"{period} AS _period FROM {rows_from}) "
            f"WHERE (_period >= TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}' "
            f"AND _period < TIMESTAMP '{end:%Y-%m-%d %H:%M:%S}') "
            "OR (_period IS NULL AND _problem IS NOT NULL)")


def _native_select(found: FocusFiles, path: Path, spelled: dict[str, str], month: date) -> str:
    """A local parquet file's month, read by DuckDB itself, in parallel, its rows numbered
    (`file_row_number`): at 2M rows ~3 s faster than streamed through pyarrow. The values and
    the typing are the same: `_typed` decides from the file's Arrow schema, which DuckDB maps
    to the same types."""
    file_schema = pq.read_schema(path)
    read = pa.schema([file_schema.field(name).with_name(c) for c, name in spelled.items()])
    schema = _binary_as_text(read)
    columns = ", ".join(f"{sql_identifier(name)} AS {sql_identifier(c)}"
                        for c, name in spelled.items())
    binary = ", binary_as_string = true" if schema != read else ""
    rows_from = (f"(SELECT {columns}, file_row_number + 1 AS _row FROM read_parquet("
                 f"{sql_literal(str(path))}, file_row_number = true{binary}))")
    return _file_select(found, path, list(spelled), month, rows_from, schema)


def _load_file(con: duckdb.DuckDBPyConnection, found: FocusFiles, path: Path | str,
               spelled: dict[str, str], month: date, log: logging.Logger | None = None) -> None:
    """Stream a file DuckDB does not read itself (CSV, or on S3) through pyarrow into the
    `focus_raw` table."""
    present = list(spelled)
    schema, batches = _batches(path, found.source, spelled, found.remote,
                               found.delimiters.get(path, ","), log)
    try:
        with registered_batches(con, "focus_file", schema, batches):
            con.execute(f"INSERT INTO {RAW_TABLE} "
                        + _file_select(found, path, present, month, "focus_file", schema))
    except duckdb.Error as exc:
        raise SourceError(found.source, str(path), str(exc).splitlines()[0]) from None


def _native(found: FocusFiles, path: Path | str, header: list[str]) -> bool:
    """Whether DuckDB reads the file itself: a local parquet file (one on S3 is read through
    pyarrow's ranged reads) without a column of the name DuckDB gives its row numbers, and
    whose path DuckDB would not read as a glob pattern."""
    return (found.remote is None and str(path).lower().endswith(".parquet")
            and "file_row_number" not in map(str.lower, header)  # DuckDB's names: any case
            and not any(c in str(path) for c in "*?[]{}"))


def _display_name(found: FocusFiles, path: Path | str) -> str:
    """The file as named in `x_SourceLine`: relative to the configured folder, so that line
    ids survive moving the folder."""
    if isinstance(path, str):  # s3://bucket/prefix/… below the configured s3:// prefix
        key, root = S3Uri.parse(path).key, S3Uri.parse(str(found.root)).key
        if not root:  # a whole bucket: the key (two folders' `2026-07.csv` are two files)
            return key
        return key[len(root):].lstrip("/") if key.startswith(root + "/") else (
            key.rsplit("/", 1)[-1])
    try:
        return str(path.relative_to(found.root))
    except ValueError:
        return path.name


def _find(source: str, path: str, fs, month: date) -> FocusFiles:
    if not is_s3(path):
        return find_files(source, path, month)
    files, sizes, modified = find_s3_files(source, path, fs, SUFFIXES)
    remote = S3Files(source, fs, sizes)
    listing = Listing(source, path, modified, remote.text,
                      lambda export, of: cur2_s3.find_delivery(source, export, of, fs).files,
                      lambda folder: [uri_of(i.path) for i in list_files(
                          fs, S3Uri.parse(folder).path, source) if i.is_file])
    current, superseded = current_files(listing, files, month)
    remote.sizes = {f: sizes[f] for f in current}
    return FocusFiles(source, path, current, remote=remote, superseded=superseded)


def _header(found: FocusFiles, file: Path | str) -> list[str]:
    if str(file).lower().endswith(".parquet"):
        try:
            if found.remote:
                return found.remote.parquet(str(file)).schema_arrow.names
            return pq.ParquetFile(file).schema_arrow.names
        except SourceError:
            raise
        except Exception as exc:  # pyarrow raises several types for a broken file
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SourceError(found.source, str(file),
                              f"not a readable parquet file ({reason})") from None
    line = (found.remote.csv_header(str(file)) if found.remote
            else _csv_header(file, found.source))
    header, delimiter = _split_header(found.source, file, line)
    if delimiter != ",":
        found.delimiters[file] = delimiter
    return header


def register_raw(con: duckdb.DuckDBPyConnection, source: str, path: str, month: date,
                 log: logging.Logger, fs=None) -> FocusFiles:
    """Load the month's rows of every FOCUS cost-and-usage file under `path` (a local file
    or folder, or an `s3://` object or prefix read through the pyarrow filesystem `fs`) into
    `focus_raw`; raise a SourceError naming the file, row and column of a bad value."""
    found = _find(source, path, fs, month)
    for note in found.superseded:
        log.info(f"{source}: {note}")
    try:
        _register(con, found, path, month, log)
    finally:
        if found.remote:
            found.remote.close()
    return found


def _register(con: duckdb.DuckDBPyConnection, found: FocusFiles, path: str, month: date,
              log: logging.Logger) -> None:
    source = found.source
    con.execute("SET TimeZone = 'UTC'")
    single = (len(found.files) == 1 and found.files[0] == path) if found.remote else (
        Path(path).is_file())
    headers, spellings = {}, {}
    for file in list(found.files):
        header = _header(found, file)
        spelled = _spelled(source, file, header)
        if is_azure_cost_details(header) and not all(c in spelled for c in REQUIRED):
            raise SourceError(source, str(file), "Azure's cost details, not a FOCUS file: "
                              "export Cost Management's FOCUS cost and usage dataset instead")
        if not single and not is_cost_and_usage(header):
            log.info(f"{source}: {file} is not a FOCUS cost-and-usage file: skipped")
            found.files.remove(file)
            found.skipped.append(file)
            continue
        _refuse_repeated(source, file, header, spelled)
        missing = [c for c in REQUIRED if c not in spelled]
        if missing:
            raise SourceError(source, str(file), f"missing FOCUS column(s) {', '.join(missing)}")
        headers[file], spellings[file] = header, spelled
    if headers and all(_native(found, f, h) for f, h in headers.items()):
        # local parquet files only: `focus_raw` is a view over them, read where the
        # normalization reads it (copied into the table, 2M rows took 0.8-1.0 s)
        selects = {file: _native_select(found, file, spellings[file], month)
                   for file in headers}
        for file in sorted(selects, key=str):  # the first bad row in (file, row) order
            _raise_first_problem(con, source, selects[file], str(file))
        con.execute(f"CREATE OR REPLACE TEMP VIEW {RAW_TABLE} AS "
                    + " UNION ALL ".join(selects.values()))
        found.raw_kind = "VIEW"
    else:
        create_raw_table(con)
        for file in headers:
            _load_file(con, found, file, spellings[file], month, log)
        _raise_first_problem(con, source, f"FROM {RAW_TABLE}")
        found.raw_kind = "TABLE"
    found.rows = con.execute(f"SELECT count(*) FROM {RAW_TABLE}").fetchone()[0]


def _raise_first_problem(con: duckdb.DuckDBPyConnection, source: str, rows: str,
                         file: str | None = None) -> None:
    """Raise a SourceError naming the first row of `rows` (a query) with a bad value."""
    try:
        bad = con.execute(f"SELECT _file, _row, _problem FROM ({rows}) WHERE _problem IS NOT "
                          "NULL ORDER BY _file, _row LIMIT 1").fetchone()
    except duckdb.Error as exc:
        raise SourceError(source, file, str(exc).splitlines()[0]) from None
    if bad:
        raise SourceError(source, f"{bad[0]} row {bad[1]}", bad[2])
