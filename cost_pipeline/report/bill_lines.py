"""The bill as lines: a quarter's (or a month's) cost read back from the warehouse as the
decisions it is made of — production vs search, preprocessing, checkpoints, egress,
untracked — plus which month failed reconciliation and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb

LINES_SQL = """
WITH a AS (
    SELECT a.*, l.x_ResourceKind AS resource_kind
    FROM attribution a JOIN billing_facts l USING (month, x_SourceLine)
    WHERE a.month BETWEEN ? AND ?
)
SELECT
    CASE
        WHEN purpose_class = 'unallocated'
            THEN 'unallocated (tax, credits, fees, unused commitment)'
        WHEN purpose_class = 'untracked' THEN 'untracked'
        WHEN component = 'storage' AND resource_kind = 'bucket' THEN 'checkpoint & artifact storage'
        WHEN component = 'network' AND resource_kind = 'bucket' THEN 'cross-region dataset pulls'
        WHEN purpose_class = 'production' THEN 'production training'
        WHEN purpose_class = 'search' THEN 'hyperparameter search'
        WHEN purpose_class = 'preprocessing' THEN 'preprocessing'
        ELSE 'other runs (eval, adhoc)'
    END AS line,
    coalesce(sum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours,
    coalesce(sum(hours) FILTER (WHERE component = 'cpu'), 0) AS cpu_hours,
    count(DISTINCT run_id) AS runs,
    sum(cost) AS cost
FROM a GROUP BY 1 ORDER BY cost DESC
"""


@dataclass
class BillLine:
    line: str
    gpu_hours: float
    cpu_hours: float
    runs: int
    cost: float


def bill_lines(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[BillLine]:
    return [BillLine(*row) for row in con.execute(LINES_SQL, [first, last]).fetchall()]


def reconciliation_notes(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[str]:
    notes = []
    rows = con.execute(
        "SELECT month, status, untracked_share, threshold, billed_gpu_hours, untracked_gpu_hours "
        "FROM reconciliation WHERE month BETWEEN ? AND ? ORDER BY month", [first, last]).fetchall()
    for month, status, share, threshold, billed, untracked in rows:
        text = (f"{month:%Y-%m}: {status.upper()} — {share:.1%} of {billed:,.0f} billed GPU-hours "
                f"untracked (threshold {threshold:.0%})")
        if status == "fail":
            top = con.execute(
                """SELECT l.ResourceId, any_value(l.x_InstanceType), sum(a.accelerator_hours),
                          sum(a.cost)
                   FROM attribution a JOIN billing_facts l USING (month, x_SourceLine)
                   WHERE a.month = ? AND a.purpose_class = 'untracked' AND a.component = 'gpu'
                   GROUP BY 1 ORDER BY 3 DESC LIMIT 1""", [month]).fetchone()
            if top:
                text += (f"; largest untracked: {top[0]} ({top[1]}) {top[2]:,.0f} GPU-hours, "
                         f"${top[3]:,.2f}, claimed by no run")
            text += f"; {untracked:,.0f} GPU-hours in all"
        notes.append(text)
    return notes


def render(lines: list[BillLine], notes: list[str], title: str, currency: str = "USD") -> str:
    total = sum(line.cost for line in lines)
    width = max([len(line.line) for line in lines] + [5])
    out = [title, f"{'line':<{width}}  {'GPU-hours':>10}  {'CPU-hours':>10}  {'runs':>5}  "
           f"{'cost (' + currency + ')':>14}  share"]
    for line in lines:
        share = line.cost / total if total else 0
        out.append(f"{line.line:<{width}}  {line.gpu_hours:>10,.1f}  {line.cpu_hours:>10,.1f}  "
                   f"{line.runs:>5}  {line.cost:>14,.2f}  {share:>5.1%}")
    out.append(f"{'total EffectiveCost':<{width}}  {'':>10}  {'':>10}  {'':>5}  {total:>14,.2f}")
    out.append("")
    out.append("Reconciliation (tracker vs bill):")
    out.extend(f"  {note}" for note in notes)
    return "\n".join(out)
