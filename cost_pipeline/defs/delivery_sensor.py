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
"""

import json

import dagster as dg

from cost_pipeline.config import ConfigError, load_config
from cost_pipeline.defs.partitions import first_month, monthly
from cost_pipeline.ingest.deliveries import month_fingerprints, source_fingerprints
from cost_pipeline.months import out_of_range, parse_month

SENSOR_NAME = "billing_delivery_sensor"
# AWS delivers a month's restatements a few times a day; listing every 10 minutes is cheap
SENSOR_INTERVAL_SECONDS = 600
# the cursor's mark on a month delivered outside the partitions (before `first_month`)
OUTSIDE = "outside:"
# the cursor's keys beside its months: each source's fingerprints as last listed, and the
# sources the last tick could not list
SOURCES, UNLISTED = "sources", "unlisted"


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
        cursor = json.loads(context.cursor) if context.cursor is not None else None
        remembered = (cursor or {}).get(SOURCES)
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
        keys = set(partitions.get_partition_keys())
        # a month outside the partitions is recorded as such: once the config's first_month
        # takes it in, its delivery is new to the sensor and requested (recorded as delivered,
        # it never was)
        record = {month: fingerprint if f"{month}-01" in keys else OUTSIDE + fingerprint
                  for month, fingerprint in seen.items()}
        record[SOURCES] = {name: months for name, months in sources.items() if months}
        if unlisted:
            record[UNLISTED] = sorted(unlisted)

        def also(reason: str) -> str:
            return f"{reason}; {failure}" if failure else reason

        if cursor is None:
            return dg.SensorResult(
                skip_reason=also(f"first tick: recorded the deliveries of {len(seen)} month(s); "
                                 "later changes request refreshes"),
                cursor=json.dumps(record, sort_keys=True))
        known = {month: fingerprint for month, fingerprint in cursor.items()
                 if month not in (SOURCES, UNLISTED)}
        requests = [
            dg.RunRequest(
                run_key=f"{month}:{fingerprint}",
                partition_key=f"{month}-01",
                tags={"cost_pipeline/launched_by": "delivery_sensor",
                      "cost_pipeline/delivery": fingerprint},
            )
            for month, fingerprint in sorted(seen.items())
            if known.get(month) != fingerprint and f"{month}-01" in keys
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
        outside = sorted(m for m, fp in seen.items()
                         if known.get(m) != OUTSIDE + fp and f"{m}-01" not in keys)
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
