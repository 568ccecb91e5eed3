"""The delivery sensor on a real Dagster instance (SQLite storage in a temporary home): the
first tick only records the exports; a restated month (new manifest) or new files of a
month without one request that month's partition of `monthly_costs`; local and on S3; a
source that cannot be listed holds back only its own months."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from cost_pipeline.definitions import JOB_NAME, build_defs
from cost_pipeline.defs.delivery_sensor import SENSOR_NAME
from cost_pipeline.demo.local_s3 import upload_tree
from tests.support.cur_rows import (
    EXPORT,
    line,
    month_dir,
    write_export,
    write_manifest,
    write_parquet,
)
from tests.support.s3_server import new_bucket, put


def export_fingerprints(cfg, today=None) -> dict[str, str]:
    """`YYYY-MM` → the fingerprint of every source's delivery of that month, as the sensor
    composes it; the first source that cannot be listed raises its error."""
    from cost_pipeline.ingest.deliveries import month_fingerprints, source_fingerprints

    listed, unlisted = source_fingerprints(cfg, today)
    if unlisted:
        raise next(iter(unlisted.values()))
    return month_fingerprints(listed)


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


def _config(tmp_path: Path, billing: dict) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"}, "billing": [billing]}))
    return str(path)


class Ticks:
    """Evaluates the sensor tick after tick, carrying the cursor as the daemon does."""

    def __init__(self, config_path: str, instance):
        self.defs = build_defs(config_path)
        self.sensor = self.defs.resolve_sensor_def(SENSOR_NAME)
        self.instance, self.cursor = instance, None

    def tick(self):
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursor,
                                          definitions=self.defs)
        result = self.sensor.evaluate_tick(context)
        self.cursor = result.cursor if result.cursor is not None else self.cursor
        return result

    def partitions(self) -> list[str]:
        return [r.partition_key for r in self.tick().run_requests]


def months(cursor: str) -> list[str]:
    """The months a cursor records (beside its per-source record)."""
    return sorted(key for key in json.loads(cursor) if key[:4].isdigit())


def test_local_export_new_and_restated_deliveries(tmp_path, instance):
    export = write_export(tmp_path, {"a.parquet": [line(1.0)]})
    ticks = Ticks(_config(tmp_path, {"kind": "aws_cur2", "path": str(export)}), instance)
    assert ticks.sensor.job_name == JOB_NAME

    first = ticks.tick()
    assert first.run_requests == [] and "first tick" in first.skip_message
    assert months(ticks.cursor) == ["2026-07"]
    assert list(json.loads(ticks.cursor)["sources"]) == ["aws_cur2"]
    assert ticks.partitions() == []  # nothing changed

    # AWS restates July: new files and a new manifest
    write_parquet(month_dir(export) / "b.parquet", [line(1.0), line(2.0)])
    write_manifest(export, ["s3://x/exports/cur/ml-cur/data/BILLING_PERIOD=2026-07/b.parquet"])
    requests = ticks.tick().run_requests
    assert [r.partition_key for r in requests] == ["2026-07-01"]
    assert requests[0].tags["cost_pipeline/launched_by"] == "delivery_sensor"
    assert ticks.partitions() == []

    # August arrives without a manifest; a stray pre-2015 folder is no partition (logged)
    write_parquet(month_dir(export, month="2026-08") / "x.parquet", [line(3.0)])
    write_parquet(month_dir(export, month="2014-12") / "x.parquet", [line(3.0)])
    assert ticks.partitions() == ["2026-08-01"]
    write_parquet(month_dir(export, month="2026-08") / "y.parquet", [line(4.0)])
    assert ticks.partitions() == ["2026-08-01"]
    assert months(ticks.cursor) == ["2014-12", "2026-07", "2026-08"]
    # the config then takes December 2014 in (first_month): its delivery, recorded as outside
    # the partitions, is requested now — recorded as delivered, it never was
    wider = tmp_path / "wider" / "config.yaml"
    wider.parent.mkdir()
    wider.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"}, "first_month": "2014-12",
                                     "billing": [{"kind": "aws_cur2", "path": str(export)}]}))
    later = Ticks(str(wider), instance)
    later.cursor = ticks.cursor
    assert later.partitions() == ["2014-12-01"]
    assert later.partitions() == []
    # September from an export recreated in CSV format: its gzipped CSV is the month's file
    (month_dir(export, month="2026-09")).mkdir(parents=True)
    (month_dir(export, month="2026-09") / f"{EXPORT}-00001.csv.gz").write_bytes(b"\x1f\x8b")
    assert ticks.partitions() == ["2026-09-01"]
    (month_dir(export, month="2026-09") / "notes.txt").write_text("not a data file")
    assert ticks.partitions() == []


def test_s3_export_restated_and_unreachable(tmp_path, s3_server, instance):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    export = write_export(tmp_path, {"a.parquet": [line(1.0)]})
    upload_tree(endpoint, export, bucket, f"cur/{EXPORT}")
    billing = {"kind": "aws_cur2", "path": f"s3://{bucket}/cur/{EXPORT}",
               "endpoint_url": endpoint}
    ticks = Ticks(_config(tmp_path, billing), instance)
    assert ticks.partitions() == []
    assert ticks.partitions() == []
    key = f"cur/{EXPORT}/metadata/BILLING_PERIOD=2026-07/{EXPORT}-Manifest.json"
    put(endpoint, bucket, key, json.dumps({"executionId": "exec-2", "dataFiles": []}))
    assert ticks.partitions() == ["2026-07-01"]
    # a month without a manifest: its data files are listed
    data = write_parquet(tmp_path / "aug.parquet", [line(2.0)]).read_bytes()
    put(endpoint, bucket, f"cur/{EXPORT}/data/BILLING_PERIOD=2026-08/part/0.parquet", data)
    assert ticks.partitions() == ["2026-08-01"]
    assert ticks.partitions() == []
    put(endpoint, bucket, f"cur/{EXPORT}/data/BILLING_PERIOD=2026-09/{EXPORT}-00001.csv.gz",
        b"\x1f\x8b")  # an export in CSV format: its gzipped CSV is the month's file
    assert ticks.partitions() == ["2026-09-01"]
    cursor = ticks.cursor

    (tmp_path / "broken").mkdir()
    broken = Ticks(_config(tmp_path / "broken", {**billing, "path": "s3://gone-bucket/cur/x"}),
                   instance)
    broken.cursor = cursor
    result = broken.tick()
    assert result.run_requests == [] and "bucket does not exist" in result.skip_message
    # kept, the source named: the next good listing compares against it
    assert json.loads(broken.cursor) == {**json.loads(cursor), "unlisted": ["aws_cur2"]}


def test_deliveries_after_a_first_tick_that_could_not_list_are_requested(tmp_path, instance):
    """The export folder is not there on the sensor's first tick: the first deliveries found
    later arrived after it started and are requested — they were recorded as history (no
    cursor), never refreshed. A folder naming no month (`BILLING_PERIOD=2026-13`, a
    template's `YYYY-MM`) is no delivery: it stopped the sensor at every tick."""
    export = tmp_path / "exports" / EXPORT
    ticks = Ticks(_config(tmp_path, {"kind": "aws_cur2", "path": str(export)}), instance)
    first = ticks.tick()
    assert first.run_requests == [] and "cannot list" in first.skip_message
    assert json.loads(ticks.cursor) == {"sources": {}, "unlisted": ["aws_cur2"]}

    written = write_export(tmp_path / "later", {"a.parquet": [line(1.0)]})
    export.parent.mkdir(parents=True)
    written.rename(export)
    write_parquet(month_dir(export, month="2026-13") / "x.parquet", [line(2.0)])
    write_parquet(month_dir(export, month="YYYY-MM") / "x.parquet", [line(2.0)])
    assert ticks.partitions() == ["2026-07-01"]
    assert months(ticks.cursor) == ["2026-07"]
    assert ticks.partitions() == []


def test_focus_deliveries_request_the_month_their_path_names(tmp_path, instance):
    """A FOCUS source was never listed: a new Azure export run or AWS FOCUS delivery went
    unnoticed until the schedule. Its files count for the month their path names (an Azure
    export's `YYYYMMDD-YYYYMMDD` folder, an AWS export's `BILLING_PERIOD=YYYY-MM`); a file
    naming none for the open month and the one before."""
    from datetime import date

    from cost_pipeline.config import load_config

    root = tmp_path / "focus"
    may = root / "ml-focus-daily" / "20260501-20260531"
    (may / "run-1").mkdir(parents=True)
    (may / "run-1" / "part_0_0001.csv").write_text("BilledCost\n1\n")
    (may / "run-1" / "manifest.json").write_text("{}")
    june = root / "aws-focus" / "data" / "BILLING_PERIOD=2026-06"
    june.mkdir(parents=True)
    (june / "a.parquet").write_bytes(b"PAR1")
    (root / "notes.txt").write_text("not a data file")
    config = _config(tmp_path, {"kind": "focus", "path": str(root)})
    assert sorted(export_fingerprints(load_config(config), date(2026, 12, 7))) == [
        "2026-05", "2026-06"]
    ticks = Ticks(config, instance)
    assert ticks.partitions() == []          # the first tick records
    (may / "run-2").mkdir()
    (may / "run-2" / "part_0_0001.csv").write_text("BilledCost\n2\n")
    assert ticks.partitions() == ["2026-05-01"]
    assert ticks.partitions() == []
    (root / "loose.csv").write_text("BilledCost\n3\n")
    assert sorted(export_fingerprints(load_config(config), date(2026, 12, 7))) == [
        "2026-05", "2026-06", "2026-11", "2026-12"]


def test_focus_deliveries_on_s3_are_listed_alike(tmp_path, s3_server):
    from datetime import date

    from cost_pipeline.config import load_config

    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, "focus/ml-focus-daily/20260501-20260531/run-1/part_0_0001.csv",
        b"BilledCost\n1\n")
    put(endpoint, bucket, "focus/ml-focus-daily/20260501-20260531/run-1/manifest.json", b"{}")
    config = _config(tmp_path, {"kind": "focus", "path": f"s3://{bucket}/focus",
                                "endpoint_url": endpoint})
    before = export_fingerprints(load_config(config), date(2026, 12, 7))
    assert sorted(before) == ["2026-05"]
    put(endpoint, bucket, "focus/ml-focus-daily/20260501-20260531/run-2/part_0_0001.csv",
        b"BilledCost\n2\n")
    after = export_fingerprints(load_config(config), date(2026, 12, 7))
    assert sorted(after) == ["2026-05"] and after["2026-05"] != before["2026-05"]


