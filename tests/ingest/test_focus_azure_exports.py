"""FOCUS files as the providers write them (SPEC §5, §12): FOCUS 1.0-preview's and Azure's
own spellings (PricingCategory `Spot`, ChargeSubcategory `Unused Commitment`, `x_InvoiceId`)
mean what FOCUS 1.0's do."""

from __future__ import annotations

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import month_params
from tests.ingest.test_focus_source import COLUMNS, MAY, load, row, vm, write_csv

AZURE_COLUMNS = tuple(c for c in COLUMNS if c not in ("InvoiceId", "ChargeClass",
                                                      "CommitmentDiscountStatus"))


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def test_focus_preview_pricing_categories_read_as_focus_1_0s(con, tmp_path):
    # FOCUS 1.0-preview (Azure's "FOCUS 1.0-preview" export) names them On-Demand, Spot and
    # Commitment-Based: all were `other`, so no spot VM was spot
    categories = {"spot": "Spot", "on-demand": "On-Demand", "commitment": "Commitment-Based",
                  "dynamic": "Dynamic", "standard": "standard", "committed": "Committed",
                  "other": "Other", "none": ""}
    rows = [vm(name, "Standard_NC24ads_A100_v4", PricingCategory=value)
            for name, value in categories.items()]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                COLUMNS + ("PricingCategory",)))
    assert {k: f["x_PricingCategory"] for k, f in facts.items()} == {
        "spot": "spot", "on-demand": "on_demand", "commitment": "committed",
        "dynamic": "spot", "standard": "on_demand", "committed": "committed",
        "other": "other", "none": "other"}


def test_azure_x_invoice_id_is_the_invoice_where_invoice_id_is_absent(con, tmp_path):
    # Azure's FOCUS 1.0 export writes the invoice in x_InvoiceId (InvoiceId is FOCUS 1.2's):
    # unread, an invoiced Azure month stayed provisional
    rows = [vm("a", "Standard_D4s_v5", x_InvoiceId="G052317890"), vm("b", "Standard_D4s_v5")]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                AZURE_COLUMNS + ("x_InvoiceId",)))
    assert {k: f["x_InvoiceId"] for k, f in facts.items()} == {"a": "G052317890", "b": None}
    # where a file has both, InvoiceId is the invoice
    rows = [vm("a", "Standard_D4s_v5", InvoiceId="INV-7", x_InvoiceId="G052317890"),
            vm("b", "Standard_D4s_v5", InvoiceId="", x_InvoiceId="G052317890")]
    facts = load(con, write_csv(tmp_path / "g" / "may.csv", rows, COLUMNS + ("x_InvoiceId",)))
    assert {k: f["x_InvoiceId"] for k, f in facts.items()} == {"a": "INV-7", "b": "G052317890"}


def test_focus_preview_charge_subcategory_says_commitment_and_correction(con, tmp_path):
    # FOCUS 1.0-preview has no CommitmentDiscountStatus nor ChargeClass: an unused
    # reservation (a Usage row of the reservation's VM size) was a VM's usage, its idle hours
    # billed GPU-hours and its cost untracked compute
    april = {"ChargePeriodStart": "2026-04-20T00:00:00Z", "ChargePeriodEnd": "2026-04-21T00:00:00Z"}
    rows = [
        vm("used", "Standard_NC24ads_A100_v4", hours=14.0, cost=30.8,
           ChargeSubcategory="Used Commitment"),
        vm("unused", "Standard_NC24ads_A100_v4", hours=10.0, cost=22.0,
           ResourceId="/providers/microsoft.capacity/reservationorders/ro-1/reservations/r-1",
           ChargeSubcategory="unused commitment"),
        vm("on-demand", "Standard_NC24ads_A100_v4", ChargeSubcategory="On-Demand"),
        row("refund-april", -3.0, ChargeCategory="Adjustment", ChargeSubcategory="Refund",
            **april),
        row("refund-may", -2.0, ChargeCategory="Adjustment", ChargeSubcategory="Refund"),
    ]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                AZURE_COLUMNS + ("ChargeSubcategory",)))
    got = {k: (f["CommitmentDiscountStatus"], f["ChargeClass"], f["x_UsageHours"],
               f["x_CostComponent"]) for k, f in facts.items()}
    assert got == {"used": ("Used", None, 14.0, "gpu"), "unused": ("Unused", None, None, "other"),
                   "on-demand": (None, None, 1.0, "gpu"),
                   "refund-april": (None, "Correction", None, "other"),
                   "refund-may": (None, None, None, "other")}
    build_attribution(con, MAY, month_params(parse_config({}, tmp_path), MAY))
    kinds = dict(con.execute(
        "SELECT b.SkuId, (a.purpose_class, a.kind, a.cost) FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) WHERE a.run_id IS NULL").fetchall())
    assert kinds["unused"] == ("unallocated", "unused_commitment", 22.0)
    assert kinds["refund-april"] == ("unallocated", "correction", -3.0)
