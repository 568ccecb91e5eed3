"""The cost of a search before it runs: configs × seeds × re-runs runs, each priced from the
model's recorded search runs in the warehouse (median of the recent ones) — a run's whole
recorded cost, every component — or, for its GPU part, from what the caller says (GPUs, hours,
price per GPU-hour), against the approval budget. Recorded runs billed in two currencies do
not add up: priced by the caller, the rest of a run comes from those billed in the
estimate's currency alone.

    cost = runs × (GPUs × hours × price + cpu + storage + transfer + other + preprocessing)

The arithmetic is decimal, on each figure's shortest text (`0.1`, not the double nearest it):
3 × 7 runs × 1 GPU × 0.1 h × $0.1 is $0.21, where doubles made 0.21000000000000005.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Context, Decimal
from pathlib import Path

import duckdb

from cost_pipeline.config import PipelineConfig
from cost_pipeline.report.money import money, money_apart, symbol_of
from cost_pipeline.text import BIDI_CONTROLS, CONTROLS
from cost_pipeline.warehouse import (
    WarehouseBusyError,
    connect_read_only,
    ensure_schema,
    exclusive_writer,
    query,
    sql_text,
)

RECENT_RUNS = 20  # the basis: the model's most recent recorded search runs
# digits enough for any product of doubles' shortest texts: the default context's 28 would
# round a search of large runs counts before it is compared with the budget
_EXACT = Context(prec=1000)
SHOWN_DIGITS = 6  # significant digits of a fractional GPU count or hours in the text
# of a price per GPU-hour: a list price's digits all (4.096575), a price from the basis's
# sums without their float crumbs
PRICE_DIGITS = 10


class EstimateError(ValueError):
    """Not enough history to price a run and no override given, or an approval that cannot
    be recorded."""


@dataclass
class SearchEstimate:
    model: str
    configs: int
    seeds: int
    reruns: int
    runs: int
    gpus: float
    hours: float
    price: float
    per_run: dict[str, float]
    per_run_cost: float
    total_cost: float
    approval_budget: float
    approved: bool
    basis: dict = field(default_factory=dict)
    currency: str = "USD"  # the basis runs' (else the warehouse's latest month's)
    from_flags: list[str] = field(default_factory=list)  # the factors given: gpus, hours, price

    def as_json(self) -> dict:
        """JSON-safe: a non-finite figure (a basis with no data) is null, never NaN."""
        return _finite(asdict(self))


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _check_override(name: str, value: float | None) -> None:
    """A figure the caller gives must be a real, non-negative amount: a negative price or
    GPU count would estimate a negative cost that always passes the approval budget."""
    if value is not None and math.isinf(value):
        # `--price 1e400` is read as infinity: "got inf" named a number nobody wrote
        raise EstimateError(f"--{name} must be a finite number >= 0: the number given is too "
                            "large for one")
    if value is not None and (not math.isfinite(value) or value < 0):
        raise EstimateError(f"--{name} must be a finite number >= 0, got {value}")


def bill_currency(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT BillingCurrency FROM billing_facts WHERE BillingCurrency IS NOT "
                      "NULL ORDER BY month DESC, BillingCurrency LIMIT 1").fetchone()
    return row[0] if row else "USD"


def exact(value: float) -> Decimal:
    """`value` as the decimal its shortest text says (`0.1` is 0.1, not the double nearest
    it): money summed and multiplied from it carries no float noise."""
    return Decimal(repr(float(value)))


def search_cost(configs: int, seeds: int, reruns: int, gpus: float, hours: float,
                price: float, extra_per_run: float = 0.0) -> float:
    """The search's cost: every run × (GPU-hours × price + what comes with a run)."""
    return float(_search_cost(configs, seeds, reruns, gpus, hours, price, extra_per_run))


def _search_cost(configs: int, seeds: int, reruns: int, gpus: float, hours: float,
                 price: float, extra_per_run: float | Decimal = 0.0) -> Decimal:
    gpu = _EXACT.multiply(_EXACT.multiply(exact(gpus), exact(hours)), exact(price))
    per_run = _EXACT.add(gpu, extra_per_run if isinstance(extra_per_run, Decimal)
                         else exact(extra_per_run))
    return _EXACT.multiply(Decimal(configs * seeds * reruns), per_run)


