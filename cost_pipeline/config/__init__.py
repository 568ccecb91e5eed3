"""The YAML contract (SPEC §9): one file, validated with pydantic, relative paths resolved
against the file's folder. An error names the key and what was expected. The file's text is
read as YAML 1.2 by `yaml_reader`."""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from cost_pipeline.config.yaml_reader import Unreadable, Yaml12Float, read_yaml, yaml_problem
from cost_pipeline.months import FIRST_MONTH, open_month, parse_month

CONFIG_ENV = "COST_PIPELINE_CONFIG"


class ConfigError(ValueError):
    """The config file is missing, unreadable or does not match the contract."""


class _Strict(BaseModel):
    # strict: YAML's `yes` is no share and `true` no count (a threshold of `yes` read as 1.0
    # passed every reconciliation); an int is still a float
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _yaml12_number(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        # YAML's `.nan` and `.inf`: `.nan` read "should be greater than or equal to 0" and
        # `.inf` passed as a budget
        raise ValueError(f"{value} is not a finite number")
    if not isinstance(value, Yaml12Float):
        return value
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value} is too large for a number")
    return number


# a number of the config: an int or a float, or a YAML 1.2 float (`1e6`, read as a
# `Yaml12Float`); never text, nor `yes`/`true` (strict)
Number = Annotated[float, BeforeValidator(_yaml12_number)]


# a path, URI, table, bucket or name that must say something: an empty tracking_uri read an
# empty `./mlflow.db` (or $MLFLOW_TRACKING_URI's tracker), an empty path the config's folder
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]


def _no_credentials(url: str | None) -> str | None:
    """An endpoint URL without `user:password@`: credentials come from the standard chain
    (AWS: environment, profile, role; GCP: Application Default), never from this file (an
    endpoint's error then showed the access key)."""
    if url and "@" in url.split("://", 1)[-1].split("/", 1)[0]:
        raise ValueError("must not carry credentials (user:password@): they come from the "
                         "standard chain (environment, profile, role), never from this file")
    return url


# an S3-compatible or API endpoint: a URL without credentials
Endpoint = Annotated[str | None, AfterValidator(_no_credentials)]


def _no_uri_credentials(path: str) -> str:
    """A source's path or URI: an `s3://` (or any `scheme://`) one without `user:password@`
    (pyarrow's error quoted `AKIA…:secret@bucket`, stored in the run's event log too); a
    local path may hold an `@`. A bucket name never holds a `:`: an S3 URI's first part with
    one is a key and a secret, whose `/` (AWS secrets hold them) hid the `@` after it."""
    if "://" not in path:
        return path
    scheme, rest = path.split("://", 1)
    if scheme.lower() == "s3" and ":" in rest.split("/", 1)[0]:
        return _no_credentials(f"{scheme}://x@{rest}")  # refused, naming no part of it
    return _no_credentials(path)


# a source's path or URI (local or `s3://…`), never carrying credentials
SourcePath = Annotated[str, Field(min_length=1, pattern=r"\S"),
                       AfterValidator(_no_uri_credentials)]
# a source's or tracker's name: it starts each of its lines' ids (`name:…`), so no `:` —
# `cur` and `cur:eu` mixed their per-source figures
SourceName = Annotated[str | None, Field(pattern=r"^[^:]+$")]
# the most accelerators one instance type counts (as for one run's `gpus`)
MAX_ACCELERATORS = 1_000_000


