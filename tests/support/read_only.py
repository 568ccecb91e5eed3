"""A folder made read-only for a test: remounted read-only (a bind mount of itself) where the
test may mount — a read-only disk, whoever writes — else, for a user other than root,
without write permission. Either way writing in it fails as it does on a read-only disk."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> bool:
    if shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """`folder` read-only for the block; yields the words a write in it fails with."""
    if os.geteuid() == 0:
        if not _mount("--bind", str(folder), str(folder)):
            pytest.skip("root without the right to mount: no folder is read-only to it")
        try:
            if not _mount("-o", "remount,ro,bind", str(folder)):
                pytest.skip("this system refuses a read-only bind mount")
            yield os.strerror(30)  # EROFS: Read-only file system
        finally:
            subprocess.run(["umount", str(folder)], capture_output=True, check=True)
        return
    mode = folder.stat().st_mode
    folder.chmod(0o555)
    try:
        yield os.strerror(13)  # EACCES: Permission denied
    finally:
        folder.chmod(mode)
