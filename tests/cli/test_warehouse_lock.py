"""Who holds the warehouse: a notebook (`duckdb.connect(path)` in another process) holding the
DuckDB file makes the CLI say so in its one line — the PID that holds it — within seconds,
and leaves the month as it was. The readers (the reports, the exports) wait for a
materialization or an upgrade writing the warehouse, and say in one line what they cannot
wait for or write."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from cost_pipeline.cli.main import main
from cost_pipeline.defs.resources import locked_message
from tests.cli.test_cli import run_cli
from tests.support.warehouse_dump import copy_with_warehouse, dump

NOTEBOOK = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
            "print('ready', flush=True); sys.stdin.read()")


def test_warehouse_held_by_another_process_names_it(demo_quarter, tmp_path, dagster_home):
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    before = dump(warehouse)
    notebook = subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(warehouse)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert notebook.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = run_cli("materialize", "--config", str(config), "--month", "2026-08", "--force",
                       env_home=dagster_home)
        took = time.monotonic() - started
    finally:
        notebook.stdin.close()
        notebook.wait(timeout=30)
    assert done.returncode == 1, done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [errors[0]] and f"is locked by PID {notebook.pid}" in errors[0], done.stderr
    assert str(warehouse) in errors[0]
    assert "before any step started" not in done.stderr
    assert took < 40, took  # was 54 s of retries before the message
    assert dump(warehouse) == before


def test_read_only_file_system_is_said():
    exc = OSError('IO Error: Cannot open file "/ro/w.duckdb": Read-only file system')
    assert locked_message("/ro/w.duckdb", exc) == \
        "warehouse /ro/w.duckdb cannot be written: read-only file system"


def test_a_warehouse_under_a_file_is_said(tmp_path, dagster_home):
    # it read "cannot be written: File exists (…/runs.csv/w.duckdb.lock)"
    (tmp_path / "runs.csv").write_text("run_id,status,start_time\n")
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: runs.csv/w.duckdb}\n")
    done = run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home)
    assert done.returncode == 1, done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: warehouse {tmp_path / 'runs.csv' / 'w.duckdb'} cannot be "
                      f"written: {tmp_path / 'runs.csv'} is a file, not a folder"], done.stderr


# a materialization's hold on the warehouse: its writer lock (`pid N`, or `pid N (what)`) and
# the DuckDB file open to write, until stdin closes
WRITER = ("import duckdb, sys; from cost_pipeline.warehouse import acquire_writer_lock; "
          "lock = acquire_writer_lock(sys.argv[1], 'materialization', sys.argv[2] or None); "
          "con = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read(); "
          "con.close()")


@contextmanager
def writing(warehouse: Path, holder: str = "") -> Iterator[subprocess.Popen]:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(warehouse), holder],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        yield writer
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)


def read_commands(config: Path, out: Path) -> dict[str, list[str]]:
    at = ["--config", str(config)]
    return {
        "report --month": ["report", *at, "--month", "2026-08", "--out", str(out / "m.html")],
        "report --from/--to": ["report", *at, "--from", "2026-07", "--to", "2026-09",
                               "--out", str(out / "q.html")],
        "export runs": ["export", "runs", *at, "--month", "2026-08", "--out",
                        str(out / "runs.csv")],
        "export focus": ["export", "focus", *at, "--month", "2026-08", "--out",
                         str(out / "focus.parquet")],
    }


def test_readers_wait_for_a_running_materialization(demo_quarter, tmp_path, capsys):
    """While a materialization writes the warehouse, the reports and the exports wait for
    its writer lock, say so on stderr, then read: they failed at once with DuckDB's paragraph
    (`IO Error: Could not set lock on file …: Conflicting lock is held in … See also …`)."""
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    for name, args in read_commands(config, tmp_path).items():
        with writing(warehouse) as writer:
            threading.Timer(1.5, writer.stdin.close).start()
            started = time.monotonic()
            code = main(args)
            took = time.monotonic() - started
        out, err = capsys.readouterr()
        assert code == 0, (name, err)
        assert err.splitlines()[0] == (f"waiting for a materialization (pid {writer.pid}) "
                                       f"writing {warehouse} to finish"), name
        assert "error" not in err, name
        assert Path(out.strip()) == Path(args[-1]).resolve(), name
        assert took >= 1.5, name


def test_a_materialization_writing_longer_than_readers_wait_is_one_line(
        demo_quarter, tmp_path, capsys, monkeypatch):
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    monkeypatch.setattr("cost_pipeline.warehouse.WRITER_WAIT_SECONDS", 1.0)
    with writing(warehouse) as writer:
        for name, args in read_commands(config, tmp_path).items():
            assert main(args) == 1, name
            out, err = capsys.readouterr()
            assert out == "" and err == (
                f"waiting for a materialization (pid {writer.pid}) writing {warehouse} to "
                f"finish\nerror: cannot read {warehouse}: a materialization (pid {writer.pid}) "
                "is writing it; waited 1 s: try again when it ends\n"), name
    assert list(tmp_path.glob("*.*")) == []  # nothing written


def an_older_version_of(config: Path) -> Path:
    """The warehouse as a version before `billing_months` wrote it."""
    warehouse = config.parent / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("DROP TABLE billing_months")
    return warehouse


def test_a_reader_waits_for_another_readers_upgrade(demo_quarter, tmp_path, capsys):
    """Two readers of an older version's warehouse: the second waits for the first one's
    upgrade (it failed on the upgrade's open with DuckDB's lock paragraph)."""
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = an_older_version_of(config)
    args = read_commands(config, tmp_path)["report --month"]
    with writing(warehouse, "upgrade") as upgrading:
        threading.Timer(1.5, upgrading.stdin.close).start()
        assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == (f"waiting for `upgrade` (pid {upgrading.pid}) writing {warehouse} to "
                   "finish\n")
    assert Path(out.strip()) == tmp_path / "m.html"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM billing_months").fetchone() == (3,)


def test_two_readers_of_an_older_warehouse_at_once_both_read(demo_quarter, tmp_path):
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    an_older_version_of(config)
    readers = [subprocess.Popen(
        [sys.executable, "-m", "cost_pipeline.cli", "export", "runs", "--config", str(config),
         "--month", "2026-08", "--out", str(tmp_path / f"runs-{n}.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (1, 2)]
    done = [(reader.wait(timeout=120), reader.stderr.read()) for reader in readers]
    assert [code for code, _ in done] == [0, 0], done
    assert "error" not in "".join(err for _, err in done)
    assert (tmp_path / "runs-1.csv").read_bytes() == (tmp_path / "runs-2.csv").read_bytes()


def test_an_older_warehouse_on_a_read_only_disk_says_it_needs_an_upgrade(demo_quarter,
                                                                         tmp_path, capsys):
    """An older version's warehouse on a read-only disk: the reader's upgrade cannot be
    written there, and the line says so (it was `[Errno 30] Read-only file system:
    '…/warehouse.duckdb.lock'`)."""
    from tests.support.read_only import read_only

    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = an_older_version_of(config)
    with read_only(config.parent) as cause:
        for name, args in read_commands(config, tmp_path).items():
            assert main(args) == 1, name
            out, err = capsys.readouterr()
            assert out == "" and err == (
                f"error: cannot read {warehouse}: it was written by an older version and "
                f"needs an upgrade that cannot be written where it is ({cause}): materialize "
                "a month of it once where it can be written\n"), name
    assert list(tmp_path.glob("*.*")) == []