def _local_file(path: str) -> str:
    """The warehouse's path: a local DuckDB file, never a URI (`s3://b/w.duckdb` was written
    under the working folder as `./s3:/b/w.duckdb`). Only the scheme is named: the rest may
    carry credentials."""
    if "://" in path:
        scheme = re.match(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://", path)
        raise ValueError(f"must be a local file, not a URI ({scheme.group(1) if scheme else ''}"
                         "://…): the warehouse is a local DuckDB file")
    return path


# the warehouse's file: a local path that says something
WarehousePath = Annotated[str, Field(min_length=1, pattern=r"\S"), AfterValidator(_local_file)]


# what DuckDB's memory_limit takes (tried on a connection: tests/cli/test_config_contract.py):
# a number and a unit of bytes, a share of the memory, or -1 (no limit); its units
_SIZE = re.compile(r"(?i)^[ \t]*(?:-1|(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t]*"
                   r"(?P<unit>%|b|bytes?|[kmgt]|[kmgt]b|[kmgt]ib|(?:kilo|mega|giga|tera)bytes?))"
                   r"[ \t]*$")
_UNIT_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}
MEMORY_LIMIT_MAX = 2**64  # bytes: DuckDB refuses more, "Memory value out of range"
_SIZE_EXAMPLES = ("expected e.g. 8GB, 1.5GiB, 80% or -1 (no limit); units B, KB, MB, GB, TB "
                  "(1000s), KiB, MiB, GiB, TiB (1024s)")