def test_a_restated_month_refreshes_the_later_months_materialized(tmp_path, instance):
    """A later month reads the restated one (a search's cost to date, trends, previous bests):
    refreshed after it, in order, where it kept the old figures."""
    export = write_export(tmp_path, {"a.parquet": [line(1.0)]})
    ticks = Ticks(_config(tmp_path, {"kind": "aws_cur2", "path": str(export)}), instance)
    for month in ("2026-06-01", "2026-08-01", "2026-09-01"):
        instance.report_runless_asset_event(dg.AssetMaterialization("billing_facts",
                                                                    partition=month))
    assert ticks.partitions() == []
    write_parquet(month_dir(export) / "b.parquet", [line(2.0)])  # July restated
    write_manifest(export, ["s3://x/exports/cur/ml-cur/data/BILLING_PERIOD=2026-07/b.parquet"])
    requests = ticks.tick().run_requests
    assert [r.partition_key for r in requests] == ["2026-07-01", "2026-08-01", "2026-09-01"]
    assert requests[1].tags["cost_pipeline/after_delivery_of"] == "2026-07"
    assert ticks.partitions() == []


def test_a_source_that_cannot_be_listed_holds_back_only_its_own_months(tmp_path, instance,
                                                                       capfd):
    """A FOCUS folder not there yet beside a CUR export: its listing failed the whole tick,
    so a restated CUR month was never requested until the FOCUS folder existed. The sources
    that list are compared as ever; the one that cannot keeps the fingerprints of its last
    listing (its months neither requested nor forgotten) and is named every tick."""
    export = write_export(tmp_path, {"a.parquet": [line(1.0)]})
    focus = tmp_path / "focus"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"}, "billing": [
        {"kind": "aws_cur2", "path": str(export)}, {"kind": "focus", "path": str(focus)}]}))
    ticks = Ticks(str(config), instance)

    first = ticks.tick()  # July of the CUR export is history; the FOCUS folder is named
    assert first.run_requests == [] and "first tick: recorded the deliveries of 1 month" in (
        first.skip_message)
    assert f"cannot list the billing exports: focus: {focus}: FOCUS file or folder not " \
           "found" in first.skip_message
    assert months(ticks.cursor) == ["2026-07"]
    assert json.loads(ticks.cursor)["unlisted"] == ["focus"]
    again = ticks.tick()
    assert again.run_requests == [] and "no new billing delivery; cannot list the billing " \
        "exports: focus:" in again.skip_message

    # AWS restates July while the FOCUS folder is still missing: July is requested
    write_parquet(month_dir(export) / "b.parquet", [line(2.0)])
    write_manifest(export, ["s3://x/exports/cur/ml-cur/data/BILLING_PERIOD=2026-07/b.parquet"])
    restated = ticks.tick()
    assert [r.partition_key for r in restated.run_requests] == ["2026-07-01"]
    assert json.loads(ticks.cursor)["unlisted"] == ["focus"]
    assert "cannot list the billing exports: focus:" in capfd.readouterr().err  # logged
    assert ticks.partitions() == []

    # the FOCUS folder appears with November: a delivery after the sensor started, requested
    (focus / "BILLING_PERIOD=2026-11").mkdir(parents=True)
    (focus / "BILLING_PERIOD=2026-11" / "part-0.csv").write_text("BilledCost\n3\n")
    assert ticks.partitions() == ["2026-11-01"]
    assert "unlisted" not in json.loads(ticks.cursor)
    listed = ticks.cursor

    # the folder goes away (moved, permissions): November keeps its last listing — neither
    # requested nor forgotten — while an August delivery of the CUR export is requested
    focus.rename(tmp_path / "focus-moved")
    write_parquet(month_dir(export, month="2026-08") / "x.parquet", [line(4.0)])
    assert ticks.partitions() == ["2026-08-01"]
    assert months(ticks.cursor) == ["2026-07", "2026-08", "2026-11"]
    assert json.loads(ticks.cursor)["2026-11"] == json.loads(listed)["2026-11"]
    assert json.loads(ticks.cursor)["unlisted"] == ["focus"]
    (tmp_path / "focus-moved").rename(focus)
    quiet = ticks.tick()  # back as it was: nothing new
    assert quiet.run_requests == [] and quiet.skip_message == "no new billing delivery"
    assert "unlisted" not in json.loads(ticks.cursor)


