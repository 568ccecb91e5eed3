"""`cost-pipeline report --from YYYY-MM --to YYYY-MM`: writes the period report and prints its
path; a bad range is one line on stderr and exit 1."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from cost_pipeline.cli.main import main
from cost_pipeline.config import load_config
from cost_pipeline.report.period import period_report_path


def test_from_to_writes_the_period_report(demo_quarter, dagster_home, tmp_path):
    config = str(demo_quarter[0])
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    cli = [sys.executable, "-m", "cost_pipeline.cli", "report", "--config", config]
    done = subprocess.run([*cli, "--from", "2026-07", "--to", "2026-09"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = period_report_path(load_config(config).warehouse_path, date(2026, 7, 1),
                                  date(2026, 9, 1))
    assert done.stdout.strip() == str(expected)
    assert expected.name == "cost-report-2026-07_2026-09.html"
    assert Path(done.stdout.strip()).stat().st_size > 10_000
    out = tmp_path / "q3.html"
    assert main(["report", "--config", config, "--from", "2026-08", "--to", "2026-09",
                 "--out", str(out)]) == 0
    assert out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--from", "2026-09", "--to", "2026-07"],
     "error: the period starts 2026-09, after its end 2026-07: --from must not be after --to"),
    (["--from", "2026-07"], "error: a period needs both --from YYYY-MM and --to YYYY-MM"),
    (["--to", "2026-07"], "error: a period needs both --from YYYY-MM and --to YYYY-MM"),
    (["--from", "2026-13", "--to", "2026-09"], "error: --from '2026-13': expected YYYY-MM"),
    (["--from", "2026-07", "--to", "Sept"], "error: --to 'Sept': expected YYYY-MM"),
    # digits of another script: Python's \d took them, and ２０２６-07 was July
    (["--from", "２０２６-07", "--to", "2026-09"], "error: --from '２０２６-07': expected YYYY-MM"),
    (["--month", "2026-0٧"], "error: month '2026-0٧': expected YYYY-MM"),
    (["--month", "2026-07", "--from", "2026-07", "--to", "2026-09"],
     "error: --month and --from/--to exclude each other: one month, or a period"),
    ([], "error: report needs --month YYYY-MM, or --from YYYY-MM --to YYYY-MM"),
    (["--from", "2026-06", "--to", "2026-09"],
     "error: no billing data for 2026-06 in {warehouse}: materialize it first, or report a "
     "shorter period"),
])
def test_bad_ranges_are_one_line_and_exit_1(demo_quarter, capsys, args, message):
    code = main(["report", "--config", str(demo_quarter[0]), *args])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    warehouse = load_config(demo_quarter[0]).warehouse_path  # named as `export` names it
    assert captured.err.strip().splitlines() == [message.format(warehouse=warehouse)]


@pytest.mark.parametrize(("args", "message"), [
    (["--month", "2014-12"], r"month 2014-12 is before the first partition: the months run "
                             r"2015-01 through the open month \d{4}-\d{2}; set `first_month: "
                             r"2014-12` in the config to include it"),
    (["--from", "2014-11", "--to", "2015-02"], r"month 2014-11 is before the first partition"),
    (["--month", "2999-01"], r"month 2999-01 has not started yet: the months run 2015-01 "),
    (["--from", "2026-08", "--to", "2999-01"], r"month 2999-01 has not started yet"),
])
def test_a_month_no_partition_holds_says_so(demo_quarter, capsys, args, message):
    # it said "materialize it first", which `materialize` then refused for the same month
    code = main(["report", "--config", str(demo_quarter[0]), *args])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert re.match(f"error: {message}", line), line


@pytest.mark.parametrize("where", ["first", "last"])
def test_debug_anywhere_on_the_line_shows_the_traceback(demo_quarter, capsys, where):
    # `report … --debug` was refused as an argument the subcommand does not know
    args = ["report", "--config", str(demo_quarter[0]), "--month", "2014-12"]
    code = main(["--debug", *args] if where == "first" else [*args, "--debug"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("error: month 2014-12 is before the first partition")
