"""GCP detailed billing export in BigQuery → the month's reduced rows (one Arrow table) that
`assets/billing_facts_gcp.sql` normalizes to FOCUS columns.

One parameterized query per month (`assets/gcp_billing_export.bq.sql`) filters by
`usage_start_time` (rows arrive late), unnests labels and credits and aggregates to
resource × hour × SKU inside BigQuery, so only the reduced rows come back. A dry run of the
same query first reports the bytes it will scan. The table name is the one identifier put
into the SQL text, and only after it matched a strict pattern; every value is a query
parameter.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date

import pyarrow as pa
import pyarrow.compute as pc

from cost_pipeline.config import GcpBillingExportSource
from cost_pipeline.ingest.sources import MAX_AMOUNT, MAX_AMOUNT_TEXT, SourceError, bad_amount
from cost_pipeline.months import month_bounds
from cost_pipeline.warehouse import sql_text

# project (optionally domain-scoped, `example.com:proj`) . dataset . table
TABLE_ID = re.compile(
    r"^(?:(?P<project>(?:[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9])\.)?"
    r"(?P<dataset>[A-Za-z0-9_]{1,1024})\.(?P<table>[A-Za-z0-9_]{1,1024})$"
)
# credits that lower the price of the usage itself: part of EffectiveCost (SPEC §3);
# every other credit type (PROMOTION, FREE_TIER, RESELLER_MARGIN, SUBSCRIPTION_BENEFIT, …)
# becomes a Credit row
USAGE_DISCOUNT_TYPES = (
    "SUSTAINED_USAGE_DISCOUNT",
    "COMMITTED_USAGE_DISCOUNT",
    "COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE",
    "DISCOUNT",
)
# Throttling (429), 5xx answers, timeouts and connection errors are retried with exponential
# backoff (the client's own retry predicate) for at most this long per call, then reported;
# the client's default is 10 minutes per call (and 40 for a query job).
RETRY_SECONDS = 120.0
RETRY_INITIAL_DELAY_SECONDS = 1.0
REQUEST_TIMEOUT_SECONDS = 60.0  # per HTTP request: a server that stops answering is retried
ADC_FIX = (
    "no Google credentials: run `gcloud auth application-default login`, set "
    "GOOGLE_APPLICATION_CREDENTIALS, or give `api_endpoint` for an emulator"
)
# the reduced rows as assets/billing_facts_gcp.sql reads them (an empty month keeps its types)
RAW_SCHEMA = pa.schema([
    ("global_name", pa.string()), ("shared_project", pa.string()),
    ("shared_labels", pa.string()), ("hour_start", pa.timestamp("us", tz="UTC")),
    ("sku_id", pa.string()), ("cost_type", pa.string()), ("run_label", pa.string()),
    ("credit_type", pa.string()), ("usage_end", pa.timestamp("us", tz="UTC")),
    ("amount", pa.float64()), ("usage_discounts", pa.float64()),
    ("usage_amount", pa.float64()), ("pricing_amount", pa.float64()),
    ("export_rows", pa.int64()), ("invoice_month", pa.string()),
    ("resource_name", pa.string()), ("sku_description", pa.string()),
    ("service_description", pa.string()), ("region", pa.string()),
    ("usage_unit", pa.string()), ("pricing_unit", pa.string()), ("currency", pa.string()),
    ("labels_json", pa.string()), ("machine_spec", pa.string()), ("cores", pa.string()),
    ("commitment_discounts", pa.float64()), ("list_amount", pa.float64()),
    ("accelerator_type", pa.string()),
    ("reversed_periods", pa.int64()), ("undated_rows", pa.int64()),
    ("empty_costs", pa.int64()), ("empty_credits", pa.int64()),
    ("empty_currencies", pa.int64()), ("least_currency", pa.string()),
])
# the export's fields the month's query reads (assets/ingest/gcp_billing_export.bq.sql)
FIELDS = ("usage_start_time", "usage_end_time", "service.description", "sku.id",
          "sku.description", "location.region", "location.location", "resource.name",
          "resource.global_name", "usage.amount", "usage.unit", "usage.amount_in_pricing_units",
          "usage.pricing_unit", "cost_type", "invoice.month", "currency", "cost", "credits.amount",
          "credits.type", "labels.key", "labels.value", "system_labels.key",
          "system_labels.value", "project.id")
STANDARD_EXPORT_FIX = (
    "a standard usage cost export (gcp_billing_export_v1_…) has no resource field: read the "
    "detailed usage cost export (gcp_billing_export_resource_v1_…), which names each VM, "
    "disk and bucket")
# a reduced row's key (its x_SourceLine), in the order assets/ingest/billing_facts_gcp.sql
# numbers the rows (x_Row); a row naming no resource is keyed by its project and labels too,
# and an hour's slices invoiced in another month are rows of their own
KEY = ("global_name", "shared_project", "shared_labels", "hour_start", "sku_id", "cost_type",
       "run_label", "credit_type", "invoice_month")


@dataclass
class ExportTable:
    project: str
    dataset: str
    table: str

    def __str__(self) -> str:
        return f"{self.project}.{self.dataset}.{self.table}"


@dataclass
class MonthRead:
    """What one month's query brought back, and what it cost to get it."""

    table: str
    rows: pa.Table
    bytes_scanned_estimate: int | None = None   # the dry run's total_bytes_processed
    table_rows: int | None = None                # rows in the export table (all months)
    export_rows_read: int = 0                    # export rows of the month, before reduction

    @property
    def rows_returned(self) -> int:
        return self.rows.num_rows

    @property
    def metadata(self) -> dict:
        return {
            "table": self.table,
            "bytes_scanned_estimate": self.bytes_scanned_estimate,
            "table_rows": self.table_rows,
            "export_rows_read": self.export_rows_read,
            "rows_returned": self.rows_returned,
        }


