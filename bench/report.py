"""The benchmark's arithmetic and its printout: ratios, the totals and reconciliation
cross-checks, the issue's targets."""

from __future__ import annotations

TOLERANCE = 1e-6  # relative: attributed / untracked / unallocated sums must agree to this
GROUPS = ("attributed", "untracked", "unallocated")
IMPLS = ("scan_floor", "reference", "in_memory", "pandas", "pipeline")
GIB = 2**30


def groups(totals: dict[str, float]) -> dict[str, float]:
    """Per purpose class → attributed (every run class), untracked, unallocated."""
    out = {g: 0.0 for g in GROUPS}
    for cls, cost in totals.items():
        out[cls if cls in ("untracked", "unallocated") else "attributed"] += cost
    return out


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-9) if abs(a - b) > 1e-9 else 0.0


def compare_totals(results: dict, rounds: list[dict] | None = None) -> dict:
    """Every implementation's three sums against the pipeline's (else the reference's), the
    later `--repeat` rounds' too."""
    truth_name = next((n for n in ("pipeline", "reference")
                       if results.get(n, {}).get("totals")), None)
    check: dict = {"tolerance": TOLERANCE, "against": truth_name, "agree": truth_name is not None,
                   "warnings": []}
    if truth_name is None:
        check["warnings"].append("no implementation produced totals")
        return check
    truth = groups(results[truth_name]["totals"])
    check[truth_name] = truth
    others = {n: results[n]["totals"] for n in ("reference", "in_memory", "pandas")
              if n != truth_name and n in results}
    touched = results.get("pipeline", {}).get("rerun_runs_touched", {}).get("totals")
    if touched is not None:  # the same rows delivered again: the same totals
        others["pipeline_after_runs_touched"] = touched
    for number, this in enumerate((rounds or [])[1:], start=2):  # round 1 is `results`
        others |= {f"{n} (round {number})": r.get("totals") for n, r in this.items()}
    for name, totals in others.items():
        if not totals:
            check["agree"] = False
            check["warnings"].append(f"{name}: no totals (failed)")
            continue
        mine = groups(totals)
        diffs = {g: _rel(mine[g], truth[g]) for g in GROUPS}
        check[name] = {**mine, "max_rel_diff": max(diffs.values())}
        for g, diff in diffs.items():
            if diff > TOLERANCE:
                check["agree"] = False
                check["warnings"].append(f"{name}: {g} {mine[g]:,.4f} vs {truth_name} "
                                         f"{truth[g]:,.4f} (relative {diff:.2e})")
    # the re-run after the runs changed against the same month recomputed with --force
    pipeline = results.get("pipeline", {})
    after_change = pipeline.get("rerun_runs_changed", {}).get("totals")
    whole = pipeline.get("rerun_forced", {}).get("totals")
    if after_change is not None and whole is not None:
        mine, truth = groups(after_change), groups(whole)
        diffs = {g: _rel(mine[g], truth[g]) for g in GROUPS}
        check["runs_changed_vs_forced"] = {"max_rel_diff": max(diffs.values())}
        for g, diff in diffs.items():
            if diff > TOLERANCE:
                check["agree"] = False
                check["warnings"].append(f"re-run after the runs changed: {g} {mine[g]:,.4f} "
                                         f"vs --force's {truth[g]:,.4f} (relative {diff:.2e})")
    return check


def _close(a: float, b: float) -> bool:
    """Equal within TOLERANCE of the larger, or both within 1e-9 of each other (an
    over-claimed excess of 0 against 1e-13)."""
    return abs(a - b) <= max(TOLERANCE * max(abs(a), abs(b)), 1e-9)


