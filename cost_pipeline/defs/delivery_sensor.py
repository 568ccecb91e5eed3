"""Delivery sensor: a new or changed CUR delivery of a month (a new manifest, or changed
export files for a month without one; local or on S3) requests a refresh of that month's
partition of the monthly job.

The cursor is JSON `{"YYYY-MM": fingerprint}` of the exports as last listed (names, sizes
and modification times: nothing is downloaded). The first tick only records what exists,
so a fresh daemon does not re-run every month of history; a first tick that cannot list the
exports (the export folder not there yet) records that nothing is delivered, so the first
deliveries a later tick finds are requested.
"""

import json

import dagster as dg

from cost_pipeline.config import ConfigError, load_config
from cost_pipeline.defs.partitions import first_month, monthly
from cost_pipeline.ingest.deliveries import export_fingerprints
from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.months import out_of_range, parse_month

SENSOR_NAME = "billing_delivery_sensor"
# AWS delivers a month's restatements a few times a day; listing every 10 minutes is cheap
SENSOR_INTERVAL_SECONDS = 600
# the cursor's mark on a month delivered outside the partitions (before `first_month`)
OUTSIDE = "outside:"


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
            seen = export_fingerprints(load_config(config_path))
        except ConfigError as exc:
            # the cursor stays as it was: the next successful listing compares against it
            return dg.SensorResult(skip_reason=f"cannot list the billing exports: {exc}")
        except SourceError as exc:
            # the same; but a first tick whose exports cannot be listed (the export folder not
            # there yet) records "nothing delivered": what a later listing finds arrived after
            # the sensor started, and is requested, not recorded as history
            return dg.SensorResult(skip_reason=f"cannot list the billing exports: {exc}",
                                   cursor="{}" if context.cursor is None else None)
        keys = set(partitions.get_partition_keys())
        # a month outside the partitions is recorded as such: once the config's first_month
        # takes it in, its delivery is new to the sensor and requested (recorded as delivered,
        # it never was)
        record = {month: fingerprint if f"{month}-01" in keys else OUTSIDE + fingerprint
                  for month, fingerprint in seen.items()}
        if context.cursor is None:
            return dg.SensorResult(
                skip_reason=f"first tick: recorded the deliveries of {len(seen)} month(s); "
                "later changes request refreshes",
                cursor=json.dumps(record, sort_keys=True))
        known = json.loads(context.cursor)
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
            skip_reason=None if requests else (
                "no new billing delivery" if not outside else
                f"new deliveries only for months outside the partitions: {', '.join(outside)}"),
            cursor=json.dumps(record, sort_keys=True))

    return billing_delivery_sensor
