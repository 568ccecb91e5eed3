"""A map column (CUR 2.0's `product` / `resource_tags` / `tags`, FOCUS's `Tags`) written by a
tool other than the provider's export as a list of its entries: pandas reads a parquet map
as a list of (key, value) tuples and writes it back as lists of two strings (`pairs`),
polars reads it as a list of {key, value} structs and writes those (`entries`), and a
BigQuery table's repeated key-value record (GCP's labels; its tags also carry `inherited`
and `namespace`) exports as a list of structs holding `key` and `value` beside other fields
(`entries` too: the other fields are not read). Both readers take such a column as the map
it stands for; a list naming a key twice, which no map holds, is refused naming its row."""

from __future__ import annotations

import pyarrow as pa


def entry_list_shape(actual: pa.DataType) -> str | None:
    """`pairs` or `entries` for a column written as a list of map entries, else None."""
    if not (pa.types.is_list(actual) or pa.types.is_large_list(actual)):
        return None
    item = actual.value_type
    if pa.types.is_list(item) or pa.types.is_large_list(item):
        value = item.value_type
        return "pairs" if pa.types.is_string(value) or pa.types.is_large_string(value) else None
    if pa.types.is_struct(item) and {"key", "value"} <= {field.name for field in item}:
        return "entries"
    return None


def listed_entries_sql(expr: str, shape: str) -> str:
    """`expr` (a list of entries of `shape`) as a list of {key, value} text structs, those
    whose key is NULL left out: `map_from_entries` of it is the map."""
    key, value = ("p[1]", "p[2]") if shape == "pairs" else ("p.key", "p.value")
    return (f"list_transform(list_filter({expr}, lambda p: {key} IS NOT NULL), "
            f"lambda p: {{'key': CAST({key} AS VARCHAR), 'value': CAST({value} AS VARCHAR)}})")


def names_a_key_twice_sql(expr: str, shape: str) -> str:
    """SQL true when the list of entries `expr` names a key twice (no map holds it)."""
    keys = f"list_transform({listed_entries_sql(expr, shape)}, lambda p: p.key)"
    return f"len(list_distinct({keys})) < len({keys})"
