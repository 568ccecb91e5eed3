"""The command line as a user runs it: exit codes, check output, one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

CLI = [sys.executable, "-m", "cost_pipeline.cli"]


def run_cli(*args: str, env_home: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "DAGSTER_HOME": str(env_home)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def copy_demo(demo_quarter, tmp_path) -> Path:
    config, _ = demo_quarter
    target = tmp_path / "demo"
    shutil.copytree(Path(config).parent, target,
                    ignore=shutil.ignore_patterns("*.duckdb", "*.wal"))
    return target / "config.yaml"


def test_materialize_prints_checks_and_strict_exit(demo_quarter, tmp_path, dagster_home):
    config = copy_demo(demo_quarter, tmp_path)
    done = run_cli("materialize", "--config", str(config), "--month", "2026-08",
                   env_home=dagster_home)
    assert done.returncode == 0, done.stderr
    assert "reconciliation_within_threshold: FAIL (ERROR)" in done.stdout
    assert "cost_conserved: PASS" in done.stdout
    assert "✓ attribution" in done.stderr  # progress goes to stderr
    strict = run_cli("materialize", "--config", str(config), "--month", "2026-08", "--strict",
                     env_home=dagster_home)
    assert strict.returncode == 2
    passing = run_cli("materialize", "--config", str(config), "--month", "2026-07", "--strict",
                      env_home=dagster_home)
    assert passing.returncode == 0, passing.stderr
    # August, materialized first, read July's figures as they were (none): said
    assert ("note: 2026-08 read this month's figures (a search's cost to date, trends, "
            "previous bests) as they were: materialize it again") in passing.stderr


NOTE = "read this month's figures"


def restate_august(config: Path, line: int, **columns) -> None:
    """August's CUR delivered again with `columns` of its first file's `line` moved by the
    amount given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = sorted((config.parent / "exports").rglob("BILLING_PERIOD=2026-08/*.parquet"))[0]
    table = pq.read_table(path)
    for name, value in columns.items():
        values = table.column(name).to_pylist()
        values[line] += value
        table = table.set_column(table.column_names.index(name), name,
                                 pa.array(values, table.schema.field(name).type))
    pq.write_table(table, path)


def test_the_later_months_note_only_when_what_they_read_changed(demo_quarter, tmp_path,
                                                                  dagster_home):
    """August materialized again after September recomputes its decision tables (they read
    September's figures) but writes the same bill, runs and attribution: September, which
    reads those, is unchanged, so no note. August's CUR delivered again with the same lines
    (its files written anew, or `--force`) is the same bill: still no note, September still
    skipped. A line restated — its cost, or only its list price — moves what September reads:
    the note names it, and September does recompute."""
    config = copy_demo(demo_quarter, tmp_path)
    for month in ("2026-07", "2026-08", "2026-09"):
        done = run_cli("materialize", "--config", str(config), "--month", month,
                       env_home=dagster_home)
        assert done.returncode == 0, done.stderr
        assert NOTE not in done.stderr  # each month materialized after the earlier ones
    again = run_cli("materialize", "--config", str(config), "--month", "2026-08",
                    env_home=dagster_home)
    assert again.returncode == 0, again.stderr
    assert "2026-08: materialized (run " in again.stdout
    assert "2026-08 billing_facts: unchanged, skipped" in again.stdout
    assert NOTE not in again.stderr
    september = run_cli("materialize", "--config", str(config), "--month", "2026-09",
                        env_home=dagster_home)
    assert "2026-09: unchanged, skipped" in september.stdout, september.stdout
    # the CUR delivered again for August, the same bytes: its bill is written again, alike
    for path in (config.parent / "exports").rglob("BILLING_PERIOD=2026-08/*"):
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 10))
    redelivered = run_cli("materialize", "--config", str(config), "--month", "2026-08",
                          env_home=dagster_home)
    assert redelivered.returncode == 0, redelivered.stderr
    assert "2026-08 billing_facts: unchanged" not in redelivered.stdout  # read again
    assert "its rows are kept" in redelivered.stderr  # the attribution's
    assert NOTE not in redelivered.stderr
    forced = run_cli("materialize", "--config", str(config), "--month", "2026-08", "--force",
                     env_home=dagster_home)
    assert forced.returncode == 0, forced.stderr
    assert NOTE not in forced.stderr
    september = run_cli("materialize", "--config", str(config), "--month", "2026-09",
                        env_home=dagster_home)
    assert "2026-09: unchanged, skipped" in september.stdout, september.stdout
    # one line restated: its cost 1 more, then only its list price
    for restated in ({"line_item_unblended_cost": 1, "line_item_net_unblended_cost": 1},
                     {"pricing_public_on_demand_cost": 1}):
        restate_august(config, 0, **restated)
        redelivered = run_cli("materialize", "--config", str(config), "--month", "2026-08",
                              env_home=dagster_home)
        assert redelivered.returncode == 0, redelivered.stderr
        assert ("note: 2026-09 read this month's figures (a search's cost to date, trends, "
                "previous bests) as they were: materialize it again to bring it up to date"
                ) in redelivered.stderr
        september = run_cli("materialize", "--config", str(config), "--month", "2026-09",
                            env_home=dagster_home)
        assert "2026-09: materialized (run " in september.stdout, september.stdout
        assert "2026-09: unchanged, skipped" not in september.stdout