def compare_reconciliation(results: dict) -> dict:
    """The pipeline's `reconciliation` (the month's figures and each accelerator type's)
    against the reference's, computed from its own claims (bench/reference.py
    `RECONCILIATION_SQL`); and after the runs changed, against the --force re-run's."""
    pipeline = results.get("pipeline", {})
    check: dict = {"tolerance": TOLERANCE, "agree": True, "warnings": [], "compared": 0}
    reference = results.get("reference", {}).get("reconciliation")
    pairs = []
    if reference is not None and pipeline.get("reconciliation") is not None:
        pairs.append(("reference", reference, pipeline["reconciliation"]))
    after = pipeline.get("rerun_runs_changed", {}).get("reconciliation")
    whole = pipeline.get("rerun_forced", {}).get("reconciliation")
    if after is not None and whole is not None:
        pairs.append(("--force re-run", whole, after))
    for name, truth, mine in pairs:
        if "error" in truth:
            check["warnings"].append(f"{name}: no reconciliation ({truth['error']})")
            continue
        check[name] = sorted(truth)
        for kind in sorted(set(truth) | set(mine)):
            theirs, ours = truth.get(kind), mine.get(kind)
            if theirs is None or ours is None:
                check["warnings"].append(f"{name}: {kind} only in "
                                         f"{'the pipeline' if theirs is None else name}")
                continue
            # the reference gives costs; the pipeline's row their shares
            if "gpu_cost" in theirs and "untracked_gpu_cost" in theirs:
                theirs = {**theirs, "untracked_cost_share": (
                    theirs["untracked_gpu_cost"] / theirs["gpu_cost"] if theirs["gpu_cost"]
                    else 0.0)}
            if "untracked_share" in ours and "untracked_share" not in theirs:
                theirs = {**theirs, "untracked_share": (
                    theirs["untracked_gpu_hours"] / theirs["billed_gpu_hours"]
                    if theirs["billed_gpu_hours"] else 0.0)}
            for figure in sorted(set(ours) & set(theirs)):
                check["compared"] += 1
                if not _close(ours[figure], theirs[figure]):
                    check["warnings"].append(f"{kind} {figure}: pipeline {ours[figure]:,.6f} "
                                             f"vs {name} {theirs[figure]:,.6f}")
    # nothing to compare (`--impls` without the pipeline, or a run that failed, which the
    # exit code reports already) is no disagreement
    check["agree"] = not check["warnings"]
    return check


def _ratio(a: dict | None, b: dict | None, key: str) -> float | None:
    if not a or not b or a.get("returncode") or b.get("returncode") or not b.get(key):
        return None
    return round(a[key] / b[key], 2)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def ratios(results: dict, rounds: list[dict] | None = None) -> dict:
    """Each ratio of the pipeline's first run to another row. With `--repeat` rounds, the
    pipeline's time ÷ the reference's and the in-memory run's is the median of the rounds'
    ratios (each round's pipeline ÷ the same round's other), the rounds' own under `rounds`."""
    p = results.get("pipeline")
    out = {}
    for other in ("reference", "in_memory", "scan_floor", "pandas"):
        out[f"pipeline/{other}"] = {"time": _ratio(p, results.get(other), "wall_seconds"),
                                    "rss": _ratio(p, results.get(other), "peak_rss_bytes")}
        per_round = [_ratio(r.get("pipeline"), r.get(other), "wall_seconds")
                     for r in rounds or [] if other in r and "pipeline" in r]
        if per_round and None not in per_round:
            out[f"pipeline/{other}"].update(time=round(_median(per_round), 2),
                                            rounds=per_round,
                                            first_round=out[f"pipeline/{other}"]["time"])
    floor = (p or {}).get("persist_floor")
    reference = results.get("reference")
    if floor and reference and not reference.get("returncode") and p.get("wall_seconds"):
        # the reference's compute plus only writing what the pipeline persists
        out["pipeline/(reference+persist_floor)"] = {"time": round(
            p["wall_seconds"] / (reference["wall_seconds"] + floor["write_seconds"]), 2)}
    out["reference/scan_floor"] = {
        "time": _ratio(results.get("reference"), results.get("scan_floor"), "wall_seconds"),
        "rss": _ratio(results.get("reference"), results.get("scan_floor"), "peak_rss_bytes")}
    if p:
        for rerun in ("rerun_unchanged", "rerun_runs_touched", "rerun_runs_changed",
                      "rerun_forced"):
            out[f"{rerun}/pipeline"] = {"time": _ratio(p.get(rerun), p, "wall_seconds")}
    return out


