"""The current delivery of each month in a FOCUS folder (local or on S3) where a provider's
export keeps its earlier deliveries beside it: the files `sources/focus.py` reads, and the
superseded deliveries left out (SPEC §3: a new delivery of a month replaces it).

- Azure Cost Management exports without "Overwrite data" write every run into
  `<export>/<YYYYMMDD-YYYYMMDD>/<runId>/part_*.csv|parquet` with a `manifest.json` whose
  `runInfo` holds the run's `runId` and `submittedTime`. Of the run folders of a date-range
  folder, only the newest is read: by its manifest's submittedTime, else by the newest
  modification time of its files; ties by folder name.
- AWS Data Exports (a FOCUS export, as a CUR 2.0 one) write the month's manifest at
  `<export>/metadata/BILLING_PERIOD=YYYY-MM/…-Manifest.json`: the month's files under
  `<export>/data/BILLING_PERIOD=YYYY-MM/` are those its newest manifest lists, found as the
  CUR reader finds them (`cur2.find_delivery`, `cur2_s3.find_delivery`). The same holds for
  a path at the export's `data/` folder or at a `BILLING_PERIOD=YYYY-MM` folder in it: the
  manifests are looked for in the export's `metadata/` folder beside it (outside the path).
  Without a manifest of the month, a `BILLING_PERIOD=YYYY-MM` folder whose files are in two
  or more execution folders (`…/BILLING_PERIOD=YYYY-MM/<execution-id>/…`) is refused: those
  are deliveries of which only the newest is the month, and summed they counted it twice.

Any other layout is read as it is: every file below the path.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime

from cost_pipeline.ingest.sources import SourceError

AZURE_MANIFEST = "manifest.json"
# an AWS Data Exports manifest, below the export's metadata folder of its month
AWS_MANIFEST = re.compile(r"^(?P<export>.+)/metadata/BILLING_PERIOD=(?P<month>\d{4}-\d{2})/"
                          r"(?:.+/)?[^/]*Manifest\.json$")
# a file below a month's folder of an AWS Data Exports export (the last such folder of its
# path): `<data>/BILLING_PERIOD=YYYY-MM/<below>`, `<data>` being the export's data/ folder
AWS_MONTH_FILE = re.compile(r"^(?P<folder>(?P<data>.*)/BILLING_PERIOD=(?P<month>\d{4}-\d{2}))/"
                            r"(?P<below>.+)$")
# a timestamp's fraction beyond microseconds (Azure writes 7 digits: `…33.0272036Z`)
EXTRA_DIGITS = re.compile(r"(\.\d{6})\d+")


@dataclass
class Listing:
    """Every file below the configured path (`modified`: path → modification time, epoch
    seconds; paths as `/`-separated text, local or `s3://`) and how to read them."""

    source: str
    root: str
    modified: dict[str, float]
    read_text: Callable[[str], str]
    # (export folder, month) → the files of the month's current delivery (`cur2`)
    aws_delivery: Callable[[str, date], list[str]]
    # a folder outside the path → every file below it ([] when there is none): an AWS
    # export's metadata/ folder when the path is its data/ folder or a month's folder in it
    files_below: Callable[[str], list[str]]


def current_files(listing: Listing, files: list[str], month: date | None = None
                  ) -> tuple[list[str], list[str]]:
    """`files` (the data files of the listing) without those of superseded deliveries, and
    a sentence for the log on each delivery left out. A SourceError where `month` (any month
    when None) is an AWS export's month in several deliveries and no manifest says which is
    the newest."""
    dropped: set[str] = set()
    notes: list[str] = []
    manifests = {(m["export"], m["month"]) for m in map(AWS_MANIFEST.match, listing.modified)
                 if m}
    for export, of_month in sorted(manifests):
        _aws_month(listing, files, export, of_month, dropped, notes)
    beside = data_folder_export(listing.root)
    outside: set[str] | None = None     # the months of its manifests, outside the path
    for folder, (export, of_month, below) in sorted(_aws_month_folders(files).items()):
        if export is not None and (export, of_month) in manifests:
            continue
        if export is not None and export == beside:
            if outside is None:
                outside = set(manifests_beside(listing.root, listing.files_below))
            if of_month in outside:
                _aws_month(listing, files, export, of_month, dropped, notes)
                continue
        if month is None or of_month == f"{month:%Y-%m}":
            _refuse_deliveries(listing.source, folder, export, of_month, below)
    _azure_runs(listing, files, dropped, notes)
    return [f for f in files if f not in dropped], notes


def _aws_month_folders(files: list[str]) -> dict[str, tuple[str | None, str, list[str]]]:
    """The `BILLING_PERIOD=YYYY-MM` folders of `files` → (their export, None when the folder
    is not in a data/ folder; the month; the paths of the files below the folder)."""
    folders: dict[str, tuple[str | None, str, list[str]]] = {}
    for file in files:
        match = AWS_MONTH_FILE.match(file)
        if not match:
            continue
        data = match["data"]
        export = (posixpath.dirname(data) if posixpath.basename(data) == "data"
                  and posixpath.dirname(data) else None)
        folders.setdefault(match["folder"], (export, match["month"], []))[2].append(
            match["below"])
    return folders


def data_folder_export(root: str) -> str | None:
    """The AWS export whose data/ folder, or a month's folder in it, the path is (its
    manifests, in metadata/, then outside the path); None for any other path."""
    root = root.rstrip("/")
    month = posixpath.basename(root).startswith("BILLING_PERIOD=")
    data = posixpath.dirname(root) if month else root
    if posixpath.basename(data) != "data" or not posixpath.dirname(data):
        return None
    return posixpath.dirname(data)


def manifests_beside(root: str, files_below: Callable[[str], list[str]]
                     ) -> dict[str, list[str]]:
    """Where the path is an AWS export's data/ folder or a month's folder in it: `YYYY-MM` →
    the manifests of the month in the export's metadata/ folder (`files_below` lists a
    folder; for a month's folder, that month's only); {} for any other path. The reader
    picks a month's delivery from them, and the delivery sensor watches them."""
    export = data_folder_export(root)
    if export is None:
        return {}
    name = posixpath.basename(root.rstrip("/"))
    months: dict[str, list[str]] = {}
    for match in map(AWS_MANIFEST.match, files_below(f"{export}/metadata")):
        if match and (not name.startswith("BILLING_PERIOD=")
                      or name == f"BILLING_PERIOD={match['month']}"):
            months.setdefault(match["month"], []).append(match.string)
    return months