def parse_table(source_name: str, source: GcpBillingExportSource) -> ExportTable:
    match = TABLE_ID.match(source.table.strip())
    if not match:
        raise SourceError(source_name, source.table,
                          "not a BigQuery table id: expected project.dataset.table "
                          "(letters, digits and underscores in dataset and table names)")
    project = match["project"] or source.project
    if not project:
        raise SourceError(source_name, source.table,
                          "the table names no project: write project.dataset.table or set "
                          "`project:`")
    return ExportTable(project, match["dataset"], match["table"])


def month_sql(table: ExportTable, has_cost_at_list: bool = False) -> str:
    """The month's query for `table`, comments dropped (the emulator counts a parameter name
    in a comment as a use of it). ListCost is the export's `cost_at_list` when the table has
    it (exports since 2023), else `cost` before credits: the price without sustained or
    committed use discounts, the closest to on-demand an older export states — but not for a
    Spot/Preemptible SKU, whose cost is the spot price and whose cost_at_list is that spot
    SKU's list price, either way no on-demand price (billing_facts_gcp.sql: NULL)."""
    text = re.sub(r"(?m)^\s*--.*\n", "", sql_text("gcp_billing_export.bq"))
    return (text.replace("{export_table}", str(table))
            .replace("{list_cost}", "cost_at_list" if has_cost_at_list else "cost"))


def make_client(source: GcpBillingExportSource, table: ExportTable):
    """A BigQuery client: anonymous against `api_endpoint` (an emulator), else Application
    Default Credentials. Jobs run in `project:` when set, else in the table's project."""
    from google.cloud import bigquery

    project = source.project or table.project
    if source.api_endpoint:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials

        return bigquery.Client(project=project, credentials=AnonymousCredentials(),
                               client_options=ClientOptions(api_endpoint=source.api_endpoint))
    return bigquery.Client(project=project)


