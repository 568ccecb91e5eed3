"""Each asset's `code_version`: a hash of the SQL files and Python modules that compute it, so
the UI marks an asset stale when its code changed (and only then)."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from cost_pipeline.warehouse import sql_files

# every table's SQL runs with these: the DDL and the shared macros
_SHARED_SQL = ("schema", "macros")


@cache
def _module_bytes(module: str) -> bytes:
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    return Path(spec.origin).read_bytes()


def code_version(sql: tuple[str, ...] = (), modules: tuple[str, ...] = (),
                 package_files: tuple[str, ...] = ()) -> str:
    """16 hex digits over the named `assets/**/<name>.sql` files (plus schema and macros), the
    named modules' source files and other files of the package (templates), by path."""
    digest = hashlib.sha256()
    files = sql_files()
    for name in sorted({*sql, *_SHARED_SQL}):
        digest.update(name.encode())
        digest.update(files[name].read_bytes())
    for module in sorted(set(modules)):
        digest.update(module.encode())
        digest.update(_module_bytes(module))
    package = Path(__file__).resolve().parents[1]
    for name in sorted(set(package_files)):
        digest.update(name.encode())
        digest.update((package / name).read_bytes())
    return digest.hexdigest()[:16]
