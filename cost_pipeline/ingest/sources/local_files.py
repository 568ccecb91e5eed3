"""The one rule for reading and listing local folders (a local CUR export, a `local` checkpoint
folder, the CLI's fingerprints of them): nothing outside the folder is read or listed.

- A path named by a file (a manifest's `dataFiles`) must stay inside the folder once `..` and
  symbolic links are resolved.
- A listing never descends into a linked folder (`l1 -> .` cannot loop, `usr -> /usr` is not
  walked); a linked file counts only when it leads to a file inside the folder; a dangling
  link is an error naming it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from cost_pipeline.ingest.sources import SourceError


def confined(root: Path, path: Path, source: str, named_by: str) -> Path:
    """`path` (inside `root` as written) resolved, or a SourceError when it leads outside
    `root`; `named_by` is what named it (the manifest)."""
    base = root.resolve()
    target = path.resolve()
    if not target.is_relative_to(base):
        raise SourceError(source, named_by, f"{path} leads outside {root} (to {target}): "
                          "only files inside the folder are read")
    return target


def walk_files(root: Path, source: str) -> Iterator[tuple[Path, os.stat_result]]:
    """(path, stat) of every file below `root`, sorted per folder, by the rule above."""
    base = root.resolve()
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()  # os.walk never descends into a linked folder (followlinks=False)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink():
                target = Path(os.path.realpath(path))
                if not target.exists():
                    raise SourceError(source, str(path), "broken symbolic link (to "
                                      f"{os.readlink(path)}): remove it or restore its target")
                if not target.is_relative_to(base):
                    raise SourceError(source, str(path), f"symbolic link leads outside {root} "
                                      f"(to {target}): only files inside the folder are read")
            try:
                stat = path.stat()
            except OSError as exc:
                raise SourceError(source, str(path), exc.strerror or str(exc)) from None
            yield path, stat
