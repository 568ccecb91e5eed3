"""The command line's progress lines reach its stderr whole, the last step's included, however
Dagster's compute-log capture copies the run's own output back (a `tail -F` process it stops
when the run ends, sometimes before the last lines were copied: dagster-io/dagster#23336)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

from tests.cli.test_cli import CLI, copy_demo

STEP_DONE = re.compile(r"^✓ (\S+) \([\d.]+ s\)$", re.MULTILINE)


def test_every_step_line_arrives_even_when_the_log_tail_copies_nothing(demo_quarter, tmp_path,
                                                                      dagster_home):
    # a `tail` that copies nothing back: anything written to descriptor 2 during the run is lost
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tail").write_text("#!/bin/sh\nexec sleep 600\n")
    (fake / "tail").chmod(stat.S_IRWXU)
    config = copy_demo(demo_quarter, tmp_path)
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home),
           "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([*CLI, "materialize", "--config", str(config), "--month", "2026-07",
                           "--force"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    steps = STEP_DONE.findall(done.stderr)
    assert steps[0] == "ingest" and steps[-1] == "monthly_report", done.stderr
    assert {"attribution", "reconciliation", "cost_levers"} <= set(steps)
    assert len(steps) == len(set(steps)) == len(re.findall(r"^… ", done.stderr, re.MULTILINE))


def test_direct_stderr_writes_past_a_redirected_descriptor(tmp_path):
    """The mechanism alone: inside `direct_stderr`, descriptor 2 pointed elsewhere (as the
    capture does) does not take the progress stream with it."""
    script = (
        "import os, sys\n"
        "from cost_pipeline.cli import progress\n"
        "with progress.direct_stderr():\n"
        f"    os.dup2(os.open({str(tmp_path / 'captured')!r}, os.O_WRONLY | os.O_CREAT), 2)\n"
        "    progress._direct.write('✓ step (0.0 s)\\n')\n"
        "    sys.stderr.write('to the capture\\n'); sys.stderr.flush()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    assert done.stderr == "✓ step (0.0 s)\n"
    assert (tmp_path / "captured").read_text() == "to the capture\n"


def test_a_stderr_without_a_descriptor_is_written_as_it_is(monkeypatch):
    import io
    import logging

    from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR

    from cost_pipeline.cli import progress

    buffer = io.StringIO()  # no fileno(): nothing to duplicate
    monkeypatch.setattr(sys, "stderr", buffer)
    with progress.direct_stderr():
        assert progress._direct is None
        record = logging.LogRecord("run", logging.INFO, __file__, 1, "hello", None, None)
        setattr(record, LOG_RECORD_METADATA_ATTR, {"orig_message": "hello"})
        progress.ProgressHandler().emit(record)
    assert buffer.getvalue() == "  hello\n"