def plain(value: float, digits: int = SHOWN_DIGITS) -> str:
    """`value` with thousands separators and never an exponent: whole digits all, a fraction
    to `digits` significant digits (as `:g` shows one), its trailing zeros dropped —
    `1,000,000`, `1,234.57`, `0.0000123457`. A value that is not finite as Python writes it,
    and one of 1e15 or more with an exponent (`1e+300`: three hundred digits say nothing more)."""
    if not math.isfinite(value) or abs(value) >= 1e15:
        return f"{value:.{digits}g}"
    amount = exact(value)
    if not amount:
        return "0"
    places = max(digits - 1 - amount.adjusted(), 0)
    shown = f"{amount.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP, _EXACT):,f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def recorded_basis(con: duckdb.DuckDBPyConnection, model: str, sample: int = RECENT_RUNS,
                   currency: str | None = None) -> dict:
    """The model's basis (`estimate_basis.sql`); with `currency`, of what was billed in it
    alone: the runs billed in it, its months' preprocessing."""
    cursor = query(con, sql_text("estimate_basis"),
                   {"model": model, "sample": sample, "currency": currency})
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchone(), strict=True))


def estimate_search(
    cfg: PipelineConfig, model: str, configs: int, seeds: int, reruns: int = 1, *,
    gpus: float | None = None, hours: float | None = None, price: float | None = None,
    cached: bool = False, con: duckdb.DuckDBPyConnection | None = None,
) -> SearchEstimate:
    for name, value in (("configs", configs), ("seeds", seeds), ("reruns", reruns)):
        if value < 1:
            raise EstimateError(f"--{name} must be at least 1, got {value}")
    for name, value in (("gpus", gpus), ("hours", hours), ("price", price)):
        _check_override(name, value)
    basis: dict = {"sample_runs": 0}
    currency = "USD"
    needs_history = gpus is None or hours is None or price is None
    owned = con is None
    if con is None and needs_history and not Path(cfg.warehouse_path).exists():
        # priced from the recorded runs: it read "no recorded search runs of model …", as if
        # the warehouse held no such model
        raise EstimateError(f"no warehouse at {cfg.warehouse_path}: materialize a month first")
    if con is None and Path(cfg.warehouse_path).exists():
        try:
            con = connect_read_only(cfg.warehouse_path)
        except duckdb.Error as exc:
            if needs_history:
                raise EstimateError(f"warehouse {cfg.warehouse_path}: {exc}") from None
    try:
        if con is not None:
            try:
                basis = recorded_basis(con, model)
                # the basis runs' currency; without a basis (or priced by the caller: a basis
                # of two currencies), the bill's latest
                currencies = basis.pop("currencies", None)
                currency = bill_currency(con)
                if currencies and ("," not in currencies or needs_history):
                    currency = currencies
                elif currencies:
                    # the caller prices the GPU part; the rest of a run comes from the runs
                    # billed in the estimate's currency alone: May's USD 0.20 of
                    # preprocessing was added to June's EUR as EUR
                    basis = recorded_basis(con, model, currency=currency)
                    basis.pop("currencies", None)
                    basis["left_out_currencies"] = [
                        c for c in currencies.split(",") if c != currency.strip().upper()]
            except duckdb.CatalogException:
                basis = {"sample_runs": 0}
    finally:
        if owned and con is not None:
            con.close()
    if needs_history and not basis.get("sample_runs"):
        raise EstimateError(f"no recorded search runs of model {model!r} in the warehouse: "
                            "pass --gpus, --hours and --price")
    if "," in currency:
        raise EstimateError(f"the recorded search runs of model {model!r} were billed in "
                            f"{currency.replace(',', ' and ')}: their amounts do not add up "
                            "(pass --gpus, --hours and --price to price a run yourself)")
    from_flags = [name for name, value in (("gpus", gpus), ("hours", hours), ("price", price))
                  if value is not None]
    if gpus is None and basis.get("gpus") is None:
        # the median run lasted 0 h yet recorded GPU-hours: no GPUs × hours tells it
        raise EstimateError(f"the recorded search runs of model {model!r} last 0 h at the "
                            "median, yet hold GPU-hours: pass --gpus and --hours (and --price) "
                            "to price a run")
    gpus = float(gpus if gpus is not None else basis["gpus"])
    hours = float(hours if hours is not None else basis["hours"])
    price = float(price if price is not None else basis["price"])
    # a run's whole recorded cost (SPEC §10), each component as the recent runs recorded it:
    # a search that runs as its runs did costs what was estimated (searches_within_estimate)
    per_run = {
        "gpu": _search_cost(1, 1, 1, gpus, hours, price),
        "cpu": exact(basis.get("cpu_per_run") or 0),
        "storage": exact(basis.get("storage_per_run") or 0),
        "transfer": exact(basis.get("transfer_per_run") or 0),
        "other": exact(basis.get("other_per_run") or 0),
        "preprocessing": exact(0 if cached else basis.get("preprocessing_per_run") or 0),
    }
    runs = configs * seeds * reruns
    extra = sum((value for part, value in per_run.items() if part != "gpu"), Decimal(0))
    total = _search_cost(configs, seeds, reruns, gpus, hours, price, extra)
    if not total.is_finite() or abs(total) >= Decimal("1e28"):
        raise EstimateError(f"the estimate overflows ({configs:,} × {seeds:,} × {reruns:,} "
                            f"runs of {gpu_count(gpus)} × {plain(hours)} h × {plain(price)}): "
                            "check the figures")
    budget = cfg.policy.search.approval_budget
    return SearchEstimate(
        model=model, configs=configs, seeds=seeds, reruns=reruns, runs=runs, gpus=gpus,
        hours=hours, price=price, per_run={part: float(v) for part, v in per_run.items()},
        per_run_cost=float(_EXACT.add(per_run["gpu"], extra)), total_cost=float(total),
        approval_budget=budget, approved=total <= exact(budget),
        basis={k: _basis_figure(k, v) for k, v in basis.items()},
        currency=currency, from_flags=from_flags,
    )