def scaling(sizes: list[dict]) -> dict:
    """Wall-time ratio of each larger size to each smaller one, per implementation."""
    out = {}
    for i, small in enumerate(sizes):
        for big in sizes[i + 1:]:
            key = f"{big['size']}/{small['size']}"
            out[key] = {"lines": round(big["lines"] / small["lines"], 2)}
            for name in IMPLS:
                out[key][name] = _ratio(big["results"].get(name), small["results"].get(name),
                                        "wall_seconds")
    return out


def targets(report: dict) -> list[tuple[str, str, bool | None]]:
    """The issue's targets that this run's sizes can speak to: (target, measured, met)."""
    by_size = {s["size"].split("-")[0]: s for s in report["sizes"]}
    rows: list[tuple[str, str, bool | None]] = []
    five = by_size.get("5m", {}).get("ratios", {}).get("pipeline/reference", {})
    if five.get("time") is not None:
        rows.append(("5M: pipeline ≤ 1.5 × reference", _ratio_text(five), five["time"] <= 1.5))
    for s in report["sizes"]:
        r = s["ratios"].get("pipeline/pandas", {}).get("time")
        if r is not None:
            rows.append((f"{s['size']}: pipeline faster than pandas", f"{r:.2f}×", r < 1))
    twenty = by_size.get("20m", {}).get("results", {}).get("pipeline")
    if twenty and not twenty.get("returncode"):
        # the highest of every first run's (`--repeat` rounds)
        rss = max([twenty["peak_rss_bytes"],
                   *(r["pipeline"]["peak_rss_bytes"] for r in by_size["20m"].get("rounds", [])
                     if "pipeline" in r)]) / GIB
        rows.append(("20M: pipeline peak RSS < 2 GiB", f"{rss:.2f} GiB", rss < 2))
    two = by_size.get("2m", {}).get("ratios", {}).get("pipeline/reference", {})
    if two.get("time") is not None:
        rows.append(("2M: pipeline ≤ 2.0 × reference", _ratio_text(two), two["time"] <= 2.0))
    # the issue's own reference computes every table in memory: in_memory stands for it
    for size, limit in (("2m", 2.0), ("5m", 1.5), ("20m", 1.5)):
        ratio = by_size.get(size, {}).get("ratios", {}).get("pipeline/in_memory", {})
        if ratio.get("time") is not None:
            rows.append((f"{size.upper()}: pipeline ≤ {limit} × in-memory (every table)",
                         _ratio_text(ratio), ratio["time"] <= limit))
    for s in report["sizes"]:
        ratio = s["ratios"].get("rerun_runs_changed/pipeline", {}).get("time")
        if ratio is not None:
            rows.append((f"{s['size']}: re-run, 1% of runs changed ≤ 0.4 × first",
                         f"{ratio:.2f}×", ratio <= 0.4))
    growth = report.get("scaling", {}).get("20m/5m", {}).get("pipeline")
    if growth is not None:
        rows.append(("pipeline time 20M ÷ 5M < 4.5", f"{growth:.2f}", growth < 4.5))
    for s in report["sizes"]:
        rerun = s["results"].get("pipeline", {}).get("rerun_unchanged")
        if rerun and not rerun.get("returncode"):
            repeats = rerun["repeats"]  # every run of it (run.py `_median_of`)
            ran = max(r["steps"] for r in repeats)
            rows.append((f"{s['size']}: unchanged month not recomputed",
                         f"{ran} steps ran in {len(repeats)} re-run(s)",
                         ran == 0 and not any(r["returncode"] for r in repeats)))
            rows.append((f"{s['size']}: unchanged-month skip < 1.5 s",
                         _median_text(rerun), rerun["wall_seconds"] < 1.5))
        cli_help = s["results"].get("pipeline", {}).get("cli_help")
        if cli_help and not cli_help.get("returncode"):
            rows.append((f"{s['size']}: cost-pipeline --help < 1.5 s",
                         _median_text(cli_help), cli_help["wall_seconds"] < 1.5))
    return rows


