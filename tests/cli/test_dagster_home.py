"""The command line's Dagster home ($DAGSTER_HOME) as a user sets it: a relative or `~` path
is the folder it names from where the command runs; a file, or a `dagster.yaml` Dagster cannot
read, is one line naming it (SPEC §10), the traceback only with --debug."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from cost_pipeline.cli.materialize import DEFAULT_SETTINGS, ensure_dagster_home

CLI = [sys.executable, "-m", "cost_pipeline.cli"]


def run_cli(*args: str, home: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env, "DAGSTER_HOME": home}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=environment,
                          cwd=cwd, timeout=300)


def copy_demo(demo_quarter, tmp_path: Path) -> Path:
    config, _ = demo_quarter
    target = tmp_path / "demo"
    shutil.copytree(Path(config).parent, target,
                    ignore=shutil.ignore_patterns("*.duckdb", "*.wal"))
    return target / "config.yaml"


@pytest.mark.parametrize(("setting", "folder"), [("relhome", "work/relhome"),
                                                 ("../homes/h", "homes/h"),
                                                 ("~/dh", "user/dh")],
                         ids=["relative", "dot-dot", "tilde"])
def test_a_relative_home_is_the_folder_it_names_from_the_working_directory(
        setting, folder, demo_quarter, tmp_path):
    """Dagster refuses a relative $DAGSTER_HOME (a 32-line traceback, after a stray
    `relhome/dagster.yaml` was written): the command resolves it against its working
    directory, and the run is recorded in the instance of that folder."""
    config = copy_demo(demo_quarter, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    done = run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   home=setting, cwd=work, HOME=str(tmp_path / "user"))
    assert done.returncode == 0, done.stderr
    (run_id,) = re.findall(r"^2026-07: materialized \(run ([0-9a-f-]+)\)$", done.stdout, re.M)
    home = tmp_path / folder
    assert (home / "dagster.yaml").read_text() == DEFAULT_SETTINGS
    # nothing else made beside it: only the folder named (no literal `~` folder in `work`)
    assert sorted(p.name for p in work.iterdir()) == (["relhome"] if folder.startswith("work")
                                                      else [])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.tags["dagster/partition"] == "2026-07-01"
        assert run.tags["cost_pipeline/launched_by"] == "cli"


@pytest.mark.parametrize(("settings", "problem"), [
    ("run_storage: [\n",
     " line 2 column 1: not valid YAML: expected the node content, but found '<stream end>' "
     "(while parsing a flow node)"),
    ("run_storage:\n  module: nonexistent.mod\n  class: Foo\n  config: {}\n",
     ": Couldn't import module nonexistent.mod when attempting to load the configurable "
     "class nonexistent.mod.Foo"),
    ("storage:\n  sqlite:\n    base_dir: 5\n    bogus: 1\n",
     ': not a valid Dagster instance config: Received unexpected config entry "bogus" at '
     'path root:storage:sqlite. Expected: "{ base_dir: (String | { env: String }) }"; '
     'Invalid scalar at path root:storage:sqlite:base_dir. Value "5" of type '
     "\"<class 'int'>\" is not valid for expected type \"String\""),
], ids=["not-yaml", "unimportable-class", "bad-key"])
def test_a_dagster_yaml_dagster_cannot_read_is_one_line_naming_it(settings, problem,
                                                                   demo_quarter, tmp_path):
    config = copy_demo(demo_quarter, tmp_path)
    home = tmp_path / "h"
    home.mkdir()
    (home / "dagster.yaml").write_text(settings)
    args = ("materialize", "--config", str(config), "--month", "2026-07")
    done = run_cli(*args, home=str(home), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"error: DAGSTER_HOME {home}/dagster.yaml{problem}\n"
    assert (home / "dagster.yaml").read_text() == settings  # left as the user wrote it
    debug = run_cli(*args, "--debug", home=str(home), cwd=tmp_path)
    assert debug.returncode == 1 and debug.stderr.startswith("Traceback")
    assert debug.stderr.endswith(done.stderr)


def test_a_home_or_demo_folder_that_is_a_file_says_it_must_be_a_folder(demo_quarter,
                                                                        tmp_path):
    """Dagster's home and the demo's --out are folders: a file there was
    `error: [Errno 17] File exists: '…/afile'`, naming neither."""
    config = copy_demo(demo_quarter, tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    month = ("materialize", "--config", str(config), "--month", "2026-07")
    done = run_cli(*month, home=str(afile), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        1, f"error: DAGSTER_HOME {afile} is a file: it must be a folder\n")
    inside = run_cli(*month, home="afile/h", cwd=tmp_path)
    assert (inside.returncode, inside.stderr) == (
        1, f"error: DAGSTER_HOME {afile}/h must be a folder: {afile} is a file\n")
    demo = run_cli("demo", "--out", "afile", home=str(tmp_path / "h"), cwd=tmp_path)
    assert (demo.returncode, demo.stdout, demo.stderr) == (
        1, "", f"error: --out {afile} is a file: it must be a folder\n")
    assert afile.read_text() == "mine\n"
    assert not (tmp_path / "h").exists()  # refused before anything was made


def test_the_home_it_makes_queues_one_run_per_warehouse(tmp_path, monkeypatch):
    """The project-local instance the CLI and `make dev` share: the UI, the schedules and the
    delivery sensor queue runs, and two of the same warehouse started at once (only the
    warehouse's lock kept them apart, in an order it did not choose); one at a time, as
    deploy/dagster.yaml.example has it."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    home = ensure_dagster_home()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
    (limit,) = queue.tag_concurrency_limits
    assert limit["key"] == "cost_pipeline/warehouse" and limit["limit"] == 1
    assert limit["value"] == {"applyLimitPerUniqueValue": True}

