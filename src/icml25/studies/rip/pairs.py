"""The pair table ``processed/pairs.parquet`` (spec "Stages", 2): exact columns and Arrow types, an atomic
writer, and a reader that rejects a malformed table (one produced elsewhere, e.g. scored by a real reward model
on a GPU node) with an error naming the offending column.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icml25.core.io import atomic_path

#: Column → Arrow type, in the table's order. ``quality`` is the only nullable column (null at paper scale).
PAIR_SCHEMA = pa.schema([
    pa.field("prompt_id", pa.int64(), nullable=False),
    pa.field("prompt", pa.string(), nullable=False),
    pa.field("quality", pa.string(), nullable=True),
    pa.field("responses", pa.list_(pa.string()), nullable=False),
    pa.field("rewards", pa.list_(pa.float64()), nullable=False),
    pa.field("chosen", pa.string(), nullable=False),
    pa.field("rejected", pa.string(), nullable=False),
    pa.field("chosen_reward", pa.float64(), nullable=False),
    pa.field("rejected_reward", pa.float64(), nullable=False),
    pa.field("reward_gap", pa.float64(), nullable=False),
    pa.field("chosen_length", pa.int64(), nullable=False),
    pa.field("rejected_length", pa.int64(), nullable=False),
    pa.field("ref_logp_chosen", pa.float64(), nullable=False),
    pa.field("ref_logp_rejected", pa.float64(), nullable=False),
])
PAIR_COLUMNS = tuple(PAIR_SCHEMA.names)


class PairTableError(ValueError):
    """A pair table that does not match :data:`PAIR_SCHEMA`; the message names the column."""


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Equal Arrow types, treating large_string/large_list (as some writers emit) as string/list."""
    if pa.types.is_large_string(actual) or pa.types.is_string_view(actual):
        actual = pa.string()
    if pa.types.is_large_list(actual) or pa.types.is_list_view(actual):
        item = actual.value_type
        if pa.types.is_large_string(item):
            item = pa.string()
        actual = pa.list_(item)
    if pa.types.is_list(actual) and pa.types.is_large_string(actual.value_type):
        actual = pa.list_(pa.string())
    if pa.types.is_list(actual) and pa.types.is_list(expected):
        return _same_type(actual.value_type, expected.value_type)
    return actual.equals(expected)


def validate_pair_table(table: pa.Table, where: str = "pairs") -> pa.Table:
    """Check columns, types, nulls and list lengths; return the table cast to :data:`PAIR_SCHEMA` order.

    Raises :class:`PairTableError` naming the first bad column: missing, unexpected, wrong type (expected vs
    actual), nulls in a non-nullable column, or ``responses``/``rewards`` of unequal or zero length in a row.
    """
    names = set(table.column_names)
    for field in PAIR_SCHEMA:
        if field.name not in names:
            raise PairTableError(f"{where}: missing column {field.name!r} (expected {list(PAIR_COLUMNS)})")
    extra = [c for c in table.column_names if c not in PAIR_COLUMNS]
    if extra:
        raise PairTableError(f"{where}: unexpected column {extra[0]!r} (the pair table has exactly "
                             f"{list(PAIR_COLUMNS)})")
    for field in PAIR_SCHEMA:
        col = table.column(field.name)
        if pa.types.is_null(col.type) and field.nullable:
            continue
        if not _same_type(col.type, field.type):
            raise PairTableError(f"{where}: column {field.name!r} has type {col.type}, expected {field.type}")
        if not field.nullable and col.null_count:
            raise PairTableError(f"{where}: column {field.name!r} has {col.null_count} null value(s)")
    n_resp = pc.list_value_length(table.column("responses")).to_numpy(zero_copy_only=False)
    n_rew = pc.list_value_length(table.column("rewards")).to_numpy(zero_copy_only=False)
    bad = (n_resp != n_rew) | (n_rew < 1)
    if bad.any():
        i = int(bad.argmax())
        raise PairTableError(f"{where}: column 'rewards' row {i}: {n_rew[i]} reward(s) for {n_resp[i]} "
                             f"response(s) (need equal and >= 1)")
    for name in ("responses", "rewards"):
        if pc.list_flatten(table.column(name)).null_count:
            raise PairTableError(f"{where}: column {name!r} has null list elements")
    return table.select(list(PAIR_COLUMNS)).cast(PAIR_SCHEMA)


def pairs_to_arrow(df: pd.DataFrame, where: str = "pairs") -> pa.Table:
    """An Arrow table of a pair frame with the exact schema (validated)."""
    missing = [c for c in PAIR_COLUMNS if c not in df.columns]
    if missing:
        raise PairTableError(f"{where}: missing column {missing[0]!r} (expected {list(PAIR_COLUMNS)})")
    try:
        table = pa.Table.from_pandas(df[list(PAIR_COLUMNS)], preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise PairTableError(f"{where}: cannot convert to Arrow: {err}") from err
    return validate_pair_table(table, where)


def write_pairs(df: pd.DataFrame, path: str | Path) -> Path:
    """Validate and atomically write the pair table as parquet."""
    table = pairs_to_arrow(df, str(path))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def read_pairs(path: str | Path) -> pd.DataFrame:
    """Read and validate a pair table (ours or one produced elsewhere); lists come back as Python lists."""
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise PairTableError(f"{path}: not a readable parquet file: {err}") from err
    table = validate_pair_table(table, str(path))
    df = table.to_pandas()
    for name in ("responses", "rewards"):
        df[name] = [list(v) for v in df[name]]
    return df
