"""`cost-pipeline export runs` (SPEC §12): the month's run_costs to CSV and Parquet, read back
equal to the warehouse's rows; the default path; a month not materialized is one line."""

from __future__ import annotations

import csv
import os
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cost_pipeline.cli.main import main
from cost_pipeline.warehouse import ensure_schema

MARCH, APRIL = date(2024, 3, 1), date(2024, 4, 1)
ROWS = [  # month, run_id, model, purpose_class, search_id, gpu, cpu, storage, network,
    #       other, cost, accelerator_hours, cpu_hours
    (MARCH, "r-b", "churn", "search", "s1", 4.0, 0.0, 0.0, 0.08 / 3, 0.01 / 1.5,
     4.0 + 0.08 / 3 + 0.01 / 1.5, 1.0, 0.0),
    (MARCH, "r-a", None, "production", None, 16.0, 0.4, 0.1, 0.08 / 1.5, 0.0,
     16.5 + 0.08 / 1.5, 4.0, 1.0 / 3),
    (APRIL, "r-a", "churn", "production", None, 8.0, 0.0, 0.0, 0.0, 0.0, 8.0, 4.0, 0.0),
]


@pytest.fixture
def config(tmp_path) -> Path:
    warehouse = tmp_path / "data" / "warehouse.duckdb"
    warehouse.parent.mkdir()
    with duckdb.connect(str(warehouse)) as con:
        ensure_schema(con)
        con.executemany("INSERT INTO run_costs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        ROWS)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"warehouse": {"path": "data/warehouse.duckdb"}}))
    return path


def march_rows() -> list[tuple]:
    return sorted((r for r in ROWS if r[0] == MARCH), key=lambda r: r[1])


def test_csv_round_trip_to_the_default_path(config, capsys):
    assert main(["export", "runs", "--config", str(config), "--month", "2024-03"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == config.parent / "data" / "exports" / "run-costs-2024-03.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    assert list(records[0]) == ["month", "run_id", "model", "purpose_class", "search_id",
                                "gpu_cost", "cpu_cost", "storage_cost", "network_cost",
                                "other_cost", "cost", "currency", "accelerator_hours",
                                "cpu_hours"]
    assert {r.pop("currency") for r in records} == {"USD"}  # a bill naming none: USD
    back = [(date.fromisoformat(r["month"]), r["run_id"], r["model"] or None,
             r["purpose_class"], r["search_id"] or None,
             *(float(r[c]) for c in list(r)[5:])) for r in records]
    assert back == march_rows()  # every double exactly: the shortest round-trip text


def test_csv_amounts_are_plain_decimals_however_large_or_small(tmp_path, capsys):
    """500,000,000,000 was written `5e+11` and a tenth of a micro-dollar `1e-7` beside
    `333333333.3333333` in the same file: every amount and hour is plain decimal notation now,
    the shortest digits that read back as the warehouse's double."""
    may = date(2024, 5, 1)
    third = 1e9 / 3  # 333333333.3333333
    row = (may, "r-big", "m", "search", "s1", 5e11, 1e-7, 0.0, third, 1.5e-12,
           5e11 + third, 1e16, 2.5)
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        ensure_schema(con)
        con.execute("INSERT INTO run_costs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"warehouse": {"path": "warehouse.duckdb"}}))
    assert main(["export", "runs", "--config", str(config), "--month", "2024-05", "--out",
                 "-"]) == 0
    written = capsys.readouterr().out
    assert written.splitlines()[1].startswith(
        '2024-05-01,"r-big","m","search","s1","500000000000","0.0000001","0",')
    [record] = list(csv.DictReader(written.splitlines()))
    assert record.pop("currency") == "USD"
    amounts = list(record)[5:]
    assert [record[c] for c in amounts] == [
        "500000000000", "0.0000001", "0", "333333333.3333333", "0.0000000000015",
        "500333333333.3333", "10000000000000000", "2.5"]
    assert [float(record[c]) for c in amounts] == list(row[5:])  # every double exactly


def test_parquet_round_trip_to_a_chosen_path(config, tmp_path, capsys):
    out = tmp_path / "elsewhere" / "runs.parquet"
    assert main(["export", "runs", "--config", str(config), "--month", "2024-04",
                 "--format", "parquet", "--out", str(out)]) == 0
    assert Path(capsys.readouterr().out.strip()) == out.resolve()
    table = pq.read_table(out)
    assert table.schema.field("month").type.equals(pa.date32())
    assert table.column("currency").to_pylist() == ["USD"]
    assert [tuple(r.values()) for r in table.drop_columns("currency").to_pylist()] == [ROWS[2]]
    assert not list(out.parent.glob(".*partial"))


def test_the_amounts_currency_is_a_column(tmp_path, capsys):
    """Every amount is in the month's BillingCurrency: a JPY month's `82` read as a EUR
    month's (the MLflow tags carry `cost.currency`, the FOCUS export `BillingCurrency`)."""
    from tests.support.warehouse_rows import insert_lines

    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        ensure_schema(con)
        con.executemany("INSERT INTO run_costs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        ROWS)
        for month, currency in [(MARCH, "JPY"), (APRIL, "EUR")]:
            insert_lines(con, month, [{"x_SourceLine": f"l-{currency}", "BillingCurrency":
                                       currency, "EffectiveCost": 1.0, "BilledCost": 1.0}])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"warehouse": {"path": "warehouse.duckdb"}}))
    for month, currency in [("2024-03", "JPY"), ("2024-04", "EUR")]:
        assert main(["export", "runs", "--config", str(config), "--month", month, "--out",
                     "-"]) == 0
        records = list(csv.DictReader(capsys.readouterr().out.splitlines()))
        assert records and {r["currency"] for r in records} == {currency}


def test_a_month_not_materialized_is_one_line(config, tmp_path, capsys):
    assert main(["export", "runs", "--config", str(config), "--month", "2024-05"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no run_costs for 2024-05 in ") and err.count("\n") == 1
    missing = tmp_path / "other.yaml"
    missing.write_text(yaml.safe_dump({"warehouse": {"path": "nowhere.duckdb"}}))
    assert main(["export", "runs", "--config", str(missing), "--month", "2024-03"]) == 1
    assert "no warehouse at" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["runs", "focus"])
def test_a_month_no_partition_holds_says_so_not_materialize_it(config, capsys, command):
    """`export … --month 2099-01` said "materialize the month first", which `materialize`
    then refuses: the line says why no partition holds it and what to do, as `report` does."""
    args = ["export", command, "--config", str(config), "--month"]
    assert main([*args, "2099-01"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: month 2099-01 has not started yet: the months run 2015-01 "
                          "through the open month ") and err.count("\n") == 1
    assert main([*args, "1999-12", "--out", "-"]) == 1
    assert capsys.readouterr().err.startswith(
        "error: month 1999-12 is before the first partition: the months run 2015-01 through "
        "the open month ")
    assert main([*args, "2024-05"]) == 1  # a partition never materialized: as it was
    assert "materialize the month first" in capsys.readouterr().err


def test_a_materialized_month_without_run_cost_is_a_header(tmp_path, dagster_home, capsys):
    """A month materialized with an MLflow tracker whose runs claim nothing billed: its
    run_costs is empty, and the export is the header alone, as with a runs file. The
    incremental record skips the assets it cannot fingerprint (an MLflow store), and the
    export took the missing record for a month never materialized; a month that was not is
    still one line, exit 1."""
    from mlflow import MlflowClient

    from cost_pipeline.cli.materialize import materialize_month

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("idle")  # no run: nothing of the bill is a run's
    (tmp_path / "focus").mkdir()
    columns = ["BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
               "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId",
               "ResourceType", "RegionId", "SkuId", "SkuPriceDetails", "ConsumedQuantity",
               "ConsumedUnit", "BilledCost", "EffectiveCost", "BillingCurrency", "InvoiceId"]
    with (tmp_path / "focus" / "bill.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerow(["2026-07-01T00:00:00Z", "2026-07-03T10:00:00Z", "2026-07-03T11:00:00Z",
                         "AWS", "Usage", "Compute", "Amazon EC2", "i-1", "Virtual Machine",
                         "us-east-1", "m6i", '{"InstanceType": "m6i.large"}', 1.0, "Hours",
                         0.5, 0.5, "USD", "INV-1"])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "warehouse": {"path": "warehouse.duckdb"},
        "billing": [{"kind": "focus", "path": "focus/bill.csv"}],
        "tracker": [{"kind": "mlflow", "tracking_uri": uri, "experiments": ["idle"]}]}))
    assert materialize_month(str(config), date(2026, 7, 1), progress=False).success
    capsys.readouterr()
    out = tmp_path / "runs.csv"
    args = ["export", "runs", "--config", str(config)]
    assert main([*args, "--month", "2026-07", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == (
        '"month","run_id","model","purpose_class","search_id","gpu_cost","cpu_cost",'
        '"storage_cost","network_cost","other_cost","cost","currency","accelerator_hours",'
        '"cpu_hours"\n')
    capsys.readouterr()
    assert main([*args, "--month", "2026-08", "--out", str(tmp_path / "august.csv")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no run_costs for 2026-08 in ") and err.count("\n") == 1
    assert not (tmp_path / "august.csv").exists()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_failed_write_leaves_no_partial_file(config, tmp_path, capsys, monkeypatch, fmt):
    """The file is written atomically: whatever fails — `--out` an existing directory, the
    final rename — nothing is left beside the target (a `.runs.csv.partial` was)."""
    import cost_pipeline.export

    folder = tmp_path / "out"
    (folder / f"runs.{fmt}").mkdir(parents=True)
    args = ["export", "runs", "--config", str(config), "--month", "2024-03", "--format", fmt]
    assert main([*args, "--out", str(folder / f"runs.{fmt}")]) == 1
    assert [p.name for p in folder.iterdir()] == [f"runs.{fmt}"]
    err = capsys.readouterr().err
    assert err == f"error: {folder / f'runs.{fmt}'} is a directory: name the file to write\n"

    def no_space(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cost_pipeline.export.os, "replace", no_space)  # the rename fails
    assert main([*args, "--out", str(folder / "runs.out")]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert [p.name for p in folder.iterdir()] == [f"runs.{fmt}"]
    monkeypatch.undo()
    assert main([*args, "--out", str(folder / "runs.out")]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"runs.{fmt}", "runs.out"])


def test_an_out_that_cannot_be_written_is_one_line_naming_it(config, tmp_path, capsys,
                                                              monkeypatch):
    """`--out` under a file, or in a folder no file can be made in (/proc), is one line
    naming the --out given and why: it said `[Errno 17] File exists: 'a_file'`, or named the
    partial copy (`.x.csv.….partial`) the user never asked for. A write that fails midway
    (the disk full) names the --out too, and nothing is left behind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("not a folder", encoding="utf-8")
    args = ["export", "runs", "--config", str(config), "--month", "2024-03"]
    for out in ("a_file/x.csv", "a_file/sub/x.csv"):
        assert main([*args, "--out", out]) == 1
        assert capsys.readouterr().err == (
            f"error: cannot write {out}: a_file is a file, not a folder\n")
    if Path("/proc/self").is_dir():
        assert main([*args, "--out", "/proc/x.csv"]) == 1
        assert capsys.readouterr().err == (
            "error: cannot write /proc/x.csv: No such file or directory\n")

    import pyarrow.csv as pacsv

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "Error writing bytes to file '/somewhere/.x.csv.abc.partial'")

    monkeypatch.setattr(pacsv, "write_csv", disk_full)
    assert main([*args, "--out", "out/x.csv"]) == 1
    assert capsys.readouterr().err == (
        "error: cannot write out/x.csv: No space left on device\n")
    assert list((tmp_path / "out").iterdir()) == []


def test_two_exports_of_the_same_path_at_once_both_succeed(config, tmp_path, monkeypatch):
    """Two writers of one path each write a partial file of their own: both renames succeed
    (a barrier holds each until both have written) and the file is one whole copy. With one
    fixed `.runs.csv.partial` the second rename failed: No such file or directory."""
    from cost_pipeline.cli.export import export_runs
    from cost_pipeline.config import load_config
    from tests.support.export_race import write_twice_at_once

    warehouse = load_config(config).warehouse_path
    target = tmp_path / "race" / "runs.csv"
    expected, _ = export_runs(warehouse, MARCH, "csv", tmp_path / "alone.csv")
    outcomes = write_twice_at_once(
        lambda: export_runs(warehouse, MARCH, "csv", target)[0], monkeypatch)
    assert outcomes == [target.resolve()] * 2
    assert target.read_bytes() == expected.read_bytes()
    assert [p.name for p in target.parent.iterdir()] == ["runs.csv"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # a new file's mode, not 0600


def test_out_dash_writes_the_csv_to_stdout(config, tmp_path, capsysbinary, monkeypatch):
    """`--out -` is stdout (SPEC §10), not a file named `-`: the CSV itself, the same bytes
    as the file; parquet cannot go there and is one line, exit 1, nothing written."""
    monkeypatch.chdir(tmp_path)
    args = ["export", "runs", "--config", str(config), "--month", "2024-03"]
    assert main(args) == 0
    path = Path(capsysbinary.readouterr().out.decode().strip())
    assert main([*args, "--out", "-"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == path.read_bytes() and err == b""
    assert main([*args, "--format", "parquet", "--out", "-"]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b"" and err == (b"error: parquet cannot go to stdout (--out -): name a file "
                                  b"with --out, or use --format csv\n")
    assert main([*args, "--month", "2024-05", "--out", "-"]) == 1  # a month not materialized
    out, err = capsysbinary.readouterr()
    assert out == b"" and err.startswith(b"error: no run_costs for 2024-05") and \
        err.count(b"\n") == 1
    assert not (tmp_path / "-").exists()
    # the staging folder beside the warehouse is gone
    assert sorted(p.name for p in path.parents[1].iterdir()) == ["exports", "warehouse.duckdb"]


def test_the_format_follows_the_extension_and_a_contradiction_is_refused(config, tmp_path,
                                                                           capsys):
    """Without --format, --out's extension says the format (.csv, .parquet, any case); other
    names keep the default, csv. A --format the extension contradicts is one line, exit 1,
    and no file (parquet went silently into a .csv file)."""
    args = ["export", "runs", "--config", str(config), "--month", "2024-03"]
    assert main([*args, "--out", str(tmp_path / "runs.parquet")]) == 0
    assert pq.read_table(tmp_path / "runs.parquet").num_rows == 2
    assert main([*args, "--out", str(tmp_path / "RUNS.CSV")]) == 0
    assert main([*args, "--out", str(tmp_path / "runs.dat")]) == 0
    for name in ("RUNS.CSV", "runs.dat"):
        assert (tmp_path / name).read_text(encoding="utf-8").startswith('"month","run_id"')
    assert main([*args, "--format", "parquet", "--out", str(tmp_path / "runs.txt")]) == 0
    assert pq.read_table(tmp_path / "runs.txt").num_rows == 2  # --format over an unknown one
    capsys.readouterr()
    for fmt, name in (("parquet", "other.csv"), ("csv", "other.Parquet")):
        assert main([*args, "--format", fmt, "--out", str(tmp_path / name)]) == 1
        err = capsys.readouterr().err
        suffix = name.rsplit(".", 1)[1]
        assert err == (f"error: --format {fmt} contradicts --out {tmp_path / name} (a "
                       f".{suffix} file): drop --format, or name a .{fmt} file\n")
        assert not (tmp_path / name).exists()


def test_a_warehouse_on_a_read_only_disk_exports_to_stdout_and_names_what_it_cannot_write(
        config, tmp_path, capsysbinary):
    """On a read-only disk `--out -` stages its copy in the system's temporary folder (it
    said `[Errno 30] Read-only file system: '…/.export-to-stdout-…'`), and the default path is
    one line naming the file that cannot be written."""
    from tests.support.read_only import read_only

    folder = config.parent / "data"
    args = ["export", "runs", "--config", str(config), "--month", "2024-03"]
    expected = b"\n".join([
        b'"month","run_id","model","purpose_class","search_id","gpu_cost","cpu_cost",'
        b'"storage_cost","network_cost","other_cost","cost","currency","accelerator_hours",'
        b'"cpu_hours"',
        b'2024-03-01,"r-a",,"production",,"16","0.4","0.1","0.05333333333333334","0",'
        b'"16.553333333333335","USD","4","0.3333333333333333"',
        b'2024-03-01,"r-b","churn","search","s1","4","0","0","0.02666666666666667",'
        b'"0.006666666666666667","4.033333333333333","USD","1","0"', b""])
    with read_only(folder) as cause:
        assert main([*args, "--out", "-"]) == 0
        out, err = capsysbinary.readouterr()
        assert (out, err) == (expected, b"")
        assert main(args) == 1
        out, err = capsysbinary.readouterr()
        assert out == b"" and err.decode() == (
            f"error: cannot write {folder / 'exports' / 'run-costs-2024-03.csv'}: {cause}\n")
    assert sorted(p.name for p in folder.iterdir()) == ["warehouse.duckdb"]


def test_an_out_path_naming_a_pipe_or_a_link_keeps_it(config, tmp_path, capsys):
    """`--out` a named pipe (or a device: as root, `--out /dev/full` replaced the system's) was
    renamed over, becoming a regular file while its reader waited for ever; a symbolic link
    was replaced by the file, the file it names untouched. A pipe, a socket or a device is
    refused in one line; a link's file is written, the link kept."""
    import os

    args = ["export", "runs", "--config", str(config), "--month", "2024-03"]
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert main([*args, "--out", str(pipe)]) == 1
    assert capsys.readouterr().err == (f"error: {pipe} is no regular file (a device, a pipe or "
                                       "a socket): name a file to write\n")
    assert pipe.is_fifo() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] \
        == []
    target = tmp_path / "kept" / "runs.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert main([*args, "--out", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text().startswith("\"month\",\"run_id\",")
