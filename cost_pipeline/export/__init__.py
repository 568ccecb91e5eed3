"""Datasets written for tools outside the pipeline (FOCUS for FinOps tools)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_atomically(path: str | Path) -> Iterator[Path]:
    """A partial file of its own beside `path` (`.<name>.<random>.partial`) for the block to
    write; it becomes `path` when the block ends, and is removed on any failure — the block's
    or the rename's (`path` a directory) — so a reader never sees half a file and nothing is
    left behind. A file system's refusal (a file where a folder must be, no space, …) is one
    OSError naming `path` and its cause, never the partial copy. Its name is unique, so two
    writers of the same `path` at once never share one: each renames a whole file of its
    own, and the last to finish leaves its copy."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory: name the file to write")
    if path.exists() and not path.is_file():
        # renamed over, a device (/dev/null, even /dev/full as root), a pipe or a socket was
        # replaced by a regular file, and what its reader waited for never came
        raise ValueError(f"{path} is no regular file (a device, a pipe or a socket): name "
                         "a file to write")
    if path.is_symlink():
        # the file the link names is written; renamed over, the link itself was replaced
        path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                        suffix=".partial")
    except OSError as exc:
        raise cannot_write(path, exc) from exc
    partial = Path(name)
    try:
        os.close(handle)
        # mkstemp's file is private (0600): the export gets the mode any new file gets
        os.chmod(partial, 0o666 & ~_umask())
        yield partial
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise cannot_write(path, exc) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def cannot_write(path: Path, exc: OSError) -> OSError:
    """One line naming `path` as the caller gave it and why it cannot be written — not the
    partial copy's name, nor a folder's `[Errno 17] File exists` when a file stands where
    `path` needs one: `cannot write a_file/x.csv: a_file is a file, not a folder`."""
    for folder in reversed(path.parents):
        if folder.exists() and not folder.is_dir():
            return OSError(f"cannot write {path}: {folder} is a file, not a folder")
    cause = os.strerror(exc.errno) if exc.errno else str(exc)
    return OSError(f"cannot write {path}: {cause}")


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (os.umask sets it
    to read it, for every thread at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
