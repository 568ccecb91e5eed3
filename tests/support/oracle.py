"""A pure-Python oracle of the attribution semantics (SPEC §6) and of the reconciliation
figures (SPEC §7 `reconciliation`), written from SPEC.md and the shared decisions, not from
the production SQL. Deliberately plain: dicts, lists, `datetime`; no DuckDB, no pandas.

Property tests compare the production `attribution` / `reconciliation` tables against it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

EPS = 1e-12


# --- small helpers --------------------------------------------------------------------------


def next_month(month: date) -> date:
    return date(month.year + (month.month == 12), month.month % 12 + 1, 1)


def _ts(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)


def hours_between(a: datetime, b: datetime) -> float:
    return (b - a) / timedelta(hours=1)


def overlap_hours(s1: datetime, e1: datetime, s2: datetime, e2: datetime) -> float:
    """Hours shared by [s1, e1) and [s2, e2); 0 when they do not meet."""
    return max(0.0, hours_between(max(s1, s2), min(e1, e2)))


def effective_end(run: dict, month_end: datetime) -> datetime | None:
    """RUNNING runs end at the partition's end; other runs without an end claim nothing."""
    if run["status"] == "RUNNING":
        return month_end
    return run["end_time"]


def purpose_class(run: dict) -> str:
    if run.get("purpose") == "search" or run.get("search_id") is not None:
        return "search"
    return {"production": "production", "preprocess": "preprocessing"}.get(
        run.get("purpose"), "other"
    )


def claimants(runs: list[dict], month: date) -> list[tuple[dict, datetime, datetime]]:
    """(run, start, end) of the runs that may claim compute and transfer: not a parent of
    another run, and with an effective end."""
    parents = {r["parent_run_id"] for r in runs if r.get("parent_run_id") is not None}
    month_end = _ts(next_month(month))
    out = []
    for run in runs:
        end = effective_end(run, month_end)
        if run["run_id"] not in parents and end is not None:
            out.append((run, run["start_time"], end))
    return out


def tag_value(line: dict, run_tag: str) -> str | None:
    """The run tag; CUR 2.0 writes user tags as `user_<key>` (FOCUS exports `user:<key>`)."""
    tags = line.get("Tags") or {}
    for key in (run_tag, f"user_{run_tag}", f"user:{run_tag}"):
        if tags.get(key) is not None:
            return tags[key]
    return None


def claim_key(resource_id: str) -> str:
    """How a resource is matched: a SageMaker training job's ARN counts as the job's name
    (lowercased, as SageMaker writes it in ARNs), so runs may list either; an Azure resource
    id (`/subscriptions/…`, case-insensitive) in lower case; other ids as is."""
    if re.fullmatch(r"arn:.*:sagemaker:.*:training-job/.*", resource_id, re.DOTALL):
        return "sagemaker:" + resource_id.split(":training-job/")[1].lower()
    if resource_id.lower().startswith("/subscriptions/"):
        return resource_id.lower()
    return resource_id


def listed_keys(resource_id: str) -> set[str]:
    """The keys a run's listed id claims by: its claim_key, and for a bare name (no `:`, no
    `/`) the training job of that name (a SageMaker job named as created, billed under its
    lowercased ARN)."""
    keys = {claim_key(resource_id)}
    if ":" not in resource_id and "/" not in resource_id:
        keys.add("sagemaker:" + resource_id.lower())
    return keys


def is_claimable(line: dict) -> bool:
    """Usage lines are attributed; everything else (and unused commitment) is unallocated."""
    return line["ChargeCategory"] == "Usage" and line.get("CommitmentDiscountStatus") != "Unused"


def rule_of(line: dict) -> str:
    if not is_claimable(line):
        return "non_usage"
    if line.get("x_ResourceKind") == "bucket":
        if line["x_CostComponent"] == "storage":
            return "bucket_storage"
        if line["x_CostComponent"] == "network":
            return "bucket_transfer"
    return "compute"


def group_key(line: dict) -> tuple:
    """(resource, s, e), the resource as runs name it (`claim_key`: an Azure id in any case is
    one resource); a line without a resource id is a group of its own."""
    if not line.get("ResourceId"):
        return ("<no resource>", line["x_SourceLine"])
    return (claim_key(line["ResourceId"]), line["ChargePeriodStart"], line["ChargePeriodEnd"])


