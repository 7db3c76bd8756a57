"""Reading a tool document (an MCP `tools/list` result, an OpenAPI document, a TOML environment) that
anyone may have written: bounded in size and depth, and checked for the type at every level it is read.

A document that is not what it claims is the user's to fix, so every refusal is a `DocumentError`: a
`UserError` (the CLI prints its one line and exits 2) whose message names the file, the place in the
document (`tools[3].inputSchema.properties`) and what was expected there. It is also a `ValueError`,
what library callers of `load_env` already catch for an environment that is not one.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openforgerl.errors import UserError

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "DocumentError",
    "as_list",
    "as_object",
    "as_scalar_list",
    "as_text",
    "read_document",
]

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
"""The largest document read. GitHub's REST OpenAPI description, among the largest published, is ~12 MB;
a 100 MB document took over a minute and ~3 GB to parse and would then compose for hours."""
MAX_DEPTH = 64
"""The deepest nesting accepted. Real schemas stay under ~20 levels; past ~1000 the parsers and every
recursive walk after them (repr, deepcopy, json.dumps) raise RecursionError."""


MAX_MESSAGE = 500


class DocumentError(UserError, ValueError):
    """A tool document that cannot be read as one; the message names where and what is wrong. It is one
    line however the document names its keys: unprintable characters are escaped, the length capped."""

    def __init__(self, message: str) -> None:
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in message)
        super().__init__(text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "...")


def _kind(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def as_object(value: Any, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    """`value` as a JSON object; absent (None) is an empty one unless `optional` is False."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise DocumentError(f"{where}: expected an object, got {_kind(value)}")
    return value


def as_list(value: Any, where: str, *, optional: bool = True) -> list[Any]:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise DocumentError(f"{where}: expected a list, got {_kind(value)}")
    return value


def as_text(value: Any, where: str, default: str = "") -> str:
    """A string field; a number or boolean is taken as its text, a container is refused."""
    if value is None:
        return default
    if isinstance(value, bool | int | float | str):
        return str(value)
    raise DocumentError(f"{where}: expected a string, got {_kind(value)}")


def as_scalar_list(value: Any, where: str) -> tuple[str, ...]:
    """A list of strings/numbers (`enum`, `required`), each as its text."""
    return tuple(as_text(v, f"{where}[{i}]") for i, v in enumerate(as_list(value, where)))


def depth(data: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply `data` nests (iteratively: a recursive walk is what a hostile document breaks);
    stops counting at `limit` + 1. Each container is walked once: YAML aliases share one object many
    times, and walking every path through them is exponential (the "billion laughs")."""
    deepest, stack, seen = 0, [(data, 1)], set()
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for c in children:
            if isinstance(c, dict | list) and id(c) not in seen:
                seen.add(id(c))
                stack.append((c, d + 1))
    return deepest


def _parse(path: Path, text: str) -> Any:
    if path.suffix in (".yaml", ".yml"):
        import yaml  # optional: JSON documents need nothing

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise DocumentError(
                f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}"
            ) from None
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DocumentError(f"{path}: not valid TOML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None


def read_document(path: Path, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """The parsed document (JSON, or YAML / TOML by suffix), refused with one line when it is too large,
    not text, not parseable or nested deeper than `MAX_DEPTH`."""
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentError(
            f"{path}: {size / 2**20:.1f} MiB; tool documents over {max_bytes / 2**20:.0f} MiB are "
            "refused (import a subset of its tools)"
        )
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = _parse(path, text)
    except RecursionError:  # the parsers' own limit (~1000 levels) is far above MAX_DEPTH
        data = None
        nested = True
    else:
        nested = depth(data) > MAX_DEPTH
    if nested:
        raise DocumentError(f"{path}: nested more than {MAX_DEPTH} levels deep; not a tool document")
    return data
