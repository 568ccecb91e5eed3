"""Explain an ML training bill: what each run, model and search cost, and the levers to cut it.
`cost-pipeline` (demo, materialize, estimate, report, export): results go to stdout, progress
to stderr. Exit codes: 0 done, 1 error (one line; a wrong command line too), 2 an ERROR check
failed under --strict."""

from __future__ import annotations

import argparse
import gc
import importlib.abc
import math
import signal
import sys
import traceback
from pathlib import Path

from cost_pipeline import interrupts
from cost_pipeline.cli.export import add_export_parser
from cost_pipeline.ingest.sources import SourceError, redact
from cost_pipeline.months import parse_month
from cost_pipeline.text import AS_TEXT, BIDI_CONTROLS, CONTROLS

EXIT_OK, EXIT_ERROR, EXIT_CHECK_FAILED, EXIT_OVER_BUDGET = 0, 1, 2, 3
EXIT_INTERRUPTED = interrupts.EXIT_INTERRUPTED  # SIGINT or SIGTERM: a run's writes rolled back


# what a terminal or a reader of the output would act on rather than show (cost_pipeline.text:
# a newline forges a result line, ESC starts a terminal escape, a right-to-left override shows
# what follows reversed), written as escapes; a backslash doubled, so `\n` in the data reads
# apart from an escaped newline
_ESCAPES = {
    **{c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (*CONTROLS, *BIDI_CONTROLS)},
    **{ord(c): e for c, e in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\\", "\\\\"))},
}


def error_line(message: str) -> str:
    """`error: <message>`, one line whatever the message quotes (a path or a value from the
    data holding a line break or a right-to-left override: blanks, dropped), secrets
    redacted."""
    return f"error: {redact(message).translate(AS_TEXT)}"


def printable(text: str) -> str:
    """`text` (a value from the data: a search id, a resource id, a model) with the characters
    `_ESCAPES` names written as escapes (`\\n`, `\\x1b`, `\\u202e`): a check is one line, as
    its data held it, whatever the data holds."""
    return text.translate(_ESCAPES)


def _fmt(value, currency: str | None = None) -> str:
    if currency is not None and isinstance(value, int | float):  # an amount of the bill
        from cost_pipeline.report.money import in_currency

        return printable(in_currency(value, currency))
    if isinstance(value, float):
        # the digits the check recorded (metadata.rounded_figure rounded it once): GPU-hours
        # of 8.333 printed 8.3330, a share kept apart from its threshold as 0.050004 printed
        # 0.0500 beside 0.0500, and 2.78e-05 unbilled GPU-hours 0.0000 on a failed check
        # (decimal imported here: only the check lines use it, not `--help`)
        from decimal import Decimal

        return f"{Decimal(repr(value)):,f}" if math.isfinite(value) else str(value)
    return printable(str(value))


MONEY_FIGURES = {"effective_cost", "delta", "violation_cost", "budget"}  # in the bill's currency
# an amount and the limit a failed check holds it to: printed with the digits that tell them
# apart (a violation cost of JPY 100.45 over a JPY 100.4 budget read JPY 100 twice)
MONEY_LIMITS = {"violation_cost": "budget"}
FIGURES = ("untracked_share", "threshold", "billed_gpu_hours", "tracked_gpu_hours",
           "effective_cost", "delta")
# what a failed check says beside its figures: what failed (its metadata holds the rest)
FAILED_FIGURES = ("missing_days", "violation_cost", "budget", "unbilled_claim_gpu_hours",
                  "resource_ids", "models", "without_estimate", "over_estimate")


def _models_over_trend(metadata: dict, currency: str) -> str:
    """`model_cost_trend`'s failing models with their cost and previous median (SPEC §12:
    the check lists them), where the line named the models alone."""
    from cost_pipeline.report.money import in_currency

    exceeding = metadata.get("exceeding")
    if not isinstance(exceeding, list) or not all(isinstance(e, dict) for e in exceeding):
        return printable(str(metadata["models"]))
    return printable("; ".join(
        f"{e.get('model')} {in_currency(e.get('cost'), currency)} against a "
        f"median of {in_currency(e.get('previous_median'), currency)}" for e in exceeding))


def _money_figures(metadata: dict, currency: str) -> dict[str, str]:
    """The amounts of `metadata` as printed: each in the bill's currency, an amount and its
    limit (`MONEY_LIMITS`) with the digits that tell them apart."""
    from cost_pipeline.report.money import money_apart, symbol_of

    shown = {k: _fmt(metadata[k], currency) for k in MONEY_FIGURES if k in metadata}
    for amount, limit in MONEY_LIMITS.items():
        value, bound = metadata.get(amount), metadata.get(limit)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, bound)):
            shown[amount], shown[limit] = (printable(text) for text in
                                           money_apart(value, bound, symbol_of(currency)))
    return shown


