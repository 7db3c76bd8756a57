"""The SDK's declarative checks: the kinds a spec may name are one registry, the built-in kinds need no
environment, and an environment's kinds exist only once that environment registered them."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import CHECK_KINDS, Check, CheckKind, InvalidValue, parse_spec, string
from openforgerl.env.errors import TaskFormatError

_PARSE = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "{setup}"
    "from openforgerl.env.checks.spec import parse_spec\n"
    "from openforgerl.env.errors import TaskFormatError\n"
    "try:\n"
    "    parse_spec({{'checks': [{{'kind': 'llm_judge', 'rubric': 'polite?'}}]}}, Path('checks.toml'))\n"
    "except TaskFormatError as exc:\n"
    "    print('refused', exc)\n"
    "else:\n"
    "    print('parsed')\n"
    "print(sorted(m for m in sys.modules if m.startswith('openforgerl.envs')))\n"
)


def _parse_in_a_fresh_interpreter(setup: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-I", "-c", _PARSE.format(setup=setup)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.splitlines()


def test_the_sdk_alone_knows_the_built_in_kinds_and_imports_no_environment() -> None:
    verdict, loaded = _parse_in_a_fresh_interpreter("")
    known = verdict.partition("expected tags: ")[2]
    assert verdict.startswith("refused") and "'record'" in known and "'llm_judge'" not in known
    assert loaded == "[]"  # parsing a spec imported no environment package


def test_claws_kinds_parse_once_claw_registered_them() -> None:
    """Control for the test above: the same spec parses once Claw's verifier package is imported."""
    verdict, loaded = _parse_in_a_fresh_interpreter("import openforgerl.envs.claw.verify\n")
    assert verdict == "parsed" and "openforgerl.envs.claw.verify" in loaded


@dataclass
class _EvenCheck(Check):
    collection: str = ""


def _even(c: _EvenCheck, ev: Evidence) -> tuple[bool, str]:
    n = len(ev.state.get(c.collection, []))
    return n % 2 == 0, f"{n} item(s)"


def _collection(v: Any) -> str:
    if not string(v).isidentifier():
        raise InvalidValue("Input should be an identifier")
    return str(v)


@pytest.fixture
def even_kind() -> Any:
    CHECK_KINDS.register("even", CheckKind(_EvenCheck, {"collection": _collection}, ("collection",), _even))
    yield
    CHECK_KINDS.unregister("even")


def test_a_registered_kind_is_parsed_with_its_fields_and_judged_by_its_judge(even_kind: None) -> None:
    spec = parse_spec({"checks": [{"kind": "even", "collection": "items"}]}, Path("checks.toml"))
    assert evaluate(spec, Evidence({"items": [1, 2]}, [], None)).reward == 1.0
    assert evaluate(spec, Evidence({"items": [1]}, [], None)).reward == 0.0
    with pytest.raises(TaskFormatError, match=r"checks\.0\.even\.collection: Input should be an identifier"):
        parse_spec({"checks": [{"kind": "even", "collection": "not one"}]}, Path("checks.toml"))
    with pytest.raises(TaskFormatError, match=r"checks\.0\.even\.collection: Field required"):
        parse_spec({"checks": [{"kind": "even"}]}, Path("checks.toml"))


def test_an_unregistered_kind_is_one_format_error_naming_the_known_ones() -> None:
    """Control for the test above: without the registration, the same spec is refused."""
    assert "even" not in CHECK_KINDS
    with pytest.raises(TaskFormatError, match=r"checks\.0: Input tag 'even' .* 'record', 'no_record'"):
        parse_spec({"checks": [{"kind": "even", "collection": "items"}]}, Path("checks.toml"))