def _refuse_deliveries(source: str, folder: str, export: str | None, month: str,
                       below: list[str]) -> None:
    """Refuse a month's folder whose files are in two or more execution folders: without a
    manifest nothing says which delivery is the month, and all read count it several times."""
    executions = sorted({path.split("/", 1)[0] for path in below if "/" in path})
    if len(executions) < 2:
        return
    shown = (", ".join(executions) if len(executions) <= 3
             else f"{executions[0]}, … {executions[-1]}")
    if export is None:
        hint = ("point path at the export's root (the folder holding its data/ and metadata/ "
                f"folders): its metadata/BILLING_PERIOD={month}/ manifests pick the newest "
                "delivery")
    else:
        # the path holds the export's metadata/, or is its data/ (or a month's folder), whose
        # metadata/ was looked in: none of the month's manifests is there; deeper, one
        # execution folder is below the path
        hint = (f"{export}/metadata/BILLING_PERIOD={month}/ holds none: copy the export with "
                "its metadata/ folder (its manifests pick the newest delivery), or keep only "
                "the newest execution folder")
    raise SourceError(source, folder, f"the month's files are in {len(executions)} execution "
                      f"folders ({shown}), deliveries of which the newest replaces the others, "
                      f"and no manifest of the month tells which is the newest: {hint}")