def _memory_limit(value: object) -> object:
    """DuckDB's memory_limit as the config takes it: what DuckDB takes, refused here, not by
    DuckDB at the first connection without the file or the key (`101%`, `1PB` passed). An
    integer is its text: `memory_limit: -1`, unquoted as the docs show it, was no string."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return value  # refused as no string (strict)
    size = _SIZE.match(value)
    if size is None:
        raise ValueError(f"{value!r} is no size: {_SIZE_EXAMPLES}")
    if size["number"] is None:
        return value
    number, unit = Decimal(size["number"]), size["unit"].lower()
    if unit == "%":
        if number > 100:
            raise ValueError(f"{value!r} is no size: a share of the memory is 0% to 100%")
        return value
    size_bytes = number * (1024 if unit.endswith("ib") else 1000) ** _UNIT_POWERS.get(unit[0], 0)
    if size_bytes >= MEMORY_LIMIT_MAX:
        raise ValueError(f"{value!r} is no size: more than DuckDB takes (16 EiB)")
    return value


class WarehouseConfig(_Strict):
    path: WarehousePath = "data/warehouse.duckdb"
    # DuckDB's memory_limit: what it may hold before spilling to `<warehouse>.tmp/`. The default
    # keeps the whole process under 2 GiB at 20M billing lines; more is faster on big
    # machines; null leaves DuckDB's own default (80% of the RAM)
    memory_limit: Annotated[str | None, BeforeValidator(_memory_limit)] = "1100MB"
    threads: int | None = Field(None, ge=1, le=4096)


class AwsCur2Source(_Strict):
    kind: Literal["aws_cur2"]
    path: SourcePath
    endpoint_url: Endpoint = None
    region: str | None = None
    name: SourceName = None


class GcpBillingExportSource(_Strict):
    kind: Literal["gcp_billing_export"]
    table: Text
    api_endpoint: Endpoint = None
    project: str | None = None
    name: SourceName = None


class FocusSource(_Strict):
    kind: Literal["focus"]
    path: SourcePath                       # a local file or folder, or s3://bucket/prefix
    endpoint_url: Endpoint = None  # optional: an S3-compatible endpoint (as aws_cur2)
    region: str | None = None
    name: SourceName = None


BillingSource = Annotated[
    AwsCur2Source | GcpBillingExportSource | FocusSource, Field(discriminator="kind")
]


class MlflowTracker(_Strict):
    kind: Literal["mlflow"]
    tracking_uri: Text
    # none: every experiment; an empty list read every one too, as if the key were left out
    experiments: Annotated[list[Text], Field(min_length=1)] | None = None
    metric: str | None = None
    tags: dict[str, Text] = {}   # an empty tag name read no value: every run's lost, silently
    name: SourceName = None
    # after each month: the runs' `cost.*` tags summed over the warehouse's months (SPEC §12)
    write_back: bool = False


class RunsFileTracker(_Strict):
    kind: Literal["runs_file"]
    path: SourcePath
    name: SourceName = None


TrackerSource = Annotated[MlflowTracker | RunsFileTracker, Field(discriminator="kind")]


class S3Checkpoints(_Strict):
    kind: Literal["s3"]
    bucket: Text
    prefix: str = ""
    endpoint_url: Endpoint = None
    region: str | None = None


class InventoryCheckpoints(_Strict):
    kind: Literal["inventory"]
    path: SourcePath  # a plain CSV, an S3 Inventory manifest.json or its folder; local or s3://
    prefix: str = ""
    # the bucket of a plain CSV without a bucket column, or of a manifest without sourceBucket
    bucket: str | None = None
    endpoint_url: Endpoint = None  # for an s3:// path on an S3-compatible endpoint
    region: str | None = None


class LocalCheckpoints(_Strict):
    kind: Literal["local"]
    path: Text
    bucket: Text
    prefix: str = ""


CheckpointSource = Annotated[
    S3Checkpoints | InventoryCheckpoints | LocalCheckpoints, Field(discriminator="kind")
]


# a dataset's bucket as a URI or an S3 ARN: the bill names the bucket alone
_BUCKET_URI = re.compile(r"(?i)^(?:(?:s3|gs)://|arn:aws[a-z-]*:s3:::)(.*)$")


def _whole_bucket(written: str) -> str:
    """A dataset's bucket as the bills name it: `s3://b`, `gs://b/` or `arn:aws:s3:::b` is
    `b`; an Azure storage account's id (`/subscriptions/…`) stays as written. A path
    inside a bucket is refused: its transfer is billed on the bucket, so `b/prefix/` never
    matched a line and went untracked without a word."""
    if written.lower().startswith("/subscriptions/"):
        return written
    uri = _BUCKET_URI.match(written)
    if uri is None and "://" in written:
        raise ValueError(f"{written!r} is no bucket: expected a bucket's name (s3://… and "
                         "gs://… are read as theirs) or an Azure storage account's id")
    bucket, _, inside = (uri.group(1) if uri else written).partition("/")
    if not bucket.strip():
        raise ValueError(f"{written!r} names no bucket: expected a bucket's name")
    if inside.strip("/"):
        raise ValueError(f"{written!r} names a path inside bucket {bucket!r}: a dataset is a "
                         "whole bucket (its transfer is billed on the bucket); write bucket: "
                         f"{bucket}")
    return bucket


class Dataset(_Strict):
    bucket: Annotated[Text, AfterValidator(_whole_bucket)]
    region: Text  # as written: compared whatever its case and surrounding blanks


class ReconciliationPolicy(_Strict):
    max_untracked_share: Number = Field(0.05, ge=0, le=1)


class RetentionPolicy(_Strict):
    keep_last_live: int = Field(3, ge=0)
    keep_last_production: int = Field(3, ge=0)
    grace_days: int = Field(7, ge=0, le=36500)
    max_monthly_violation_cost: Number = Field(100.0, ge=0)


class SearchPolicy(_Strict):
    approval_budget: Number = Field(10000.0, ge=0)
    metric_goal: Literal["max", "min"] = "max"


class RetrainPolicy(_Strict):
    # a retrain whose metric moved less than this (either way) changed nothing measurable
    min_metric_change: Number = Field(0.002, ge=0)


class TrendPolicy(_Strict):
    # model_cost_trend fails when a model's month costs more than this × the median of its
    # previous 3 months (SPEC §12)
    max_growth: Number = Field(1.5, gt=0)


class Policy(_Strict):
    reconciliation: ReconciliationPolicy = ReconciliationPolicy()
    retention: RetentionPolicy = RetentionPolicy()
    search: SearchPolicy = SearchPolicy()
    retrain: RetrainPolicy = RetrainPolicy()
    trend: TrendPolicy = TrendPolicy()


class Alerts(_Strict):
    # the NAME of the environment variable holding the webhook URL: the URL is a secret
    webhook_url_env: str = Field("COST_ALERT_WEBHOOK_URL", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    timeout_seconds: Number = Field(10.0, gt=0, le=30)


class ScheduleSettings(_Strict):
    """When the monthly close runs (the bill needs a few days to settle) and the daily
    month-to-date refresh of the open month."""

    day_of_month: int = Field(3, ge=1, le=28)
    hour_of_day: int = Field(6, ge=0, le=23)
    daily_refresh_hour: int = Field(5, ge=0, le=23)


class PipelineConfig(_Strict):
    # the first monthly partition (`YYYY-MM`); months before it cannot be materialized
    first_month: date = FIRST_MONTH
    warehouse: WarehouseConfig = WarehouseConfig()
    billing: list[BillingSource] = []
    run_tag: Text = "run_id"
    accelerators: dict[str, int] = {}
    datasets: dict[str, Dataset] = {}
    tracker: list[TrackerSource] = []
    checkpoints: list[CheckpointSource] = []
    policy: Policy = Policy()
    alerts: Alerts = Alerts()
    schedule: ScheduleSettings = ScheduleSettings()
    base_dir: Path = Path(".")

    @field_validator("first_month", mode="before")
    @classmethod
    def _a_month(cls, value: object) -> date:
        if isinstance(value, datetime):  # YAML reads 2020-01-01T00:00:00Z as an instant
            month = _month_starting_at(value)
        elif isinstance(value, date):  # YAML reads 2015-01-01 as a date
            if value.day != 1:
                raise ValueError(f"{value}: expected a month, YYYY-MM")
            month = value
        else:
            month = parse_month(str(value))
        if month.year < 1970:  # `0202-01` for 2020-01: no partition can be named before it
            raise ValueError(f"{month.year:04d}-{month.month:02d}: a month from 1970 on is "
                             "expected")
        if month > open_month():
            raise ValueError(f"{month:%Y-%m} has not started yet")
        return month

    @field_validator("billing", "tracker")
    @classmethod
    def _names_once(cls, value: list) -> list:
        """A name given to two entries: the second's lines were named by its position
        (`aws3:…`), and an error about them named a source nobody wrote."""
        seen: dict[str, int] = {}
        for i, entry in enumerate(value):
            name = getattr(entry, "name", None)
            if name is not None and name in seen:
                raise ValueError(f"name {name!r} is given to entries {seen[name]} and {i}: "
                                 "each source's name must be its own")
            if name is not None:
                seen[name] = i
        return value

    @field_validator("accelerators")
    @classmethod
    def _counts_positive(cls, value: dict[str, int]) -> dict[str, int]:
        for instance_type, count in value.items():
            if not 0 <= count <= MAX_ACCELERATORS:
                raise ValueError(f"{instance_type}: accelerator count must be 0 to "
                                 f"{MAX_ACCELERATORS:,}")
        return value

    def resolve(self, path: str) -> str:
        """A config path made absolute against the config file's folder (URIs untouched)."""
        if "://" in path:
            return path
        p = Path(path).expanduser()
        return str(p if p.is_absolute() else (self.base_dir / p).resolve())

    @property
    def warehouse_path(self) -> str:
        return self.resolve(self.warehouse.path)


