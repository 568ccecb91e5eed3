"""`make bench`: for each size, a generated month (cached in bench-data/) measured five ways
side by side — the scan floor, the one-statement DuckDB reference, every table by the
pipeline's own SQL in memory, a hand-written pandas attribution, and the pipeline end to end
(`cost-pipeline materialize`, fresh Dagster home and warehouse) — then the pipeline re-run on
unchanged inputs, after the same runs file is delivered again, after 1% of the runs changed,
and with --force (whose totals the previous re-run's must equal). Each is a child process:
wall time and peak RSS. Prints a table and the ratios, checks that every implementation's
totals agree and that the pipeline's `reconciliation` is the reference's, writes
bench-results.json. `--repeat N` times the reference, the in-memory run and the pipeline's
first run N times each, alternately, and reads the median of the rounds' ratios.

    python bench/run.py --sizes "1m 5m 20m" [--runs 100000] [--objects 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import duckdb
import yaml
from generate import MONTH_OPTIONS, add_month_options, refusal
from measure import machine_facts, run_measured
from report import compare_reconciliation, compare_totals, print_report, ratios, scaling

from cost_pipeline.config import load_config

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MONTH = "2026-07"
STEP_LINE = re.compile(r"^✓ (\S+) \(([\d.]+) s\)$", re.MULTILINE)
SIMPLE = {"scan_floor": "scan_floor.py", "reference": "reference.py",
          "in_memory": "in_memory.py", "pandas": "pandas_impl.py"}


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected e.g. 20k, 1m, 5m")
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


# the generated month's variants: (option of run.py and generate.py, its default, the suffix
# of the month's data folder when it is not the default)
VARIANTS = tuple((name, default, suffix) for name, default, _, _, suffix in MONTH_OPTIONS)


def month_variant(args) -> dict:
    """The generator's options that differ from their defaults, e.g. {"layout": "packed"}."""
    return {name: getattr(args, name) for name, default, _ in VARIANTS
            if getattr(args, name) != default}


def variant_suffix(variant: dict) -> str:
    """The month's data folder's suffix for `variant`: `-wide-zoned-tagged-packed`."""
    return "".join(suffix.format(variant[name]) for name, _, suffix in VARIANTS
                   if name in variant)


def _generator_options(variant: dict) -> list[str]:
    """generate.py's command-line options for `variant`: `--run-tags`, `--layout packed`."""
    options: list[str] = []
    for name, value in variant.items():
        flag = f"--{name.replace('_', '-')}"
        options += [flag] if value is True else [flag, str(value)]
    return options


