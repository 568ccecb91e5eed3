"""Ctrl-C (SIGINT) and `docker stop` (SIGTERM) at the steps of a real `cost-pipeline
materialize` process, after a new delivery of the month arrived — every step signalled, the
two signals taking turns: the process exits 130 with one `error: interrupted …` line, and
every table's month is wholly as before (or, for a signal that lands after the commit, wholly
new) — never some tables new and others old."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.test_kill import AUGUST, CUR, VOLATILE, _cli
from tests.support.warehouse_dump import copy_with_warehouse, dump


def _restated(demo_quarter, target: Path) -> Path:
    """A copy of the demo whose August was restated since it was materialized."""
    config = copy_with_warehouse(Path(demo_quarter[0]), target)
    table = pq.read_table(config.parent / CUR)
    pq.write_table(table.slice(0, table.num_rows - 25), config.parent / CUR)
    runs = config.parent / "runs.csv"
    runs.write_text(runs.read_text().replace(",churn,churn,", ",churn,restated,", 1))
    return config


def _signalled_at(config: Path, nth_step: int | str, signum: int, env: dict,
                  delay: float = 0.0) -> tuple[int, str, str, str | None]:
    """Start a materialization, send `signum` `delay` seconds after its `nth_step` step (or the
    step of that name) starts; returns (exit code, stdout, stderr, the step signalled — None
    when the run ended before it)."""
    proc = subprocess.Popen(_cli(config), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    started, step, lines = 0, None, []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("… "):
            if nth_step in (started, line[2:].strip()):
                time.sleep(delay)
                proc.send_signal(signum)
                step = line[2:].strip()
                break
            started += 1
    rest_err = proc.stderr.read()
    out = proc.stdout.read()
    code = proc.wait(timeout=120)
    return code, out, "".join(lines) + rest_err, step


def _copy(demo_quarter, target: Path, dagster_home: Path) -> tuple[Path, Path, dict]:
    config = _restated(demo_quarter, target)
    pristine = target / "pristine.duckdb"
    shutil.copy(config.parent / "warehouse.duckdb", pristine)
    dagster_home.mkdir(parents=True, exist_ok=True)
    return config, pristine, {**os.environ, "DAGSTER_HOME": str(dagster_home)}


def test_sigint_and_sigterm_at_every_step_leave_the_month_whole(demo_quarter, tmp_path):
    # one copy of the restated demo per signal, signalled side by side (the two processes use
    # both cores; each has its own warehouse and Dagster home): in round k, SIGINT at step 2k
    # and SIGTERM at step 2k + 1, so the two together signal every step of the job once
    copies = {signum: _copy(demo_quarter, tmp_path / signum.name, tmp_path / f"home-{signum.name}")
              for signum in (signal.SIGINT, signal.SIGTERM)}
    old = dump(copies[signal.SIGINT][0].parent / "warehouse.duckdb", VOLATILE)
    signalled: dict[tuple[str, str], dict] = {}
    finished: dict[str, dict] = {}
    nth = 0
    with ThreadPoolExecutor(max_workers=len(copies)) as pool:
        while len(finished) < len(copies):
            trials = {signum: pool.submit(_signalled_at, config, nth + offset, signum, env)
                      for offset, (signum, (config, _, env)) in enumerate(copies.items())
                      if signum.name not in finished}
            for signum, trial in trials.items():
                config, pristine, _ = copies[signum]
                warehouse = config.parent / "warehouse.duckdb"
                code, out, err, step = trial.result()
                if step is None:  # the run finished before its nth step: the month is new
                    assert code == 0, err
                    assert f"{AUGUST:%Y-%m}: materialized" in out
                    finished[signum.name] = dump(warehouse, VOLATILE)
                    continue
                assert code == 130, (signum.name, step, err)
                assert "materialized" not in out, (signum.name, step)
                errors = [line for line in err.splitlines() if line.startswith("error:")]
                assert len(errors) == 1 and errors[0].startswith("error: interrupted"), (
                    signum.name, step, err)
                assert "Traceback" not in err, (signum.name, step, err)
                signalled[signum.name, step] = dump(warehouse, VOLATILE)
                shutil.copy(pristine, warehouse)  # the next run starts from the old month again
            nth += len(copies)

    for name in ("SIGINT", "SIGTERM"):
        assert len({step for signum, step in signalled if signum == name}) >= 9, signalled
    steps = [step for _, step in signalled]
    assert len(steps) == len(set(steps)) >= 20, sorted(steps)  # each step of the job once
    assert {"ingest", "attribution", "reconciliation", "monthly_report"} <= set(steps)
    for new in finished.values():  # (each copy's new month names its own files)
        for table in ("billing_facts", "tracker_runs", "attribution", "reconciliation"):
            assert new[table][AUGUST] != old[table][AUGUST], table
    for (name, step), after in signalled.items():
        assert after in (old, finished[name]), (
            name, step, [t for t in old if after.get(t) != old[t]])


def test_a_signal_while_the_attribution_queries_run_stops_the_run_as_an_interrupt(
        demo_quarter, tmp_path):
    # signalled while the attribution's queries ran (not as the step started), the interrupted
    # query aborted the run's transaction and the step's cleanup failed on DuckDB's "Current
    # transaction is aborted": the command said that error and exited 1, about one signal in
    # two. Each delay lands within the step (~0.4 s here) or, on a slow machine, in a later one
    config, pristine, env = _copy(demo_quarter, tmp_path / "demo", tmp_path / "home")
    warehouse = config.parent / "warehouse.duckdb"
    old = dump(warehouse, VOLATILE)
    for delay, signum in ((0.05, signal.SIGTERM), (0.15, signal.SIGINT), (0.25, signal.SIGTERM),
                          (0.35, signal.SIGINT), (0.45, signal.SIGTERM)):
        code, _, err, step = _signalled_at(config, "attribution", signum, env, delay)
        assert step == "attribution"
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert (code, errors) == (130, ["error: interrupted: the run stopped and its writes "
                                        "were rolled back"]), (delay, signum.name, err)
        assert dump(warehouse, VOLATILE) == old, (delay, signum.name)
        shutil.copy(pristine, warehouse)


# a job of two independent steps: the first runs a DuckDB query long enough to be signalled
# in (it says so on stderr first), the second must not run once the first was interrupted.
# Whether DuckDB stops the query at once or notices the signal only at its end varies from
# run to run; either way the query fails with DuckDB's "Query interrupted"
_QUERY_JOB = """
import json, sys
import dagster as dg
from cost_pipeline.cli.materialize import _failure
from cost_pipeline.defs.resources import Warehouse