def test_a_cursor_written_before_sources_were_recorded_apart_requests_nothing_new(
        tmp_path, instance):
    """A deployment's cursor holds only months: the same listing requests nothing (the month's
    fingerprint is the one it had) and the next cursor records the sources apart."""
    from cost_pipeline.config import load_config

    export = write_export(tmp_path, {"a.parquet": [line(1.0)]})
    config = _config(tmp_path, {"kind": "aws_cur2", "path": str(export)})
    ticks = Ticks(config, instance)
    ticks.cursor = json.dumps(export_fingerprints(load_config(config)))
    quiet = ticks.tick()
    assert quiet.run_requests == [] and quiet.skip_message == "no new billing delivery"
    assert months(ticks.cursor) == ["2026-07"]
    assert list(json.loads(ticks.cursor)["sources"]["aws_cur2"]) == ["2026-07"]
    # such a cursor and a source that cannot be listed: the tick waits, as it used to
    ticks.cursor = json.dumps(export_fingerprints(load_config(config)))
    export.rename(tmp_path / "moved")
    waiting = ticks.tick()
    assert waiting.run_requests == [] and "export folder not found" in waiting.skip_message
    assert "sources" not in json.loads(ticks.cursor)


def test_a_focus_export_read_from_its_data_folder_is_watched_through_its_manifests(tmp_path,
                                                                                   instance):
    """`path` at an AWS FOCUS export's data/ folder: the reader picks the month's delivery
    from the manifests in the export's metadata/ folder beside it, but the sensor listed only
    the data files — a delivery that rewrote only the manifest, or whose manifest landed a
    tick after its data files, was never requested. The manifests of the months the path
    holds count in their month's fingerprint; a month of metadata/ without data files below
    the path is no delivery of this source."""
    export = tmp_path / "focus-export"
    data, metadata = export / "data", export / "metadata"

    def write(relative: str, text: str) -> None:
        (export / relative).parent.mkdir(parents=True, exist_ok=True)
        (export / relative).write_text(text)

    write("data/BILLING_PERIOD=2026-07/exec-1/a.parquet", "PAR1")
    write("metadata/BILLING_PERIOD=2026-07/focus-export-Manifest.json", '{"executionId": "1"}')
    write("metadata/BILLING_PERIOD=2026-05/focus-export-Manifest.json", '{"executionId": "0"}')
    ticks = Ticks(_config(tmp_path, {"kind": "focus", "path": str(data)}), instance)
    assert ticks.partitions() == []                    # the first tick records
    assert months(ticks.cursor) == ["2026-07"]          # May: a manifest, no data below path
    assert ticks.partitions() == []

    # a re-delivery of July that rewrites only its manifest
    write("metadata/BILLING_PERIOD=2026-07/focus-export-Manifest.json",
          '{"executionId": "2", "dataFiles": []}')
    assert ticks.partitions() == ["2026-07-01"]
    assert ticks.partitions() == []
    # August's data files, then, a tick later, its manifest: each requests August
    write("data/BILLING_PERIOD=2026-08/exec-1/a.parquet", "PAR1")
    assert ticks.partitions() == ["2026-08-01"]
    write("metadata/BILLING_PERIOD=2026-08/exec-1/focus-export-Manifest.json",
          '{"executionId": "1"}')
    assert ticks.partitions() == ["2026-08-01"]
    assert ticks.partitions() == []
    # May's manifest rewritten: no month of this source's data, nothing requested
    write("metadata/BILLING_PERIOD=2026-05/focus-export-Manifest.json", '{"executionId": "00"}')
    assert ticks.partitions() == []
    assert months(ticks.cursor) == ["2026-07", "2026-08"]

    # metadata/ cannot be listed (a broken link in it): the source keeps its last listing
    (metadata / "gone.json").symlink_to(tmp_path / "nowhere.json")
    held = ticks.tick()
    assert held.run_requests == [] and "cannot list the billing exports: focus: " in (
        held.skip_message) and "broken symbolic link" in held.skip_message
    assert json.loads(ticks.cursor)["unlisted"] == ["focus"]
    assert months(ticks.cursor) == ["2026-07", "2026-08"]
    (metadata / "gone.json").unlink()
    assert ticks.partitions() == []
    assert "unlisted" not in json.loads(ticks.cursor)

    # a cursor written before the manifests counted (its fingerprints of the data files
    # alone): the same listing requests nothing, the next cursor records them
    from cost_pipeline.config import load_config

    config = load_config(_config(tmp_path, {"kind": "focus", "path": str(data)}))
    ticks.cursor = json.dumps(export_fingerprints(config))
    assert ticks.partitions() == []
    assert sorted(json.loads(ticks.cursor)["beside"]["focus"]) == ["2026-07", "2026-08"]
    assert ticks.partitions() == []
    write("metadata/BILLING_PERIOD=2026-07/focus-export-Manifest.json", '{"executionId": "3"}')
    assert ticks.partitions() == ["2026-07-01"]


