"""The warning naming the instance types of unknown accelerator count states the count each
was counted as: 1 an instance for a CUR (or a FOCUS file of another provider), its GPU-hours
÷ the period's hours, rounded up, on Google's GPU lines (a GCP FOCUS file here; the GCP
export's reader in test_gcp_billing.py). It said "counted as 1" for every type."""

from __future__ import annotations

import logging

import duckdb
import pytest

from tests.ingest.test_cur2_normalization import JOB, L, gpu_box
from tests.ingest.test_focus_gcp_view import HOUR, N1, N1_RAM, T4, gcp_month, lines_of, sku
from tests.support.cur_rows import build, config, facts, write_export


def test_a_curs_unknown_type_is_counted_as_1_an_instance(tmp_path, caplog):
    """A 2-instance training job of the unknown p9.48xlarge holds G = 2 × 1 in
    billing_facts: the warning says 1, the count `accelerators:` would replace."""
    export = write_export(tmp_path, {"a.parquet": [
        gpu_box("p9", "BoxUsage:p9.48xlarge"),
        L("sm_p9", 20.0, line_item_product_code="AmazonSageMaker",
          line_item_usage_type="USE1-Train:ml.p9.48xlarge", line_item_resource_id=JOB,
          line_item_usage_amount=2.0),
    ]})
    with duckdb.connect() as con, caplog.at_level(logging.WARNING, logger="test"):
        summary = build(con, config(tmp_path, export))
        rows = facts(con)
    assert (rows["p9"]["x_AcceleratorCount"], rows["sm_p9"]["x_AcceleratorCount"]) == (1, 2)
    assert summary.unknown_instance_types == ["p9.48xlarge"]
    assert ("accelerator count unknown (add them under `accelerators:`): p9.48xlarge "
            "(counted as 1)\n") in caplog.text


def test_a_gcp_focus_unknown_gpu_count_is_stated_as_counted_from_its_hours(tmp_path, caplog):
    """An N1 with 4 T4-hours in the hour and no core line: G = 4 T4-hours ÷ 1 h = 4, on its
    GPU and RAM lines; the warning said it was counted as 1."""
    rows = [sku("n1-vm", "T4-GPU", T4, 4 * HOUR, "seconds", 1.4, N1),
            sku("n1-vm", "N1-RAM", N1_RAM, 30 * 2.0 ** 30 * HOUR, "byte-seconds", 0.1, N1)]
    t4 = "n1-standard-8 + nvidia-tesla-t4"
    with caplog.at_level(logging.WARNING, logger="test"):
        con, summary = gcp_month(tmp_path, rows, [])
    assert lines_of(con) == {"T4-GPU": (t4, "gpu", 4, pytest.approx(1.0), True),
                             "N1-RAM": (t4, "gpu", 4, None, False)}
    con.close()
    assert summary.unknown_instance_types == [t4]
    assert (f"accelerator count unknown (add them under `accelerators:`): {t4} (counted as 4: "
            "its accelerator-hours ÷ the hours of its period, rounded up)\n") in caplog.text