def print_checks(result) -> None:
    for check in result.checks:
        mark = "PASS" if check.passed else f"FAIL ({check.severity})"
        keys = [k for k in (*FIGURES, *(() if check.passed else FAILED_FIGURES))
                if check.metadata.get(k) not in (None, "")]
        currency = check.metadata.get("currency") or "USD"
        amounts = _money_figures(check.metadata, currency)
        figures = ", ".join(
            f"{k} {amounts[k] if k in amounts else _fmt(check.metadata[k])}"
            if k != "models" else f"models {_models_over_trend(check.metadata, currency)}"
            for k in keys)
        print(f"{result.month:%Y-%m} {check.asset}.{check.name}: {mark}  {figures}".rstrip())


def cmd_materialize(args) -> int:
    from cost_pipeline.cli.materialize import materialize_month

    month = parse_month(args.month)
    result = materialize_month(args.config, month, force=args.force)
    if not result.success:
        if args.debug and result.error_detail:
            print(redact(result.error_detail), file=sys.stderr)
        print(error_line(result.error), file=sys.stderr)
        return EXIT_INTERRUPTED if result.interrupted else EXIT_ERROR
    print_checks(result)
    for asset in result.skipped:
        print(f"{month:%Y-%m} {asset}: unchanged, skipped")
    if result.run_id is None:
        print(f"{month:%Y-%m}: unchanged, skipped (code, config and inputs as at the last "
              "materialization; --force recomputes)")
    elif result.skipped:
        print(f"{month:%Y-%m}: materialized (run {result.run_id}); "
              f"{len(result.skipped)} unchanged asset(s) skipped")
    else:
        print(f"{month:%Y-%m}: materialized (run {result.run_id})")
    if result.run_id is not None and result.later_months:
        them = "it" if len(result.later_months) == 1 else "them"
        print(f"note: {', '.join(result.later_months)} read this month's figures (a search's "
              f"cost to date, trends, previous bests) as they were: materialize {them} again "
              f"to bring {them} up to date", file=sys.stderr)
    if args.strict and result.failed_error_checks:
        return EXIT_CHECK_FAILED
    return EXIT_OK


def cmd_estimate(args) -> int:
    import json

    from cost_pipeline.config import load_config
    from cost_pipeline.estimate import EstimateError, estimate_search, record_approval, render

    if args.approve and not args.search_id:
        raise EstimateError("--approve needs --search-id S: the search the estimate is for")
    if not args.approve and (args.search_id or args.expected_improvement is not None
                             or args.approved_by):
        raise EstimateError("--search-id, --expected-improvement and --approved-by record an "
                            "approval: add --approve")
    cfg = load_config(args.config)
    est = estimate_search(
        cfg, args.model, args.configs, args.seeds, args.reruns,
        gpus=args.gpus, hours=args.hours, price=args.price, cached=args.cached,
    )
    recorded = None
    if args.approve:
        # recorded whether or not it is within budget: the row says approved = false
        recorded = record_approval(cfg, est, args.search_id,
                                   expected_improvement=args.expected_improvement,
                                   approved_by=args.approved_by)
    if args.json:
        out = est.as_json()
        if recorded is not None:
            out["approval"] = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                               for k, v in recorded.items()}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(render(est))
        if recorded is not None:
            verdict = "approved" if recorded["approved"] else "NOT approved (over budget)"
            print(f"  recorded for search {recorded['search_id']} in {cfg.warehouse_path}: "
                  f"{verdict}")
    return EXIT_OK if est.approved else EXIT_OVER_BUDGET