def _month_starting_at(instant: datetime) -> date:
    """The month an instant written for `first_month` starts: its first instant in UTC, the
    partitions' time (`2020-01-01T00:00:00Z`, `2020-01-01 00:00:00`); an instant inside a
    month names none (it was compared with a date: a traceback, and no code location)."""
    utc = instant.astimezone(UTC).replace(tzinfo=None) if instant.tzinfo else instant
    if utc != datetime(utc.year, utc.month, 1):
        raise ValueError(f"{instant} is an instant inside {utc:%Y-%m} (UTC), not a month: "
                         "expected YYYY-MM")
    return utc.date()


def _describe(error: dict) -> str:
    loc = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    msg = error["msg"]
    if error["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif error["type"] == "extra_forbidden":
        msg = "unknown key"
    elif error["type"] == "string_pattern_mismatch" and loc.endswith(".name"):
        msg = "must not contain ':' (it separates a line's source from its id)"
    elif error["type"] == "string_pattern_mismatch" and loc.endswith("webhook_url_env"):
        # the value is not repeated: it may be the secret URL itself
        msg = ("must name the environment variable holding the webhook URL (e.g. "
               "COST_ALERT_WEBHOOK_URL), not the URL: the URL is a secret, kept out of the file")
    elif error["type"] == "string_pattern_mismatch":
        msg = "must not be blank"
    elif error["type"] == "string_type" and isinstance(error.get("input"), bool):
        # a region `no`, a run_tag `on`: "Input should be a valid string" said nothing of why
        msg = ("YAML reads an unquoted yes, no, on, off, true or false as a boolean (here "
               f"{str(error['input']).lower()}): quote it if it is text")
    elif error["type"] == "string_too_short":
        msg = "must not be empty"
    elif error["type"] == "union_tag_invalid":
        msg = f"unknown kind {error.get('input', {}).get('kind')!r}; expected one of " + (
            error.get("ctx", {}).get("expected_tags", "")
        )
    return f"{loc or '(top level)'}: {msg}"


def parse_config(data: object, base_dir: Path, origin: str = "<config>") -> PipelineConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a mapping at the top level")
    if "base_dir" in data:  # the file's folder, set here: no key of the file
        raise ConfigError(f"{origin}: base_dir: unknown key")
    try:
        return PipelineConfig.model_validate({**data, "base_dir": Path(base_dir)})
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(f"{origin}: {problems}") from None


def config_file(path: str | os.PathLike[str]) -> Path:
    """The config file as every reader names it: absolute, its links not followed — a config
    linked into place (a Kubernetes ConfigMap mount links it into a `..2024_…` folder)
    resolves its relative paths, and its warehouse, beside the link."""
    return Path(os.path.abspath(Path(path).expanduser()))


# what a config path given empty or blank is told, by `load_config` and the command line alike
EMPTY_PATH = ("the config path is empty: name the config file, or leave --config out to read "
              f"${CONFIG_ENV}")
NO_CONFIG = f"no config: pass --config FILE or set {CONFIG_ENV}"


def config_path(path: str | os.PathLike[str] | None = None) -> str | os.PathLike[str]:
    """The config to read: `path`, else (None) $COST_PIPELINE_CONFIG. A path given empty or
    blank is refused, not replaced by the variable: `--config "$CFG"` with CFG unset read the
    variable's config, another warehouse, without a word. The variable set blank is no config
    (it read a file named by its blanks)."""
    if path is not None and not str(path).strip():
        raise ConfigError(EMPTY_PATH)
    given = os.environ.get(CONFIG_ENV, "") if path is None else path
    if not str(given).strip():
        raise ConfigError(NO_CONFIG)
    return given


def load_config(path: str | os.PathLike[str] | None = None) -> PipelineConfig:
    """Load and validate the config at `path` (else, when None, $COST_PIPELINE_CONFIG)."""
    file = config_file(config_path(path))
    try:
        content = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config {file}: {exc.strerror or exc}") from None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content.count(b"\n", 0, exc.start) + 1
        column = exc.start - (content.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"config {file} line {line} column {column}: not UTF-8 text (byte "
                          f"0x{content[exc.start]:02x}); save the file as UTF-8") from None
    try:
        data = read_yaml(text)
    except Unreadable as exc:
        raise ConfigError(f"config {file} {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {file}{yaml_problem(exc, text)}") from None
    if data is None:
        # no bytes, only blanks or comments, or a YAML null: read as every default, the
        # month was an empty warehouse written beside the file, exit 0 (`{}` still is that)
        raise ConfigError(f"config {file}: {EMPTY_FILE}")
    return parse_config(data, file.parent, origin=f"config {file}")


EMPTY_FILE = ("the file is empty; it must hold the config as a YAML mapping: the bills to "
              "attribute (billing:), the runs (tracker:), the checkpoints (checkpoints:), …")
