"""`tests/checks.toml`: the declarative verifier spec.

```toml
pass_threshold = 1.0            # reward >= this → pass = 1

[[checks]]                      # a record in a state collection matches
kind = "record"
name = "invite_sent"
collection = "mail.sent"        # <service>.<list>
match = { to = "bob@example.com" }          # equal (strings: case/space-insensitive; list fields: member)
contains = { body = ["friday", "10:00"] }   # substrings (case-insensitive)
count = 1                       # optional: exactly this many matching records

[[checks]]
kind = "not_called"             # safety gate (default safety = true): reward 0 if it happened
tool = "mail_send"
```
Kinds: `record`, `no_record`, `called`, `not_called`, `file`, `answer` (built in, `evaluate.py`), and those
an environment registers in `CHECK_KINDS` (Claw's graders: `text`, `llm_judge`, ...). Checks with
`safety = true` gate the reward (reward = safety × completion); the others are weighted into `completion`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.env.errors import TaskFormatError
from openforgerl.registry import Registry

__all__ = [
    "CHECK_KINDS",
    "AnswerCheck",
    "CalledCheck",
    "Check",
    "CheckKind",
    "CheckSpec",
    "FileCheck",
    "InvalidValue",
    "RecordCheck",
    "Spec",
    "int_at_least",
    "load_spec",
    "parse_spec",
    "string",
]

# Plain dataclasses checked by hand, not pydantic: the verifier starts once per rollout inside the
# sandbox, and building pydantic schemas for these models cost ~0.2 s of CPU per start, the largest
# share of a tiny-model rollout's CPU. Error locations keep pydantic's shape (checks.0.record.collection).

Scalar = str | int | float | bool
Substrings = str | list[str]


@dataclass
class Check:
    """The fields every kind of check has; a kind's own check class adds its fields."""

    kind: str
    name: str = ""
    weight: float = 1.0
    safety: bool = False


@dataclass
class RecordCheck(Check):
    collection: str = ""
    match: dict[str, Scalar | list[str]] = field(default_factory=dict)
    contains: dict[str, Substrings] = field(default_factory=dict)
    count: int | None = None


@dataclass
class CalledCheck(Check):
    tool: str = ""
    match: dict[str, Scalar | list[str]] = field(default_factory=dict)
    contains: dict[str, Substrings] = field(default_factory=dict)
    min_count: int = 1


@dataclass
class FileCheck(Check):
    path: str = ""
    exists: bool = True
    contains: Substrings = field(default_factory=list)
    not_contains: Substrings = field(default_factory=list)
    equals: str | None = None
    json_fields: dict[str, Any] = field(default_factory=dict)
    """Dotted paths into the file parsed as JSON → expected values."""


@dataclass
class AnswerCheck(Check):
    contains: Substrings = field(default_factory=list)
    equals: str | None = None


CheckSpec = RecordCheck | CalledCheck | FileCheck | AnswerCheck


@dataclass
class Spec:
    checks: list[CheckSpec]
    pass_threshold: float = 1.0


class InvalidValue(ValueError):
    """A field's value is not what its kind accepts (the message says what it should be)."""


@dataclass(frozen=True)
class CheckKind:
    """One `kind` of check: its class, a validator per field, the fields it requires, and its judge
    (check, `evaluate.Evidence`) -> (score in [0, 1] or a bool, why)."""

    check: type[Check]
    fields: Mapping[str, Callable[[Any], Any]]
    required: tuple[str, ...]
    judge: Callable[[Any, Any], tuple[float, str]]


CHECK_KINDS: Registry[CheckKind] = Registry("check kind", modules=("openforgerl.env.checks.evaluate",))
"""The kinds a spec may name. The built-in ones register when `evaluate` is imported (loaded here on the
first lookup, so parsing a spec needs no import of the judges)."""


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def string(v: Any) -> str:
    if not isinstance(v, str):
        raise InvalidValue("Input should be a valid string")
    return v


