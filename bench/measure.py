"""Wall time and peak memory of a child process, and the facts about the machine that make
a benchmark's numbers comparable."""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import psutil

POLL_SECONDS = 0.05
TIMELINE_SECONDS = 0.5  # one (seconds, MiB) point per this interval: where the peak happens


@dataclass
class Measured:
    wall_seconds: float
    peak_rss_bytes: int           # the larger of the two figures below
    child_maxrss_bytes: int       # wait4's ru_maxrss of the child: its exact peak
    tree_peak_rss_bytes: int      # polled Σ RSS of the child and its descendants
    returncode: int
    stdout: str
    stderr: str
    load_average: list[float]     # 1/5/15-minute load when the command ended
    rss_timeline: list[list[float]]  # [seconds since start, tree RSS MiB], every 0.5 s

    def as_json(self, keep_output: bool = False) -> dict:
        data = asdict(self)
        if not keep_output:
            data.pop("stdout")
            data["stderr"] = self.stderr[-2000:] if self.returncode else ""
        return data


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def run_measured(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None,
                 log_dir: Path, name: str) -> Measured:
    """Run `cmd` to completion; stdout and stderr go to files in `log_dir` (no pipe to fill)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    peak = [0]
    timeline: list[list[float]] = []
    done = threading.Event()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        watched = psutil.Process(child.pid)

        def poll() -> None:
            while not done.is_set():
                try:
                    rss = _tree_rss(watched)
                except psutil.NoSuchProcess:
                    return
                peak[0] = max(peak[0], rss)
                now = time.perf_counter() - t0
                if not timeline or now - timeline[-1][0] >= TIMELINE_SECONDS:
                    timeline.append([round(now, 2), round(rss / 2**20)])
                done.wait(POLL_SECONDS)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        # wait4 reaps the child and returns its own resource usage (ru_maxrss in KiB on Linux)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        poller.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    maxrss = usage.ru_maxrss * (1 if platform.system() == "Darwin" else 1024)
    return Measured(
        wall_seconds=round(wall, 3), peak_rss_bytes=max(maxrss, peak[0]),
        child_maxrss_bytes=maxrss, tree_peak_rss_bytes=peak[0],
        returncode=child.returncode,
        stdout=out_path.read_text(encoding="utf-8", errors="replace"),
        stderr=err_path.read_text(encoding="utf-8", errors="replace"),
        load_average=[round(x, 2) for x in os.getloadavg()],
        rss_timeline=timeline,
    )


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_facts() -> dict:
    memory = psutil.virtual_memory()
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": memory.total,
        "memory_available_bytes_at_start": memory.available,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in ("cost-pipeline", "duckdb", "dagster",
                                              "dagster-duckdb", "pyarrow", "pandas", "numpy")},
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "cost_pipeline", "assets")),
    }