def test_a_focus_export_on_s3_read_from_its_data_folder_is_watched_through_its_manifests(
        tmp_path, s3_server, instance):
    """As on a local disk, for a path at the export's data/ folder and at a month's folder in
    it (then only that month's manifests count)."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    export = "exports/focus-export"
    put(endpoint, bucket, f"{export}/data/BILLING_PERIOD=2026-07/exec-1/a.parquet", b"PAR1")
    put(endpoint, bucket, f"{export}/metadata/BILLING_PERIOD=2026-07/focus-export-Manifest.json",
        '{"executionId": "1"}')
    put(endpoint, bucket, f"{export}/metadata/BILLING_PERIOD=2026-06/focus-export-Manifest.json",
        '{"executionId": "1"}')
    billing = {"kind": "focus", "path": f"s3://{bucket}/{export}/data/",
               "endpoint_url": endpoint}
    ticks = Ticks(_config(tmp_path, billing), instance)
    (tmp_path / "month").mkdir()
    july = Ticks(_config(tmp_path / "month", {
        **billing, "path": f"s3://{bucket}/{export}/data/BILLING_PERIOD=2026-07"}), instance)
    assert ticks.partitions() == [] and july.partitions() == []
    assert ticks.partitions() == [] and july.partitions() == []

    put(endpoint, bucket, f"{export}/metadata/BILLING_PERIOD=2026-07/focus-export-Manifest.json",
        '{"executionId": "2", "dataFiles": []}')
    assert ticks.partitions() == ["2026-07-01"]
    assert july.partitions() == ["2026-07-01"]
    assert ticks.partitions() == [] and july.partitions() == []
    put(endpoint, bucket, f"{export}/metadata/BILLING_PERIOD=2026-06/focus-export-Manifest.json",
        '{"executionId": "2", "dataFiles": []}')
    assert ticks.partitions() == [] and july.partitions() == []
    # a new data file in July's folder: the month its folder names, also for the path at it
    # (it counted for the open month and the one before, the files' own paths naming none)
    put(endpoint, bucket, f"{export}/data/BILLING_PERIOD=2026-07/exec-2/b.parquet", b"PAR1")
    assert ticks.partitions() == ["2026-07-01"]
    assert july.partitions() == ["2026-07-01"]
