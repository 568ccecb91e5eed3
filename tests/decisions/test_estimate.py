"""The pre-search estimate: the mission's arithmetic, the recorded basis, the budget gate."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime

import duckdb
import pytest

from cost_pipeline.config import load_config, parse_config
from cost_pipeline.estimate import EstimateError, estimate_search, search_cost


def test_search_cost_is_runs_times_gpu_hours_times_price():
    # 12 configs × 3 seeds × 4 re-runs = 144 runs of 4 GPUs × 12 h at $4.10/GPU-hour
    assert search_cost(12, 3, 4, gpus=4, hours=12, price=4.10) == pytest.approx(
        144 * 4 * 12 * 4.10)
    assert search_cost(1, 1, 1, 8, 1, 2.0, extra_per_run=5.0) == pytest.approx(21.0)


def test_overrides_need_no_history(tmp_path):
    cfg = parse_config({"warehouse": {"path": "none.duckdb"},
                        "policy": {"search": {"approval_budget": 5000}}}, tmp_path)
    est = estimate_search(cfg, "churn", 10, 3, 2, gpus=4, hours=10, price=2.5)
    assert est.runs == 60
    assert est.total_cost == pytest.approx(60 * 4 * 10 * 2.5)
    assert not est.approved and est.approval_budget == 5000


def test_without_history_or_overrides_is_a_clear_error(tmp_path):
    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    duckdb.connect(cfg.warehouse_path).close()   # a warehouse, without runs
    with pytest.raises(EstimateError, match="no recorded search runs of model 'churn'"):
        estimate_search(cfg, "churn", 10, 3)
    with pytest.raises(EstimateError, match="--configs"):
        estimate_search(cfg, "churn", 0, 3, gpus=1, hours=1, price=1)


def test_recorded_basis_from_the_demo_quarter(demo_quarter, demo_warehouse):
    config, _ = demo_quarter
    cfg = load_config(config)
    est = estimate_search(cfg, "churn", 12, 3, 1, con=demo_warehouse)
    # the demo's search runs: 4 GPUs × 12 h on p4d.24xlarge at $32.7726 / 8 GPUs per hour
    assert est.gpus == 4 and est.hours == 12
    assert est.price == pytest.approx(32.7726 / 8, rel=1e-6)
    assert est.per_run["gpu"] == pytest.approx(4 * 12 * 32.7726 / 8)
    assert est.per_run["transfer"] > 0 and est.per_run["preprocessing"] > 0
    cached = estimate_search(cfg, "churn", 12, 3, 1, con=demo_warehouse, cached=True)
    assert cached.per_run["preprocessing"] == 0
    assert cached.total_cost == pytest.approx(est.total_cost - 36 * est.per_run["preprocessing"])


def test_a_run_is_priced_at_its_whole_recorded_cost(tmp_path):
    """SPEC §10 "from the model's recorded per-run cost": every component of it. Two search
    runs of 10 GPU-hours ($100) that each also paid CPU $20, storage $2, transfer $3 and other
    $1: a search of two such runs is estimated at what those two cost ($252), where pricing
    GPU alone said $200 and the search ran 26 % over its own estimate."""
    import duckdb

    from tests.support.warehouse_rows import insert, insert_runs

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    march = date(2026, 3, 1)
    parts = {"gpu": 100.0, "cpu": 20.0, "storage": 2.0, "network": 3.0, "other": 1.0}
    with duckdb.connect() as con:
        insert_runs(con, march, [
            {"run_id": run_id, "status": "FINISHED", "model": "m", "purpose": "search",
             "search_id": "S0", "config_id": run_id, "start_time": datetime(2026, 3, day),
             "end_time": datetime(2026, 3, day, 10)} for day, run_id in ((2, "t1"), (3, "t2"))])
        insert(con, "attribution", march, [
            {"x_SourceLine": f"{run_id}-{component}", "run_id": run_id, "purpose_class": "search",
             "component": component, "cost": cost, "share": 1.0, "rule": "compute",
             "hours": 10.0 if component in ("gpu", "cpu") else None,
             "accelerator_hours": 10.0 if component == "gpu" else None}
            for run_id in ("t1", "t2") for component, cost in parts.items()], {})
        est = estimate_search(cfg, "m", 2, 1, con=con)
        (recorded,) = con.execute("SELECT sum(cost) FROM attribution").fetchone()
    assert (est.gpus, est.hours, est.price) == (1.0, 10.0, 10.0)
    assert est.per_run == pytest.approx({"gpu": 100.0, "cpu": 20.0, "storage": 2.0,
                                         "transfer": 3.0, "other": 1.0, "preprocessing": 0.0})
    assert est.per_run_cost == pytest.approx(126.0)
    assert est.total_cost == pytest.approx(recorded) == pytest.approx(252.0)


def test_cli_json_and_exit_code(demo_quarter, dagster_home):
    config, _ = demo_quarter
    base = [sys.executable, "-m", "cost_pipeline.cli", "estimate", "--config", str(config),
            "--model", "churn", "--seeds", "3", "--json"]
    small = subprocess.run([*base, "--configs", "2"], capture_output=True, text=True)
    assert small.returncode == 0, small.stderr
    out = json.loads(small.stdout)
    assert {"runs", "per_run_cost", "total_cost", "approval_budget", "approved"} <= set(out)
    assert out["runs"] == 6 and out["approved"] is True
    big = subprocess.run([*base, "--configs", "40", "--reruns", "3"], capture_output=True,
                         text=True)
    assert big.returncode == 3
    assert json.loads(big.stdout)["approved"] is False


@pytest.mark.parametrize("flag, value", [("--price", "-100"), ("--gpus", "-4"),
                                         ("--hours", "nan"), ("--price", "inf")])
def test_negative_or_non_finite_overrides_are_refused_in_one_line(tmp_path, capsys, flag,
                                                                  value):
    # issue 16: `--price -100` estimated −144,000 "within budget" and exited 0
    from cost_pipeline.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_text("warehouse: {path: none.duckdb}\n")
    argv = ["estimate", "--config", str(config), "--model", "churn", "--configs", "12",
            "--seeds", "3", "--reruns", "4", "--gpus", "4", "--hours", "12", "--price", "4.1"]
    argv[argv.index(flag) + 1] = value
    assert main([*argv, "--json"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    [line] = out.err.strip().splitlines()
    assert line.startswith(f"error: {flag} must be a finite number >= 0")


def test_estimate_json_is_json_and_amounts_carry_the_bills_currency(tmp_path, capsys):
    import duckdb

    from cost_pipeline.cli.main import main
    from cost_pipeline.estimate import render
    from tests.support.warehouse_rows import insert_lines

    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n")
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:  # a NOK bill, no search runs
        from datetime import date, datetime

        insert_lines(con, date(2026, 10, 1), [{
            "ChargePeriodStart": datetime(2026, 10, 1), "ChargePeriodEnd": datetime(2026, 10, 1, 1),
            "ChargeCategory": "Usage", "EffectiveCost": 1.0, "x_CostComponent": "gpu",
            "x_SourceLine": "l0", "BillingCurrency": "NOK"}])
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "churn",
            "--configs", "2", "--seeds", "1", "--gpus", "1", "--hours", "1", "--price", "10"]
    assert main([*argv, "--json"]) == 0
    printed = capsys.readouterr().out
    assert "NaN" not in printed and json.loads(printed)["currency"] == "NOK"
    cfg = load_config(str(tmp_path / "c.yaml"))
    text = render(estimate_search(cfg, "churn", 2, 1, gpus=1, hours=1, price=10))
    assert "NOK 20.00" in text and "$" not in text


def test_an_overflowing_estimate_is_one_clear_error(tmp_path):
    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    with pytest.raises(EstimateError, match="overflows"):
        estimate_search(cfg, "churn", 10**6, 10**6, gpus=1e300, hours=1e10, price=1.0)


def test_money_has_no_float_noise(tmp_path, capsys):
    """3 configs × 7 seeds × 1 GPU × 0.1 h × $0.1/GPU-hour is $0.21: the JSON said
    0.21000000000000005, and a budget of exactly $0.21 called it over."""
    from cost_pipeline.cli.main import main

    cfg = parse_config({"warehouse": {"path": "none.duckdb"},
                        "policy": {"search": {"approval_budget": 0.21}}}, tmp_path)
    est = estimate_search(cfg, "churn", 3, 7, gpus=1, hours=0.1, price=0.1)
    assert (est.per_run["gpu"], est.per_run_cost, est.total_cost) == (0.01, 0.01, 0.21)
    assert est.approved
    assert search_cost(3, 7, 1, 1, 0.1, 0.1) == 0.21
    assert search_cost(1, 3, 1, 1, 1, 0.1, extra_per_run=0.2) == 0.9  # float: 0.9000000000000001
    (tmp_path / "c.yaml").write_text("warehouse: {path: none.duckdb}\n")
    assert main(["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "churn",
                 "--configs", "3", "--seeds", "7", "--gpus", "1", "--hours", "0.1",
                 "--price", "0.1", "--json"]) == 0
    printed = capsys.readouterr().out
    assert '"total_cost": 0.21,' in printed and '"per_run_cost": 0.01,' in printed
    assert json.loads(printed)["per_run"]["gpu"] == 0.01


def test_gpus_and_hours_print_as_plain_numbers(tmp_path):
    """A million GPUs × a million hours read `1e+06 GPUs × 1e+06 h`: plain numbers with
    thousands separators, fractions to six significant digits as before."""
    from cost_pipeline.estimate import render

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    huge = render(estimate_search(cfg, "churn", 1, 1, gpus=1e6, hours=1e6, price=0.5))
    assert "  GPU per run: 1,000,000 GPUs × 1,000,000 h × 0.5 USD/GPU-hour" in huge
    assert "$500,000,000,000.00 total" in huge
    small = render(estimate_search(cfg, "churn", 1, 1, gpus=2.5, hours=1234.5678, price=2))
    assert "  GPU per run: 2.5 GPUs × 1,234.57 h × 2 USD/GPU-hour" in small
    tiny = render(estimate_search(cfg, "churn", 1, 1, gpus=8, hours=0.0000123456789, price=2))
    assert "  GPU per run: 8 GPUs × 0.0000123457 h × " in tiny
    # one of each is singular: it read "1 configs × 1 seeds × 1 re-run(s) = 1 runs"
    assert "Search estimate for churn: 1 config × 1 seed × 1 re-run = 1 run\n" in tiny
    assert "churn: 1,200 configs × 3 seeds × 2 re-runs = 7,200 runs\n" in render(
        estimate_search(cfg, "churn", 1200, 3, reruns=2, gpus=1, hours=1, price=2))
    with pytest.raises(EstimateError) as err:
        estimate_search(cfg, "churn", 10**6, 10**6, gpus=1e300, hours=1e10, price=1.0)
    # from 1e15 on an exponent: a 1e300 spelled out was three hundred digits in one line
    assert "(1,000,000 × 1,000,000 × 1 runs of 1e+300 GPUs × 10,000,000,000 h × 1)" \
        in str(err.value)
    assert len(str(err.value)) < 200


def _recorded_runs(con, runs: list[tuple], month: date = date(2026, 3, 1),
                   price: float = 1.0) -> None:
    """Search runs of model m: (run_id, tracker gpus, wall hours, recorded GPU-hours)."""
    from tests.support.warehouse_rows import insert, insert_runs

    insert_runs(con, month, [
        {"run_id": run_id, "status": "FINISHED", "model": "m", "purpose": "search",
         "search_id": "S0", "gpus": gpus, "start_time": datetime(month.year, month.month, i + 1),
         "end_time": datetime(month.year, month.month, i + 1, hours)}
        for i, (run_id, gpus, hours, _) in enumerate(runs)])
    insert(con, "attribution", month, [
        {"x_SourceLine": f"{run_id}-gpu", "run_id": run_id, "purpose_class": "search",
         "component": "gpu", "cost": gpu_hours * price, "share": 1.0, "rule": "compute",
         "hours": float(hours), "accelerator_hours": float(gpu_hours)}
        for run_id, _, hours, gpu_hours in runs], {})


def test_a_run_is_priced_at_the_gpu_hours_it_recorded(tmp_path):
    """Its recorded per-run cost (SPEC §10), not the tracker's `gpus` × the median hours: a
    run on two nodes of 4 GPUs (`gpus` counts each node's, SPEC §4) recorded 80 GPU-hours in
    10 h and cost $200, estimated at 4 × 10 × 2.5 = $100 and approved against a $100 budget.
    And the median run's GPU-hours, not the median GPUs × the median hours: runs of 1 GPU ×
    10 h (twice), 8 × 1 (twice) and 8 × 10 cost 10, 10, 8, 8 and 80 — estimated at 8 × 10."""
    import duckdb

    cfg = parse_config({"warehouse": {"path": "none.duckdb"},
                        "policy": {"search": {"approval_budget": 100}}}, tmp_path)
    with duckdb.connect() as con:
        _recorded_runs(con, [("two-nodes", 4, 10, 80.0)], price=2.5)
        est = estimate_search(cfg, "m", 1, 1, con=con)
    assert (est.gpus, est.hours) == (8.0, 10.0)
    assert est.per_run["gpu"] == pytest.approx(200.0) and not est.approved
    with duckdb.connect() as con:
        _recorded_runs(con, [("a", 1, 10, 10.0), ("b", 1, 10, 10.0), ("c", 8, 1, 8.0),
                             ("d", 8, 1, 8.0), ("e", 8, 10, 80.0)])
        est = estimate_search(cfg, "m", 1, 1, con=con)
    assert est.per_run["gpu"] == pytest.approx(10.0)  # the median run's 10 GPU-hours × $1


def test_a_model_searched_on_cpus_is_priced_from_its_cpu_runs(tmp_path):
    """Two search runs on CPU instances, $3 each: "no recorded search runs" was said of a model
    with two, and priced by hand (--gpus 0) every part came from an empty basis: $0,
    approved, then over its own estimate."""
    import duckdb

    from tests.support.warehouse_rows import insert, insert_runs

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    march = date(2026, 3, 1)
    with duckdb.connect() as con:
        insert_runs(con, march, [
            {"run_id": run_id, "status": "FINISHED", "model": "fraud", "purpose": "search",
             "search_id": "S0", "start_time": datetime(2026, 3, day),
             "end_time": datetime(2026, 3, day, 2)} for day, run_id in ((2, "c1"), (3, "c2"))])
        insert(con, "attribution", march, [
            {"x_SourceLine": f"{run_id}-cpu", "run_id": run_id, "purpose_class": "search",
             "component": "cpu", "cost": 3.0, "share": 1.0, "rule": "compute", "hours": 2.0,
             "accelerator_hours": 0.0} for run_id in ("c1", "c2")], {})
        est = estimate_search(cfg, "fraud", 2, 1, con=con)
    assert est.basis["sample_runs"] == 2
    assert (est.gpus, est.hours, est.price) == (0.0, 2.0, 0.0)
    assert est.per_run["cpu"] == pytest.approx(3.0)
    assert est.total_cost == pytest.approx(6.0)


def test_a_basis_billed_in_two_currencies_is_refused_unless_priced_by_hand(tmp_path, capsys):
    """Runs billed in EUR in March and in USD in April: their amounts do not add up, and the
    estimate said "USD" (the latest month's) over a price mixing both. It is refused, saying
    so; priced by the caller it is in the latest month's currency. A non-finite expected
    improvement is refused before anything is recorded (a NaN was written, then the JSON
    output failed on it)."""
    import duckdb

    from cost_pipeline.cli.main import main

    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n")
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        _recorded_runs(con, [("a", 1, 10, 10.0)], month=date(2026, 3, 1))
        _recorded_runs(con, [("b", 1, 10, 10.0)], month=date(2026, 4, 1))
        con.execute("INSERT INTO billing_months VALUES ('2026-03-01', 1, 1, 1, 1, 'EUR'), "
                    "('2026-04-01', 1, 1, 1, 1, 'USD')")
    cfg = load_config(str(tmp_path / "c.yaml"))
    with pytest.raises(EstimateError, match="billed in EUR and USD"):
        estimate_search(cfg, "m", 1, 1)
    assert estimate_search(cfg, "m", 1, 1, gpus=1, hours=1, price=2).total_cost == 2
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "m", "--configs", "1",
            "--seeds", "1", "--gpus", "1", "--hours", "1", "--price", "2", "--approve",
            "--search-id", "S-nan", "--expected-improvement", "nan", "--json"]
    assert main(argv) == 1
    assert "--expected-improvement must be a finite number" in capsys.readouterr().err
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        assert con.execute("SELECT count(*) FROM search_approvals").fetchone() == (0,)


def _billed_months(con, currencies: dict[date, str]) -> None:
    """Each month's bill: one line in its currency, and its row of `billing_months`."""
    from tests.support.warehouse_rows import insert_lines

    for month, currency in currencies.items():
        insert_lines(con, month, [{
            "ChargePeriodStart": datetime(month.year, month.month, 1),
            "ChargePeriodEnd": datetime(month.year, month.month, 1, 1),
            "ChargeCategory": "Usage", "EffectiveCost": 1.0, "x_CostComponent": "gpu",
            "x_SourceLine": f"bill-{month}", "BillingCurrency": currency}])
        con.execute("INSERT INTO billing_months VALUES (?, 1, 1, 1, 1, ?)", [month, currency])


def _run_parts(con, month: date, costs: dict[str, dict[str, float]]) -> None:
    """Each run's recorded cost of the month by component (not GPU: `_recorded_runs`)."""
    from tests.support.warehouse_rows import insert

    insert(con, "attribution", month, [
        {"x_SourceLine": f"{run_id}-{component}", "run_id": run_id, "purpose_class": "search",
         "component": component, "cost": cost, "share": 1.0, "rule": "compute"}
        for run_id, parts in costs.items() for component, cost in parts.items()], {})


def test_a_basis_of_two_currencies_priced_by_hand_adds_only_the_estimates_currency(tmp_path,
                                                                                 capsys):
    """May billed in USD, June in EUR; priced by hand, the estimate is in June's EUR. It
    printed "preprocessing EUR 0.20" and medians of May's USD and June's EUR amounts as EUR
    (cpu EUR 3.00: the median of USD 4, 4 and EUR 2, 2; preprocessing May's USD 0.20 and June's
    EUR 0.60 over 4 training runs). The parts besides the GPU come from the runs billed in EUR
    alone: cpu 2, storage 0.5, transfer 0.3, other 0.1, preprocessing EUR 0.60 over June's 2
    training runs = 0.30 — with the GPU's 1 × 1 h × 1.5, EUR 4.70 a run, EUR 9.40 for 2. A bill
    now in JPY, where no search run was billed, has none to take: the GPU part alone."""
    import duckdb

    from cost_pipeline.cli.main import main
    from cost_pipeline.estimate import render
    from tests.support.warehouse_rows import insert_runs

    may, june = date(2026, 5, 1), date(2026, 6, 1)
    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n")
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        _recorded_runs(con, [("m1", 1, 10, 10.0), ("m2", 1, 10, 10.0)], month=may)
        _recorded_runs(con, [("j1", 1, 10, 10.0), ("j2", 1, 10, 10.0)], month=june)
        _run_parts(con, may, {run_id: {"cpu": 4.0, "storage": 1.0, "network": 0.6,
                                       "other": 0.2} for run_id in ("m1", "m2")})
        _run_parts(con, june, {run_id: {"cpu": 2.0, "storage": 0.5, "network": 0.3,
                                        "other": 0.1} for run_id in ("j1", "j2")})
        # the model's preprocessing: May 31 in USD, June 1 in EUR (both within two days
        # of the first June run)
        for month, run_id, start, cost in ((may, "p-may", datetime(2026, 5, 31), 0.2),
                                           (june, "p-june", datetime(2026, 6, 1, 12), 0.6)):
            insert_runs(con, month, [{"run_id": run_id, "status": "FINISHED", "model": "m",
                                      "purpose": "preprocess", "start_time": start,
                                      "end_time": start.replace(hour=start.hour + 1)}])
            _run_parts(con, month, {run_id: {"cpu": cost}})
        _billed_months(con, {may: "USD", june: "EUR"})
    cfg = load_config(str(tmp_path / "c.yaml"))
    with pytest.raises(EstimateError, match="billed in EUR and USD"):
        estimate_search(cfg, "m", 2, 1)
    est = estimate_search(cfg, "m", 2, 1, gpus=1, hours=1, price=1.5)
    assert est.currency == "EUR" and est.basis["sample_runs"] == 2
    assert est.per_run == pytest.approx({"gpu": 1.5, "cpu": 2.0, "storage": 0.5,
                                         "transfer": 0.3, "other": 0.1,
                                         "preprocessing": 0.3})
    assert est.per_run_cost == pytest.approx(4.7)
    assert est.total_cost == pytest.approx(9.4)
    cached = estimate_search(cfg, "m", 2, 1, gpus=1, hours=1, price=1.5, cached=True)
    assert cached.total_cost == pytest.approx(8.8)  # 2 × (4.70 − 0.30)
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "m", "--configs", "2",
            "--seeds", "1", "--gpus", "1", "--hours", "1", "--price", "1.5"]
    assert main([*argv, "--approve", "--search-id", "s2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  {'preprocessing':<14} {'EUR 0.30':>16} per run  {'EUR 0.60':>16} total" in lines
    assert f"  {'per run':<14} {'EUR 4.70':>16}  (the GPU part from --gpus, --hours and " \
        "--price; the rest from the recorded search runs billed in EUR, those billed in USD " \
        "left out)" in lines
    assert f"  {'total':<14} {'EUR 9.40':>16}" in lines
    assert "  basis: median of the 2 most recent recorded search runs billed in EUR" in lines
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        assert con.execute("SELECT per_run_cost, estimated_cost, currency FROM "
                           "search_approvals WHERE search_id = 's2'").fetchone() \
            == pytest.approx((4.7, 9.4, "EUR"))
        _billed_months(con, {date(2026, 7, 1): "JPY"})
    est = estimate_search(cfg, "m", 2, 1, gpus=1, hours=1, price=1.5)
    assert est.currency == "JPY" and est.basis["sample_runs"] == 0
    assert est.per_run == {"gpu": 1.5, "cpu": 0, "storage": 0, "transfer": 0, "other": 0,
                           "preprocessing": 0}
    assert est.total_cost == 3.0
    text = render(est).splitlines()
    assert f"  {'per run':<14} {'JPY 2':>16}  (the GPU part alone, from --gpus, --hours and " \
        "--price: the recorded search runs of m were billed in EUR and USD, none in JPY)" \
        in text
    assert not any(line.startswith("  basis:") for line in text)


def _billed_in(path, currency: str) -> None:
    import duckdb

    from tests.support.warehouse_rows import insert_lines

    with duckdb.connect(str(path)) as con:  # the bill's currency; no search runs
        insert_lines(con, date(2026, 10, 1), [{
            "ChargePeriodStart": datetime(2026, 10, 1), "ChargePeriodEnd": datetime(2026, 10, 1, 1),
            "ChargeCategory": "Usage", "EffectiveCost": 1.0, "x_CostComponent": "gpu",
            "x_SourceLine": "l0", "BillingCurrency": currency}])


@pytest.mark.parametrize(("currency", "budget", "price", "total", "limit", "verdict"), [
    # JPY 2,221.2 over a JPY 2,221 budget read "total JPY 2,221 … budget JPY 2,221: OVER"
    ("JPY", 2221, 2221.2, "JPY 2,221.2", "JPY 2,221.0", "OVER"),
    ("JPY", 2221, 2220.6, "JPY 2,220.6", "JPY 2,221.0", "within"),
    ("JPY", 2221, 2222.0, "JPY 2,222", "JPY 2,221", "OVER"),   # apart already: whole yen
    ("JPY", 2221, 2221.0, "JPY 2,221", "JPY 2,221", "within"),  # equal: alike
    # KWD 5.0004 over a KWD 5 budget read "KWD 5.000 … KWD 5.000: OVER"
    ("KWD", 5, 5.0004, "KWD 5.0004", "KWD 5.0000", "OVER"),
])
def test_a_total_and_a_budget_that_differ_read_apart(tmp_path, currency, budget, price, total,
                                                     limit, verdict):
    from cost_pipeline.estimate import render

    _billed_in(tmp_path / "w.duckdb", currency)
    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n"
                                     f"policy: {{search: {{approval_budget: {budget}}}}}\n")
    cfg = load_config(str(tmp_path / "c.yaml"))
    text = render(estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1, price=price))
    assert f"  {'total':<14} {total:>16}" in text.splitlines()
    assert f"  approval budget {limit}: {verdict} budget" in text.splitlines()


def test_an_estimate_without_a_warehouse_says_so(tmp_path, capsys):
    """A config whose warehouse file does not exist read "no recorded search runs of model
    'churn'", as if the warehouse held no such model: it says what every reader says. Priced
    by hand (--gpus, --hours, --price), the estimate needs no warehouse."""
    from cost_pipeline.cli.main import main

    (tmp_path / "c.yaml").write_text("warehouse: {path: none.duckdb}\n")
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "churn",
            "--configs", "2", "--seeds", "3"]
    for overrides in ([], ["--gpus", "4"], ["--gpus", "4", "--hours", "2"]):
        assert main([*argv, *overrides]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (f"error: no warehouse at {tmp_path / 'none.duckdb'}: "
                                "materialize a month first\n")
    assert main([*argv, "--gpus", "4", "--hours", "2", "--price", "1.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_cost"] == 72.0  # 6 runs × 4 × 2 × 1.5
    assert not (tmp_path / "none.duckdb").exists()
    # the API says the same, where only the command line did
    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    with pytest.raises(EstimateError, match=r"^no warehouse at .*none\.duckdb: materialize"):
        estimate_search(cfg, "churn", 2, 3, gpus=4)


def test_a_run_priced_by_hand_says_so_and_its_price_reads_as_given(tmp_path):
    """With no recorded run the per-run price is the GPU part the caller gave, yet the line
    said "(every component of a recorded run)"; a price of 0.00001 read `0.0000
    USD/GPU-hour` (four decimals), 2 read `2.0000`."""
    from cost_pipeline.estimate import render

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    text = render(estimate_search(cfg, "churn", 1, 1, gpus=1000, hours=1, price=0.00001))
    assert "  GPU per run: 1,000 GPUs × 1 h × 0.00001 USD/GPU-hour" in text.splitlines()
    # 1,000 × 1 × 0.00001 = $0.01, its GPU part alone
    assert f"  {'per run':<14} {'$0.01':>16}  (the GPU part alone, from --gpus, --hours and " \
        "--price: no recorded search run of churn)" in text.splitlines()
    assert "recorded run)" not in text
    assert "× 2 USD/GPU-hour" in render(estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1,
                                                        price=2))
    assert "× 4.096575 USD/GPU-hour" in render(estimate_search(cfg, "churn", 1, 1, gpus=1,
                                                               hours=1, price=32.7726 / 8))


def test_one_gpu_is_singular(tmp_path):
    """It read "1 GPUs × 1 h"."""
    from cost_pipeline.estimate import render

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    one = render(estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1, price=2))
    assert "  GPU per run: 1 GPU × 1 h × 2 USD/GPU-hour\n" in one
    half = render(estimate_search(cfg, "churn", 1, 1, gpus=0.5, hours=1, price=2))
    assert "  GPU per run: 0.5 GPUs × 1 h × " in half
    with pytest.raises(EstimateError) as err:
        estimate_search(cfg, "churn", 10**9, 10**9, 10**9, gpus=1, hours=1e300, price=1e10)
    assert "runs of 1 GPU × 1e+300 h × 10,000,000,000)" in str(err.value)


