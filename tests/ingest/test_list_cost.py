"""`billing_facts.ListCost` and `x_PricingCategory` (SPEC §12) from CUR 2.0 and FOCUS files;
the GCP export's are tested with the BigQuery emulator in test_gcp_billing.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.ingest.test_focus_source import MAY, load, row, vm, write_csv
from tests.support.cur_rows import COLUMNS as CUR_COLUMNS
from tests.support.cur_rows import build, config, facts, line, write_export

PRICING = {"pricing_public_on_demand_cost": pa.float64(), "pricing_term": pa.string()}
SP_ARN = "arn:aws:savingsplans::999988887777:savingsplan/0a1b2c3d"


def cur(name: str, cost: float, list_cost: float | None, **cols) -> dict:
    return line(cost, identity_line_item_id=name, pricing_public_on_demand_cost=list_cost,
                **cols)


CUR_LINES = [
    # (line, expected ListCost, expected x_PricingCategory)
    (cur("box", 0.096, 0.096, pricing_term="OnDemand"), 0.096, "on_demand"),
    (cur("spot", 9.83, 32.77, line_item_usage_type="SpotUsage:p4d.24xlarge",
         line_item_resource_id="i-spot", pricing_term=""), 32.77, "spot"),
    # a spot instance the usage type does not say is spot: the pricing term does
    (cur("spot_term", 3.0, 12.24, line_item_usage_type="USE1-BoxUsage:g5.12xlarge",
         line_item_resource_id="i-term", pricing_term="Spot"), 12.24, "spot"),
    (cur("sm_spot", 1.2, 3.825, line_item_product_code="AmazonSageMaker",
         line_item_usage_type="USE1-Train-Spot:ml.p3.2xlarge",
         line_item_resource_id="arn:aws:sagemaker:us-east-1:1:training-job/j1"), 3.825, "spot"),
    (cur("sp_cov", 0.0, 3.06, line_item_line_item_type="SavingsPlanCoveredUsage",
         line_item_usage_type="BoxUsage:p3.2xlarge", line_item_resource_id="i-sp",
         savings_plan_savings_plan_a_r_n=SP_ARN, savings_plan_savings_plan_effective_cost=1.8),
     3.06, "committed"),
    # the negation mirrors the covered hour (its cost is 0): its list price would count the
    # hour twice in a spot chain's on-demand comparison
    (cur("sp_neg", -3.06, 3.06, line_item_line_item_type="SavingsPlanNegation",
         line_item_usage_type="BoxUsage:p3.2xlarge", line_item_resource_id="i-sp",
         savings_plan_savings_plan_a_r_n=SP_ARN), 0.0, "committed"),
    (cur("ri_used", 0.0, 0.096, line_item_line_item_type="DiscountedUsage",
         line_item_resource_id="i-ri", reservation_effective_cost=0.05), 0.096, "committed"),
    (cur("ebs", 0.011, 0.011, line_item_usage_type="EBS:VolumeUsage.gp3",
         line_item_resource_id="vol-1", product_product_family="Storage"), 0.011, "on_demand"),
    (cur("tax", 1.5, 0.0, line_item_line_item_type="Tax", line_item_usage_type="",
         line_item_resource_id=None), 0.0, "other"),
    (cur("credit", -2.0, 0.0, line_item_line_item_type="Credit", line_item_usage_type="",
         line_item_resource_id=None), 0.0, "other"),
]


@pytest.fixture
def con():
    import duckdb

    connection = duckdb.connect()
    yield connection
    connection.close()


def test_cur_list_cost_and_pricing_category(tmp_path, con):
    export = write_export(tmp_path, {"part-1.parquet": [r for r, _, _ in CUR_LINES]},
                          extra=PRICING)
    build(con, config(tmp_path, export))
    rows = facts(con)
    for written, list_cost, category in CUR_LINES:
        got = rows[written["identity_line_item_id"]]
        assert got["ListCost"] == pytest.approx(list_cost), written["identity_line_item_id"]
        assert got["x_PricingCategory"] == category, written["identity_line_item_id"]


def test_cur_without_the_pricing_columns_has_no_list_cost(tmp_path, con):
    assert "pricing_public_on_demand_cost" not in CUR_COLUMNS
    lines = [line(1.0, identity_line_item_id="box"),
             line(2.0, identity_line_item_id="spot", line_item_usage_type="SpotUsage:g5.xlarge",
                  line_item_resource_id="i-spot")]
    build(con, config(tmp_path, write_export(tmp_path, {"part-1.parquet": lines})))
    rows = facts(con)
    assert rows["box"]["ListCost"] is None and rows["box"]["x_PricingCategory"] == "on_demand"
    assert rows["spot"]["x_PricingCategory"] == "spot"


def test_cur_split_pods_carry_their_share_of_the_list_cost(tmp_path, con):
    """A pod's split row takes its fraction of the parent hour's ListCost, as of its cost:
    the month's ListCost is unchanged."""
    from tests.support.cur_rows import SPLIT_COLUMNS

    parent = cur("node", 4.0, 10.0, line_item_usage_type="SpotUsage:g5.xlarge",
                 line_item_resource_id="i-node")
    pod = cur("pod", 0.0, 0.0, line_item_usage_type="SpotUsage:g5.xlarge",
              line_item_resource_id="arn:aws:eks:pod/p1",
              split_line_item_parent_resource_id="i-node", split_line_item_split_cost=1.0)
    export = write_export(tmp_path, {"part-1.parquet": [parent, pod]},
                          extra={**PRICING, **SPLIT_COLUMNS})
    build(con, config(tmp_path, export))
    rows = facts(con)
    assert rows["pod"]["ListCost"] == pytest.approx(2.5)       # 10 × 1 / 4
    assert rows["node"]["ListCost"] == pytest.approx(7.5)
    assert rows["pod"]["x_PricingCategory"] == rows["node"]["x_PricingCategory"] == "spot"