def usage_hours_by_group(lines: list[dict]) -> dict[tuple, float]:
    """Σ x_UsageHours of the Usage lines of each (ResourceId, s, e) that carry hours."""
    total: dict[tuple, float] = {}
    for line in lines:
        if is_claimable(line) and line.get("x_UsageHours") is not None:
            key = group_key(line)
            total[key] = total.get(key, 0.0) + line["x_UsageHours"]
    return total


# --- the three share rules: each returns [(run, share)] before normalization ---------------


def compute_shares(line: dict, d_by_group: dict, cands: list, run_tag: str) -> list:
    """Rule 1: min(1, overlap / d) × min(gpus, G) / G for every run claiming the line."""
    s, e = line["ChargePeriodStart"], line["ChargePeriodEnd"]
    d = d_by_group.get(group_key(line), 0.0)
    if d <= 0:
        d = hours_between(s, e)
    g = line["x_AcceleratorCount"]
    tag = tag_value(line, run_tag)
    shares = []
    for run, start, end in cands:
        listed = bool(line.get("ResourceId")) and claim_key(line["ResourceId"]) in {
            key for rid in run["resource_ids"] or [] for key in listed_keys(rid)}
        tagged = tag is not None and tag == run["run_id"]
        ov = overlap_hours(start, end, s, e)
        if (listed or tagged) and ov > 0:
            gpu_part = min(run["gpus"], g) / g if run["gpus"] is not None and g > 0 else 1.0
            shares.append((run, min(1.0, ov / d) * gpu_part))
    return shares


def snapshot(inventory: list[dict], bucket: str, day: date, month: date) -> list[dict]:
    """The bucket's listing for `day`: that day's snapshot, else the month-end snapshot. An
    entry whose `key` is None is a dated report listing no object: its day's snapshot exists
    and holds nothing. A bucket an undated listing lists too (the bucket as it is now) holds
    besides its dated snapshot the undated objects whose keys no dated source covers (a
    source covers the keys starting with the text common to all the keys it listed in the
    month), each from the day it was last modified on."""
    rows = [o for o in inventory if o["bucket"] == bucket]
    end = next_month(month)
    undated = [o for o in rows if o["snapshot_date"] is None
               and o["last_modified"] is not None and o["last_modified"] < _ts(end)]
    dated = [o for o in rows if o["snapshot_date"] and month <= o["snapshot_date"] < end]
    todays = [o for o in rows if o["snapshot_date"] == day]
    if todays:
        on = day
        listed = [o for o in todays if o["key"] is not None]
    elif dated:
        on = max(o["snapshot_date"] for o in dated)
        listed = [o for o in dated if o["snapshot_date"] == on and o["key"] is not None]
    else:
        return undated
    keys: dict[str | None, list[str]] = {}
    for o in dated:
        if o["key"] is not None:
            keys.setdefault(o.get("source"), []).append(o["key"])
    scopes = [_common_start(min(k), max(k)) for k in keys.values()]
    return listed + [o for o in undated if o["last_modified"] < _ts(on + timedelta(days=1))
                     and not any(o["key"].startswith(scope) for scope in scopes)]


