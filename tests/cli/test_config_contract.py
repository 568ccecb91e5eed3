"""The config file's contract (SPEC §9): what it refuses, with one line naming the file and
the key — a value of the wrong kind is never read as another (`yes` as a share of 1.0), a key
written twice never drops the first, and relative paths resolve beside the file as named."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cost_pipeline.config import ConfigError, load_config, parse_config


@pytest.mark.parametrize(("data", "named"), [
    # YAML's booleans are no numbers: `max_untracked_share: yes` passed every reconciliation
    ({"policy": {"reconciliation": {"max_untracked_share": True}}},
     "policy.reconciliation.max_untracked_share"),
    ({"policy": {"retention": {"keep_last_live": True}}}, "policy.retention.keep_last_live"),
    ({"policy": {"retention": {"grace_days": False}}}, "policy.retention.grace_days"),
    ({"policy": {"search": {"approval_budget": True}}}, "policy.search.approval_budget"),
    ({"accelerators": {"x.large": True}}, "accelerators.x.large"),
    # an empty tracker or path read nothing (or $MLFLOW_TRACKING_URI's tracker) and exited 0
    ({"tracker": [{"kind": "mlflow", "tracking_uri": ""}]}, "tracking_uri: must not be empty"),
    ({"billing": [{"kind": "focus", "path": "  "}]}, "path: must not be blank"),
    # an empty warehouse path failed opening the config's folder, a blank one wrote a file
    # named three spaces
    ({"warehouse": {"path": ""}}, "warehouse.path: must not be empty"),
    ({"warehouse": {"path": "   "}}, "warehouse.path: must not be blank"),
    # the warehouse is a local DuckDB file: `s3://b/w.duckdb` was written as ./s3:/b/w.duckdb
    ({"warehouse": {"path": "s3://b/w.duckdb"}}, "warehouse.path: must be a local file, not "
     "a URI (s3://…): the warehouse is a local DuckDB file"),
    ({"warehouse": {"path": "file:///data/w.duckdb"}}, "warehouse.path: must be a local "
     "file, not a URI (file://…)"),
    ({"warehouse": {"path": "S3://AKIAEX:SECRETPW7@b/w.duckdb"}}, "warehouse.path: must be "
     "a local file, not a URI (S3://…)"),
    # an empty list read every experiment; an empty tag name lost every run's resource ids
    ({"tracker": [{"kind": "mlflow", "tracking_uri": "x", "experiments": []}]},
     "tracker.0.mlflow.experiments"),
    ({"tracker": [{"kind": "mlflow", "tracking_uri": "x", "tags": {"resource_ids": ""}}]},
     "tracker.0.mlflow.tags.resource_ids: must not be empty"),
    # values DuckDB refused later, without the file or the key
    ({"warehouse": {"memory_limit": "lots"}}, "warehouse.memory_limit: 'lots' is no size"),
    ({"warehouse": {"threads": 0}}, "warehouse.threads"),
    ({"policy": {"retention": {"grace_days": 10**9}}}, "policy.retention.grace_days"),
    ({"accelerators": {"x.large": 10**11}}, "accelerators: x.large: accelerator"),
    # a year of three digits broke the partitions; a future month as a YAML date passed
    ({"first_month": "0202-01"}, "first_month: 0202-01: a month from 1970 on"),
    ({"first_month": date(2999, 1, 1)}, "first_month: 2999-01 has not started"),
    ({"base_dir": "/etc"}, "base_dir: unknown key"),
    # credentials in an endpoint: an unreachable one's error showed the access key
    ({"billing": [{"kind": "aws_cur2", "path": "s3://b/x",
                   "endpoint_url": "http://AKIAEXAMPLE:secret@127.0.0.1:9000"}]},
     "billing.0.aws_cur2.endpoint_url: must not carry credentials (user:password@)"),
    ({"checkpoints": [{"kind": "s3", "bucket": "b", "endpoint_url": "https://k:s@s3.local"}]},
     "endpoint_url: must not carry credentials"),
    # credentials in an s3:// path: pyarrow's error showed them, in the run's event log too
    ({"billing": [{"kind": "aws_cur2", "path": "s3://AKIAEXAMPLE:SECRETPW2@bucket/p/e"}]},
     "billing.0.aws_cur2.path: must not carry credentials (user:password@)"),
    ({"billing": [{"kind": "focus", "path": "s3://AKIAEX:SECRETPW8@bucket/focus/"}]},
     "billing.0.focus.path: must not carry credentials"),
    ({"billing": [{"kind": "focus", "path": "s3://AKIAEX:SECRETPW8/a+b@bucket/focus/"}]},
     "billing.0.focus.path: must not carry credentials"),
    ({"checkpoints": [{"kind": "inventory", "path": "s3://k:SECRETPW9@b/inv/manifest.json"}]},
     "checkpoints.0.inventory.path: must not carry credentials"),
    ({"tracker": [{"kind": "runs_file", "path": "s3://k:SECRETPW9@b/runs.csv"}]},
     "tracker.0.runs_file.path: must not carry credentials"),
    # a name given twice: the second entry's lines were named by its position (`aws3:…`)
    ({"billing": [{"kind": "aws_cur2", "path": "x", "name": "aws"},
                  {"kind": "focus", "path": "y", "name": "aws"}]},
     "billing: name 'aws' is given to entries 0 and 1: each source's name must be its own"),
    # a name starts its lines' ids (`name:…`): `cur` and `cur:eu` mixed their figures
    ({"billing": [{"kind": "aws_cur2", "path": "x", "name": "cur:eu"}]},
     "billing.0.aws_cur2.name: must not contain ':'"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_its_key(data, named):
    with pytest.raises(ConfigError) as err:
        parse_config(data, Path("."), origin="config c.yaml")
    assert str(err.value).startswith("config c.yaml: ") and named in str(err.value)
    assert "\n" not in str(err.value) and "SECRETPW" not in str(err.value)


@pytest.mark.parametrize("written", [
    "ml-datasets", "s3://ml-datasets", "s3://ml-datasets/", "gs://ml-datasets",
    "gs://ml-datasets/", "arn:aws:s3:::ml-datasets", "S3://ml-datasets"])
def test_a_dataset_bucket_written_as_a_uri_or_an_arn_is_the_bucket(written):
    """A bill names a bucket by its name: `s3://ml-datasets` or its ARN as the bucket never
    matched a transfer line, which went untracked without a word."""
    cfg = parse_config({"datasets": {"events": {"bucket": written, "region": "us-east-1"}}},
                       Path("."))
    assert cfg.datasets["events"].bucket == "ml-datasets"


def test_an_azure_storage_account_id_is_a_dataset_bucket_as_written():
    account = ("/subscriptions/0000/resourceGroups/ML-RG/providers/Microsoft.Storage/"
               "storageAccounts/mldata")
    cfg = parse_config({"datasets": {"clicks": {"bucket": account, "region": "eastus"},
                                     "views": {"bucket": "mldata", "region": "eastus"}}},
                       Path("."))
    assert [d.bucket for d in cfg.datasets.values()] == [account, "mldata"]


@pytest.mark.parametrize(("written", "problem"), [
    ("ml-datasets/prefix/", "'ml-datasets/prefix/' names a path inside bucket 'ml-datasets'"),
    ("s3://ml-datasets/prefix", "'s3://ml-datasets/prefix' names a path inside bucket "
     "'ml-datasets'"),
    ("arn:aws:s3:::ml-datasets/events/", "'arn:aws:s3:::ml-datasets/events/' names a path "
     "inside bucket 'ml-datasets'"),
    ("gs://", "'gs://' names no bucket"),
    ("https://mldata.blob.core.windows.net/events", "'https://mldata.blob.core.windows.net/"
     "events' is no bucket"),
])
def test_a_dataset_bucket_naming_a_path_inside_it_is_refused(written, problem):
    """A dataset is a whole bucket: its transfer is billed on the bucket. `ml-datasets/prefix/`
    was kept as written and never matched a line."""
    with pytest.raises(ConfigError) as err:
        parse_config({"datasets": {"events": {"bucket": written, "region": "us-east-1"}}},
                     Path("."), origin="config c.yaml")
    assert str(err.value).startswith(f"config c.yaml: datasets.events.bucket: {problem}")
    assert "a dataset is a whole bucket" in str(err.value) or "no bucket" in str(err.value)


def test_a_local_path_with_an_at_sign_is_a_path():
    """An `@` refused only in a URI's host part; an MLflow server's basic auth in its URI is
    taken (its errors are redacted: `test_mlflow_write_back`)."""
    cfg = parse_config({"billing": [{"kind": "focus", "path": "exports/team@eu/"}],
                        "tracker": [{"kind": "runs_file", "path": "runs@2026.csv"},
                                    {"kind": "mlflow", "tracking_uri": "http://u:p@ml:5000"}]},
                       Path("/base"))
    assert cfg.billing[0].path == "exports/team@eu/"


def test_sizes_and_numbers_duckdb_takes_are_accepted():
    cfg = parse_config({"warehouse": {"memory_limit": "1.5GiB", "threads": 2},
                        "policy": {"reconciliation": {"max_untracked_share": 0},
                                   "search": {"approval_budget": 500}}}, Path("."))
    assert cfg.policy.reconciliation.max_untracked_share == 0.0
    assert cfg.policy.search.approval_budget == 500.0
    for size in ("8GB", "80%", "-1", "4gb", "1000000000 bytes"):
        parse_config({"warehouse": {"memory_limit": size}}, Path("."))


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys: a second `billing:` dropped the first's
    sources without a word. Merge keys (`<<: *anchor`) still merge."""
    path = tmp_path / "config.yaml"
    path.write_text("billing:\n  - {kind: aws_cur2, path: cur}\ntracker: []\n"
                    "billing:\n  - {kind: focus, path: focus}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"config {path} line 4: key 'billing' written twice (first at "
                              "line 1): keep one")
    path.write_text("defaults: &d {kind: runs_file, path: runs.csv}\n"
                    "tracker:\n  - {<<: *d, name: team}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="defaults: unknown key"):  # merged, then refused
        load_config(path)


def test_a_linked_config_resolves_its_paths_beside_the_link(tmp_path):
    """A config linked into place (a Kubernetes ConfigMap mounts it as a link into a
    `..2024_…` folder) resolved its relative paths in the target's folder: the runs file was
    not found and the warehouse written into the mount."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "config.yaml").write_text("warehouse: {path: warehouse.duckdb}\n"
                                      "tracker: [{kind: runs_file, path: runs.csv}]\n",
                                      encoding="utf-8")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    (mounted / "config.yaml").symlink_to(real / "config.yaml")
    cfg = load_config(mounted / "config.yaml")
    assert cfg.warehouse_path == str(mounted / "warehouse.duckdb")
    assert cfg.resolve(cfg.tracker[0].path) == str(mounted / "runs.csv")
    # the code location (and `materialize`, which runs it) writes that warehouse too: it
    # followed the link and wrote the target's folder, where `report` found no month
    from cost_pipeline.defs.definitions import WAREHOUSE_TAG, build_defs

    job = build_defs(str(mounted / "config.yaml")).resolve_job_def("monthly_costs")
    assert job.run_tags[WAREHOUSE_TAG] == str(mounted / "warehouse.duckdb")


def test_entries_of_one_kind_get_names_no_other_entry_has():
    """[focus, aws_cur2 named `focus3`, focus] named the third `focus3` too: the CUR export was
    dropped from the month (the sources are keyed by name), with no error."""
    from cost_pipeline.ingest.sources import source_names

    cfg = parse_config({"billing": [{"kind": "focus", "path": "a"},
                                    {"kind": "aws_cur2", "path": "b", "name": "focus3"},
                                    {"kind": "focus", "path": "c"}]}, Path("."))
    assert source_names(cfg.billing) == ["focus", "focus3", "focus4"]


def test_yaml_1_2_floats_are_numbers_in_numeric_fields_and_text_elsewhere(tmp_path):
    """`1e6` is a float in YAML 1.2 (and in JSON) but text to PyYAML (YAML 1.1, which wants
    `1.0e+6`): `approval_budget: 1e6` was refused as "not a valid number". A numeric field
    now takes it; a text field keeps what was written, never a number made of a name."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "run_tag: 1e6\n"
        "policy:\n"
        "  search: {approval_budget: 1e6}\n"
        "  retention: {max_monthly_violation_cost: 1.0e6}\n"
        "  retrain: {min_metric_change: 2e-3}\n"
        "  reconciliation: {max_untracked_share: .5e-1}\n"
        "  trend: {max_growth: +15e-1}\n"
        "datasets: {1e6: {bucket: 1E6, region: 1e-9}}\n"
        "tracker:\n"
        "  - {kind: mlflow, tracking_uri: x, experiments: [1e6, 2.5e3], "
        "tags: {resource_ids: 1e6}}\n", encoding="utf-8")
    cfg = load_config(path)
    policy = cfg.policy
    assert policy.search.approval_budget == 1_000_000.0
    assert policy.retention.max_monthly_violation_cost == 1_000_000.0
    assert policy.retrain.min_metric_change == 0.002
    assert policy.reconciliation.max_untracked_share == 0.05
    assert policy.trend.max_growth == 1.5
    assert type(policy.search.approval_budget) is float
    # names stay as written: an experiment, a tag, a dataset called `1e6` is no million
    assert cfg.run_tag == "1e6" and type(cfg.run_tag) is str
    assert cfg.tracker[0].experiments == ["1e6", "2.5e3"]
    assert cfg.tracker[0].tags == {"resource_ids": "1e6"}
    assert list(cfg.datasets) == ["1e6"]
    assert (cfg.datasets["1e6"].bucket, cfg.datasets["1e6"].region) == ("1E6", "1e-9")
    assert all(type(v) is str for v in (*cfg.tracker[0].experiments, *cfg.datasets,
                                        cfg.datasets["1e6"].bucket))
    for written, read in (("1e308", 1e308), ("1e-9", 1e-9), ("1.0e+6", 1e6), ("-0e0", 0.0)):
        path.write_text(f"policy: {{search: {{approval_budget: {written}}}}}\n",
                        encoding="utf-8")
        assert load_config(path).policy.search.approval_budget == read
    # quoted, it is text, refused as a number is; too large for a double, refused by name
    for written, problem in (('"1e6"', "Input should be a valid number"),
                             ("1e400", "1e400 is too large for a number"),
                             # YAML's own not-a-number and infinity: `.nan` read "Input should
                             # be greater than or equal to 0", `.inf` was a budget
                             (".nan", "nan is not a finite number"),
                             ("-.inf", "-inf is not a finite number"),
                             (".inf", "inf is not a finite number")):
        path.write_text(f"policy: {{search: {{approval_budget: {written}}}}}\n",
                        encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert str(err.value) == f"config {path}: policy.search.approval_budget: {problem}"
    # only the config's own reader: PyYAML's safe loader still reads YAML 1.1
    import yaml

    assert yaml.safe_load("a: 1e6") == {"a": "1e6"}


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"# the pipeline's config\n\n# to do\n",
                                     b"null\n", b"~\n", b"---\n"])
