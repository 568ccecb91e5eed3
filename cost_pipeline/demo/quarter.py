"""The demo quarter 2026-07 … 2026-09, written in the real source formats.

The story (model `churn`, training in us-east-1, dataset `churn-events` in us-west-2): one
production run of 48 h × 4 GPUs, and 140 search runs of 12 h × 4 GPUs (grids of configs ×
3 seeds, re-run every time the features changed: September's first search runs August's
12 configs again). Searches are approved before they run with an estimate (`APPROVALS`):
August's was approved for 2 seeds and ran 3; September's re-run was never approved. Two
4-GPU runs share each p4d.24xlarge (8 × A100); the production run shares its instance with
an eval run. Every training run is
preceded by 20 CPU-hours of preprocessing from raw, pulls its dataset across regions and
writes hourly checkpoints that are never deleted (production keeps its last 3). In August a
g5.12xlarge notebook nobody tracks burns 1,000 GPU-hours: the month fails reconciliation.

Retrains and preemption (SPEC §12): churn's production run was launched on drift; a second
model, `fraud` (gradient boosting on a CPU instance, so the GPU-hours stay as they were),
retrains monthly on a schedule while its metric stays flat. One p4d pair of September's second
search runs on spot capacity and is reclaimed after 3 hours: one run restarts from scratch on
the replacement instance, the other resumes from its checkpoint (the pair's 12 instance-hours
are split 3 + 9, so the GPU-hours stay as they were; the restarts pull no data and need no
preprocessing, and they are logged outside the sweep: not trials of the search).

`generate_demo(out_dir)` writes, deterministically and without network:
  exports/cur/ml-cur/…   AWS Data Exports CUR 2.0 parquet + manifests (see `demo_cur`)
  runs.csv               the tracker (a `runs_file`, SPEC §4 columns)
  inventory.csv          the checkpoint bucket at the quarter's end (`bucket,key,size,…`)
  config.yaml            the pipeline config (SPEC §9) naming all of the above
"""

from __future__ import annotations

import csv
import io
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# ---------------------------------------------------------------- the story's parameters

MONTHS = ("2026-07", "2026-08", "2026-09")
QUARTER_START, QUARTER_END = _t("2026-07-01T00:00"), _t("2026-10-01T00:00")
MODEL = EXPERIMENT = "churn"
REGION, AZ = "us-east-1", "us-east-1a"
DATASET, DATASET_BUCKET, DATASET_REGION = "churn-events", "ml-datasets", "us-west-2"
CKPT_BUCKET, CKPT_PREFIX = "ml-checkpoints", "checkpoints/"
INPUT_HASH = "sha256:5be1c0a97f3d2e4b8c6a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c"
TRANSFORM_VERSION = "features-v7"
METRIC = "val_auc"
MAX_UNTRACKED_SHARE = 0.05


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int            # accelerators per instance (0 = CPU)
    vcpu: int
    memory: str
    rate: float          # USD per hour, us-east-1 (on demand, or the spot price)
    usage_type: str
    sku: str
    on_demand_rate: float | None = None   # the public on-demand rate when `rate` is spot


P4D = InstanceType("p4d.24xlarge", 8, 96, "1152 GiB", 32.7726, "BoxUsage:p4d.24xlarge",
                   "QG3FPJ6JNB7Q7H3K")
M5 = InstanceType("m5.4xlarge", 0, 16, "64 GiB", 0.768, "USE1-BoxUsage:m5.4xlarge",
                  "Q2Z4PG8RV6KNHVQX")
G5 = InstanceType("g5.12xlarge", 4, 48, "192 GiB", 5.672, "BoxUsage:g5.12xlarge",
                  "B5M5ZQ8TG9JH7P4E")
P4D_SPOT = InstanceType("p4d.24xlarge", 8, 96, "1152 GiB", 12.9300, "SpotUsage:p4d.24xlarge",
                        "QG3FPJ6JNB7Q7H3K", on_demand_rate=P4D.rate)
C6I = InstanceType("c6i.32xlarge", 0, 128, "256 GiB", 5.44, "USE1-BoxUsage:c6i.32xlarge",
                   "JNC2FYN3A6TUY5AS")