@dg.asset
def a_query(duckdb: Warehouse) -> None:
    with duckdb.get_connection() as con:
        print("querying", file=sys.stderr, flush=True)
        # ~3 s here: DuckDB may notice the signal only when the query ends
        con.execute("SELECT count(*) FROM range(250000000) a, range(3) b "
                    "WHERE (a.range * b.range) % 7 = 3").fetchall()

@dg.asset
def b_after() -> None:
    print("b_after ran", file=sys.stderr, flush=True)

job = dg.define_asset_job("two", selection=["a_query", "b_after"])
defs = dg.Definitions(assets=[a_query, b_after], jobs=[job],
                      resources={"duckdb": Warehouse(database=sys.argv[1])})
result = defs.resolve_job_def("two").execute_in_process(raise_on_error=False)
failures = [e for e in result.all_events if e.is_step_failure]
print(json.dumps({"steps": [e.step_key for e in failures],
                  "interrupted": _failure(result, "")[2]}))
"""


# a job whose one step writes a row and stages a page; the page's rename, in the resource's
# teardown after the COMMIT, sends the process `argv[2]` first: a signal landing between the
# COMMIT and the run's tagged outcome, every time
_SIGNAL_AT_PUBLISH = """
import json, os, signal, sys
from pathlib import Path
import dagster as dg
from cost_pipeline.cli.materialize import _failure
from cost_pipeline.defs.resources import COMMIT_TAG, Warehouse

