"""Arrow type tests the billing readers (CUR 2.0, FOCUS) share: what a file's column holds
where the provider's export holds text."""

from __future__ import annotations

import pyarrow as pa


def is_text(actual: pa.DataType) -> bool:
    """A string column, plain or dictionary-encoded (as pyarrow writes a pandas category)."""
    if pa.types.is_dictionary(actual):
        actual = actual.value_type
    return pa.types.is_string(actual) or pa.types.is_large_string(actual)


def is_binary(actual: pa.DataType) -> bool:
    """A binary column: in a text column's place, strings written without their UTF8
    annotation (Impala, older Hive)."""
    return pa.types.is_binary(actual) or pa.types.is_large_binary(actual)