RUN_GPUS = 4                                   # every training run uses 4 GPUs
RUNS_PER_INSTANCE = P4D.gpus // RUN_GPUS       # 2 runs share each p4d.24xlarge
SEARCH_HOURS, PRODUCTION_HOURS, PREPROCESS_HOURS = 12, 48, 20
WAVE = 6                                       # p4d instances a search runs at once


@dataclass(frozen=True)
class Search:
    search_id: str
    prefix: str                  # run ids: <prefix>-cNN-sS, sweep parent <prefix>-sweep
    start: str
    seeds: tuple[int, ...]       # seeds per config, in config order
    auc: float                   # roughly the best val_auc this search reaches
    statuses: dict[str, str] = field(default_factory=dict)   # run suffix -> status
    configs_of: str | None = None  # the prefix whose config ids it runs again (a re-run)


SEARCHES = (
    Search("s-2026-07", "s2607", "2026-07-06T00:00", (3,) * 12, 0.842, {"c05-s2": "FAILED"}),
    Search("s-2026-08", "s2608", "2026-08-17T00:00", (3,) * 12, 0.851, {"c09-s1": "KILLED"}),
    # after a feature change, August's grid again: the same 12 config ids, the same 3 seeds
    Search("s-2026-09a", "s2609a", "2026-09-02T00:00", (3,) * 12, 0.856, configs_of="s2608"),
    Search("s-2026-09b", "s2609b", "2026-09-10T00:00", (3,) * 10 + (2,), 0.858,
           {"c03-s0": "FAILED"}),
)
DELETED_RUNS = frozenset({"s2607-c11-s1"})     # deleted in the tracker: compute still billed
# approvals recorded before a search (`estimate --approve`, priced from the quarter's rates):
# (search_id, configs, seeds, recorded at, approved by, expected improvement). August was
# approved for 2 seeds per config and ran 3 (it overruns its estimate); s-2026-09a, the re-run
# of August's grid, was launched without an approval.
APPROVALS = (
    ("s-2026-07", 12, 3, "2026-07-03T15:00", "ml-lead", None),
    ("s-2026-08", 12, 2, "2026-08-14T15:00", "ml-lead", 0.01),
    ("s-2026-09b", 11, 3, "2026-09-08T15:00", "ml-lead", 0.003),
)
PRODUCTION_RUN, PRODUCTION_START, PRODUCTION_AUC = "prod-2609", "2026-09-21T00:00", 0.861
PRODUCTION_TRIGGER = "drift"     # churn was retrained because its inputs drifted
# fraud: retrained on the 1st week of every month on a schedule, on one c6i.32xlarge for
# FRAUD_HOURS; its val_auc barely moves (August and September are flat retrains)
FRAUD, FRAUD_HOURS = "fraud", 10
FRAUD_RETRAINS = (("fraud-2607", "2026-07-07T02:00", 0.9121),
                  ("fraud-2608", "2026-08-04T02:00", 0.9124),
                  ("fraud-2609", "2026-09-01T02:00", 0.9119))
# the spot pair of s-2026-09b: reclaimed after SPOT_HOURS; c03-s0 restarts from scratch on the
# replacement instance, c03-s1 resumes from its last checkpoint
SPOT_SEARCH, SPOT_PAIR, SPOT_HOURS = "s-2026-09b", ("c03-s0", "c03-s1"), 3
SPOT_RESUMES = "c03-s1"
EVAL_RUN = "eval-2609"       # evaluates production on the instance's other 4 GPUs
NOTEBOOKS = (("2026-07-20T09:00", 8), ("2026-08-03T00:00", 250), ("2026-09-15T10:00", 12))

SP_ARN = "arn:aws:savingsplans::999988887777:savingsplan/3f6b1c2e-7d4a-4e8b-9c0d-1a2b3c4d5e6f"
SP_SEARCH = "s-2026-09a"     # its first wave of p4d instance-hours runs on the Savings Plan
SP_RATE = 23.5963            # USD per p4d.24xlarge hour under the plan
SP_UNUSED = 125.40           # the month's commitment the covered hours did not use
SP_SPLIT = 0.6               # one covered hour is split 0.6 plan / 0.4 on demand