class SignalledOnRename(type(Path())):
    def replace(self, target):
        os.kill(os.getpid(), getattr(signal, "SIG" + sys.argv[2]))
        return super().replace(target)

@dg.asset
def writes(duckdb: Warehouse) -> None:
    with duckdb.get_connection() as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    staged = SignalledOnRename(sys.argv[1] + ".page.pending")
    staged.write_text("new page")
    duckdb.publish_on_commit(staged, Path(sys.argv[1] + ".page"))

job = dg.define_asset_job("one", selection=["writes"])
defs = dg.Definitions(assets=[writes], jobs=[job],
                      resources={"duckdb": Warehouse(database=sys.argv[1])})
signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
instance = dg.DagsterInstance.get()
result = defs.resolve_job_def("one").execute_in_process(raise_on_error=False,
                                                         instance=instance)
commit = instance.get_run_by_id(result.run_id).tags.get(COMMIT_TAG, "")
print(json.dumps({"commit": commit, "failure": _failure(result, commit)[0] if not
                  result.success else None}))
"""


@pytest.mark.parametrize("signame", ["INT", "TERM"])
def test_a_signal_between_the_commit_and_the_runs_outcome_says_it_committed(tmp_path,
                                                                           signame):
    # a signal inside the resource's teardown, after the COMMIT: the run said "rolled back"
    # of a month committed (its outcome never tagged), left the new page unpublished
    # (`.pending` beside the old one), or failed with DuckDB's "Query interrupted" (exit 1)
    # when it cut the COMMIT's query. The teardown holds the signal to its end: the month
    # committed, its page published, the outcome tagged, then the signal is the run's
    import json
    import sys

    script = tmp_path / "job.py"
    script.write_text(_SIGNAL_AT_PUBLISH, encoding="utf-8")
    database = tmp_path / "w.duckdb"
    done = subprocess.run([sys.executable, str(script), str(database), signame],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["commit"] == "committed", done.stderr
    assert outcome["failure"] in (None, "interrupted after the month's writes were committed")
    assert (tmp_path / "w.duckdb.page").read_text() == "new page"
    assert not (tmp_path / "w.duckdb.page.pending").exists()
    import duckdb

    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("SELECT x FROM t").fetchall() == [(1,)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_query_stops_the_run_as_an_interrupt(tmp_path, signum):
    # DuckDB swallows the signal handler's exception and fails the query with its own
    # `RuntimeError("Query interrupted")`: read as a step's plain error, the run went on to its
    # next steps and the command exited 1 with "error: Query interrupted" (seen in
    # test_sigint_and_sigterm_at_every_step_leave_the_month_whole, when SIGTERM landed inside
    # untracked_usage's query)
    import json
    import sys
    import time

    script = tmp_path / "job.py"
    script.write_text(_QUERY_JOB, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "w.duckdb")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DAGSTER_HOME": str(tmp_path)})
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("querying"):
            time.sleep(0.3)  # inside the query
            proc.send_signal(signum)
            break
    err = "".join(lines) + proc.stderr.read()
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0, err
    outcome = json.loads(out.strip().splitlines()[-1])
    assert outcome == {"steps": ["a_query"], "interrupted": True}, err
    assert "b_after ran" not in err


@pytest.mark.parametrize(("error", "code"), [(RuntimeError("Query interrupted"), 130),
                                             (RuntimeError("something else"), None)])
def test_an_interrupted_query_outside_a_run_is_one_line(monkeypatch, capsys, error, code):
    # the command's own queries (the unchanged-month check, recording fingerprints) run
    # outside Dagster's steps: a signal there is the same one line and exit 130, not a
    # traceback; any other RuntimeError is not taken for one
    import importlib

    cli = importlib.import_module("cost_pipeline.cli.main")  # (the package names its `main`)

    def fails(args):
        raise error

    monkeypatch.setattr(cli, "cmd_materialize", fails)
    argv = ["materialize", "--config", "unused.yaml", "--month", "2026-07"]
    if code is None:
        with pytest.raises(RuntimeError, match="something else"):
            cli.main(argv)
        return
    assert cli.main(argv) == code
    assert capsys.readouterr().err == "error: interrupted\n"


# a job of two steps in a row, each writing to the run's warehouse transaction; in one of
# them (argv[2]) a finalizer runs while the signal arrives — the handler's exception is raised
# inside the weakref callback, where Python cannot raise it ("Exception ignored in …"; seen
# once in test_sigint_and_sigterm_at_every_step_leave_the_month_whole, in SQLAlchemy's
# `_collection_gced`): before interrupts.py the run went on and committed, exit 0. Nothing
# but the warehouse resource installs the hook here, as in a run worker the daemon launched
_FINALIZER_JOB = """
import json, signal, sys, weakref
import dagster as dg
from cost_pipeline import interrupts
from cost_pipeline.cli.materialize import _failure
from cost_pipeline.defs.resources import COMMIT_TAG, Warehouse
from cost_pipeline.warehouse import query

