"""Rows -> files: Parquet (pyarrow, loadable with HF ``datasets``) and JSONL.

In Parquet, ``multi_modal_data`` and the dict-valued members of ``extra_fields`` (reward
components / extra info) are stored as JSON strings (Parquet cannot store an empty struct);
``read_parquet_rows`` decodes them back so rows round-trip to the ``AgentLoopOutput`` shape.
Token ids are int32, masks int8, logprobs float64 (the recorded values, bit-exact).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type hints (no py.typed)
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # as above

from openforgerl.export.verl import AGENT_LOOP_FIELDS

_TYPES: dict[str, pa.DataType] = {
    "prompt_ids": pa.list_(pa.int32()),
    "response_ids": pa.list_(pa.int32()),
    "response_mask": pa.list_(pa.int8()),
    "response_logprobs": pa.list_(pa.float64()),
    "reward_score": pa.float64(),
    "num_turns": pa.int32(),
}
_JSON_COLUMNS = ("multi_modal_data",)
_JSON_EXTRA_KEYS = ("reward_components", "reward_extra_info")


def rows_to_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] = AGENT_LOOP_FIELDS) -> pa.Table:
    arrays = [_column(name, [row[name] for row in rows]) for name in columns]
    return pa.table(arrays, names=list(columns))


def _column(name: str, values: list[Any]) -> pa.Array:
    if name in _JSON_COLUMNS:
        return pa.array([_json(v) for v in values], type=pa.string())
    if name == "extra_fields":
        values = [{k: _json(v) if k in _JSON_EXTRA_KEYS else v for k, v in row.items()} for row in values]
    return pa.array(values, type=_TYPES.get(name))


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def write_parquet(
    rows: Sequence[dict[str, Any]], path: Path, columns: Sequence[str] = AGENT_LOOP_FIELDS
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows_to_table(rows, columns), path)


def read_parquet_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()  # one dict per row, by column name
    for row in rows:
        _decode(row, _JSON_COLUMNS)
        if isinstance(row.get("extra_fields"), dict):
            _decode(row["extra_fields"], _JSON_EXTRA_KEYS)
    return rows


def _decode(mapping: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        if isinstance(mapping.get(key), str):
            mapping[key] = orjson.loads(mapping[key])


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row))
            fh.write(b"\n")


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