PULL_GB, TRANSFER_RATE = 500.0, 0.02     # each training run pulls the dataset once
S3_RATE = 0.023                          # USD per GB-month, S3 Standard
EBS_GB, EBS_RATE = 500, 0.08             # a gp3 volume per training run, USD per GB-month
NAT_ID, NAT_RATE = "nat-0f1e2d3c4b5a69788", 0.045
TAX_RATE, CREDIT = 0.0625, 500.0
GIB = 1 << 30
MODEL_BYTES, OPTIMIZER_BYTES = 3 * GIB // 2, 3 * GIB
KEEP_LAST = 3                            # production deletes all but its newest 3 checkpoints
# objects in the checkpoint bucket that no tracked run owns: (key, GiB, last_modified)
OTHER_OBJECTS = (
    *((f"checkpoints/s2605-c{c:02d}-s0/step-{k:06d}/{f}", g, f"2026-05-1{c}T0{k // 1000}:58")
      for c in (2, 7) for k in (1000, 2000, 3000)
      for f, g in (("model.safetensors", 1.5), ("optimizer.pt", 3.0))),
    ("checkpoints/nb-finetune-0611/model.pt", 2.5, "2026-06-11T16:40"),
    *((f"datasets/churn-events/cache/part-{i:05d}.parquet", 2.0, "2026-06-12T03:10")
      for i in range(4)),
    ("exports/notebook-scratch.parquet", 0.3, "2026-06-30T22:05"),
)


# ---------------------------------------------------------------- the plan


@dataclass
class Run:
    run_id: str
    purpose: str
    start: datetime
    end: datetime
    status: str = "FINISHED"
    search_id: str | None = None
    seed: int | None = None
    config_id: str | None = None
    resource_ids: tuple[str, ...] = ()
    gpus: int | None = None
    dataset: str | None = None
    metric: float | None = None
    keep: bool = False
    deleted: bool = False
    parent: str | None = None
    input_hash: str | None = None
    transform_version: str | None = None
    model: str = MODEL
    trigger: str | None = None
    restart_of: str | None = None
    resumed_from: str | None = None


@dataclass
class Resource:
    """An instance or EBS volume billed one line per hour from `start` for `hours`."""

    rid: str
    itype: InstanceType | None      # None: a gp3 volume
    start: datetime
    hours: int
    tags: dict[str, str] = field(default_factory=dict)
    covered: dict[int, float] = field(default_factory=dict)   # hour -> Savings Plan share


@dataclass
class Obj:
    key: str
    size: int
    created: datetime
    deleted: datetime | None = None


@dataclass
class Plan:
    runs: list[Run] = field(default_factory=list)
    resources: list[Resource] = field(default_factory=list)
    objects: list[Obj] = field(default_factory=list)
    pulls: list[datetime] = field(default_factory=list)   # a training run's start each
    interrupted: list[Run] = field(default_factory=list)  # spot runs reclaimed mid-run


class _Ids:
    def __init__(self) -> None:
        self.n = {"i": 0, "vol": 0}

    def __call__(self, kind: str) -> str:
        self.n[kind] += 1
        stem = {"i": "0a1b2c3d4e5f6", "vol": "0f9e8d7c6b5a4"}[kind]
        return f"{kind}-{stem}{self.n[kind]:04x}"


def _train(plan: Plan, ids: _Ids, run: Run, instance: str, keep_last: int | None) -> None:
    """A training run on `instance`: its own volume, the preprocessing right before it,
    its dataset pull and its hourly checkpoints."""
    hours = int((run.end - run.start) / HOUR)
    vol = ids("vol")
    plan.resources.append(Resource(vol, None, run.start, hours, {"user_team": "ml-platform"}))
    run.resource_ids, run.gpus = (instance, vol), RUN_GPUS
    run.dataset = DATASET
    plan.pulls.append(run.start)
    prep = ids("i")
    plan.resources.append(Resource(prep, M5, run.start - PREPROCESS_HOURS * HOUR,
                                   PREPROCESS_HOURS, {"user_team": "ml-platform"}))
    plan.runs.append(Run(f"pp-{run.run_id}", "preprocess", run.start - PREPROCESS_HOURS * HOUR,
                         run.start, resource_ids=(prep,), input_hash=INPUT_HASH,
                         transform_version=TRANSFORM_VERSION))
    plan.runs.append(run)
    saved = [run.start + (h + 1) * HOUR - timedelta(minutes=2) for h in range(hours)]
    for h, at in enumerate(saved):
        gone = saved[h + keep_last] if keep_last and h + keep_last < hours else None
        for name, size in (("model.safetensors", MODEL_BYTES), ("optimizer.pt", OPTIMIZER_BYTES)):
            key = f"{CKPT_PREFIX}{run.run_id}/step-{(h + 1) * 1000:06d}/{name}"
            plan.objects.append(Obj(key, size, at, gone))