FOCUS_ROWS = [
    (vm("std", "g5.xlarge", ListCost=1.006, PricingCategory="Standard"), 1.006, "on_demand"),
    (vm("dyn", "g5.xlarge", cost=0.4, ListCost=1.006, PricingCategory="Dynamic"), 1.006, "spot"),
    (vm("cmt", "g5.xlarge", cost=0.6, ListCost=1.006, PricingCategory="Committed"), 1.006,
     "committed"),
    (vm("oth", "m5.large", cost=0.1, ListCost="", PricingCategory="Other"), None, "other"),
    (row("tax", 3.0, ChargeCategory="Tax", ServiceCategory=""), None, "other"),
    # a commitment's purchase and a tax line priced Committed are not usage: other, as CUR's
    # fees (they read committed)
    (row("buy", 300.0, ChargeCategory="Purchase", PricingCategory="Committed"), None, "other"),
    (row("vat", 3.0, ChargeCategory="Tax", PricingCategory="Standard"), None, "other"),
]


def test_focus_list_cost_and_pricing_category(tmp_path, con):
    from tests.ingest.test_focus_source import COLUMNS

    path = write_csv(tmp_path / "focus.csv", [r for r, _, _ in FOCUS_ROWS],
                     columns=(*COLUMNS, "ListCost", "PricingCategory"))
    rows = load(con, path)
    assert {r["month"] for r in rows.values()} == {MAY}
    for written, list_cost, category in FOCUS_ROWS:
        got = rows[written["SkuId"]]
        assert got["ListCost"] == (None if list_cost is None else pytest.approx(list_cost))
        assert got["x_PricingCategory"] == category, written["SkuId"]


def test_focus_list_cost_that_is_not_a_number_names_the_row(tmp_path, con):
    from cost_pipeline.ingest.sources import SourceError
    from tests.ingest.test_focus_source import COLUMNS

    path = write_csv(tmp_path / "focus.csv", [vm("std", "g5.xlarge", ListCost="cheap")],
                     columns=(*COLUMNS, "ListCost"))
    with pytest.raises(SourceError, match=r"focus\.csv.*ListCost \"cheap\" is not a number"):
        load(con, path)
