"""Delivery sensor: a new or changed CUR delivery of a month (a new manifest, or changed
export files for a month without one; local or on S3) requests a refresh of that month's
partition of the monthly job.

The cursor is JSON `{"YYYY-MM": fingerprint, "sources": {source: {"YYYY-MM": fingerprint}}}`
of the exports as last listed (names, sizes and modification times: nothing is downloaded),
plus `"unlisted": [source, …]` while a source cannot be listed. The first tick only records
what exists, so a fresh daemon does not re-run every month of history. A source that cannot
be listed (a FOCUS folder not there yet, a bucket whose credentials were revoked) keeps the
fingerprints of its last listing — none on a first tick, so its first deliveries a later
tick finds are requested — and is named in the tick's log and skip reason; the other
sources' changes are requested as ever.

A FOCUS source whose path is an AWS export's data/ folder (or a month's folder in it) is read
by the manifests in the export's metadata/ folder beside it (`focus_deliveries`): those of
the months the path holds count in their month's fingerprint, so a delivery that rewrites
only its manifest, or whose manifest lands a tick after its data files, is requested. Their
own fingerprints are kept under `"beside"`; a cursor without that key compares the months as
they were fingerprinted before (the upgrade requests no month of history).
"""

import hashlib
import json
from pathlib import Path

import dagster as dg

from cost_pipeline.config import ConfigError, FocusSource, PipelineConfig, load_config
from cost_pipeline.defs.partitions import first_month, monthly
from cost_pipeline.ingest.deliveries import month_fingerprints, source_fingerprints
from cost_pipeline.ingest.sources import SourceError, s3, source_names
from cost_pipeline.ingest.sources.focus_deliveries import data_folder_export, manifests_beside
from cost_pipeline.ingest.sources.local_files import walk_files
from cost_pipeline.months import out_of_range, parse_month

SENSOR_NAME = "billing_delivery_sensor"
# AWS delivers a month's restatements a few times a day; listing every 10 minutes is cheap
SENSOR_INTERVAL_SECONDS = 600
# the cursor's mark on a month delivered outside the partitions (before `first_month`)
OUTSIDE = "outside:"
# the cursor's keys beside its months: each source's fingerprints as last listed, and the
# sources the last tick could not list
SOURCES, UNLISTED = "sources", "unlisted"
# the cursor's key for the manifests beside a FOCUS source's data/ folder: source → `YYYY-MM`
# → their fingerprint
BESIDE = "beside"


def build_delivery_sensor(config_path: str, job_name: str,
                          partitions: dg.PartitionsDefinition = monthly) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        job_name=job_name,
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Lists the CUR exports' manifests (else data files) per month; a new or "
        "changed delivery requests that month's partition of the monthly job.",
    )
    def billing_delivery_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        try:
            cfg = load_config(config_path)
        except ConfigError as exc:
            # the cursor stays as it was: the next successful listing compares against it
            return dg.SensorResult(skip_reason=f"cannot list the billing exports: {exc}")
        listed, unlisted = source_fingerprints(cfg)
        plain = dict(listed)
        beside = _fold_manifests_beside(cfg, listed, unlisted)
        cursor = json.loads(context.cursor) if context.cursor is not None else None
        remembered = (cursor or {}).get(SOURCES)
        # a source not listed keeps its manifests' last listing too
        beside.update({name: (cursor or {}).get(BESIDE, {}).get(name, {})
                       for name in unlisted if name in beside})
        failure = ""
        if unlisted:
            failure = "cannot list the billing exports: " + "; ".join(
                str(exc) for exc in unlisted.values())
            context.log.warning(failure + " (their months keep their last listing until they "
                                "can be listed)")
            if remembered is None and any(key[:4].isdigit() for key in cursor or {}):
                # a cursor written before sources were recorded apart: what the unlisted
                # source held of each month is unknown, so the tick waits as it used to
                return dg.SensorResult(skip_reason=failure)
        # a source that cannot be listed keeps its last listing (none on a first tick: its
        # deliveries found later arrived after the sensor started, and are requested)
        sources = {**listed, **{name: (remembered or {}).get(name, {}) for name in unlisted}}
        seen = month_fingerprints(sources)
        # a cursor from before the manifests beside a data/ folder counted: compared as then
        compared = (month_fingerprints({**sources, **{n: plain[n] for n in beside
                                                      if n in listed}})
                    if beside and cursor is not None and BESIDE not in cursor else seen)
        keys = set(partitions.get_partition_keys())
        # a month outside the partitions is recorded as such: once the config's first_month
        # takes it in, its delivery is new to the sensor and requested (recorded as delivered,
        # it never was)
        record = {month: fingerprint if f"{month}-01" in keys else OUTSIDE + fingerprint
                  for month, fingerprint in seen.items()}
        record[SOURCES] = {name: months for name, months in sources.items() if months}
        if unlisted:
            record[UNLISTED] = sorted(unlisted)
        if beside:
            record[BESIDE] = beside

        def also(reason: str) -> str:
            return f"{reason}; {failure}" if failure else reason

        if cursor is None:
            return dg.SensorResult(
                skip_reason=also(f"first tick: recorded the deliveries of {len(seen)} month(s); "
                                 "later changes request refreshes"),
                cursor=json.dumps(record, sort_keys=True))
        known = {month: fingerprint for month, fingerprint in cursor.items()
                 if month not in (SOURCES, UNLISTED, BESIDE)}
        requests = [
            dg.RunRequest(
                run_key=f"{month}:{fingerprint}",
                partition_key=f"{month}-01",
                tags={"cost_pipeline/launched_by": "delivery_sensor",
                      "cost_pipeline/delivery": fingerprint},
            )
            for month, fingerprint in sorted(seen.items())
            if known.get(month) != compared.get(month) and f"{month}-01" in keys
        ]
        # later months already materialized read the restated one (a search's cost to date,
        # trends, previous bests, recomputed preprocessing): refreshed after it, in order
        if requests:
            delivered = {r.partition_key for r in requests}
            held = context.instance.get_materialized_partitions(dg.AssetKey("billing_facts"))
            requests += [
                dg.RunRequest(
                    run_key=f"{key[:7]}:after:{requests[0].run_key}",
                    partition_key=key,
                    tags={"cost_pipeline/launched_by": "delivery_sensor",
                          "cost_pipeline/after_delivery_of": requests[0].partition_key[:7]},
                )
                for key in sorted(held & keys)
                if key > requests[0].partition_key and key not in delivered
            ]
        outside = sorted(m for m in seen
                         if known.get(m) != OUTSIDE + compared.get(m, "") and f"{m}-01" not in keys)
        if outside:  # said, not silently dropped: the config key extends the range
            context.log.warning(out_of_range(parse_month(outside[0]), first_month(partitions))
                                + f" ({len(outside)} delivered month(s) outside the partitions: "
                                + ", ".join(outside) + ")")
        return dg.SensorResult(
            run_requests=requests,
            skip_reason=None if requests else also(
                "no new billing delivery" if not outside else
                f"new deliveries only for months outside the partitions: {', '.join(outside)}"),
            cursor=json.dumps(record, sort_keys=True))

    return billing_delivery_sensor


