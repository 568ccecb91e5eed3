"""The period report (SPEC §12) as a job the UI launches for any range of months: a
non-partitioned job of one op whose config is `from_month` and `to_month` (YYYY-MM). It reads
the months already materialized and writes `<warehouse folder>/reports/
cost-report-FROM_TO.html` — the same page as `cost-pipeline report --from … --to …`.

A job and not an asset: the report is a view of any range a reader asks for, not one table
the monthly partitions build, and an asset keyed by range would not fit the monthly graph."""


from datetime import date

import dagster as dg
from dagster_duckdb import DuckDBResource
from pydantic import Field

from cost_pipeline.defs.metadata import to_minor_unit
from cost_pipeline.defs.resources import PipelineSettings
from cost_pipeline.months import parse_month

PERIOD_JOB = "period_report"


class PeriodReportConfig(dg.Config):
    from_month: str = Field(description="first month of the period, YYYY-MM")
    to_month: str = Field(description="last month of the period, YYYY-MM")


def last_quarter(today: date) -> tuple[str, str]:
    """The three complete months before `today`'s: the launchpad's default range."""
    index = today.year * 12 + today.month - 1
    first, last = index - 3, index - 1
    return (f"{first // 12:04d}-{first % 12 + 1:02d}", f"{last // 12:04d}-{last % 12 + 1:02d}")


@dg.op(description="Write the period report of the months from_month … to_month.")
def write_period_report(context: dg.OpExecutionContext, config: PeriodReportConfig,
                        duckdb: DuckDBResource, settings: PipelineSettings) -> str:
    # imported here: matplotlib costs a second, and loading the code location needs none of it
    from cost_pipeline.report.period import check_range
    from cost_pipeline.report.period import write_period_report as write

    first, last = parse_month(config.from_month), parse_month(config.to_month)
    check_range(first, last, ("from_month", "to_month"))  # the job's own fields
    with duckdb.get_connection() as con:
        path, data = write(settings.load().warehouse_path, first, last, con=con)
    context.log.info(f"period report {first:%Y-%m} … {last:%Y-%m}: {path}")
    context.add_output_metadata({
        "report": dg.MetadataValue.path(str(path)),
        # to the currency's smallest unit, as the page shows them (a fils, a yen)
        "total_effective_cost": to_minor_unit(float(data["total"]), data["currency"]),
        **{f"total_{m:%Y_%m}": to_minor_unit(float(data["totals"][m]["effective_cost"]),
                                             data["currency"])
           for m in data["months"]},
        "currency": data["currency"],
    })
    return str(path)


def build_period_job(today: date, run_tags: dict[str, str]) -> dg.JobDefinition:
    first, last = last_quarter(today)

    @dg.job(name=PERIOD_JOB, tags=run_tags,
            description="The period report (cost-report-FROM_TO.html) for the months in the op "
            "config (from_month, to_month: YYYY-MM); the months must be materialized.",
            config=dg.RunConfig(ops={"write_period_report": PeriodReportConfig(
                from_month=first, to_month=last)}))
    def period_report():
        write_period_report()

    return period_report