def _common_start(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def storage_shares(line: dict, runs: list[dict], inventory: list, month: date, run_tag: str):
    """Rule 4: a known run's tag takes the whole line; else split by bytes in the bucket."""
    known = {r["run_id"]: r for r in runs}
    tag = tag_value(line, run_tag)
    if tag in known:
        return [(known[tag], 1.0)]
    listing = snapshot(inventory, line["ResourceId"], line["ChargePeriodStart"].date(), month)
    listed = sum(o["size"] for o in listing)
    if listed <= 0:
        return []
    run_bytes: dict[str, int] = {}
    for o in listing:
        if o["prefix"] is not None and o["run_id"] in known:
            run_bytes[o["run_id"]] = run_bytes.get(o["run_id"], 0) + o["size"]
    return [(known[rid], b / listed) for rid, b in sorted(run_bytes.items()) if b > 0]


def same_region(a: str, b: str) -> bool:
    """GCS's `US-EAST1` and Compute's `us-east1` are one region: compared without the blanks
    around them, in lower case."""
    blanks = " \t\n\v\f\r"
    return a.strip(blanks).lower() == b.strip(blanks).lower()


def transfer_shares(line: dict, cands: list, datasets: dict):
    """Rule 5: runs pulling a dataset of this bucket from another region, by overlap."""
    s, e = line["ChargePeriodStart"], line["ChargePeriodEnd"]
    overlaps = []
    for run, start, end in cands:
        ds = datasets.get(run.get("dataset"))
        if ds is None or claim_key(ds["bucket"]) != claim_key(line["ResourceId"]):
            continue
        if (run.get("region") is None or ds.get("region") is None
                or same_region(run["region"], ds["region"])):
            continue
        ov = overlap_hours(start, end, s, e)
        if ov > 0:
            overlaps.append((run, ov))
    total = sum(ov for _, ov in overlaps)
    return [(run, ov / total) for run, ov in overlaps]


def raw_shares(line, d_by_group, cands, runs, inventory, datasets, month, run_tag) -> list:
    rule = rule_of(line)
    if rule == "bucket_storage":
        return storage_shares(line, runs, inventory, month, run_tag)
    if rule == "bucket_transfer":
        return transfer_shares(line, cands, datasets)
    return compute_shares(line, d_by_group, cands, run_tag)


# --- attribution ----------------------------------------------------------------------------


def _row(line: dict, share: float, run_id, pclass: str, rule: str, kind) -> dict[str, Any]:
    uh = line.get("x_UsageHours")
    hours = share * uh if uh is not None else None
    return {
        "x_SourceLine": line["x_SourceLine"],
        "run_id": run_id,
        "purpose_class": pclass,
        "component": line["x_CostComponent"],
        "cost": line["EffectiveCost"] * share,
        "hours": hours,
        "accelerator_hours": hours * line["x_AcceleratorCount"] if hours is not None else None,
        "share": share,
        "rule": rule,
        "kind": kind,
    }


def attribute(
    lines: list[dict],
    runs: list[dict],
    inventory: list[dict],
    datasets: dict[str, dict],
    month: date,
    run_tag: str = "run_id",
) -> list[dict]:
    """The attribution rows of one month: per line, one row per claiming run, plus an
    `untracked` row for the unclaimed remainder, or one `unallocated` row (non-Usage)."""
    cands = claimants(runs, month)
    d_by_group = usage_hours_by_group(lines)
    out = []
    for line in lines:
        rule = rule_of(line)
        if rule == "non_usage":
            unused = line.get("CommitmentDiscountStatus") == "Unused"
            kind = "unused_commitment" if unused else line["ChargeCategory"].lower()
            out.append(_row(line, 1.0, None, "unallocated", rule, kind))
            continue
        shares = raw_shares(line, d_by_group, cands, runs, inventory, datasets, month, run_tag)
        total = sum(share for _, share in shares)
        scale = total if total > 1 + EPS else 1.0
        for run, share in shares:
            out.append(_row(line, share / scale, run["run_id"], purpose_class(run), rule, None))
        if 1 - total > EPS:
            if total > 0 or line.get("x_SplitParent"):  # an instance's unused capacity
                kind = "idle_capacity"
            elif not line.get("ResourceId") or line.get("x_ResourceKind") == "shared":
                kind = "shared"
            else:
                kind = "no_run"
            out.append(_row(line, 1 - total, None, "untracked", rule, kind))
    return out


# --- reconciliation -------------------------------------------------------------------------


def reconcile(
    lines: list[dict],
    attribution_rows: list[dict],
    runs: list[dict],
    month: date,
    threshold: float,
    run_tag: str = "run_id",
) -> dict[str, Any]:
    """The month's reconciliation figures (SPEC §7) from its lines and attribution rows."""
    by_line = {line["x_SourceLine"]: line for line in lines}

    def is_gpu(line: dict) -> bool:
        return line["x_CostComponent"] == "gpu" and line.get("x_UsageHours") is not None

    def gpu_hours(line: dict) -> float:
        return line["x_UsageHours"] * line["x_AcceleratorCount"]

    billed = sum(gpu_hours(line) for line in lines if is_gpu(line))
    tracked = untracked = 0.0
    for row in attribution_rows:
        line = by_line[row["x_SourceLine"]]
        if is_gpu(line) and row["purpose_class"] not in ("untracked", "unallocated"):
            tracked += row["share"] * gpu_hours(line)
        if is_gpu(line) and row["purpose_class"] == "untracked":
            untracked += row["share"] * gpu_hours(line)
    untracked_share = untracked / billed if billed else 0.0

    gpu_cost = sum(
        line["EffectiveCost"]
        for line in lines
        if line["x_CostComponent"] == "gpu" and is_claimable(line)
    )
    untracked_gpu_cost = sum(
        r["cost"]
        for r in attribution_rows
        if r["purpose_class"] == "untracked" and r["component"] == "gpu"
    )

    # over-claim: recompute the raw (unnormalized) compute shares of the gpu lines.
    cands = claimants(runs, month)
    d_by_group = usage_hours_by_group(lines)
    over = 0.0
    for line in lines:
        if is_gpu(line) and rule_of(line) == "compute":
            s = sum(share for _, share in compute_shares(line, d_by_group, cands, run_tag))
            if s > 1 + EPS:
                over += (s - 1) * gpu_hours(line)

    # claims on resources the month's bill never shows, over the hours the bill covers: up
    # to the latest end of its Usage lines of at most a day (at most the month's end; none:
    # nothing covered)
    billed_ids = {claim_key(line["ResourceId"]) for line in lines if line.get("ResourceId")}
    m_start, m_end = _ts(month), _ts(next_month(month))
    usage_ends = [line["ChargePeriodEnd"] for line in lines if line["ChargeCategory"] == "Usage"
                  and line["ChargePeriodEnd"] - line["ChargePeriodStart"] <= timedelta(days=1)]
    horizon = min(max(usage_ends), m_end) if usage_ends else m_start
    unbilled = 0.0
    for run, start, end in cands:
        in_month = overlap_hours(start, end, m_start, horizon)
        if in_month <= 0:
            continue
        keys: dict[str, set[str]] = {}
        for rid in run["resource_ids"] or []:
            keys.setdefault(claim_key(rid), set()).update(listed_keys(rid))
        for claimed in keys.values():
            if not claimed & billed_ids:
                unbilled += in_month * (run["gpus"] if run["gpus"] else 1)

    total = sum(line["EffectiveCost"] for line in lines)

    def cost_of(pred) -> float:
        return sum(r["cost"] for r in attribution_rows if pred(r["purpose_class"]))

    attributed = cost_of(lambda p: p not in ("untracked", "unallocated"))
    # per instance type of the gpu usage lines (a line without one is a type of its own,
    # last): the GPU-hours of those with hours, the cost of all, as the month's figures
    types: dict[str | None, dict[str, float]] = {}
    for line in lines:
        if line["x_CostComponent"] == "gpu" and is_claimable(line):
            acc = types.setdefault(line.get("x_InstanceType"), dict.fromkeys(
                ("billed", "untracked", "cost", "untracked_cost"), 0.0))
            acc["billed"] += gpu_hours(line) if is_gpu(line) else 0.0
            acc["cost"] += line["EffectiveCost"]
    for row in attribution_rows:
        line = by_line[row["x_SourceLine"]]
        if row["purpose_class"] == "untracked" and row["component"] == "gpu":
            acc = types[line.get("x_InstanceType")]
            acc["untracked"] += row["share"] * gpu_hours(line) if is_gpu(line) else 0.0
            acc["untracked_cost"] += row["cost"]
    by_type = [{
        "instance_type": kind,
        "billed_gpu_hours": acc["billed"],
        "untracked_gpu_hours": acc["untracked"],
        "untracked_share": acc["untracked"] / acc["billed"] if acc["billed"] else 0.0,
        "gpu_cost": acc["cost"],
        "untracked_cost_share": acc["untracked_cost"] / acc["cost"] if acc["cost"] else 0.0,
    } for kind, acc in sorted(types.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))]
    return {
        "by_accelerator_type": by_type,
        "billed_gpu_hours": billed,
        "tracked_gpu_hours": tracked,
        "untracked_gpu_hours": untracked,
        "untracked_share": untracked_share,
        "status": "pass" if untracked_share <= threshold else "fail",
        "untracked_cost_share": untracked_gpu_cost / gpu_cost if gpu_cost else 0.0,
        "coverage": attributed / total if total else 0.0,
        "over_claimed_gpu_hours": over,
        "unbilled_claim_gpu_hours": unbilled,
        "total_effective_cost": total,
        "attributed_cost": attributed,
        "untracked_cost": cost_of(lambda p: p == "untracked"),
        "unallocated_cost": cost_of(lambda p: p == "unallocated"),
    }