class Box:
    pass

def _finalizer(_ref):
    signal.raise_signal(signal.SIG{signal})
    total = 0
    for i in range(100_000):  # the handler runs here, inside the callback
        total += i

def _write(duckdb, name):
    with duckdb.get_connection() as con:
        con.execute(f"CREATE TABLE {{name}} AS SELECT 1 AS x")
        print(f"{{name}} wrote", file=sys.stderr, flush=True)
        if name == sys.argv[2]:
            box = Box()
            ref = weakref.ref(box, _finalizer)
            del box
            if sys.argv[3] == "query":  # the step goes on to another query
                query(con, f"CREATE TABLE {{name}}_after AS SELECT 1 AS x")
            print(f"{{name}} ended", file=sys.stderr, flush=True)

@dg.asset
def first(duckdb: Warehouse) -> None:
    _write(duckdb, "first")

@dg.asset(deps=[first])
def second(duckdb: Warehouse) -> None:
    _write(duckdb, "second")

job = dg.define_asset_job("two", selection=["first", "second"])
defs = dg.Definitions(assets=[first, second], jobs=[job],
                      resources={{"duckdb": Warehouse(database=sys.argv[1])}})
instance = dg.DagsterInstance.ephemeral()
result = defs.resolve_job_def("two").execute_in_process(raise_on_error=False, instance=instance)
commit = instance.get_run_by_id(result.run_id).tags.get(COMMIT_TAG) or ""
print(json.dumps({{"commit": commit, "interrupted": _failure(result, commit)[2],
                  "swallowed": interrupts.swallowed()}}))