def _basis_figure(name: str, value):
    """A basis figure as the JSON writes it: amounts and hours as floats, the count of runs
    the medians are taken over as an integer (`"sample_runs": 20.0` read as a measure)."""
    if not isinstance(value, int | float):
        return value
    return int(value) if name == "sample_runs" else float(value)


def counted(n: int, noun: str) -> str:
    """`1 config`, `1,200 configs` (macros.sql `counted` for the levers' texts)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def gpu_count(gpus: float) -> str:
    """`1 GPU`, `0.5 GPUs`, `1,000,000 GPUs` (it read "1 GPUs")."""
    return f"{plain(gpus)} GPU{'' if gpus == 1 else 's'}"


def render(est: SearchEstimate) -> str:
    symbol = symbol_of(est.currency)
    rows = [
        f"Search estimate for {est.model}: {counted(est.configs, 'config')} × "
        f"{counted(est.seeds, 'seed')} × {counted(est.reruns, 're-run')} = "
        f"{counted(est.runs, 'run')}",
        f"  GPU per run: {gpu_count(est.gpus)} × {plain(est.hours)} h × "
        f"{plain(est.price, PRICE_DIGITS)} {est.currency}/GPU-hour",
        f"  amounts in {est.currency}",
    ]
    for part, value in est.per_run.items():
        rows.append(f"  {part:<14} {money(value, symbol):>16} per run  "
                    f"{money(value * est.runs, symbol):>16} total")
    # with no recorded run, the caller's GPUs × hours × price are the whole per-run price
    source = ("every component of a recorded run" if est.basis.get("sample_runs") else
              "the GPU part alone, from --gpus, --hours and --price: no recorded search run "
              f"of {est.model}")
    if est.basis.get("sample_runs") and est.from_flags:
        flags = [f"--{name}" for name in est.from_flags]
        given = ("the GPU part from --gpus, --hours and --price" if len(flags) == 3 else
                 f"{' and '.join(flags)} given")
        source = f"{given}; the rest from the recorded search runs"
    left_out = est.basis.get("left_out_currencies")
    billed_in = ""
    if left_out:  # runs billed in two currencies, priced by the caller
        billed_in = f" billed in {est.currency}"
        source = (
            "the GPU part from --gpus, --hours and --price; the rest from the recorded search "
            f"runs{billed_in}, those billed in {' and '.join(left_out)} left out"
            if est.basis.get("sample_runs") else
            "the GPU part alone, from --gpus, --hours and --price: the recorded search runs "
            f"of {est.model} were billed in {' and '.join(left_out)}, none in {est.currency}")
    rows.append(f"  {'per run':<14} {money(est.per_run_cost, symbol):>16}  ({source})")
    # a total and a budget that differ but read alike (JPY 2,221.2 over JPY 2,221) are shown
    # with the digits that tell them apart: "JPY 2,221 … budget JPY 2,221: OVER" read wrong
    total, budget = money_apart(est.total_cost, est.approval_budget, symbol)
    rows.append(f"  {'total':<14} {total:>16}")
    verdict = "within" if est.approved else "OVER"
    rows.append(f"  approval budget {budget}: {verdict} budget")
    if est.basis.get("sample_runs"):
        sample = int(est.basis["sample_runs"])
        rows.append(f"  basis: median of the {sample:,} most recent recorded search runs"
                    f"{billed_in}" if sample != 1 else
                    f"  basis: the most recent recorded search run{billed_in}")
    return "\n".join(rows)


# ---------------------------------------------------------------- approval (SPEC §12)

APPROVAL_COLUMNS = ("month", "search_id", "model", "configs", "seeds", "reruns", "runs",
                    "per_run_cost", "estimated_cost", "approval_budget", "approved",
                    "expected_improvement", "approved_by", "recorded_at", "currency")


def record_approval(
    cfg: PipelineConfig, est: SearchEstimate, search_id: str, *,
    expected_improvement: float | None = None, approved_by: str | None = None,
    recorded_at: datetime | None = None, lock_timeout_seconds: float = 900.0,
) -> dict:
    """Record `est` as the estimate of search `search_id` in `search_approvals` (the latest
    recording of a search counts; `approved` says whether it is within the approval budget;
    `currency` is the estimate's).
    The write holds the warehouse's writer lock and is one transaction, so it never
    interleaves with a materialization. Recording the same search at the same instant again
    replaces that recording. Returns the row."""
    search_id = (search_id or "").strip()
    if not search_id:
        raise EstimateError("--search-id must name the search (the tracker's search_id)")
    if any(ord(c) in CONTROLS or ord(c) in BIDI_CONTROLS for c in search_id):
        # recorded, a line break in it printed the confirmation as two lines
        raise EstimateError("--search-id holds a control character (a line break, an escape "
                            "…): name the search as the tracker does")
    if approved_by is not None and not approved_by.strip():
        raise EstimateError("--approved-by names who approved: got no name")
    if expected_improvement is not None and math.isinf(expected_improvement):
        # `1e400` is read as infinity: "got inf" named a number nobody wrote
        raise EstimateError("--expected-improvement must be a finite number: the number "
                            "given is too large for one")
    if expected_improvement is not None and not math.isfinite(expected_improvement):
        # checked before the write: a NaN was recorded, then the JSON output failed on it
        raise EstimateError(f"--expected-improvement must be a finite number, got "
                            f"{expected_improvement}")
    at = (recorded_at or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    row = {
        "month": date(at.year, at.month, 1), "search_id": search_id, "model": est.model,
        "configs": est.configs, "seeds": est.seeds, "reruns": est.reruns, "runs": est.runs,
        "per_run_cost": est.per_run_cost, "estimated_cost": est.total_cost,
        "approval_budget": est.approval_budget, "approved": est.approved,
        "expected_improvement": expected_improvement, "approved_by": approved_by,
        "recorded_at": at,
        # the currency the estimate is in: search_costs holds it only against spend billed
        # in the same one (a EUR estimate is no limit on a JPY month)
        "currency": est.currency,
    }
    database = cfg.warehouse_path
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive_writer(database, f"estimate --approve {search_id}",
                              lock_timeout_seconds):
            con = _open_for_write(database)
            try:
                ensure_schema(con)
                con.execute("BEGIN TRANSACTION")
                con.execute("DELETE FROM search_approvals WHERE search_id = ? "
                            "AND recorded_at = ?", [search_id, at])
                con.execute(f"INSERT INTO search_approvals ({', '.join(APPROVAL_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * len(APPROVAL_COLUMNS))})",
                            [row[c] for c in APPROVAL_COLUMNS])
                con.execute("COMMIT")
            finally:
                con.close()
    except WarehouseBusyError as exc:
        raise EstimateError(str(exc)) from None
    except duckdb.Error as exc:
        raise EstimateError(f"warehouse {database}: recording the approval of {search_id} "
                            f"failed: {exc}") from None
    return row


def _open_for_write(database: str, attempts: int = 12) -> duckdb.DuckDBPyConnection:
    """A write connection, retried while a reader (a report, an estimate) holds the file."""
    delay = 0.1
    for attempt in range(attempts):
        try:
            return duckdb.connect(database)
        except duckdb.IOException:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")