def read_month(source_name: str, source: GcpBillingExportSource, month: date,
               run_tag: str) -> MonthRead:
    """The month's reduced rows, with the dry run's byte estimate and the row counts."""
    import requests
    from google.api_core import exceptions as api_errors
    from google.auth import exceptions as auth_errors
    from google.cloud import bigquery

    table = parse_table(source_name, source)
    start, end = month_bounds(month)
    params = [
        bigquery.ScalarQueryParameter("month_start", "TIMESTAMP", start.replace(tzinfo=UTC)),
        bigquery.ScalarQueryParameter("month_end", "TIMESTAMP", end.replace(tzinfo=UTC)),
        bigquery.ScalarQueryParameter("invoice_month", "STRING", f"{month:%Y%m}"),
        bigquery.ScalarQueryParameter("run_tag", "STRING", run_tag),
        bigquery.ArrayQueryParameter("usage_discount_types", "STRING",
                                     list(USAGE_DISCOUNT_TYPES)),
    ]
    retry = bigquery.DEFAULT_RETRY.with_timeout(RETRY_SECONDS).with_delay(
        initial=RETRY_INITIAL_DELAY_SECONDS, maximum=max(RETRY_SECONDS / 4, 1.0))
    # a query job that fails for a transient reason is re-run, within twice the call budget
    job_retry = bigquery.retry.DEFAULT_JOB_RETRY.with_timeout(2 * RETRY_SECONDS).with_delay(
        initial=RETRY_INITIAL_DELAY_SECONDS, maximum=max(RETRY_SECONDS / 4, 1.0))
    calls = {"retry": retry, "timeout": REQUEST_TIMEOUT_SECONDS}
    try:
        client = make_client(source, table)
        with client:
            export = client.get_table(str(table), **calls)
            check_fields(source_name, str(table), export.schema or [])
            table_rows = export.num_rows
            has_list = any(f.name == "cost_at_list" for f in export.schema or [])
            sql = month_sql(table, has_list)
            dry = client.query(sql, job_config=bigquery.QueryJobConfig(
                dry_run=True, use_query_cache=False, query_parameters=params), **calls)
            job = client.query(sql, job_config=bigquery.QueryJobConfig(query_parameters=params),
                               job_retry=job_retry, **calls)
            # the reduced rows are few: the REST pages suffice (no Storage Read API needed)
            rows = job.result(retry=retry, job_retry=job_retry).to_arrow(
                create_bqstorage_client=False)
    except auth_errors.DefaultCredentialsError:
        raise SourceError(source_name, str(table), ADC_FIX) from None
    except api_errors.NotFound as exc:
        raise SourceError(source_name, str(table), f"not found: {_message(exc)}") from None
    except api_errors.RetryError as exc:
        cause = _message(exc.cause) if exc.cause is not None else _message(exc)
        raise SourceError(source_name, str(table), f"unreachable: still failing after retrying "
                          f"for {RETRY_SECONDS:g} s ({cause})") from None
    except api_errors.GoogleAPIError as exc:
        raise SourceError(source_name, str(table), _message(exc)) from None
    except (OSError, requests.RequestException) as exc:  # a transport error not retried
        raise SourceError(source_name, str(table), f"unreachable: {_message(exc)}") from None
    rows = _typed(rows)
    check_rows(source_name, str(table), rows, month, run_tag, has_list)
    return MonthRead(str(table), rows, dry.total_bytes_processed, table_rows,
                     int(pc.sum(rows["export_rows"]).as_py() or 0))


def _typed(rows: pa.Table) -> pa.Table:
    """The reduced rows in RAW_SCHEMA's column order and types. BigQuery returns a GROUP BY's
    rows in any order: the normalization numbers them (x_Row) in KEY order, where sorting
    them here took 7.5 s per 2M rows (DuckDB's sort, a fraction of it)."""
    columns = [rows[f.name].cast(f.type) if f.name in rows.column_names
               else pa.nulls(rows.num_rows, f.type) for f in RAW_SCHEMA]
    return pa.Table.from_arrays(columns, schema=RAW_SCHEMA)


def check_fields(source_name: str, table: str, schema: list) -> None:
    """Raise naming the fields of FIELDS the table lacks (BigQuery's own error names one,
    as `Unrecognized name`), saying so where the table is the standard export."""
    def names(fields, prefix: str = "") -> set[str]:
        found = set()
        for field in fields:
            found.add(prefix + field.name)
            found |= names(field.fields or (), prefix + field.name + ".")
        return found

    present = names(schema)
    missing = [f for f in FIELDS if f not in present]
    if "resource.global_name" in missing:
        raise SourceError(source_name, table, STANDARD_EXPORT_FIX)
    if missing:
        raise SourceError(source_name, table, f"not a detailed billing export: no field "
                          f"{', '.join(missing)}")