def _ratio_text(ratio: dict) -> str:
    """`5.23×`, or with `--repeat` rounds `5.21× (median of 3 rounds: 5.10–5.40)`."""
    rounds = sorted(ratio.get("rounds") or [])
    if len(rounds) < 2:
        return f"{ratio['time']:.2f}×"
    return (f"{ratio['time']:.2f}× (median of {len(rounds)} rounds: "
            f"{rounds[0]:.2f}–{rounds[-1]:.2f})")


def _median_text(run: dict) -> str:
    """A row timed several times (run.py `_median_of`): `0.41 s (median of 3: 0.39–1.78)`."""
    walls = sorted(r["wall_seconds"] for r in run["repeats"])
    return (f"{run['wall_seconds']:.2f} s (median of {len(walls)}: "
            f"{walls[0]:.2f}–{walls[-1]:.2f})")


def print_steps(label: str, width: int, name: str, run: dict) -> None:
    """Every step of a pipeline run in the order it ran, and the time outside the steps
    (Python and Dagster start-up, run bookkeeping)."""
    steps = run.get("steps_in_order") or []
    if not steps:
        return
    outside = run["wall_seconds"] - sum(s for _, s in steps)
    shown = ", ".join(f"{step} {seconds:.1f}" for step, seconds in steps)
    print(f"{label:<{width}}{name} steps (s): {shown}; outside steps {outside:.1f}")


def print_rounds(size: dict, width: int) -> None:
    """`--repeat`: each alternated row's wall times and peaks over the rounds, then the
    pipeline's ratio to each other row, round by round."""
    rounds = size.get("rounds") or []
    if not rounds:
        return
    label = f"{size['size']:<{width}}"
    print(f"{label}{len(rounds)} rounds, alternating {', '.join(rounds[0])}:")
    for name in rounds[0]:
        runs = [r[name] for r in rounds if name in r]
        walls = ", ".join(f"{r['wall_seconds']:.2f}" for r in runs)
        peaks = [r["peak_rss_bytes"] for r in runs]
        print(f"{label}  {name}: {walls} s; peak {_mib(min(peaks))}–{_mib(max(peaks))} MiB")
    for other in ("reference", "in_memory"):
        ratio = size["ratios"].get(f"pipeline/{other}", {})
        if ratio.get("rounds"):
            print(f"{label}  pipeline ÷ {other}: "
                  f"{', '.join(f'{x:.2f}×' for x in ratio['rounds'])} "
                  f"(median {ratio['time']:.2f}×)")


def _mib(value: int | None) -> str:
    return f"{value / 2**20:,.0f}" if value else "-"


