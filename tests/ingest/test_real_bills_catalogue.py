"""Issue 16's defects found on public bills, each with a minimal file spelled as the real
export spells it: resource ids with blanks in a runs file, and bad values refused at their
source with the file, row and field named."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.runs_file import read_runs
from cost_pipeline.ingest.sources.runs_file_sql import read_runs_table

# an Azure Monitor metric alert as Azure's cost export names it: the alert's name has a blank
AZURE_ALERT = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/"
               "providers/microsoft.insights/metricAlerts/CPU Alert")


def runs_csv(path: Path, resource_ids: str, **more) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["run_id", "status", "start_time", "end_time", "resource_ids",
                         *more])
        writer.writerow(["r1", "FINISHED", "2026-07-01T00:00:00Z", "2026-07-01T02:00:00Z",
                         resource_ids, *more.values()])
    return path


def both_readers(path: Path) -> list[list[str]]:
    """resource_ids as the record-by-record and the vectorized readers give them (equal)."""
    slow = [r["resource_ids"] for r in read_runs(path, "runs")]
    fast = read_runs_table(path, "runs")["resource_ids"].to_pylist()
    assert slow == fast
    return slow


@pytest.mark.parametrize(("text", "ids"), [
    (AZURE_ALERT, [AZURE_ALERT]),                                    # kept whole
    (f"{AZURE_ALERT}; i-0a", [AZURE_ALERT, "i-0a"]),                 # the documented `;`
    (f" i-0a ,'{AZURE_ALERT}'", ["i-0a", AZURE_ALERT]),
    (f'["{AZURE_ALERT}", "vol-0b"]', [AZURE_ALERT, "vol-0b"]),       # a JSON list
    ("gke-pool|node 7", ["gke-pool|node 7"]),                        # `|` inside an id
    ("i-0a,i-0b", ["i-0a", "i-0b"]),
])
def test_resource_ids_split_only_on_comma_and_semicolon(tmp_path, text, ids):
    assert both_readers(runs_csv(tmp_path / "runs.csv", text)) == [ids]


@pytest.mark.parametrize("text", ["i-0a i-0b", "i-0a|vol-0b", "i-0a, i-0b i-0c",
                                  "arn:aws:sagemaker:us-east-1:1:training-job/a i-0b"])
def test_ids_run_together_are_ambiguous_and_named(tmp_path, text):
    path = runs_csv(tmp_path / "runs.csv", text)
    for reader in (read_runs, read_runs_table):
        with pytest.raises(SourceError) as error:
            reader(path, "runs")
        message = str(error.value)
        assert str(path) in message and "row 2" in message  # the line of the file
        assert "resource_ids" in message and "ambiguous" in message
        assert "','" in message and "JSON list" in message
        assert len(message.splitlines()) == 1