def ensure_month(root: Path, label: str, lines: int, runs: int, objects: int,
                 logs: Path, variant: dict) -> tuple[Path, dict]:
    """The generated month of this size and `variant` (`month_variant`), reused when the same
    generator made it."""
    generator = hashlib.sha256((BENCH / "generate.py").read_bytes()).hexdigest()[:16]
    wanted = {"lines": lines, "runs": runs, "objects": objects, "generator": generator,
              **variant}
    data = root / label
    stamp = data / "generated.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("params") == wanted:
        return data, {**json.loads(stamp.read_text()), "cached": True}
    shutil.rmtree(data, ignore_errors=True)
    measured = run_measured(
        [sys.executable, str(BENCH / "generate.py"), str(data), "--lines", str(lines),
         "--runs", str(runs), "--objects", str(objects), *_generator_options(variant)],
        log_dir=logs, name=f"{label}-generate")
    if measured.returncode != 0:
        raise SystemExit(f"generating {label} failed:\n{measured.stderr[-2000:]}")
    files = sorted(data.glob("cur/**/*.parquet"))
    info = {"params": wanted, "cur_files": len(files),
            "cur_bytes": sum(f.stat().st_size for f in files),
            "generate": measured.as_json(), "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                          time.gmtime())}
    stamp.write_text(json.dumps(info, indent=2))
    return data, {**info, "cached": False}


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "cost-pipeline"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cost_pipeline.cli"]


def pipeline_workspace(data: Path, work: Path, runs_format: str = "parquet"
                       ) -> tuple[Path, dict]:
    """A fresh Dagster home, warehouse and config (absolute paths) for one pipeline series;
    the runs file is a copy so that changing it leaves the cached month alone. With
    `runs_format` csv or jsonl the pipeline reads the same runs from a CSV or JSONL written from it
    (`deliver_runs`); the parquet copy stays the one `change_runs` edits."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "dagster_home").mkdir(parents=True)
    (work / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    config = yaml.safe_load((data / "config.yaml").read_text(encoding="utf-8"))
    shutil.copy2(data / config["tracker"][0]["path"], work / "runs.parquet")
    config["warehouse"]["path"] = str(work / "warehouse.duckdb")
    config["billing"][0]["path"] = str((data / config["billing"][0]["path"]).resolve())
    config["tracker"][0]["path"] = str(deliver_runs(work, runs_format))
    config["checkpoints"][0]["path"] = str((data / config["checkpoints"][0]["path"]).resolve())
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "COST_PIPELINE_CONFIG"}
    env.update(DAGSTER_HOME=str(work / "dagster_home"), DAGSTER_DISABLE_TELEMETRY="1")
    return work / "config.yaml", env


def _pipeline_result(measured, keep_checks: bool = True) -> dict:
    in_order = [[name, float(s)] for name, s in STEP_LINE.findall(measured.stderr)]
    steps = dict(in_order)
    result = measured.as_json()
    result["steps_in_order"] = in_order  # sequential (in-process executor): with rss_timeline
    skipped = re.findall(r"^\S+ (\S+): unchanged, skipped", measured.stdout, re.MULTILINE)
    result.update(steps=dict(sorted(steps.items(), key=lambda kv: -kv[1])),
                  steps_seconds=round(sum(steps.values()), 3), skipped_assets=skipped)
    if keep_checks:
        result["checks"] = [ln for ln in measured.stdout.splitlines() if ": PASS" in ln
                            or ": FAIL" in ln]
    return result


def runs_path(work: Path, runs_format: str) -> Path:
    """The runs file the pipeline reads."""
    return work / {"csv": "runs.csv", "jsonl": "runs.jsonl"}.get(runs_format, "runs.parquet")


def deliver_runs(work: Path, runs_format: str) -> Path:
    """`runs_path`, delivered: a CSV or JSONL file is (re)written from the parquet copy."""
    path = runs_path(work, runs_format)
    if runs_format == "csv":  # the runs-file CSV spelling: ids comma-separated (SPEC §4)
        with duckdb.connect() as con:
            con.execute(f"COPY (SELECT * REPLACE (array_to_string(resource_ids, ',') AS "
                        f"resource_ids) FROM read_parquet('{work / 'runs.parquet'}')) "
                        f"TO '{path}' (FORMAT csv, HEADER true)")
    elif runs_format == "jsonl":  # one object a run, times as JavaScript writes them (…Z)
        iso = "strftime({0}, '%Y-%m-%dT%H:%M:%S.%gZ') AS {0}"
        with duckdb.connect() as con:
            con.execute(f"COPY (SELECT * REPLACE ({iso.format('start_time')}, "
                        f"{iso.format('end_time')}) FROM read_parquet('{work / 'runs.parquet'}')) "
                        f"TO '{path}' (FORMAT json)")
    return path


def change_runs(path: Path, every: int = 100) -> dict:
    """A later delivery of the runs file: one run in `every` (by its id's hash) ended an hour
    earlier than the last delivery said, the rest as they were."""
    changed = path.with_suffix(".changed.parquet")
    with duckdb.connect() as con:
        ((runs, moved),) = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE hash(run_id) % {every} = 0 "
            f"AND end_time IS NOT NULL) FROM read_parquet('{path}')").fetchall()
        con.execute(
            f"COPY (SELECT * REPLACE (CASE WHEN hash(run_id) % {every} = 0 "
            f"THEN end_time - INTERVAL 1 HOUR ELSE end_time END AS end_time) "
            f"FROM read_parquet('{path}')) TO '{changed}' (FORMAT parquet)")
    changed.replace(path)
    return {"runs": runs, "changed": moved}


def _first_run(data: Path, work: Path, logs: Path, label: str, runs_format: str,
               keep_checks: bool = True) -> tuple[dict, object, Path, dict, list[str]]:
    """The pipeline's first run of the month in a fresh workspace (`pipeline_workspace`), what
    it left in the warehouse read back when it succeeded: (result, the measured run, config,
    environment, command), the last three for re-running it."""
    config, env = pipeline_workspace(data, work, runs_format)
    cmd = [*_cli(), "materialize", "--config", str(config), "--month", MONTH]
    measured = run_measured(cmd, env=env, cwd=work, log_dir=logs, name=f"{label}-pipeline")
    result = _pipeline_result(measured, keep_checks)
    if measured.returncode == 0:
        result.update(warehouse_figures(work / "warehouse.duckdb"))
    return result, measured, config, env, cmd


def measure_first_run(data: Path, work: Path, logs: Path, label: str,
                      runs_format: str = "parquet") -> dict:
    """One more first run of the pipeline (a later round of `--repeat`), the workspace
    removed after it."""
    result = _first_run(data, work, logs, label, runs_format, keep_checks=False)[0]
    shutil.rmtree(work, ignore_errors=True)
    return result


def run_simple(name: str, data: Path, logs: Path, label: str) -> dict:
    """One of the implementations that are a script given the month's folder."""
    measured = run_measured([sys.executable, str(BENCH / SIMPLE[name]), str(data)],
                            log_dir=logs, name=f"{label}-{name}")
    result = measured.as_json()
    if measured.returncode == 0:
        result.update(json.loads(measured.stdout.strip().splitlines()[-1]))
    return result


def measure_pipeline(data: Path, work: Path, logs: Path, label: str,
                     focus_export: bool = False, runs_format: str = "parquet") -> dict:
    result, first, config, env, cmd = _first_run(data, work, logs, label, runs_format)
    runs = runs_path(work, runs_format)
    result["runs_file"] = {"format": runs_format, "bytes": runs.stat().st_size}
    if first.returncode != 0:
        result["error"] = first.stderr.strip().splitlines()[-1:] or ["failed"]
        return result
    result["warehouse_bytes"] = (work / "warehouse.duckdb").stat().st_size
    # what writing the two big tables costs alone, in the same engine and memory limit
    limit = load_config(str(config)).warehouse.memory_limit
    floor = run_measured([sys.executable, str(BENCH / "persist_floor.py"),
                          str(work / "warehouse.duckdb"),
                          *(["--memory-limit", str(limit)] if limit else [])],
                         log_dir=logs, name=f"{label}-persist-floor")
    if floor.returncode == 0:
        result["persist_floor"] = {**floor.as_json(),
                                   **json.loads(floor.stdout.strip().splitlines()[-1])}
    result["rerun_unchanged"] = _median_of([
        _pipeline_result(run_measured(cmd, env=env, cwd=work, log_dir=logs,
                                      name=f"{label}-pipeline-rerun-{n}"), keep_checks=False)
        for n in range(1, QUICK_REPEATS + 1)])
    os.utime(runs)  # a new delivery of the runs file: the same rows, a new mtime
    touched = run_measured(cmd, env=env, cwd=work, log_dir=logs,
                           name=f"{label}-pipeline-runs-touched")
    result["rerun_runs_touched"] = _pipeline_result(touched, keep_checks=False)
    if touched.returncode == 0:
        result["rerun_runs_touched"].update(warehouse_figures(work / "warehouse.duckdb"))
    result["runs_changed"] = change_runs(work / "runs.parquet")
    deliver_runs(work, runs_format)  # a CSV or JSONL delivered again from the changed runs
    changed = run_measured(cmd, env=env, cwd=work, log_dir=logs,
                           name=f"{label}-pipeline-runs-changed")
    result["rerun_runs_changed"] = _pipeline_result(changed, keep_checks=False)
    if changed.returncode == 0:
        result["rerun_runs_changed"].update(warehouse_figures(work / "warehouse.duckdb"))
        # the same month recomputed from every input (--force): what the re-run after the
        # runs changed must equal
        whole = run_measured([*cmd, "--force"], env=env, cwd=work, log_dir=logs,
                             name=f"{label}-pipeline-forced")
        result["rerun_forced"] = _pipeline_result(whole, keep_checks=False)
        if whole.returncode == 0:
            result["rerun_forced"].update(warehouse_figures(work / "warehouse.duckdb"))
    if focus_export:  # `cost-pipeline export focus` of the month (not part of the job)
        out = work / "focus.parquet"
        exported = run_measured([*_cli(), "export", "focus", "--config", str(config),
                                 "--month", MONTH, "--out", str(out)], env=env, cwd=work,
                                log_dir=logs, name=f"{label}-focus-export")
        result["focus_export"] = exported.as_json()
        if exported.returncode == 0:
            with duckdb.connect() as con:  # the file's footer only
                ((rows,),) = con.execute("SELECT num_rows FROM parquet_file_metadata(?)",
                                         [str(out)]).fetchall()
            result["focus_export"]["rows"] = rows
            out.unlink()
    # start-up alone: the command line parsing its arguments
    result["cli_help"] = _median_of([
        run_measured([*_cli(), "--help"], env=env, cwd=work, log_dir=logs,
                     name=f"{label}-cli-help-{n}").as_json()
        for n in range(1, QUICK_REPEATS + 1)])
    return result


# the sub-second rows (the unchanged-month skip, --help) are timed this many times and the
# median kept: one stall of the machine is a large share of half a second
QUICK_REPEATS = 3


def _median_of(runs: list[dict]) -> dict:
    """The run of median wall time, with every run's wall time, return code and number of
    steps run under `repeats`: the time targets read the median, "nothing recomputed" every
    run."""
    ordered = sorted(runs, key=lambda r: r["wall_seconds"])
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["repeats"] = [{"wall_seconds": r["wall_seconds"], "returncode": r["returncode"],
                          "steps": len(r.get("steps", {}))} for r in runs]
    return median


# the in-memory run holds every table uncompressed: measured 2.0 / 3.0 / 5.5 GiB at 1M / 2M /
# 5M lines (100k runs, 1M objects), about 0.85 GiB per million lines on top of ~1.2 GiB; the
# packed layout's four times as many claims 4.8 / 9.6 GiB at 2M / 5M, about 1.6 GiB per
# million lines on top of ~1.7 GiB
IN_MEMORY_GIB = {"spread": (1.2, 0.85), "packed": (1.7, 1.6), "ephemeral": (1.2, 0.85)}
IN_MEMORY_SHARE = 0.6  # of the machine's memory: above it the run is skipped, not swapped


# the `reconciliation` figures compared with the reference's (report.py
# `compare_reconciliation`): the month's, and per accelerator type those the list holds
RECONCILED = ("billed_gpu_hours", "tracked_gpu_hours", "untracked_gpu_hours", "untracked_share",
              "untracked_cost_share", "over_claimed_gpu_hours")
RECONCILED_PER_TYPE = ("billed_gpu_hours", "untracked_gpu_hours", "untracked_share", "gpu_cost",
                       "untracked_cost_share")


def warehouse_figures(warehouse: Path) -> dict[str, dict]:
    """What a run left in the warehouse, read back once: `totals`, the attribution's cost per
    purpose class; `reconciliation`, the month's row as {"all": its figures, instance type:
    the type's} ({} without a row)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        # the stored rows, not the `attribution` view: its join would grow this process,
        # and every child forked after it inherits that resident memory in ru_maxrss
        rows = con.execute("SELECT purpose_class, sum(cost) FROM attribution_rows "
                           "WHERE month = DATE '2026-07-01' GROUP BY 1").fetchall()
        row = con.execute(f"SELECT {', '.join(RECONCILED)}, by_accelerator_type "
                          "FROM reconciliation WHERE month = DATE '2026-07-01'").fetchone()
    reconciliation = {}
    if row is not None:
        *figures, types = row
        reconciliation["all"] = {n: float(v) for n, v in zip(RECONCILED, figures, strict=True)}
        for t in types:
            reconciliation[t["instance_type"]] = {n: float(t[n]) for n in RECONCILED_PER_TYPE}
    return {"totals": {cls: float(cost) for cls, cost in rows},
            "reconciliation": reconciliation}


def in_memory_fits(lines: int, memory_bytes: int,
                   layout: str = "spread") -> tuple[bool, float]:
    """Whether bench/in_memory.py's month of `lines` in `layout` fits the machine, and its
    estimate."""
    base, per_million = IN_MEMORY_GIB[layout]
    need = base + per_million * lines / 1e6
    return need * 2**30 <= IN_MEMORY_SHARE * memory_bytes, need


def reference_reconciliation(data: Path, logs: Path, label: str) -> dict:
    """bench/reference.py's reconciliation of the month (not part of its timed run)."""
    done = run_measured([sys.executable, str(BENCH / "reference.py"), str(data),
                         "--reconciliation"], log_dir=logs,
                        name=f"{label}-reference-reconciliation")
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(done.stdout.strip().splitlines()[-1])["reconciliation"]


def measure_size(label: str, lines: int, args, logs: Path) -> dict:
    data, generated = ensure_month(args.data_dir, label, lines, args.runs, args.objects, logs,
                                   month_variant(args))
    print(f"[{label}] month in {data} ({'cached' if generated['cached'] else 'generated'}, "
          f"{generated['cur_files']} CUR files, {generated['cur_bytes'] / 1e6:,.0f} MB)",
          file=sys.stderr, flush=True)
    results: dict[str, dict] = {}
    for name in args.impls:
        if name == "in_memory":
            fits, need = in_memory_fits(lines, args.memory_bytes, args.layout)
            if not fits:
                print(f"[{label}] in_memory: skipped (needs ~{need:.0f} GiB, more than "
                      f"{IN_MEMORY_SHARE:.0%} of this machine's "
                      f"{args.memory_bytes / 2**30:.1f} GiB)", file=sys.stderr, flush=True)
                continue
        if name == "pipeline":
            results[name] = measure_pipeline(data, data / "work", logs, label,
                                             args.focus_export, args.runs_format)
            if not args.keep_warehouse:
                shutil.rmtree(data / "work", ignore_errors=True)
        else:
            results[name] = run_simple(name, data, logs, label)
            if name == "reference":
                # its reconciliation figures from the same claims: another process, untimed
                results[name]["reconciliation"] = reference_reconciliation(data, logs, label)
        _say(label, name, results[name])
    rounds = repeat_rounds(data, label, args, logs, results)
    return {"size": label, "lines": lines, "runs": args.runs, "objects": args.objects,
            "data": {k: v for k, v in generated.items() if k != "params"},
            "results": results, "totals_check": compare_totals(results, rounds),
            "reconciliation_check": compare_reconciliation(results),
            "ratios": ratios(results, rounds), "rounds": rounds}


def _say(label: str, name: str, r: dict) -> None:
    print(f"[{label}] {name}: {r['wall_seconds']:.2f} s, "
          f"{r['peak_rss_bytes'] / 2**20:,.0f} MiB (load {r['load_average'][0]})"
          + ("" if r["returncode"] == 0 else f"  FAILED rc={r['returncode']}"),
          file=sys.stderr, flush=True)


# the implementations `--repeat` times again, in this order within a round: the issue's
# check runs the pipeline alternately with the reference and reads the median ratio
ALTERNATED = ("reference", "in_memory", "pipeline")


def repeat_rounds(data: Path, label: str, args, logs: Path, results: dict) -> list[dict]:
    """`--repeat N`: the first round is what `measure_size` measured; N − 1 more rounds run the
    reference, the in-memory run and a pipeline first run (each of them measured in the first
    round and successful there) once each, in that order. Each round: name → its run."""
    alternated = [n for n in ALTERNATED if results.get(n, {}).get("returncode") == 0]
    rounds = [{n: _round_entry(results[n]) for n in alternated}]
    for number in range(2, args.repeat + 1):
        this = {}
        for name in alternated:
            tag = f"{label}-round-{number}"
            this[name] = (measure_first_run(data, data / f"work-round-{number}", logs, tag,
                                            args.runs_format)
                          if name == "pipeline" else run_simple(name, data, logs, tag))
            _say(f"{label} round {number}", name, this[name])
            this[name] = _round_entry(this[name])
        rounds.append(this)
    return rounds if len(rounds) > 1 else []


def _round_entry(result: dict) -> dict:
    """What the JSON keeps of a round's run (the first round's whole runs are in `results`)."""
    keep = ("wall_seconds", "peak_rss_bytes", "returncode", "load_average", "totals",
            "steps_seconds")
    entry = {k: result[k] for k in keep if k in result}
    if "steps" in result:  # a pipeline run: how many steps ran (a first run: every one)
        entry["steps_run"] = len(result["steps"])
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1m 5m 20m",
                        help="billing lines per month, e.g. '1m 5m 20m' (default: all three)")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--impls", default="scan_floor,reference,in_memory,pandas,pipeline",
                        help="comma-separated subset of scan_floor,reference,in_memory,pandas,"
                        "pipeline")
    add_month_options(parser, kept_as=True)
    parser.add_argument("--runs-format", choices=("parquet", "csv", "jsonl"), default="parquet",
                        help="csv / jsonl: the pipeline reads the month's runs from a CSV or "
                        "JSONL runs file (the same runs; the other rows read the parquet one)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "bench-data")
    parser.add_argument("--results", type=Path, default=ROOT / "bench-results.json")
    parser.add_argument("--focus-export", action="store_true",
                        help="also time `cost-pipeline export focus` of the pipeline's month "
                        "(a row per line × attribution row; ~50 s at 2M lines)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="time the reference, the in-memory run and the pipeline's first "
                        "run N times each, alternately (the pipeline's re-runs once); the "
                        "ratios and targets read the median of the rounds' ratios")
    parser.add_argument("--keep-warehouse", action="store_true",
                        help="keep bench-data/<size>/work (warehouse, Dagster home, logs)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if reason := refusal(layout=args.layout, run_tags=args.run_tags,
                         commitments=args.commitments, spot=args.spot, split=args.split,
                         sagemaker=args.sagemaker, bill=args.bill,
                         granularity=args.granularity, nodes=args.nodes, files=args.files,
                         amounts=args.amounts, cur_format=args.cur_format):
        parser.error(reason)
    args.impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    sizes = [(s, parse_size(s)) for s in re.split(r"[,\s]+", args.sizes.strip()) if s]
    defaults = args.runs == 100_000 and args.objects == 1_000_000
    logs = args.data_dir / "logs"
    report = {"machine": machine_facts(), "month": MONTH, "sizes": []}
    args.memory_bytes = report["machine"]["memory_bytes"]
    for text, lines in sizes:
        label = text.lower() if defaults else f"{text.lower()}-{args.runs}r-{args.objects}o"
        label += variant_suffix(month_variant(args))
        report["sizes"].append(measure_size(label, lines, args, logs))
        report["scaling"] = scaling(report["sizes"])
        report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        args.results.write_text(json.dumps(report, indent=2))  # partial results survive
    print_report(report)
    print(f"\nresults: {args.results}")
    agree = all(s["totals_check"]["agree"] and s["reconciliation_check"]["agree"]
                for s in report["sizes"])
    runs = [r for s in report["sizes"]
            for r in [*s["results"].values(), *(x for rd in s["rounds"] for x in rd.values())]]
    failed = any(r.get("returncode") for r in runs)
    return 1 if failed or not agree else 0


if __name__ == "__main__":
    sys.exit(main())