def print_report(report: dict) -> None:
    m = report["machine"]
    print(f"\n{m['cpu_model']}, {m['logical_cores']} cores, {m['memory_bytes'] / GIB:.1f} GiB; "
          f"load average at start {m['load_average_at_start']}, at end "
          f"{m.get('load_average_at_end')}; duckdb {m['versions']['duckdb']}, "
          f"pandas {m['versions']['pandas']}, dagster {m['versions']['dagster']}")
    w = max([8, *(len(s["size"]) + 2 for s in report["sizes"])])
    print(f"\n{'size':<{w}}{'what':<30}{'wall s':>9}{'peak MiB':>10}{'load':>7}"
          f"{'pipeline ÷ it':>15}")
    for s in report["sizes"]:
        res = s["results"]
        rows = [(n, res[n]) for n in IMPLS if n in res]
        if "pipeline" in res:
            rows += [(f"pipeline re-run, {k.split('_', 1)[1].replace('_', ' ')}",
                      res["pipeline"][k])
                     for k in ("rerun_unchanged", "rerun_runs_touched", "rerun_runs_changed",
                               "rerun_forced") if k in res["pipeline"]]
        if "focus_export" in res.get("pipeline", {}):
            focus = res["pipeline"]["focus_export"]
            rows.append((f"FOCUS export, {focus.get('rows', 0):,} rows", focus))
        for name, r in rows:
            # this row's own ratio: with `--repeat` rounds, the first round's
            ratio = s["ratios"].get(f"pipeline/{name}", {})
            ratio = ratio.get("first_round", ratio.get("time"))
            failed = "" if not r.get("returncode") else f"  FAILED (rc {r['returncode']})"
            print(f"{s['size']:<{w}}{name:<30}{r['wall_seconds']:>9.2f}"
                  f"{_mib(r['peak_rss_bytes']):>10}{r['load_average'][0]:>7.2f}"
                  f"{(f'{ratio:.2f}×' if ratio else ''):>15}{failed}")
        check = s["totals_check"]
        for warning in check["warnings"]:
            print(f"{s['size']:<{w}}WARNING totals differ: {warning}")
        if check["agree"]:
            print(f"{s['size']:<{w}}totals agree (attributed, untracked, unallocated within "
                  f"{check['tolerance']:g} relative of the {check['against']})"
                  + ("; after the runs changed, equal to a --force re-run's"
                     if "runs_changed_vs_forced" in check else ""))
        recon = s.get("reconciliation_check")
        if recon is not None:
            for warning in recon["warnings"]:
                print(f"{s['size']:<{w}}WARNING reconciliation differs: {warning}")
            if recon["agree"] and recon["compared"]:
                types = [k for k in recon.get("reference", []) if k != "all"]
                print(f"{s['size']:<{w}}reconciliation equals the reference's (billed, tracked "
                      "and untracked GPU-hours, the shares, over-claimed hours; the month and "
                      f"{len(types)} accelerator types: {recon['compared']} figures within "
                      f"{recon['tolerance']:g})" + ("; after the runs changed, the --force "
                                                    "re-run's" if "--force re-run" in recon
                                                    else ""))
        changed = res.get("pipeline", {}).get("runs_changed")
        if changed:
            print(f"{s['size']:<{w}}runs changed: {changed['changed']:,} of {changed['runs']:,} "
                  "runs end an hour earlier in the second delivery")
        runs = res.get("pipeline", {}).get("runs_file")
        if runs and runs["format"] != "parquet":  # --runs-format csv
            print(f"{s['size']:<{w}}runs file: the pipeline read the runs as {runs['format']} "
                  f"({runs['bytes'] / 1e6:,.1f} MB), the other rows as parquet")
        floor = res.get("pipeline", {}).get("persist_floor")
        if floor:
            both = s["ratios"].get("pipeline/(reference+persist_floor)", {}).get("time")
            print(f"{s['size']:<{w}}persist floor: copying billing_facts + attribution_rows "
                  f"({', '.join(f'{n:,}' for n in floor['rows'].values())} rows) takes "
                  f"{floor['write_seconds']:.2f} s; pipeline ÷ (reference + that) = "
                  f"{f'{both:.2f}×' if both else '-'}")
        print_rounds(s, w)
        pipeline = res.get("pipeline", {})
        print_steps(s["size"], w, "pipeline", pipeline)
        print_steps(s["size"], w, "re-run, 1% of runs changed,",
                    pipeline.get("rerun_runs_changed", {}))
        if pipeline.get("cli_help"):
            print(f"{s['size']:<{w}}cost-pipeline --help: {_median_text(pipeline['cli_help'])}")
    for key, row in report.get("scaling", {}).items():
        shown = ", ".join(f"{n} {row[n]:.2f}" for n in IMPLS if row.get(n) is not None)
        print(f"time {key} (lines ×{row['lines']}): {shown}")
    rows = targets(report)
    if rows:
        print("\ntargets (issues 6 and 14):")
        for target, measured, met in rows:
            print(f"  {'met ' if met else 'MISS'}  {target:<42} {measured}")