@pytest.mark.parametrize(("flag", "value"), [("--price", "1e400"), ("--hours", "1e309"),
                                             ("--gpus", "-1e400")])
def test_an_override_too_large_for_a_number_says_so(tmp_path, capsys, flag, value):
    """`--price 1e400` said "got inf": a number the user never wrote."""
    from cost_pipeline.cli.main import main

    (tmp_path / "c.yaml").write_text("warehouse: {path: none.duckdb}\n")
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "churn",
            "--configs", "1", "--seeds", "1", "--gpus", "1", "--hours", "1", "--price", "1"]
    assert main([*argv, f"{flag}={value}"]) == 1  # the last one given counts
    assert capsys.readouterr().err == (f"error: {flag} must be a finite number >= 0: the "
                                       "number given is too large for one\n")


def test_the_json_counts_its_basis_runs_as_an_integer(tmp_path, capsys):
    """`"sample_runs": 2.0`: a count of runs is an integer."""
    import duckdb

    from cost_pipeline.cli.main import main

    (tmp_path / "c.yaml").write_text("warehouse: {path: w.duckdb}\n")
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        _recorded_runs(con, [("a", 1, 10, 10.0), ("b", 1, 10, 10.0)])
    argv = ["estimate", "--config", str(tmp_path / "c.yaml"), "--model", "m",
            "--configs", "1", "--seeds", "1", "--json"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert '"sample_runs": 2,' in printed or '"sample_runs": 2\n' in printed
    assert type(json.loads(printed)["basis"]["sample_runs"]) is int
    assert main([*argv, "--gpus", "1", "--hours", "1", "--price", "1"]) == 0
    assert type(json.loads(capsys.readouterr().out)["basis"]["sample_runs"]) is int


def test_runs_of_no_length_are_priced_or_refused_in_one_line(tmp_path):
    """A basis whose median run lasted 0 h: its GPUs (GPU-hours over hours) were no number
    and the command died with a traceback (`float(None)`). Runs that held no GPU are priced
    at 0 GPUs; runs of no length that recorded GPU-hours cannot be told as GPUs × hours:
    one line asking for the overrides."""
    import duckdb

    from tests.support.warehouse_rows import insert, insert_runs

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    march = date(2026, 3, 1)
    with duckdb.connect() as con:
        insert_runs(con, march, [{"run_id": "z1", "status": "FINISHED", "model": "m0",
                                  "purpose": "search", "search_id": "s9",
                                  "start_time": datetime(2026, 3, 2, 10),
                                  "end_time": datetime(2026, 3, 2, 10)}])
        insert(con, "attribution", march, [
            {"x_SourceLine": "logs", "run_id": "z1", "purpose_class": "search",
             "component": "storage", "cost": 5.0, "share": 1.0, "rule": "bucket_storage",
             "hours": None, "accelerator_hours": None}], {})
        est = estimate_search(cfg, "m0", 2, 2, con=con)
        assert (est.gpus, est.hours, est.per_run["storage"], est.total_cost) == (
            0.0, 0.0, 5.0, 20.0)
    with duckdb.connect() as con:
        _recorded_runs(con, [("t", 4, 0, 8.0)])
        with pytest.raises(EstimateError, match=(
                r"^the recorded search runs of model 'm' last 0 h at the median, yet hold "
                r"GPU-hours: pass --gpus and --hours \(and --price\) to price a run$")):
            estimate_search(cfg, "m", 1, 1, con=con)
        est = estimate_search(cfg, "m", 1, 1, con=con, gpus=4, hours=2)
        assert est.per_run["gpu"] == pytest.approx(8.0)  # at the recorded $1 a GPU-hour


def test_preprocessing_is_shared_over_the_training_runs_of_its_own_span(tmp_path):
    """The preprocessing of the two days before the basis's first run was counted, but not
    the training runs of those days: a production run's own $2 of preprocessing went to the
    three search runs ($4 / 3 = $1.33 a run, where the span's four runs make $1.00)."""
    import duckdb

    from tests.support.warehouse_rows import insert, insert_runs

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    march = date(2026, 3, 1)
    runs = [("prod", "production", None, datetime(2026, 3, 1, 12), 2),
            ("p0", "preprocess", None, datetime(2026, 3, 1, 11), 1),
            ("p1", "preprocess", None, datetime(2026, 3, 2, 9), 1),
            ("t1", "search", "s1", datetime(2026, 3, 2, 10), 2),
            ("t2", "search", "s1", datetime(2026, 3, 2, 10), 4),
            ("t3", "search", "s1", datetime(2026, 3, 2, 12), 2)]
    with duckdb.connect() as con:
        insert_runs(con, march, [
            {"run_id": run_id, "status": "FINISHED", "model": "churn", "purpose": purpose,
             "search_id": search, "start_time": start,
             "end_time": start.replace(hour=start.hour + hours)}
            for run_id, purpose, search, start, hours in runs])
        insert(con, "attribution", march, [
            {"x_SourceLine": f"{run_id}-line", "run_id": run_id,
             "purpose_class": "preprocessing" if purpose == "preprocess" else purpose,
             "component": "cpu" if purpose != "search" else "gpu",
             "cost": 2.0 if purpose == "preprocess" else 8.0 * hours, "share": 1.0,
             "rule": "compute", "hours": float(hours),
             "accelerator_hours": 4.0 * hours if purpose == "search" else 0.0}
            for run_id, purpose, _, _, hours in runs], {})
        est = estimate_search(cfg, "churn", 1, 1, con=con)
    assert est.per_run["preprocessing"] == pytest.approx(1.0)


def test_a_recorded_basis_with_a_factor_given_by_hand_says_which(tmp_path):
    """`--gpus 1 --hours 1 --price 1` over a model with recorded runs read "(every component
    of a recorded run)": the GPU part was the caller's."""
    import duckdb

    from cost_pipeline.estimate import render

    cfg = parse_config({"warehouse": {"path": "none.duckdb"}}, tmp_path)
    with duckdb.connect() as con:
        _recorded_runs(con, [("a", 4, 2, 8.0), ("b", 4, 2, 8.0), ("c", 4, 2, 8.0)])
        texts = {flags: render(estimate_search(cfg, "m", 1, 1, con=con, **flags_given))
                 for flags, flags_given in (
                     ("", {}), ("gpus", {"gpus": 8}),
                     ("all", {"gpus": 1, "hours": 1, "price": 1}),
                     ("hours price", {"hours": 3, "price": 2}))}
        (one,) = (render(estimate_search(cfg, "m", 1, 1, con=con)),)
    lines = {flags: [line for line in text.splitlines() if line.startswith("  per run")][0]
             for flags, text in texts.items()}
    assert lines[""].endswith("(every component of a recorded run)")
    assert lines["gpus"].endswith("(--gpus given; the rest from the recorded search runs)")
    assert lines["all"].endswith("(the GPU part from --gpus, --hours and --price; the rest "
                                 "from the recorded search runs)")
    assert lines["hours price"].endswith("(--hours and --price given; the rest from the "
                                         "recorded search runs)")
    assert "  basis: median of the 3 most recent recorded search runs" in one
    with duckdb.connect() as con:
        _recorded_runs(con, [("a", 4, 2, 8.0)])
        assert "  basis: the most recent recorded search run\n" in render(
            estimate_search(cfg, "m", 1, 1, con=con)) + "\n"