def check_rows(source_name: str, table: str, rows: pa.Table, month: date, run_tag: str,
               has_cost_at_list: bool = True) -> None:
    """Raise a SourceError naming the export table and the key of the first reduced row
    (in KEY order, as the normalization numbers them) that sums an export row the month
    cannot take: no start time (in no month: those invoiced in the month are read to be
    named), an empty cost or credit amount (SUM would skip it), a figure that is not a
    finite amount below MAX_AMOUNT, a usage that ends before it starts, no currency, or a
    currency other than the month's."""
    def first(mask) -> dict | None:
        hit = rows.filter(mask)  # a null in the mask is not a hit
        if not hit.num_rows:
            return None
        return hit.sort_by([(k, "ascending") for k in KEY]).slice(0, 1).to_pylist()[0]

    def refuse(row: dict, problem: str):
        raise SourceError(source_name, f"{table}, the export rows of {describe(row, run_tag)}",
                          problem)

    for column, problem in (
            ("undated_rows", "usage_start_time is empty in {n} export row(s) invoiced in the "
                             "month: a row is read in the month its usage starts"),
            ("empty_costs", "cost is empty in {n} export row(s)"),
            ("empty_credits", "credits.amount is empty in {n} credit(s) of its export rows"),
            ("empty_currencies", "currency is empty in {n} export row(s)"),
            ("reversed_periods", "usage_end_time is before usage_start_time in {n} export "
                                 "row(s)")):
        row = first(pc.greater(rows[column], 0))
        if row:
            refuse(row, problem.format(n=row[column]))
    fields = {"amount": "cost", "usage_discounts": "credits.amount",
              "list_amount": "cost_at_list" if has_cost_at_list else "cost",
              "usage_amount": "usage.amount", "pricing_amount": "usage.amount_in_pricing_units"}
    bad = {c: pc.or_(pc.invert(pc.is_finite(rows[c])),
                     pc.greater_equal(pc.abs(rows[c]), MAX_AMOUNT)) for c in fields}
    row = first(functools.reduce(pc.or_, bad.values()))
    if row:
        column = next(c for c in fields if row[c] is not None and bad_amount(row[c]))
        field = "credits.amount" if column == "amount" and row["credit_type"] else fields[column]
        refuse(row, f"{field} sums to {row[column]}: a cost or quantity must be a finite "
                    f"number below {MAX_AMOUNT_TEXT}")
    row = first(pc.not_equal(rows["least_currency"], rows["currency"]))
    if row:
        refuse(row, f"its export rows are in {row['least_currency']} and {row['currency']}: "
                    "one currency per month is required")
    counts = sorted((-c["counts"], c["values"])
                    for c in rows["currency"].drop_null().value_counts().to_pylist())
    if len(counts) > 1:
        month_currency = counts[0][1]
        row = first(pc.not_equal(rows["currency"], month_currency))
        refuse(row, f"currency {row['currency']} differs from {month_currency}: one currency "
                    f"per month is required ({month:%Y-%m} has "
                    f"{', '.join(sorted(c for _, c in counts))})")


def describe(row: dict, run_tag: str) -> str:
    """A reduced row's key as the export's fields spell it: what to filter the table by."""
    sku = row["sku_id"] or "(none)"
    hour = (f"hour {row['hour_start']:%Y-%m-%d %H:00} UTC" if row["hour_start"] is not None
            else f"invoice month {row['invoice_month']}")
    parts = [f"resource {row['global_name']}" if row["global_name"] else "no resource"
             + (f" (project {row['shared_project']})" if row.get("shared_project") else ""),
             hour,
             f"SKU {sku} ({row['sku_description']})" if row["sku_description"] else f"SKU {sku}"]
    if row["cost_type"] != "regular":
        parts.append(f"cost_type {row['cost_type']}")
    if row["run_label"] is not None:
        parts.append(f"label {run_tag}={row['run_label']}")
    if row["credit_type"] is not None:
        parts.append(f"credit {row['credit_type']}")
    if row["hour_start"] is not None and row["invoice_month"] != f"{row['hour_start']:%Y%m}":
        parts.append(f"invoice month {row['invoice_month']}")
    return ", ".join(parts)


def _message(exc) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
