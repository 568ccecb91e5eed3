"""Local folders are read and listed by one rule (ingest/sources/local_files.py): a CUR
manifest cannot name a file outside its export folder (`../`, a link), a checkpoint folder's
links never lead the listing — nor the CLI's fingerprints of it — out of the folder or round in
a loop (`l1 -> .`), and a dangling link is an error naming it."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import date
from pathlib import Path

import pytest

from cost_pipeline.cli.incremental import _listing
from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.cur2 import find_delivery
from cost_pipeline.ingest.sources.listing_rows import walk_local

AUGUST = date(2026, 8, 1)


def _export(tmp_path: Path, data_files: list[str]) -> Path:
    root = tmp_path / "exports" / "ml-cur"
    data = root / "data" / "BILLING_PERIOD=2026-08"
    data.mkdir(parents=True)
    (data / "part-0.parquet").write_bytes(b"PAR1")
    meta = root / "metadata" / "BILLING_PERIOD=2026-08"
    meta.mkdir(parents=True)
    (meta / "ml-cur-Manifest.json").write_text(json.dumps({"dataFiles": data_files}))
    (tmp_path / "outside.parquet").write_bytes(b"PAR1")
    return root


@pytest.mark.parametrize("entry", [
    "s3://bucket/cur/ml-cur/data/BILLING_PERIOD=2026-08/../../../outside.parquet",
    "data/BILLING_PERIOD=2026-08/../../../outside.parquet",
    "s3://bucket/cur/ml-cur/../../outside.parquet",
], ids=["uri-dotdot", "key-dotdot", "after-export-name"])
def test_manifest_cannot_name_a_file_outside_the_export(tmp_path, entry):
    root = _export(tmp_path, [entry])
    with pytest.raises(SourceError, match="Manifest.json: .*leads outside") as err:
        find_delivery("cur", str(root), AUGUST)
    assert "outside.parquet" in str(err.value)


def test_manifest_cannot_read_through_a_link_out_of_the_export(tmp_path):
    root = _export(tmp_path, ["s3://bucket/cur/ml-cur/data/BILLING_PERIOD=2026-08/link.parquet"])
    (root / "data" / "BILLING_PERIOD=2026-08" / "link.parquet").symlink_to(
        tmp_path / "outside.parquet")
    with pytest.raises(SourceError, match="leads outside"):
        find_delivery("cur", str(root), AUGUST)


def test_manifest_inside_the_export_still_reads(tmp_path):
    root = _export(tmp_path, ["s3://bucket/cur/ml-cur/data/BILLING_PERIOD=2026-08/part-0.parquet"])
    delivery = find_delivery("cur", str(root), AUGUST)
    assert [Path(f).name for f in delivery.files] == ["part-0.parquet"]


@pytest.fixture
def looping_folder(tmp_path) -> Path:
    folder = tmp_path / "checkpoints"
    (folder / "run-1" / "ckpt-1").mkdir(parents=True)
    (folder / "run-1" / "ckpt-1" / "model.pt").write_bytes(b"x" * 10)
    (folder / "l1").symlink_to(".")
    (folder / "l2").symlink_to(".")
    (folder / "run-1" / "usr").symlink_to("/usr")
    (folder / "run-1" / "same.pt").symlink_to(folder / "run-1" / "ckpt-1" / "model.pt")
    return folder


def _within(seconds: float, call):
    """call()'s result, or a failure when it has not returned within `seconds`."""
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(value=call()), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still listing after {seconds} s"
    return box["value"], time.monotonic() - started


def test_listing_never_follows_links_out_of_the_folder_nor_loops(looping_folder):
    objects, took = _within(10, lambda: list(walk_local(looping_folder, "ckpt", "bucket")))
    assert sorted(o["key"] for o in objects) == ["run-1/ckpt-1/model.pt", "run-1/same.pt"]
    listed, took = _within(10, lambda: _listing(str(looping_folder)))
    assert listed is not None and len(listed) == 2, listed
    assert all(str(looping_folder.resolve()) in row[0] for row in listed)


def test_link_out_of_the_folder_and_dangling_link_are_named(looping_folder):
    outside = looping_folder.parent / "secret.bin"
    outside.write_bytes(b"s")
    (looping_folder / "run-1" / "out.bin").symlink_to(outside)
    with pytest.raises(SourceError, match=r"run-1/out.bin: symbolic link leads outside"):
        list(walk_local(looping_folder, "ckpt", "bucket"))
    os.unlink(looping_folder / "run-1" / "out.bin")
    (looping_folder / "run-1" / "gone.pt").symlink_to(looping_folder / "nowhere.pt")
    with pytest.raises(SourceError, match=r"run-1/gone.pt: broken symbolic link"):
        list(walk_local(looping_folder, "ckpt", "bucket"))
    # the fingerprint cannot tell: the asset runs, and the run names the link
    assert _within(10, lambda: _listing(str(looping_folder)))[0] is None


def test_focus_folder_lists_by_the_same_rule(looping_folder):
    from cost_pipeline.ingest.sources.focus import find_files

    (looping_folder / "run-1" / "bill.csv").write_text("BilledCost\n1\n")
    found, _ = _within(10, lambda: find_files("focus", str(looping_folder)))
    assert [p.name for p in found.files] == ["bill.csv"]
