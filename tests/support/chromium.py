"""A page rendered in headless Chromium (the Debian package `.ci/run` installs): its
screenshot's pixels and its DOM after JavaScript ran."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def render_in_chromium(page: Path, work: Path, height: int, width: int = 1200):
    """(the screenshot's RGB pixels, the DOM) of `page`; skips the test without Chromium."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium not installed (.ci/run installs the Debian package)")
    from matplotlib.image import imread

    base = [browser, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={work / 'profile'}"]
    shot = work / f"{page.stem}.png"
    subprocess.run([*base, f"--screenshot={shot}", f"--window-size={width},{height}",
                    page.as_uri()], capture_output=True, timeout=90, check=True)
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=90, check=True).stdout
    return imread(str(shot))[..., :3], dom