def test_a_failed_check_says_what_failed(capsys):
    """A failing WARN check printed only "FAIL (WARN)": it names what failed now (the
    searches, the days, the models, the cost against the budget); a passing one stays short."""
    from datetime import date

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult

    checks = [
        CheckOutcome("search_costs", "searches_within_estimate", False, "WARN",
                     {"without_estimate": "S2", "over_estimate": "S1, S3", "searches": 3}),
        CheckOutcome("retention_violations", "retention_within_budget", False, "WARN",
                     {"violation_cost": 120.5, "budget": 100.0, "currency": "EUR"}),
        CheckOutcome("billing_facts", "billing_complete", True, "ERROR",
                     {"missing_days": "", "days_expected": 31}),
        CheckOutcome("cost_per_model_monthly", "model_cost_trend", True, "WARN",
                     {"models": ""}),
    ]
    print_checks(MonthResult(date(2026, 7, 1), True, "r", None, checks))
    assert capsys.readouterr().out.splitlines() == [
        "2026-07 search_costs.searches_within_estimate: FAIL (WARN)  without_estimate S2, "
        "over_estimate S1, S3",
        "2026-07 retention_violations.retention_within_budget: FAIL (WARN)  "
        "violation_cost EUR 120.50, budget EUR 100.00",
        "2026-07 billing_facts.billing_complete: PASS",
        "2026-07 cost_per_model_monthly.model_cost_trend: PASS",
    ]


def test_cli_runs_are_recorded_in_the_instance(demo_quarter, tmp_path, dagster_home):
    import dagster as dg

    config = copy_demo(demo_quarter, tmp_path)
    assert run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home).returncode == 0
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"cost_pipeline/launched_by": "cli"}))
        assert runs and runs[0].tags.get("dagster/partition") == "2026-07-01"


def test_bad_config_key_is_one_clear_line(tmp_path, dagster_home):
    config = tmp_path / "c.yaml"
    config.write_text("warehouse: {path: w.duckdb}\npolicy: {reconciliation: "
                      "{max_untracked_share: lots}}\nbogus: 1\n")
    done = run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "policy.reconciliation.max_untracked_share" in lines[0] and "bogus" in lines[0]


