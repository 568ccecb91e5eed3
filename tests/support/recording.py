"""A DuckDB connection that notes the statements it is given, for tests of which statements
the code issues (and which it does not)."""

from __future__ import annotations

import duckdb


class Recording:
    """A connection that notes every statement it is given."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.statements = con, []

    def execute(self, sql, *args):
        self.statements.append(sql)
        return self.con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.con, name)