def _aws_month(listing: Listing, files: list[str], export: str, month: str,
               dropped: set[str], notes: list[str]) -> None:
    folder = f"{export}/data/BILLING_PERIOD={month}/"
    below = [f for f in files if f.startswith(folder) and f not in dropped]
    if not below:
        return
    current = set(listing.aws_delivery(export, date.fromisoformat(month + "-01")))
    stale = [f for f in below if f not in current]
    if stale:
        dropped.update(stale)
        notes.append(f"{export}: BILLING_PERIOD={month}: {len(stale)} file(s) of earlier "
                     f"deliveries not read (the month's newest manifest lists "
                     f"{len(current)}), e.g. {stale[0]}")


@dataclass
class _Run:
    folder: str
    run_id: str
    submitted: datetime | None
    manifest: list[str]      # its manifest, if any
    files: list[str]         # its data files


def _azure_runs(listing: Listing, files: list[str], dropped: set[str],
                notes: list[str]) -> None:
    manifests = {posixpath.dirname(p): p for p in listing.modified
                 if posixpath.basename(p).lower() == AZURE_MANIFEST}
    ranges: dict[str, dict[str, dict]] = {}   # date-range folder → run folder → runInfo
    root = listing.root.rstrip("/")
    for run, manifest in sorted(manifests.items()):
        if not run.startswith(root + "/"):   # the path is one run's folder: read it all
            continue
        info = _run_info(listing, manifest)
        if info is not None:
            ranges.setdefault(posixpath.dirname(run), {})[run] = info
    for date_range, infos in ranges.items():
        runs: dict[str, _Run] = {}
        for file in files:
            if not file.startswith(date_range + "/") or file in dropped:
                continue
            name = file[len(date_range) + 1:].split("/", 1)[0]
            if name == posixpath.basename(file):
                continue  # a file beside the runs, not in one: read as it is
            folder = f"{date_range}/{name}"
            if folder not in runs:
                info = infos.get(folder, {})
                runs[folder] = _Run(folder, str(info.get("runId") or name),
                                    _instant(info.get("submittedTime")),
                                    [manifests[folder]] if folder in manifests else [], [])
            runs[folder].files.append(file)
        # a run folder without its manifest beside runs with one is a run still being written
        # (Azure writes the manifest last): its files are not the month yet
        for run in [r for r in runs.values() if r.folder not in infos]:
            dropped.update(run.files)
            notes.append(f"{date_range}: export run folder {run.folder} has no manifest.json "
                         f"(a run still being written): its {len(run.files)} file(s) not read")
            del runs[run.folder]
        if len(runs) < 2:
            continue
        ordered = sorted(runs.values(), key=lambda r: (_recency(listing, r), r.folder))
        newest = ordered[-1]
        for run in ordered[:-1]:
            dropped.update(run.files)
            notes.append(f"{date_range}: export run {run.run_id} ({_when(listing, run)}) "
                         f"superseded by run {newest.run_id} ({_when(listing, newest)}): "
                         f"its {len(run.files)} file(s) not read")


def _run_info(listing: Listing, manifest: str) -> dict | None:
    """The `runInfo` of an Azure export's manifest; None for a manifest of another kind."""
    try:
        doc = json.loads(listing.read_text(manifest))
    except ValueError as exc:
        raise SourceError(listing.source, manifest, f"unreadable manifest: {exc}") from None
    info = doc.get("runInfo") if isinstance(doc, dict) else None
    return info if isinstance(info, dict) else None


def _instant(text: object) -> datetime | None:
    """An ISO 8601 time as Azure writes it (7 fractional digits, `Z`), in UTC; None when
    absent or unreadable."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(EXTRA_DIGITS.sub(r"\1", text.strip()))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _recency(listing: Listing, run: _Run) -> float:
    if run.submitted is not None:
        return run.submitted.timestamp()
    return max(listing.modified[f] for f in run.files + run.manifest)


def _when(listing: Listing, run: _Run) -> str:
    if run.submitted is not None:
        return f"submitted {run.submitted:%Y-%m-%dT%H:%M:%SZ}"
    newest = datetime.fromtimestamp(_recency(listing, run), UTC)
    return f"no submittedTime; files modified up to {newest:%Y-%m-%dT%H:%M:%SZ}"