def _flag_month(flag: str, text: str):
    try:
        return parse_month(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected YYYY-MM") from None


def cmd_report(args) -> int:
    import webbrowser

    from cost_pipeline.config import load_config
    from cost_pipeline.months import out_of_range
    from cost_pipeline.report import write_report
    from cost_pipeline.report.data import ReportError

    period = (args.from_month, args.to_month)
    if args.month and any(period):
        raise ValueError("--month and --from/--to exclude each other: one month, or a period")
    if any(period) and not all(period):
        raise ValueError("a period needs both --from YYYY-MM and --to YYYY-MM")
    if not args.month and not any(period):
        raise ValueError("report needs --month YYYY-MM, or --from YYYY-MM --to YYYY-MM")
    cfg = load_config(args.config)
    if args.month:
        first = last = parse_month(args.month)
    else:
        first, last = (_flag_month(flag, text) for flag, text in
                       (("--from", args.from_month), ("--to", args.to_month)))
    try:
        if args.month:
            path, data = write_report(cfg.warehouse_path, first, out=args.out)
            if data.get("stale"):
                print(f"note: {data['stale']}", file=sys.stderr)
        else:
            from cost_pipeline.report.period import stale_searches, write_period_report

            path, data = write_period_report(cfg.warehouse_path, first, last, out=args.out)
            if stale := stale_searches(data):
                print(f"note: {stale}", file=sys.stderr)
    except ReportError:
        # a month no partition holds: say so and how to include it, not "materialize it"
        problem = first <= last and (out_of_range(first, cfg.first_month)
                                     or out_of_range(last, cfg.first_month))
        if problem:
            raise ReportError(problem) from None
        raise
    print(path)
    # no browser (a headless machine, BROWSER a command that fails): said, the page is written
    if args.open and not webbrowser.open(path.as_uri()):
        print(f"note: no web browser could be opened; open {path} yourself", file=sys.stderr)
    return EXIT_OK


def cmd_demo(args) -> int:
    from cost_pipeline.demo.run import run_demo

    return run_demo(Path(args.out), strict=args.strict)


class UsageError(Exception):
    """The command line itself is wrong (an unknown option, a missing or bad argument)."""


class CommandParser(argparse.ArgumentParser):
    """argparse that raises a one-line `UsageError` naming the command instead of printing
    its usage and exiting 2: exit 2 means an ERROR check failed under --strict (SPEC §10).
    `--help` still prints the help and exits 0. Subcommands are made of this class too.
    Its help reads as the command's other lines, not in argparse's words ("show this help
    message and exit", the commands under "positional arguments")."""

    def __init__(self, *args, add_help: bool = True, **kwargs):
        super().__init__(*args, add_help=False, **kwargs)
        # the only positional arguments of the command line are its (sub)commands, listed first
        self._positionals.title = "commands"
        if add_help:
            self.add_argument("-h", "--help", action="help", help="show this help")

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)")

    def parse_known_args(self, args=None, namespace=None):
        # an option a subcommand does not know is named by that subcommand (argparse would
        # leave it to the top-level parser, whose message names no command)
        known, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return known, extra


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="cost-pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="generate the demo quarter and materialize it")
    demo.add_argument("--out", default="demo", help="folder for the demo data (default: demo)")
    demo.add_argument("--strict", action="store_true",
                      help="exit 2 when an ERROR check failed in any of its three months")
    demo.set_defaults(func=cmd_demo)

    mat = sub.add_parser("materialize", help="materialize every asset of one month")
    mat.add_argument("--config", required=False, default=None,
                     help="config YAML (default: $COST_PIPELINE_CONFIG)")
    mat.add_argument("--month", required=True, help="YYYY-MM")
    mat.add_argument("--strict", action="store_true",
                     help="exit 2 when an ERROR check failed")
    mat.add_argument("--force", action="store_true",
                     help="recompute every asset, also those whose code, config and inputs "
                     "are unchanged since their last materialization")
    mat.set_defaults(func=cmd_materialize)

    est = sub.add_parser("estimate", help="the cost of a search before it runs")
    est.add_argument("--config", default=None, help="config YAML (default: $COST_PIPELINE_CONFIG)")
    est.add_argument("--model", required=True,
                     help="the model the search trains (as the tracker names it)")
    est.add_argument("--configs", type=int, required=True, help="hyperparameter configurations")
    est.add_argument("--seeds", type=int, required=True, help="seeds per configuration")
    est.add_argument("--reruns", type=int, default=1, help="re-runs (feature/data changes)")
    est.add_argument("--gpus", type=float, help="GPUs per run (default: recorded median)")
    est.add_argument("--hours", type=float, help="hours per run (default: recorded median)")
    est.add_argument("--price", type=float,
                     help="price per GPU-hour (default: recorded effective price)")
    est.add_argument("--cached", action="store_true",
                     help="preprocessing is cached: no per-run preprocessing cost")
    est.add_argument("--json", action="store_true", help="one JSON object on stdout")
    est.add_argument("--approve", action="store_true",
                     help="record the estimate in the warehouse (search_approvals) as the "
                     "approval of --search-id; exit 3 still says it is over budget")
    est.add_argument("--search-id", default=None, help="the search the approval is for")
    est.add_argument("--expected-improvement", type=float, default=None,
                     help="the metric gain the search is expected to buy")
    est.add_argument("--approved-by", default=None, help="who approved it")
    est.set_defaults(func=cmd_estimate)

    rep = sub.add_parser("report", help="write the HTML cost report of a month, or of a "
                         "period (--from/--to)")
    rep.add_argument("--config", default=None, help="config YAML (default: $COST_PIPELINE_CONFIG)")
    rep.add_argument("--month", default=None, help="YYYY-MM: the monthly report")
    rep.add_argument("--from", dest="from_month", default=None, metavar="YYYY-MM",
                     help="first month of the period report (with --to)")
    rep.add_argument("--to", dest="to_month", default=None, metavar="YYYY-MM",
                     help="last month of the period report (with --from)")
    rep.add_argument("--out", default=None, help="HTML file (default: <warehouse folder>/"
                     "reports/cost-report-YYYY-MM.html, or cost-report-YYYY-MM_YYYY-MM.html "
                     "for a period)")
    rep.add_argument("--open", action="store_true", help="open it in the web browser")
    rep.set_defaults(func=cmd_report)

    add_export_parser(sub)  # `export runs`, … (cli/export.py: one parser function per export)
    return parser