def _fold_manifests_beside(cfg: PipelineConfig, listed: dict[str, dict[str, str]],
                           unlisted: dict[str, SourceError]) -> dict[str, dict[str, str]]:
    """Each FOCUS source at an AWS export's data/ folder (or a month's folder in it): the
    manifests of its months in the export's metadata/ folder, folded into those months'
    fingerprints in `listed`; returned per source as `YYYY-MM` → their fingerprint (empty
    for a source not listed). A source whose metadata/ cannot be listed moves to
    `unlisted`."""
    beside: dict[str, dict[str, str]] = {}
    for name, source in zip(source_names(cfg.billing), cfg.billing, strict=True):
        if not isinstance(source, FocusSource):
            continue
        root = cfg.resolve(source.path)
        if data_folder_export(root) is None:
            continue
        beside[name] = {}
        if name not in listed:
            continue
        try:
            found = _manifests(name, source, root)
        except SourceError as exc:
            del listed[name]
            unlisted[name] = exc
            continue
        months = dict(listed[name])
        for month, entries in found.items():
            # the months the path holds (the one a month's folder names included:
            # deliveries.py files its data there): a month of metadata/ without data below it
            # is none
            if month in months:
                beside[name][month] = _digest(entries)
                months[month] = _digest([months.get(month), entries])
        listed[name] = months
    return beside


def _manifests(name: str, source: FocusSource, root: str) -> dict[str, list]:
    """`YYYY-MM` → the manifests beside the path (`manifests_beside`) as listed: path, size
    and modification time, nothing read."""
    stats: dict[str, list] = {}
    if s3.is_s3(root):
        fs = s3.filesystem(source.endpoint_url, source.region)

        def files_below(folder: str) -> list[str]:
            for info in s3.list_files(fs, s3.S3Uri.parse(folder).path, name):
                if info.is_file:
                    stats[s3.uri_of(info.path)] = [info.size, s3.mtime_text(info)]
            return list(stats)
    else:
        def files_below(folder: str) -> list[str]:
            if Path(folder).is_dir():
                for path, stat in walk_files(Path(folder), name):
                    stats[path.as_posix()] = [stat.st_size, stat.st_mtime_ns]
            return list(stats)

    try:
        found = manifests_beside(root, files_below)
    except OSError as exc:  # a local folder that cannot be read (permissions)
        raise SourceError(name, root, str(exc)) from None
    export = data_folder_export(root) or ""
    return {month: sorted([path[len(export) + 1:], *stats[path]] for path in paths)
            for month, paths in found.items()}


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