"""


@pytest.mark.parametrize("signame", ["INT", "TERM"])
@pytest.mark.parametrize(("where", "then"), [("first", "query"), ("first", "end"),
                                             ("second", "end")])
def test_a_signal_a_finalizer_swallowed_still_stops_the_run(tmp_path, signame, where, then):
    # the step stops at its next query (`warehouse.query`), else the run at its next step,
    # else the commit after the last step rolls back
    import json
    import sys

    import duckdb

    script = tmp_path / "job.py"
    script.write_text(_FINALIZER_JOB.format(signal=signame), encoding="utf-8")
    database = tmp_path / "w.duckdb"
    done = subprocess.run([sys.executable, str(script), str(database), where, then],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert f"{where} wrote" in done.stderr
    # the signal's exception did not stop the step where it landed; its next query did
    assert (f"{where} ended" in done.stderr) == (then == "end"), done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    why = "interrupted" if where == "second" else "a step failed"
    assert outcome == {"commit": f"rolled back: {why}", "interrupted": True,
                       "swallowed": True}, done.stderr
    if where == "first":  # the next step never writes
        assert "second wrote" not in done.stderr
    assert "Exception ignored" not in done.stderr  # recorded, not printed
    with duckdb.connect(str(database), read_only=True) as con:  # the month rolled back
        assert con.execute("SELECT count(*) FROM information_schema.tables").fetchone() == (0,)


def test_a_signal_a_finalizer_swallowed_outside_a_run_exits_130(monkeypatch, capsys):
    # the command's own code (the unchanged-month check, the report) outside a run's steps:
    # the command ends as interrupted, whatever it returned
    import importlib
    import sys
    import weakref

    from cost_pipeline import interrupts

    cli = importlib.import_module("cost_pipeline.cli.main")
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # restored after the test
    monkeypatch.setitem(interrupts._swallowed, "interrupt", False)

    class Box:
        pass

    def finalizer(_ref):
        raise KeyboardInterrupt  # as a signal handler raising inside the callback

    def swallows(args):
        box = Box()
        ref = weakref.ref(box, finalizer)  # noqa: F841 (kept alive until the box dies)
        del box
        return 0

    monkeypatch.setattr(cli, "cmd_materialize", swallows)
    argv = ["materialize", "--config", "unused.yaml", "--month", "2026-07"]
    assert cli.main(argv) == 130
    assert capsys.readouterr().err == "error: interrupted\n"
    monkeypatch.setitem(interrupts._swallowed, "interrupt", False)
    # any other unraisable exception still reaches the hook that was there before
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    interrupts.install()

    def fails(_ref):
        raise ValueError("not an interrupt")

    box = Box()
    ref = weakref.ref(box, fails)  # noqa: F841
    del box
    assert [u.exc_type for u in seen] == [ValueError] and not interrupts.swallowed()


_SIGNAL_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys, time

MODULE, SIGNUM, WRAPPED = sys.argv[1], getattr(signal, "SIG" + sys.argv[2]), sys.argv[3]

class SignalAt(importlib.abc.MetaPathFinder):  # the signal arrives as the command imports it
    def find_spec(self, name, path, target=None):
        if name == MODULE:
            if not WRAPPED:
                os.kill(os.getpid(), SIGNUM)
                return None
            try:  # as a module the signal passes through raises its own error
                os.kill(os.getpid(), SIGNUM)
                time.sleep(5)
            except KeyboardInterrupt as exc:
                raise RuntimeError("Error calling __set_name__ on 'Field'") from exc
        return None

sys.meta_path.insert(0, SignalAt())
from cost_pipeline.cli import run
sys.argv = ["cost-pipeline", "report", "--config", "config.yaml", "--month", "2026-08"]
sys.exit(run())
"""


@pytest.mark.parametrize("signame", ["INT", "TERM"])
@pytest.mark.parametrize("module", ["cost_pipeline.config", "cost_pipeline.estimate"])
@pytest.mark.parametrize("wrapped", ["", "wrapped"])
def test_a_signal_while_the_command_starts_is_one_line(tmp_path, signame, module, wrapped):
    # Ctrl-C in the first second, while the command imported what it runs with (outside
    # `main`'s handlers), printed Python's traceback and died of SIGINT (exit -2); its
    # exception wrapped by what it passed through (pydantic's SchemaError, a RuntimeError
    # from `__set_name__`, ssl's TypeError) was a traceback and exit 1
    done = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_IMPORTING, module, signame,
                           wrapped],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")


def test_the_demo_interrupted_in_a_month_exits_130(tmp_path):
    # `cost-pipeline demo` said the interrupted month's line and exited 1, as at an error
    proc = subprocess.Popen([sys.executable, "-m", "cost_pipeline.cli", "demo", "--out",
                             str(tmp_path / "demo")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DAGSTER_HOME": str(tmp_path / "home")})
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.strip() == "… attribution":
            proc.send_signal(signal.SIGTERM)
            break
    err = "".join(lines) + proc.stderr.read()
    proc.stdout.read()
    assert proc.wait(timeout=120) == 130, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: 2026-07: interrupted: the run stopped and its writes were rolled back"], err