@pytest.mark.parametrize(("content", "where", "problem"), [
    (b"warehouse: {path: w.duckdb\nbilling: [\n", "line 2 column 8",
     "not valid YAML: expected ',' or '}', but got ':' (while parsing a flow mapping that "
     "starts at line 1 column 12)"),
    (b"warehouse:\n  path: w.duckdb\n   bad: 1\n", "line 3 column 7",
     "not valid YAML: mapping values are not allowed here"),
    (b"warehouse: {path: w\x01.duckdb}\n", "line 1 column 20",
     "not valid YAML: character #x0001"),
    (b"# caf\xe9 (latin-1)\nwarehouse: {path: w.duckdb}\n", "line 1 column 6",
     "not UTF-8 text (byte 0xe9)"),
], ids=["flow-mapping", "indentation", "control-character", "latin-1"])
def test_an_unreadable_config_is_one_line_naming_the_file_and_where(content, where, problem,
                                                                     tmp_path, capsys):
    from cost_pipeline.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_bytes(content)
    assert main(["report", "--config", str(config), "--month", "2026-07"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: config {config} {where}: {problem}")


def test_source_error_fails_cleanly_and_keeps_the_previous_month(demo_quarter, tmp_path,
                                                                 dagster_home):
    config = copy_demo(demo_quarter, tmp_path)
    assert run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home).returncode == 0
    warehouse = config.parent / yaml.safe_load(config.read_text())["warehouse"]["path"]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        before = con.execute("SELECT count(*), sum(EffectiveCost) FROM billing_facts").fetchone()
    runs = config.parent / "runs.csv"
    text = runs.read_text().splitlines()
    header = text[0].split(",")
    start, end = header.index("start_time"), header.index("end_time")
    # swap start and end of the first run: its end is now before its start
    import csv
    import io

    rows = list(csv.reader(io.StringIO("\n".join(text))))
    rows[1][start], rows[1][end] = rows[1][end], rows[1][start]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    runs.write_text(buffer.getvalue())
    done = run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home)
    assert done.returncode == 1
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert "runs.csv row 2" in errors[0] and "end_time" in errors[0]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        after = con.execute("SELECT count(*), sum(EffectiveCost) FROM billing_facts").fetchone()
        assert after[0] == before[0] and after[1] == pytest.approx(before[1], abs=1e-6)
        assert con.execute("SELECT count(*) FROM tracker_runs WHERE month = DATE '2026-07-01'"
                           ).fetchone()[0] > 0


def test_bad_month_argument(tmp_path, dagster_home):
    done = run_cli("materialize", "--config", str(tmp_path / "none.yaml"), "--month", "2026-13",
                   env_home=dagster_home)
    assert done.returncode == 1 and done.stderr.startswith("error:")