def main(argv: list[str] | None = None) -> int:
    # `docker stop` sends SIGTERM: the same as Ctrl-C (Dagster does the same during a run)
    signal.signal(signal.SIGTERM, _interrupt)
    interrupts.install()  # a signal whose exception a finalizer swallowed still stops us
    parser = build_parser()
    # `--debug` anywhere on the line (`materialize … --debug` was refused as unknown to the
    # subcommand): taken out here, set on the parsed arguments
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = parser.parse_args([a for a in argv if a != "--debug"])
    except UsageError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return EXIT_ERROR
    args.debug = debug or getattr(args, "debug", False)   # (`--deb`, argparse's abbreviation)
    # imported once a command runs, not to parse or print --help (pydantic, DuckDB: ~0.5 s)
    from cost_pipeline.config import ConfigError, config_path
    from cost_pipeline.estimate import EstimateError

    if args.command != "demo":
        try:  # an empty `--config "$CFG"` (CFG unset) is refused before anything is read
            args.config = config_path(getattr(args, "config", None))
        except ConfigError as exc:
            print(error_line(str(exc)), file=sys.stderr)
            return EXIT_ERROR
    try:
        code = args.func(args)
        if interrupts.swallowed() and code != EXIT_INTERRUPTED:
            return _interrupted()
        return code
    except (ConfigError, SourceError, EstimateError, ValueError, OSError) as exc:
        if interrupts.within(exc):  # a signal's exception, wrapped by what it passed through
            return _interrupted()
        if args.debug:
            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(error_line(str(exc)), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:
        # a signal while one of the command's own DuckDB queries ran (outside a run's steps):
        # DuckDB swallows the KeyboardInterrupt and fails the query with its own error
        from cost_pipeline.warehouse import query_interrupted

        if not (query_interrupted(exc) or interrupts.within(exc)):
            raise
        return _interrupted()


def run() -> int:
    """The `cost-pipeline` command as a process: `main` with the interpreter's cyclic garbage
    collector tuned for one short-lived run. Dagster's definitions and a run's events are a
    few hundred thousand long-lived objects: collecting every 700 allocations rescans them
    ~900 times a run (0.4 s at 2M billing lines; 0.2 s every 10,000), and the collection at
    interpreter shutdown takes another ~0.45 s to free what the exit frees anyway. Frozen
    objects are still released by the exit; nothing is left open by then (the run's warehouse
    connection is closed by its resource, the files by their `with`)."""
    gc.set_threshold(10_000, 10, 10)
    sys.meta_path.insert(0, _WithoutPandas())
    try:
        return main()
    except (Exception, KeyboardInterrupt) as exc:
        # a signal while the command started (its imports, outside `main`'s handlers), as
        # such or wrapped by the module it passed through: one line, as anywhere else, not
        # Python's traceback and a death by SIGINT
        if not interrupts.within(exc):
            raise
        return _interrupted()
    finally:
        gc.freeze()


class _WithoutPandas(importlib.abc.MetaPathFinder):
    """pandas, as if it were not installed. pyarrow imports it, when it is, at its first
    conversion of a Python value (~0.3 s a run), and so do clients that merely check for it.
    Nothing here uses pandas, which is not a dependency: the process runs as it does where
    pandas is not installed."""

    def find_spec(self, name, path, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _interrupted() -> int:
    """A command a signal stopped: one line, its exit status."""
    print("error: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":  # python -m cost_pipeline.cli.main
    sys.exit(run())