def test_an_empty_config_file_is_one_line_naming_the_file(tmp_path, content, capsys,
                                                           monkeypatch):
    """An empty config (no bytes, only blanks or comments, a YAML null) was read as every
    default: `materialize` wrote an empty warehouse beside it and exited 0, the month's only
    word a `billing_complete` failure listing all its days as missing."""
    from cost_pipeline.cli.main import main

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    assert main(["materialize", "--config", str(path), "--month", "2026-07"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: config {path}: the file is empty; it must hold the config as a YAML "
        "mapping: the bills to attribute (billing:), the runs (tracker:), the checkpoints "
        "(checkpoints:), …\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # nothing written
    # an explicit empty mapping is the config of every default, as `parse_config({})` is
    path.write_text("{}\n", encoding="utf-8")
    assert load_config(path).billing == []


@pytest.mark.parametrize(("written", "month"), [
    ("2020-01-01T00:00:00Z", date(2020, 1, 1)), ("2020-03-01 00:00:00", date(2020, 3, 1)),
    ("2020-03-01t00:00:00.000+00:00", date(2020, 3, 1))])
def test_first_month_written_as_its_first_instant_is_that_month(tmp_path, written, month):
    """A YAML timestamp at a month's first instant (UTC, the partitions' time) names that
    month: `first_month: 2020-01-01T00:00:00Z` was a traceback, "can't compare
    datetime.datetime to datetime.date"."""
    path = tmp_path / "config.yaml"
    path.write_text(f"first_month: {written}\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.first_month == month and type(cfg.first_month) is date


@pytest.mark.parametrize(("written", "problem"), [
    ("2015-01-01 12:00:00", "2015-01-01 12:00:00 is an instant inside 2015-01"),
    ("2015-01-15T00:00:00Z", "2015-01-15 00:00:00+00:00 is an instant inside 2015-01"),
    # midnight of the 1st two hours east of UTC is 22:00 UTC on the last day of December
    ("2020-01-01T00:00:00+02:00", "2020-01-01 00:00:00+02:00 is an instant inside 2019-12"),
])
def test_first_month_written_as_an_instant_inside_a_month_is_refused(tmp_path, written,
                                                                       problem):
    """An instant inside a month names no month: one line naming the file and the key, and
    the Dagster code location still loads (it raised TypeError and did not)."""
    from cost_pipeline.defs.definitions import build_defs

    path = tmp_path / "config.yaml"
    path.write_text(f"first_month: {written}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"config {path}: first_month: {problem} (UTC), not a month: "
                              "expected YYYY-MM")
    assert build_defs(str(path)).resolve_job_def("monthly_costs") is not None


@pytest.mark.parametrize(("content", "where", "problem"), [
    ("# the pipeline\nfirst_month: 2015-02-30\n", "line 2 column 14",
     "2015-02-30 reads as a date, but there is no such date (day is out of range for month)"),
    ("first_month: 2015-13-01\n", "line 1 column 14",
     "2015-13-01 reads as a date, but there is no such date (month must be in 1..12)"),
    ("tracker:\n  - {kind: mlflow, tracking_uri: http://x, experiments: [2024-02-30]}\n",
     "line 2 column 58",
     "2024-02-30 reads as a date, but there is no such date (day is out of range for month)"),
    ("first_month: 2015-01-01 24:00:00\n", "line 1 column 14",
     "2015-01-01 24:00:00 reads as a date, but there is no such date (hour must be in 0..23)"),
])
def test_a_date_that_does_not_exist_is_named_by_line_and_column(tmp_path, content, where,
                                                                  problem):
    """A YAML date no calendar holds was `error: day is out of range for month`, naming
    neither the file nor the key, and a ValueError the code location did not catch."""
    from cost_pipeline.defs.definitions import build_defs

    path = tmp_path / "config.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"config {path} {where}: {problem}; quote it if it is text"
    assert build_defs(str(path)).resolve_job_def("monthly_costs") is not None


def test_integers_are_read_as_yaml_1_2_writes_them(tmp_path):
    """PyYAML reads YAML 1.1: `hour_of_day: 010` was 8 (octal), `08` refused, `grace_days:
    1:30` 90 (base 60). The config reads YAML 1.2: a leading zero is a decimal's, an octal is
    written `0o`, and `1:30` is text."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "schedule: {hour_of_day: 010, day_of_month: 08, daily_refresh_hour: 0o10}\n"
        "policy: {retention: {keep_last_live: 0x0A, keep_last_production: -0, grace_days: 09}}\n"
        "accelerators: {a.large: 010, b.large: +7}\n"
        "run_tag: 1:30\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.schedule.hour_of_day, cfg.schedule.day_of_month,
            cfg.schedule.daily_refresh_hour) == (10, 8, 8)
    retention = cfg.policy.retention
    assert (retention.keep_last_live, retention.keep_last_production,
            retention.grace_days) == (10, 0, 9)
    assert cfg.accelerators == {"a.large": 10, "b.large": 7}
    assert cfg.run_tag == "1:30"  # a name, where it was the number 90 and refused
    # what YAML 1.1 alone reads as a number is text, refused where a number is expected
    for written, key, problem in (
            ("policy: {retention: {grace_days: 1:30}}", "policy.retention.grace_days",
             "Input should be a valid integer"),
            ("policy: {retention: {keep_last_live: 1_000}}", "policy.retention.keep_last_live",
             "Input should be a valid integer"),
            ("schedule: {hour_of_day: 0b101}", "schedule.hour_of_day",
             "Input should be a valid integer"),
            ("policy: {trend: {max_growth: 1:30.5}}", "policy.trend.max_growth",
             "Input should be a valid number")):
        path.write_text(written + "\n", encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert str(err.value) == f"config {path}: {key}: {problem}"
    import yaml  # only the config's own reader: PyYAML's safe loader still reads YAML 1.1

    assert yaml.safe_load("a: 010") == {"a": 8}


def test_the_yaml_reader_is_its_own_module_and_the_contract_keeps_its_names():
    """The YAML 1.2 reader (numbers, a key written twice, a key read as a boolean) was a third
    of the contract's module; it is `cost_pipeline.config.yaml_reader`, and every name the
    contract offered is still `cost_pipeline.config`'s."""
    from cost_pipeline.config import yaml_reader

    data = yaml_reader.read_yaml("a: 010\nb: 0o10\nc: 0x0A\nd: 1e6\ne: 1:30\nf: 1.5\n"
                                 "g: 2015-01-01\n")
    assert data == {"a": 10, "b": 8, "c": 10, "d": "1e6", "e": "1:30", "f": 1.5,
                    "g": date(2015, 1, 1)}
    assert isinstance(data["d"], yaml_reader.Yaml12Float)
    for text, problem in (
            ("billing: []\ntracker: []\nbilling: []\n",
             "line 3: key 'billing' written twice (first at line 1): keep one"),
            ("datasets:\n  no: {}\n", "line 2 column 3: YAML reads the key no as the boolean "
             "false: quote it ('no') if it is a name"),
            ("first_month: 2015-02-30\n", "line 1 column 14: 2015-02-30 reads as a date, but "
             "there is no such date (day is out of range for month); quote it if it is text")):
        with pytest.raises(yaml_reader.Unreadable) as err:
            yaml_reader.read_yaml(text)
        assert str(err.value) == problem
    import yaml

    text = "warehouse: {path: w.duckdb\nbilling: [\n"
    with pytest.raises(yaml.YAMLError) as err:
        yaml_reader.read_yaml(text)
    assert yaml_reader.yaml_problem(err.value, text) == (
        " line 2 column 8: not valid YAML: expected ',' or '}', but got ':' (while parsing a "
        "flow mapping that starts at line 1 column 12)")

    import cost_pipeline.config as contract

    for name in ("Alerts", "AwsCur2Source", "CONFIG_ENV", "ConfigError", "Dataset", "EMPTY_FILE",
                 "FocusSource", "GcpBillingExportSource", "InventoryCheckpoints",
                 "LocalCheckpoints", "MAX_ACCELERATORS", "MEMORY_LIMIT_MAX", "MlflowTracker",
                 "PipelineConfig", "Policy", "ReconciliationPolicy", "RetentionPolicy",
                 "RetrainPolicy", "RunsFileTracker", "S3Checkpoints", "ScheduleSettings",
                 "SearchPolicy", "TrendPolicy", "WarehouseConfig", "config_file", "load_config",
                 "parse_config"):
        assert hasattr(contract, name), name
    assert "SafeLoader" not in Path(contract.__file__).read_text(encoding="utf-8")


def _duckdb_takes(memory_limit: str) -> bool:
    import duckdb

    with duckdb.connect() as con:
        try:
            con.execute(f"SET memory_limit = '{memory_limit}'")
        except duckdb.Error:
            return False
    return True


@pytest.mark.parametrize(("size", "taken"), [
    ("8GB", True), ("1.5GiB", True), ("4gb", True), ("512 MB", True), ("2TiB", True),
    ("64KiB", True), ("64kb", True), ("1T", True), ("1 byte", True), ("100B", True),
    ("1000000000 bytes", True), ("2 gigabytes", True), (".5GB", True), ("16000000TB", True),
    ("80%", True), ("0%", True), ("100%", True), ("12.5 %", True), ("-1", True),
    # DuckDB refuses these at the first connection, naming neither the file nor the key
    ("101%", False), ("100.5%", False), ("-1%", False), ("1PB", False), ("1P", False),
    ("1pib", False), ("1 kibibyte", False), ("8", False), ("1.5", False), ("lots", False),
    ("+5GB", False), ("1,5GB", False), ("18446744073709551616B", False),
    ("20000000TB", False)])
def test_memory_limit_takes_what_duckdb_takes(size, taken):
    """`101%`, `1PB`, `1pib` passed the config and failed at DuckDB's first connection."""
    assert _duckdb_takes(size) is taken
    if taken:
        cfg = parse_config({"warehouse": {"memory_limit": size}}, Path("."))
        assert cfg.warehouse.memory_limit == size
        return
    with pytest.raises(ConfigError) as err:
        parse_config({"warehouse": {"memory_limit": size}}, Path("."), origin="config c.yaml")
    assert str(err.value).startswith(f"config c.yaml: warehouse.memory_limit: {size!r} is no "
                                     "size")


def test_memory_limit_refusals_say_why_and_minus_one_needs_no_quotes(tmp_path):
    path = tmp_path / "config.yaml"
    for written, read in (("-1", "-1"), ("80%", "80%"), ('"-1"', "-1")):
        path.write_text(f"warehouse: {{memory_limit: {written}}}\n", encoding="utf-8")
        assert load_config(path).warehouse.memory_limit == read  # -1 as the docs show it
    for written, problem in (
            ("8", "'8' is no size: expected e.g. 8GB, 1.5GiB, 80% or -1 (no limit); units "
                  "B, KB, MB, GB, TB (1000s), KiB, MiB, GiB, TiB (1024s)"),
            ("101%", "'101%' is no size: a share of the memory is 0% to 100%"),
            ("1PB", "'1PB' is no size: expected e.g. 8GB, 1.5GiB, 80% or -1 (no limit); "
                    "units B, KB, MB, GB, TB (1000s), KiB, MiB, GiB, TiB (1024s)"),
            ("20000000TB", "'20000000TB' is no size: more than DuckDB takes (16 EiB)"),
            ("-2", "'-2' is no size: expected e.g. 8GB, 1.5GiB, 80% or -1 (no limit); units "
                   "B, KB, MB, GB, TB (1000s), KiB, MiB, GiB, TiB (1024s)"),
            ("yes", "YAML reads an unquoted yes, no, on, off, true or false as a boolean "
                    "(here true): quote it if it is text")):
        path.write_text(f"warehouse: {{memory_limit: {written}}}\n", encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert str(err.value) == f"config {path}: warehouse.memory_limit: {problem}"


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_config_path_is_no_config(tmp_path, monkeypatch, given):
    """An empty path fell back to $COST_PIPELINE_CONFIG, a config nobody passed; only no path
    at all (None) reads the variable. It is refused in the words `--config ""` is
    (test_cli::test_an_empty_config_path_is_refused_not_read_from_the_environment), where
    the two said it differently."""
    other = tmp_path / "other.yaml"
    other.write_text("warehouse: {path: other.duckdb}\n")
    monkeypatch.setenv("COST_PIPELINE_CONFIG", str(other))
    with pytest.raises(ConfigError) as err:
        load_config(given)
    assert str(err.value) == ("the config path is empty: name the config file, or leave "
                              "--config out to read $COST_PIPELINE_CONFIG")
    assert load_config(None).warehouse_path == str(tmp_path / "other.duckdb")
    for unset in (None, "", " "):  # the variable unset, or set blank: no config at all
        if unset is None:
            monkeypatch.delenv("COST_PIPELINE_CONFIG")
        else:
            monkeypatch.setenv("COST_PIPELINE_CONFIG", unset)
        with pytest.raises(ConfigError) as err:
            load_config(None)
        assert str(err.value) == "no config: pass --config FILE or set COST_PIPELINE_CONFIG"


@pytest.mark.parametrize(("content", "where", "word", "value"), [
    ("datasets: {yes: {bucket: b, region: r}}\n", "line 1 column 12", "yes", "true"),
    ("accelerators:\n  Off: 8\n", "line 2 column 3", "Off", "false"),
    ("tracker:\n  - {kind: mlflow, tracking_uri: x, tags: {TRUE: run}}\n", "line 2 column 44",
     "TRUE", "true"),
])
def test_a_boolean_where_a_name_is_expected_says_to_quote_it(tmp_path, content, where, word,
                                                               value):
    """YAML reads an unquoted yes/no/on/off/true/false as a boolean: a dataset named `yes`
    was refused as "datasets.True.[key]: Input should be a valid string"."""
    path = tmp_path / "config.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"config {path} {where}: YAML reads the key {word} as the "
                              f"boolean {value}: quote it ('{word}') if it is a name")
    path.write_text(content.replace(word, f"'{word}'"), encoding="utf-8")
    load_config(path)  # quoted, it is the name


def test_a_boolean_where_text_is_expected_says_to_quote_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("datasets: {d: {bucket: b, region: no}}\nrun_tag: on\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"config {path}: run_tag: YAML reads an unquoted yes, no, on, off, true or false as a "
        "boolean (here true): quote it if it is text; datasets.d.region: YAML reads an "
        "unquoted yes, no, on, off, true or false as a boolean (here false): quote it if it "
        "is text")