@pytest.mark.parametrize(("argv", "command", "named"), [
    (["materialize", "--month", "2026-07", "--stict"], "cost-pipeline materialize", "--stict"),
    (["materialize", "--config", "c.yaml"], "cost-pipeline materialize", "--month"),
    (["export", "runs", "--month", "2026-07", "--format", "json"], "cost-pipeline export runs",
     "'json'"),
    ([], "cost-pipeline", "command"),
])
def test_a_wrong_command_line_is_one_line_and_exit_1(argv, command, named, capsys):
    """Exit 2 is kept for an ERROR check under --strict (SPEC §10): a usage error is an error
    like any other, one line naming the command and its --help."""
    from cost_pipeline.cli.main import main

    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {command}: ") and named in captured.err
    assert captured.err.rstrip().endswith(f"(see {command} --help)")
    with pytest.raises(SystemExit) as done:
        main([*argv[:2], "--help"] if argv[:1] == ["export"] else [*argv[:1], "--help"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: ")


def test_demo_help_says_what_strict_does_as_materialize_does(capsys):
    """`demo --help` listed `--strict` with no text: it says the exit code, as
    `materialize --help` does."""
    from cost_pipeline.cli.main import main

    helps = {}
    for command in ("demo", "materialize"):
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0
        helps[command] = " ".join(capsys.readouterr().out.split())
    assert "--strict exit 2 when an ERROR check failed --force" in helps["materialize"]
    assert helps["demo"].endswith("--strict exit 2 when an ERROR check failed in any of "
                                  "its three months")


@pytest.mark.parametrize(("argv", "commands"), [
    (["--help"], True), (["demo", "--help"], False), (["materialize", "--help"], False),
    (["estimate", "--help"], False), (["report", "--help"], False), (["export", "--help"], True),
    (["export", "runs", "--help"], False), (["export", "focus", "--help"], False),
])
def test_help_reads_in_the_commands_words_not_argparses(argv, commands, capsys):
    """Every `--help` listed `-h, --help show this help message and exit` and the commands
    under "positional arguments", argparse's words beside lines like `--debug show
    tracebacks`; `estimate --help` listed `--model MODEL` with no text."""
    from cost_pipeline.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert " -h, --help show this help " in f"{shown} "
    assert "message and exit" not in shown and "positional arguments" not in shown
    assert ("commands: " in shown) == commands
    if argv == ["--help"]:
        assert shown.endswith("options: -h, --help show this help --debug show tracebacks")
        # what the tool does, where it read "`cost-pipeline`: demo, materialize (and more)."
        assert ("} ... Explain an ML training bill: what each run, model and search cost, and "
                "the levers to cut it. commands: ") in shown
    if argv[0] == "estimate":
        assert " --model MODEL the model the search trains (as the tracker names it) " in shown



@pytest.mark.parametrize("argv", [["--help"], ["materialize", "--help"],
                                  ["export", "runs", "--help"]])
def test_help_loads_no_module_only_a_command_uses(argv):
    """`decimal` (the check lines' figures) was imported at the top of the command's module:
    `--help` loaded it, and nothing else on its path does. pydantic, DuckDB and Dagster
    (~0.5 s) are a command's too."""
    probe = ("import sys; from cost_pipeline.cli.main import run\n"
             f"sys.argv = ['cost-pipeline', *{argv!r}]\n"
             "try:\n    run()\nexcept SystemExit as done:\n    code = done.code\n"
             "print(code, sorted(m for m in ('decimal', '_decimal', '_pydecimal', 'pydantic', "
             "'duckdb', 'dagster') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and done.stdout.splitlines()[-1] == "0 []"


def test_the_services_demo_reads_its_command_line_as_the_command_does(capsys):
    """`python -m cost_pipeline.demo.services` (`make demo-services`) passes `--strict` on:
    its wrong option is the same one line and exit 1, not argparse's exit 2."""
    from cost_pipeline.demo.services import main

    command = "python -m cost_pipeline.demo.services"
    assert main(["--strcit"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {command}: ") and "--strcit" in captured.err


def test_the_command_process_tunes_the_garbage_collector(tmp_path):
    """`cost-pipeline` is `run`: `main` with Python's cyclic collector set for one short run
    (fewer collections, the heap frozen at exit); `main` itself, which the tests call
    in-process, leaves the collector alone."""
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert scripts["project"]["scripts"]["cost-pipeline"] == "cost_pipeline.cli:run"
    probe = (
        "import gc, sys; from cost_pipeline.cli.main import main, run; "
        "before = gc.get_threshold(); sys.argv = ['cost-pipeline', 'report']; "
        "main(['report']); assert gc.get_threshold() == before and gc.get_freeze_count() == 0; "
        "code = run(); "
        "print(code, gc.get_threshold()[0], gc.get_freeze_count() > 0)")
    env = {k: v for k, v in os.environ.items() if k != "COST_PIPELINE_CONFIG"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "10000", "True"]  # no config: exit 1, still tuned


def test_the_command_process_runs_as_where_pandas_is_not_installed(demo_quarter, tmp_path,
                                                                   dagster_home):
    """pyarrow imports pandas, when installed, at its first conversion of a Python value
    (~0.3 s a run; the checkpoint listing's reader makes one). pandas is not a dependency:
    `run` hides it, and a whole month materializes without it; `main` leaves it alone."""
    import importlib.util

    assert importlib.util.find_spec("pandas") is not None  # installed here (the bench extra)
    config = copy_demo(demo_quarter, tmp_path)
    probe = (
        "import sys; from cost_pipeline.cli.main import run; "
        f"sys.argv = ['cost-pipeline', 'materialize', '--config', {str(config)!r}, "
        "'--month', '2026-08']; code = run(); loaded = 'pandas' in sys.modules\n"
        "try:\n    import pandas\nexcept ModuleNotFoundError:\n    hidden = True\n"
        "else:\n    hidden = False\n"
        "print(code, loaded, hidden)")
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["0", "False", "True"], done.stdout
    in_process = subprocess.run(
        [sys.executable, "-c", "import sys, pyarrow as pa; import cost_pipeline.cli.main; "
                               "pa.array(['a']); print('pandas' in sys.modules)"],
        capture_output=True, text=True, timeout=60)
    assert in_process.stdout.split() == ["True"], in_process.stderr  # only `run` hides it


def test_a_failed_trend_prints_each_models_cost_and_median(capsys):
    """SPEC §12: the check lists the models, their cost and that median; the printed line
    named the models alone. The metadata is the real check's, as the run records it."""
    from datetime import date

    import duckdb

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult
    from cost_pipeline.defs.checks import model_cost_trend
    from cost_pipeline.warehouse import ensure_schema

    with duckdb.connect() as con:
        ensure_schema(con)
        for month, churn, fraud in ((4, 10.0, 5.0), (5, 10.0, 5.0), (6, 10.0, 5.0),
                                    (7, 16.0, 9.0)):
            for model, cost in (("churn", churn), ("fraud", fraud)):
                con.execute("INSERT INTO cost_per_model_monthly VALUES "
                            "(?, ?, 'search', 'gpu', ?, 0, 1)", [date(2026, month, 1), model, cost])
        check = model_cost_trend(con, date(2026, 7, 1), 1.5)
    outcome = CheckOutcome("cost_per_model_monthly", "model_cost_trend", check.passed, "WARN",
                           {k: v.value for k, v in check.metadata.items()})
    print_checks(MonthResult(date(2026, 7, 1), True, "r", None, [outcome]))
    assert capsys.readouterr().out.splitlines() == [
        "2026-07 cost_per_model_monthly.model_cost_trend: FAIL (WARN)  models churn $16.00 "
        "against a median of $10.00; fraud $9.00 against a median of $5.00"]


FORGED = "s\n2026-07 reconciliation.reconciliation_within_threshold: PASS\x1b[31mRED"


def test_a_check_line_shows_control_characters_from_the_data_escaped(capsys):
    """A search id (the runs file's) holding a newline, a terminal escape and a
    right-to-left override printed a second, forged result line and coloured the terminal:
    each check is one line, with what the data holds shown escaped. The metadata is the real
    check's, as the run records it."""
    from datetime import date

    import duckdb

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult
    from cost_pipeline.defs.checks import searches_within_estimate
    from tests.support.warehouse_rows import insert

    july = date(2026, 7, 1)
    with duckdb.connect() as con:
        insert(con, "search_costs", july, [
            {"search_id": search_id, "runs": 1, "configs": 1.0, "seeds": 1,
             "runs_this_month": 1, "hours": 1.0, "accelerator_hours": 1.0, "cost": 1.0}
            for search_id in (FORGED, "tab\there\r\u202egnp.exe\x7f\x9b\u2066x\u2069")], {})
        check = searches_within_estimate(con, july)
    outcomes = [
        CheckOutcome("search_costs", "searches_within_estimate", check.passed, "WARN",
                     {k: v.value for k, v in check.metadata.items()}),
        CheckOutcome("reconciliation", "tracker_claims_billed", False, "WARN",
                     {"unbilled_claim_gpu_hours": 2.0, "resource_ids": "i-1\u2028i-2\x00"}),
        CheckOutcome("reconciliation", "reconciliation_within_threshold", False, "ERROR",
                     {"untracked_share": 0.5, "threshold": 0.05}),
    ]
    print_checks(MonthResult(july, True, "r", None, outcomes))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert out.splitlines() == [
        "2026-07 search_costs.searches_within_estimate: FAIL (WARN)  without_estimate "
        r"s\n2026-07 reconciliation.reconciliation_within_threshold: PASS\x1b[31mRED, "
        r"tab\there\r\u202egnp.exe\x7f\x9b\u2066x\u2069",
        "2026-07 reconciliation.tracker_claims_billed: FAIL (WARN)  "
        r"unbilled_claim_gpu_hours 2.0, resource_ids i-1\u2028i-2\x00",
        "2026-07 reconciliation.reconciliation_within_threshold: FAIL (ERROR)  "
        "untracked_share 0.5, threshold 0.05",
    ]


def test_a_check_line_prints_the_figures_own_digits(capsys):
    """GPU-hours rounded to 3 decimals printed with 4 (`billed_gpu_hours 8.3330` for 8.3333…);
    a share kept apart from its threshold to 6 digits printed with 4 (`untracked_share 0.0500,
    threshold 0.0500` on a failed check); a run listing an unbilled resource for 0.1 s failed
    the check with `unbilled_claim_gpu_hours 0.0000`. Each figure prints the digits the check
    recorded, a figure under its rounding its first three significant ones."""
    from datetime import date

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult
    from cost_pipeline.defs.metadata import kept_apart, rounded

    raw = {"untracked_share": 0.050004, "threshold": 0.05, "billed_gpu_hours": 25 / 3,
           "tracked_gpu_hours": 11 / 3}
    outcomes = [
        CheckOutcome("reconciliation", "reconciliation_within_threshold", False, "ERROR",
                     kept_apart(rounded(raw), raw, "untracked_share", "threshold")),
        CheckOutcome("reconciliation", "tracker_claims_billed", False, "WARN",
                     {**rounded({"unbilled_claim_gpu_hours": 0.1 / 3600}),
                      "resource_ids": "i-x"}),
        CheckOutcome("reconciliation", "reconciliation_within_threshold", True, "ERROR",
                     rounded({"untracked_share": 0.0, "threshold": 0.05,
                              "billed_gpu_hours": 1234567.0})),
    ]
    print_checks(MonthResult(date(2026, 1, 1), True, "r", None, outcomes))
    assert capsys.readouterr().out.splitlines() == [
        "2026-01 reconciliation.reconciliation_within_threshold: FAIL (ERROR)  "
        "untracked_share 0.050004, threshold 0.05, billed_gpu_hours 8.333, "
        "tracked_gpu_hours 3.667",
        "2026-01 reconciliation.tracker_claims_billed: FAIL (WARN)  "
        "unbilled_claim_gpu_hours 0.0000278, resource_ids i-x",
        "2026-01 reconciliation.reconciliation_within_threshold: PASS  "
        "untracked_share 0.0, threshold 0.05, billed_gpu_hours 1,234,567.0",
    ]


def test_a_failed_trend_shows_its_models_escaped(capsys):
    """The models a failed trend lists, from the tracker, print escaped as any other value."""
    from datetime import date

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult

    outcome = CheckOutcome("cost_per_model_monthly", "model_cost_trend", False, "WARN", {
        "currency": "USD", "models": "churn\nfake",
        "exceeding": [{"model": "churn\nfake\x1b]0;t\x07", "cost": 16.0,
                       "previous_median": 10.0}]})
    print_checks(MonthResult(date(2026, 7, 1), True, "r", None, [outcome]))
    assert capsys.readouterr().out.splitlines() == [
        "2026-07 cost_per_model_monthly.model_cost_trend: FAIL (WARN)  models "
        r"churn\nfake\x1b]0;t\x07 $16.00 against a median of $10.00"]


def test_a_failed_retention_budget_shows_its_cost_apart_from_the_budget(capsys):
    """A violation cost a fraction of the currency's unit over the budget printed as much as
    the budget under FAIL (JPY 100 against JPY 100, $100.00 against $100.00): the two keep
    the digits that tell them apart. The yen metadata is the real check's."""
    from datetime import date

    import duckdb

    from cost_pipeline.cli.main import print_checks
    from cost_pipeline.cli.materialize import CheckOutcome, MonthResult
    from cost_pipeline.defs.checks import retention_within_budget
    from tests.support.warehouse_rows import BILLING_DEFAULTS, insert

    july = date(2026, 7, 1)
    with duckdb.connect() as con:
        insert(con, "billing_facts", july, [{
            "ChargePeriodStart": date(2026, 7, 1), "ChargePeriodEnd": date(2026, 7, 2),
            "ChargeCategory": "Usage", "EffectiveCost": 1000.0, "x_CostComponent": "gpu",
            "x_SourceLine": "l0", "BillingCurrency": "JPY"}], BILLING_DEFAULTS)
        # 60.25 + 40.2 = 100.45 of dead checkpoints against a budget of 100.4
        insert(con, "retention_violations", july, [
            {"bucket": "b", "key": key, "reason": "dead_run", "bytes": 1,
             "monthly_cost": cost} for key, cost in (("k1", 60.25), ("k2", 40.2))], {})
        check = retention_within_budget(con, july, 100.4)
    outcomes = [
        CheckOutcome("retention_violations", "retention_within_budget", check.passed, "WARN",
                     {k: v.value for k, v in check.metadata.items()}),
        CheckOutcome("retention_violations", "retention_within_budget", False, "WARN",
                     {"violation_cost": 100.004, "budget": 100.0, "currency": "USD"}),
        CheckOutcome("retention_violations", "retention_within_budget", False, "WARN",
                     {"violation_cost": 120.5, "budget": 100.0, "currency": "EUR"}),
    ]
    print_checks(MonthResult(july, True, "r", None, outcomes))
    assert [line.split("  ")[1] for line in capsys.readouterr().out.splitlines()] == [
        "violation_cost JPY 100.5, budget JPY 100.4",
        "violation_cost $100.004, budget $100.000",
        "violation_cost EUR 120.50, budget EUR 100.00",
    ]


def test_a_backslash_in_the_data_reads_apart_from_an_escape():
    """`s\\n1` written in a search id (a backslash and an n) read as an escaped newline."""
    from cost_pipeline.cli.main import printable

    assert printable("s\\n1") == "s\\\\n1" and printable("s\n1") == "s\\n1"
    assert printable("i-\u202egnp.exe\u2066") == "i-\\u202egnp.exe\\u2066"


def test_an_error_naming_a_value_with_a_line_break_is_one_line(tmp_path, capsys):
    """An error line quotes what it names as it is: a config path holding a newline (or a
    right-to-left override) made the one-line error two lines, or reversed its end."""
    from cost_pipeline.cli.main import main

    for name in ("a\nb.yaml", "a\u202eb.yaml"):
        assert main(["materialize", "--config", str(tmp_path / name), "--month",
                     "2026-07"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "\u202e" not in err


def test_a_report_of_a_month_never_materialized_names_the_warehouse(tmp_path, capsys):
    """`report --month` said "in the warehouse" where `export` names the file: with two
    configs, which warehouse lacks the month?"""
    from datetime import date, datetime

    from cost_pipeline.cli.main import main
    from tests.support.warehouse_rows import insert_lines

    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n")
    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as con:  # October billed, May never materialized
        insert_lines(con, date(2026, 10, 1), [{
            "ChargePeriodStart": datetime(2026, 10, 1), "ChargePeriodEnd": datetime(2026, 10, 1, 1),
            "ChargeCategory": "Usage", "EffectiveCost": 1.0, "x_CostComponent": "gpu",
            "x_SourceLine": "l0"}])
    assert main(["report", "--config", str(tmp_path / "c.yaml"), "--month", "2026-05"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"error: no billing data for 2026-05 in {warehouse}: materialize "
                            "the month first\n")


@pytest.mark.parametrize("argv", [["report", "--month", "2026-07"],
                                  ["export", "runs", "--month", "2026-07"],
                                  ["estimate", "--model", "m", "--configs", "1", "--seeds", "1"],
                                  ["materialize", "--month", "2026-07"]])
@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_config_path_is_refused_not_read_from_the_environment(
        tmp_path, capsys, monkeypatch, argv, given):
    """`--config "$CFG"` with CFG unset read $COST_PIPELINE_CONFIG's file instead: another
    config's warehouse, without a word. It is said as `load_config("")` says it
    (test_config_contract::test_an_empty_config_path_is_no_config), where the command line
    said `--config names no file`; so is no config at all."""
    from cost_pipeline.cli.main import main

    other = tmp_path / "other.yaml"
    other.write_text("warehouse: {path: other.duckdb}\n")
    monkeypatch.setenv("COST_PIPELINE_CONFIG", str(other))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert main([*argv, "--config", given]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("error: the config path is empty: name the config file, or leave "
                            "--config out to read $COST_PIPELINE_CONFIG\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.yaml"]  # nothing written
    monkeypatch.delenv("COST_PIPELINE_CONFIG")
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: no config: pass --config FILE or set COST_PIPELINE_CONFIG\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.yaml"]
