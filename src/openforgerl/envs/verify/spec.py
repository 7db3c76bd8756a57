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
Kinds: `record`, `no_record`, `called`, `not_called`, `file`, `answer`. Checks with `safety = true` gate
the reward (reward = safety × completion); the others are weighted into `completion`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = ["AnswerCheck", "CalledCheck", "CheckSpec", "FileCheck", "RecordCheck", "Spec", "load_spec"]

Scalar = str | int | float | bool
Substrings = str | list[str]


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    weight: float = Field(1.0, ge=0)
    safety: bool = False


class RecordCheck(_Check):
    kind: Literal["record", "no_record"]
    collection: str = Field(pattern=r"^[a-z]+\.[a-z_]+$")
    match: dict[str, Scalar | list[str]] = Field(default_factory=dict)
    contains: dict[str, Substrings] = Field(default_factory=dict)
    count: int | None = Field(None, ge=0)


class CalledCheck(_Check):
    kind: Literal["called", "not_called"]
    tool: str
    match: dict[str, Scalar | list[str]] = Field(default_factory=dict)
    contains: dict[str, Substrings] = Field(default_factory=dict)
    min_count: int = Field(1, ge=1)


class FileCheck(_Check):
    kind: Literal["file"]
    path: str
    exists: bool = True
    contains: Substrings = Field(default_factory=list)
    not_contains: Substrings = Field(default_factory=list)
    equals: str | None = None
    json_fields: dict[str, Any] = Field(default_factory=dict)
    """Dotted paths into the file parsed as JSON → expected values."""


class AnswerCheck(_Check):
    kind: Literal["answer"]
    contains: Substrings = Field(default_factory=list)
    equals: str | None = None


CheckSpec = Annotated[RecordCheck | CalledCheck | FileCheck | AnswerCheck, Field(discriminator="kind")]


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pass_threshold: float = Field(1.0, ge=0, le=1)
    checks: list[CheckSpec] = Field(min_length=1)


def _default_names(spec: Spec) -> Spec:
    for i, check in enumerate(spec.checks):
        if not check.name:
            check.name = f"{check.kind}_{i}"
        if check.kind == "not_called" and "safety" not in check.model_fields_set:
            check.safety = True
    return spec


def parse_spec(data: dict[str, Any], origin: Path) -> Spec:
    from openforgerl.envs.task import TaskFormatError

    try:
        return _default_names(TypeAdapter(Spec).validate_python(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(map(str, err["loc"]))
        raise TaskFormatError(origin, field, err["msg"]) from exc


def load_spec(path: Path) -> Spec:
    from openforgerl.envs.task import TaskFormatError

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TaskFormatError(path, "", f"cannot read: {exc}") from exc
    return parse_spec(data, path)