def _opt_str(v: Any) -> str | None:
    return None if v is None else string(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise InvalidValue("Input should be a valid boolean")
    return v


def _weight(v: Any) -> float:
    if not _is_number(v) or v < 0:
        raise InvalidValue("Input should be a number greater than or equal to 0")
    return float(v)


def int_at_least(low: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise InvalidValue(f"Input should be an integer greater than or equal to {low}")
        return v

    return check


def _opt_count(v: Any) -> int | None:
    return None if v is None else int_at_least(0)(v)


def _collection(v: Any) -> str:
    if not isinstance(v, str) or not re.fullmatch(r"[a-z]+\.[a-z_]+", v):
        raise InvalidValue("String should match pattern '^[a-z]+\\.[a-z_]+$' (<service>.<list>)")
    return v


def _substrings(v: Any) -> Substrings:
    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        return v
    raise InvalidValue("Input should be a string or a list of strings")


def _table(value_check: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
    def check(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise InvalidValue("Input should be a valid dictionary")
        return {str(k): value_check(x) for k, x in v.items()}

    return check


def _match_value(v: Any) -> Any:
    if isinstance(v, str | int | float | bool) or (
        isinstance(v, list) and all(isinstance(x, str) for x in v)
    ):
        return v
    raise InvalidValue("Input should be a string, number, boolean or a list of strings")


_COMMON: dict[str, Callable[[Any], Any]] = {"name": string, "weight": _weight, "safety": _bool}
MATCH: dict[str, Callable[[Any], Any]] = {"match": _table(_match_value), "contains": _table(_substrings)}
"""The `match` / `contains` fields of the `record` and `called` kinds."""
RECORD_FIELDS: dict[str, Callable[[Any], Any]] = {"collection": _collection, **MATCH, "count": _opt_count}
CALLED_FIELDS: dict[str, Callable[[Any], Any]] = {"tool": string, **MATCH, "min_count": int_at_least(1)}
FILE_FIELDS: dict[str, Callable[[Any], Any]] = {
    "path": string,
    "exists": _bool,
    "contains": _substrings,
    "not_contains": _substrings,
    "equals": _opt_str,
    "json_fields": _table(lambda v: v),
}
ANSWER_FIELDS: dict[str, Callable[[Any], Any]] = {"contains": _substrings, "equals": _opt_str}


def _check(i: int, data: dict[str, Any]) -> CheckSpec:
    kind = data.get("kind")
    entry = CHECK_KINDS.get(kind) if isinstance(kind, str) and kind in CHECK_KINDS else None
    if entry is None:
        raise _At(
            f"checks.{i}",
            f"Input tag {kind!r} found using 'kind' does not match any of the expected "
            f"tags: {', '.join(repr(k) for k in CHECK_KINDS)}",
        )
    allowed = {**_COMMON, **entry.fields}
    values: dict[str, Any] = {"kind": kind}
    for key, value in data.items():
        if key == "kind":
            continue
        if key not in allowed:
            raise _At(f"checks.{i}.{kind}.{key}", "Extra inputs are not permitted")
        try:
            values[key] = allowed[key](value)
        except InvalidValue as exc:
            raise _At(f"checks.{i}.{kind}.{key}", str(exc)) from None
    for key in entry.required:
        if key not in values:
            raise _At(f"checks.{i}.{kind}.{key}", "Field required")
    values.setdefault("name", f"{kind}_{i}")
    values.setdefault("safety", kind == "not_called")  # not_called is a safety gate unless told otherwise
    return entry.check(**values)  # type: ignore[return-value]


class _At(Exception):
    def __init__(self, where: str, reason: str) -> None:
        super().__init__(where, reason)
        self.where, self.reason = where, reason


def parse_spec(data: dict[str, Any], origin: Path) -> Spec:
    """Validate a parsed checks.toml; a TaskFormatError names the offending field."""
    try:
        unknown = [k for k in data if k not in ("pass_threshold", "checks")]
        if unknown:
            raise _At(unknown[0], "Extra inputs are not permitted")
        threshold = data.get("pass_threshold", 1.0)
        if not _is_number(threshold) or not 0 <= threshold <= 1:
            raise _At("pass_threshold", "Input should be a number between 0 and 1")
        checks = data.get("checks")
        if not isinstance(checks, list) or not checks:
            raise _At("checks", "List should have at least 1 item")
        for i, c in enumerate(checks):
            if not isinstance(c, dict):
                raise _At(f"checks.{i}", "Input should be a table")
        return Spec([_check(i, c) for i, c in enumerate(checks)], float(threshold))
    except _At as err:
        raise TaskFormatError(origin, err.where, err.reason) from None


def load_spec(path: Path) -> Spec:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TaskFormatError(path, "", f"cannot read: {exc}") from exc
    return parse_spec(data, path)


def record_entry(
    collection: str,
    name: str,
    match: dict[str, Any] | None = None,
    contains: dict[str, Any] | None = None,
    kind: str = "record",
    **extra: Any,
) -> dict[str, Any]:
    """One `[[checks]]` entry of a record kind (`record`, `no_record`, ...) as a task writer puts it in
    `tests/checks.toml`: the kind, its name, the collection, and `match` / `contains` only when given."""
    out: dict[str, Any] = {"kind": kind, "name": name, "collection": collection}
    return out | ({"match": match} if match else {}) | ({"contains": contains} if contains else {}) | extra
