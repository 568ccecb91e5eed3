"""FOCUS data nobody here wrote (SPEC §3, issue 3): `focus-data-toolkit` samples for AWS,
Azure and GCP in FOCUS 1.2 and 1.3, generated at test time, go through the `focus` source and
the real Dagster job. Each sample's EffectiveCost arrives in billing_facts exactly (the
1.3 samples as parquet, the 1.2 ones as CSV), attribution conserves it, and unused
commitments are unallocated."""

from __future__ import annotations

import csv
import json
import subprocess
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml

from cost_pipeline.demo.tool_venvs import ToolUnavailable, tool_executable

TOOLKIT = "focus-data-toolkit>=0.14.1,<0.15"
SAMPLES = [(p, v) for p in ("aws", "azure", "gcp") for v in ("1.2", "1.3")]
ROWS = 400
REL = 1e-9          # "exactly": float sums of the same decimals in another order
INSTANCE_TYPES = ("EC2 Instance", "Virtual Machine", "Compute Instance")


def toolkit_executable() -> Path:
    """`focus-toolkit` from its own virtual environment (`.cache/focus-venv`)."""
    return tool_executable("focus", TOOLKIT, "focus-toolkit")


@pytest.fixture(scope="session")
def focus_toolkit() -> Path:
    try:
        return toolkit_executable()
    except ToolUnavailable as exc:
        pytest.skip(f"focus-data-toolkit unavailable (its own venv could not be built): {exc}")


def _to_parquet(csv_path: Path) -> Path:
    """The sample as a typed parquet file: timestamps, numbers, Tags as a map."""
    table = pacsv.read_csv(csv_path)
    tags = [[(k, str(v)) for k, v in json.loads(t).items()] if t else None
            for t in table["Tags"].to_pylist()]
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags",
                             pa.array(tags, pa.map_(pa.string(), pa.string())))
    out = csv_path.with_suffix(".parquet")
    pq.write_table(table, out)
    csv_path.unlink()
    return out


def _file_totals(csv_path: Path) -> dict:
    """Independent of the pipeline: the sample's months and totals, in decimals."""
    totals: dict = defaultdict(lambda: {"effective": Decimal(0), "unused": Decimal(0),
                                        "instance": None})
    with csv_path.open(newline="", encoding="utf-8") as rows:
        for row in csv.DictReader(rows):
            month = date.fromisoformat(row["BillingPeriodStart"][:7] + "-01")
            t = totals[month]
            t["effective"] += Decimal(row["EffectiveCost"])
            if row["CommitmentDiscountStatus"] == "Unused":
                t["unused"] += Decimal(row["EffectiveCost"])
            if (t["instance"] is None and row["ChargeCategory"] == "Usage"
                    and row["ResourceType"] in INSTANCE_TYPES and row["ConsumedUnit"] == "Hours"):
                t["instance"] = row["ResourceId"]
    return dict(totals)


@pytest.fixture(scope="session")
def focus_quarter(focus_toolkit, tmp_path_factory, dagster_home):
    """Every sample as its own `focus` billing source of one config, with a runs file that
    claims one instance per sample, materialized by the Dagster job month by month."""
    from cost_pipeline.cli.materialize import materialize_month

    root = tmp_path_factory.mktemp("focus")
    expected: dict[str, dict] = {}
    billing, runs = [], []
    for seed, (provider, version) in enumerate(SAMPLES, start=11):
        name = f"{provider}-{version.replace('.', '')}"
        out = root / name
        subprocess.run([str(focus_toolkit), "generate", "--provider", provider,
                        "--focus-version", version, "--rows", str(ROWS), "--seed", str(seed),
                        "--out", str(out)], check=True, capture_output=True, timeout=120)
        (cost_file,) = out.glob("*cost_and_usage*.csv")
        expected[name] = _file_totals(cost_file)
        if version == "1.3":
            _to_parquet(cost_file)
        billing.append({"kind": "focus", "path": name, "name": name})
        for month, totals in expected[name].items():
            if totals["instance"]:
                runs.append({"run_id": f"run-{name}-{month:%Y%m}", "status": "FINISHED",
                             "start_time": f"{month:%Y-%m}-01T00:00:00Z",
                             "end_time": f"{month:%Y-%m}-28T00:00:00Z",
                             "resource_ids": totals["instance"], "purpose": "adhoc"})
    with (root / "runs.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(runs[0]))
        writer.writeheader()
        writer.writerows(runs)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({
        "warehouse": {"path": "warehouse.duckdb"}, "billing": billing,
        "tracker": [{"kind": "runs_file", "path": "runs.csv"}]}))
    months = sorted({m for totals in expected.values() for m in totals})
    results = {m: materialize_month(str(config), m, progress=False) for m in months}
    return root / "warehouse.duckdb", expected, results


def test_every_month_materializes_and_conserves_cost(focus_quarter):
    _warehouse, _expected, results = focus_quarter
    for month, result in results.items():
        assert result.success, f"{month}: {result.error}"
        conserved = [c for c in result.checks if c.name == "cost_conserved"]
        assert conserved and all(c.passed for c in conserved), month


@pytest.mark.parametrize("sample", [f"{p}-{v.replace('.', '')}" for p, v in SAMPLES])
def test_sample_cost_arrives_exactly_and_is_conserved(focus_quarter, sample):
    warehouse, expected, _results = focus_quarter
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for month, totals in expected[sample].items():
            billed, attributed, unused_lines, unused_unallocated, claimed = con.execute(
                """WITH lines AS (SELECT * FROM billing_facts WHERE month = $month
                                   AND starts_with(x_SourceLine, $prefix)),
                        shares AS (SELECT a.*, l.CommitmentDiscountStatus FROM attribution a
                                   JOIN lines l USING (month, x_SourceLine))
                   SELECT (SELECT sum(EffectiveCost) FROM lines),
                          (SELECT sum(cost) FROM shares),
                          (SELECT coalesce(sum(EffectiveCost), 0) FROM lines
                            WHERE CommitmentDiscountStatus = 'Unused'),
                          (SELECT coalesce(sum(cost), 0) FROM shares
                            WHERE purpose_class = 'unallocated' AND kind = 'unused_commitment'),
                          (SELECT coalesce(sum(cost), 0) FROM shares WHERE run_id IS NOT NULL)
                """, {"month": month, "prefix": sample + ":"}).fetchone()
            total = float(totals["effective"])
            assert billed == pytest.approx(total, rel=REL, abs=1e-9)
            assert attributed == pytest.approx(total, rel=REL, abs=1e-9)
            assert unused_lines == pytest.approx(float(totals["unused"]), rel=REL, abs=1e-9)
            assert unused_unallocated == pytest.approx(unused_lines, rel=REL, abs=1e-9)
            assert totals["unused"] > 0, "the sample has unused commitment to route"
            if totals["instance"]:
                assert claimed > 0, "the run claiming one of the sample's instances got nothing"
