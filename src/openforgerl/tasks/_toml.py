"""A minimal TOML writer (tables, arrays of tables, inline tables, scalars) for generated task files.

The stdlib reads TOML but cannot write it; our documents are small and regular, so this is enough.
Strings are written as JSON strings, which are valid TOML basic strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _table(data: Mapping[str, Any], prefix: str, out: list[str], inline: bool = False) -> None:
    """Scalars first, then sub-tables; inside an array-of-tables item, mappings stay inline."""
    for k, v in data.items():
        if inline or (not isinstance(v, Mapping) and not _is_table_array(v)):
            out.append(f"{_key(k)} = {_value(v)}")
    if inline:
        return
    for k, v in data.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        if isinstance(v, Mapping):
            out.append(f"\n[{name}]")
            _table(v, name, out)
        elif _is_table_array(v):
            for item in v:
                out.append(f"\n[[{name}]]")
                _table(item, name, out, inline=True)


def dumps(data: Mapping[str, Any]) -> str:
    out: list[str] = []
    _table(data, "", out)
    return "\n".join(out).lstrip("\n") + "\n"