def _search(plan: Plan, ids: _Ids, s: Search, rng: random.Random) -> None:
    start = _t(s.start)
    effects = [rng.uniform(-0.008, 0.0) for _ in s.seeds]
    best = max(range(len(s.seeds)), key=lambda c: effects[c])
    effects[best] = 0.0                       # the best config reaches the search's auc
    members = [(c + 1, seed) for c, n in enumerate(s.seeds) for seed in range(n)]
    pairs = [members[i:i + RUNS_PER_INSTANCE] for i in range(0, len(members), RUNS_PER_INSTANCE)]
    end = start + math.ceil(len(pairs) / WAVE) * SEARCH_HOURS * HOUR
    parent = f"{s.prefix}-sweep"
    plan.runs.append(Run(parent, "search", start, end, search_id=s.search_id))
    for p, pair in enumerate(pairs):
        t0 = start + (p // WAVE) * SEARCH_HOURS * HOUR
        instance = ids("i")
        spot = s.search_id == SPOT_SEARCH and tuple(
            f"c{c:02d}-s{seed}" for c, seed in pair) == SPOT_PAIR
        plan.resources.append(Resource(instance, P4D_SPOT if spot else P4D, t0,
                                       SPOT_HOURS if spot else SEARCH_HOURS,
                                       {"user_team": "ml-platform", "user_search_id": s.search_id}))
        for c, seed in pair:
            suffix = f"c{c:02d}-s{seed}"
            status = s.statuses.get(suffix, "FINISHED")
            metric = s.auc + effects[c - 1] + rng.uniform(-0.001, 0.001) if status == "FINISHED" \
                else None
            config_id = f"{s.configs_of or s.prefix}-c{c:02d}"
            run = Run(f"{s.prefix}-{suffix}", "search", t0, t0 + SEARCH_HOURS * HOUR, status,
                      s.search_id, seed, config_id, parent=parent,
                      metric=None if metric is None else round(min(metric, s.auc), 4),
                      deleted=f"{s.prefix}-{suffix}" in DELETED_RUNS)
            _train(plan, ids, run, instance, keep_last=None)
            if spot:
                plan.interrupted.append(run)


def _interrupt(plan: Plan, ids: _Ids) -> None:
    """The spot pair reclaimed after SPOT_HOURS: each run ends KILLED there (its checkpoints
    after that never written) and a restart finishes its 12 hours' slot on a replacement spot
    instance, with the run's volume; one from scratch, one from the checkpoint."""
    if not plan.interrupted:
        return
    first = plan.interrupted[0]
    cut = first.start + SPOT_HOURS * HOUR
    rest = int((first.end - cut) / HOUR)
    replacement = ids("i")
    plan.resources.append(Resource(replacement, P4D_SPOT, cut, rest,
                                   {"user_team": "ml-platform", "user_search_id": SPOT_SEARCH}))
    for run in plan.interrupted:
        resumes = run.run_id.endswith(SPOT_RESUMES)
        step = f"step-{SPOT_HOURS * 1000:06d}"
        restart = Run(f"{run.run_id}-r1", "search", cut, run.end,
                      "FINISHED" if resumes else "FAILED", seed=run.seed,
                      config_id=run.config_id, resource_ids=(replacement, run.resource_ids[1]),
                      gpus=run.gpus, metric=run.metric if resumes else None,
                      restart_of=run.run_id,
                      resumed_from=f"s3://{CKPT_BUCKET}/{CKPT_PREFIX}{run.run_id}/{step}/"
                      if resumes else None)
        run.end, run.status, run.metric = cut, "KILLED", None
        mine = f"{CKPT_PREFIX}{run.run_id}/"
        kept = [o for o in plan.objects if not o.key.startswith(mine)
                or o.created < cut]
        plan.objects[:] = kept
        first_step = SPOT_HOURS if resumes else 0
        for h in range(rest):
            at = cut + (h + 1) * HOUR - timedelta(minutes=2)
            for name, size in (("model.safetensors", MODEL_BYTES),
                               ("optimizer.pt", OPTIMIZER_BYTES)):
                key = f"{CKPT_PREFIX}{restart.run_id}/step-{(first_step + h + 1) * 1000:06d}/{name}"
                plan.objects.append(Obj(key, size, at))
        plan.runs.append(restart)


def _fraud_retrains(plan: Plan, ids: _Ids) -> None:
    """The second model's scheduled monthly retrains on a CPU instance."""
    for run_id, at, auc in FRAUD_RETRAINS:
        instance = ids("i")
        plan.resources.append(Resource(instance, C6I, _t(at), FRAUD_HOURS,
                                       {"user_team": "risk-ml", "user_run_id": run_id}))
        plan.runs.append(Run(run_id, "production", _t(at), _t(at) + FRAUD_HOURS * HOUR,
                             resource_ids=(instance,), metric=auc, model=FRAUD,
                             trigger="schedule"))


def build_plan() -> Plan:
    """Every run, billed resource, checkpoint object and dataset pull of the quarter."""
    plan, ids, rng = Plan(), _Ids(), random.Random(20260701)
    for s in SEARCHES:
        _search(plan, ids, s, rng)
    start = _t(PRODUCTION_START)
    end = start + PRODUCTION_HOURS * HOUR
    instance = ids("i")
    plan.resources.append(Resource(instance, P4D, start, PRODUCTION_HOURS,
                                   {"user_team": "ml-platform", "user_run_id": PRODUCTION_RUN}))
    prod = Run(PRODUCTION_RUN, "production", start, end, metric=PRODUCTION_AUC, keep=True,
               trigger=PRODUCTION_TRIGGER)
    _train(plan, ids, prod, instance, keep_last=KEEP_LAST)
    plan.runs.append(Run(EVAL_RUN, "eval", start, end, resource_ids=(instance,), gpus=RUN_GPUS))
    for at, hours in NOTEBOOKS:                 # nobody tracks them, nobody tagged them
        plan.resources.append(Resource(ids("i"), G5, _t(at), hours))
    # after every other instance: the ids above stay what they were before these existed
    _interrupt(plan, ids)
    _fraud_retrains(plan, ids)
    sp_wave = [r for r in plan.resources if r.itype is P4D and
               r.tags.get("user_search_id") == SP_SEARCH][:WAVE]
    for r in sp_wave:
        r.covered = {h: 1.0 for h in range(r.hours)}
    sp_wave[0].covered[0] = SP_SPLIT
    for key, gib, at in OTHER_OBJECTS:
        plan.objects.append(Obj(key, int(gib * GIB), _t(at)))
    plan.runs.sort(key=lambda r: (r.start, r.run_id))
    return plan


# ---------------------------------------------------------------- the story's headline


def _story() -> dict:
    billed = dict.fromkeys(MONTHS, 0.0)
    notebook = dict.fromkeys(MONTHS, 0.0)
    untracked = dict.fromkeys(MONTHS, 0.0)
    for s in SEARCHES:
        instances = math.ceil(sum(s.seeds) / RUNS_PER_INSTANCE)
        billed[s.start[:7]] += instances * SEARCH_HOURS * P4D.gpus
        idle = instances * P4D.gpus - sum(s.seeds) * RUN_GPUS     # half-used instances
        untracked[s.start[:7]] += idle * SEARCH_HOURS
    billed[PRODUCTION_START[:7]] += PRODUCTION_HOURS * P4D.gpus
    for at, hours in NOTEBOOKS:
        notebook[at[:7]] += float(hours * G5.gpus)
        billed[at[:7]] += hours * G5.gpus
        untracked[at[:7]] += hours * G5.gpus
    share = {m: round(untracked[m] / billed[m], 6) for m in MONTHS}
    failing = [m for m in MONTHS if share[m] > MAX_UNTRACKED_SHARE]
    search_runs = sum(sum(s.seeds) for s in SEARCHES)
    return {
        "months": list(MONTHS),
        "search_runs": search_runs,
        "searches": {s.search_id: sum(s.seeds) for s in SEARCHES},
        "search_gpu_hours": float(search_runs * SEARCH_HOURS * RUN_GPUS),
        "production_gpu_hours": float(PRODUCTION_HOURS * RUN_GPUS),
        "eval_gpu_hours": float(PRODUCTION_HOURS * RUN_GPUS),
        "preprocess_runs": search_runs + 1,
        "preprocess_cpu_hours": float((search_runs + 1) * PREPROCESS_HOURS),
        "dataset_pull_gb": (search_runs + 1) * PULL_GB,
        "billed_gpu_hours": billed,
        "notebook_gpu_hours": notebook,
        "untracked_gpu_hours": untracked,
        "untracked_gpu_share": share,
        "failing_month": failing[0] if len(failing) == 1 else failing,
        "interrupted_runs": [f"{s.prefix}-{suffix}" for s in SEARCHES
                             if s.search_id == SPOT_SEARCH for suffix in SPOT_PAIR],
        "fraud_retrains": len(FRAUD_RETRAINS),
        "fraud_cpu_hours": float(len(FRAUD_RETRAINS) * FRAUD_HOURS),
    }


STORY = _story()


# ---------------------------------------------------------------- writers

RUN_COLUMNS = ("run_id", "experiment", "model", "purpose", "search_id", "seed", "config_id",
               "status", "start_time", "end_time", "resource_ids", "gpus", "region", "dataset",
               "dataset_region", "input_hash", "transform_version", "metric_name",
               "metric_value", "keep", "deleted", "parent_run_id", "trigger", "restart_of",
               "resumed_from")


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _blank(value) -> str:
    return "" if value is None else str(value)


def runs_csv(plan: Plan) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(RUN_COLUMNS)
    for r in plan.runs:
        w.writerow([r.run_id, r.model, r.model, r.purpose, _blank(r.search_id), _blank(r.seed),
                    _blank(r.config_id), r.status, iso(r.start), iso(r.end),
                    ",".join(r.resource_ids), _blank(r.gpus), REGION, _blank(r.dataset),
                    DATASET_REGION if r.dataset else "", _blank(r.input_hash),
                    _blank(r.transform_version), METRIC if r.metric is not None else "",
                    _blank(r.metric), str(r.keep).lower(), str(r.deleted).lower(),
                    _blank(r.parent), _blank(r.trigger), _blank(r.restart_of),
                    _blank(r.resumed_from)])
    return out.getvalue()


def inventory_csv(plan: Plan) -> str:
    """The checkpoint bucket as listed at the quarter's end."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("bucket", "key", "size", "last_modified"))
    live = [o for o in plan.objects if o.deleted is None or o.deleted > QUARTER_END]
    for o in sorted(live, key=lambda o: o.key):
        w.writerow((CKPT_BUCKET, o.key, o.size, o.created.strftime("%Y-%m-%dT%H:%M:%S.000Z")))
    return out.getvalue()


def config() -> dict:
    return {
        "warehouse": {"path": "warehouse.duckdb"},
        "billing": [{"kind": "aws_cur2", "path": "exports/cur/ml-cur"}],
        "run_tag": "run_id",
        "datasets": {DATASET: {"bucket": DATASET_BUCKET, "region": DATASET_REGION}},
        "tracker": [{"kind": "runs_file", "path": "runs.csv"}],
        "checkpoints": [{"kind": "inventory", "path": "inventory.csv", "prefix": CKPT_PREFIX}],
        "policy": {
            "reconciliation": {"max_untracked_share": MAX_UNTRACKED_SHARE},
            "retention": {"keep_last_live": 3, "keep_last_production": 3, "grace_days": 7,
                          "max_monthly_violation_cost": 100.0},
            "search": {"approval_budget": 10000.0, "metric_goal": "max"},
        },
        "alerts": {"webhook_url_env": "COST_ALERT_WEBHOOK_URL"},
    }
