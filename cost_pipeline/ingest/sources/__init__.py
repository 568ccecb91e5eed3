"""Source readers: each turns one configured input into rows of the normalized tables."""

from __future__ import annotations


class SourceError(ValueError):
    """Bad input: names the source, the file or table, and the row or field."""

    def __init__(self, source: str, where: str | None, problem: str):
        self.source, self.where, self.problem = source, where, problem
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def source_names(entries: list, default: str = "") -> list[str]:
    """A distinct, stable name per configured entry: its `name`, else its kind (+ index)."""
    names: list[str] = []
    for i, entry in enumerate(entries):
        name = getattr(entry, "name", None) or entry.kind
        if name in names:
            name = f"{name}{i + 1}"
        names.append(name)
    return names
