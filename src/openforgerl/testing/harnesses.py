"""A scripted harness that stands in for an agent with a shell: it asks the model once, then runs its script.

An agent acts only after a model answer, and a harness that ends before its first model call is infra
(`orchestrator/classify.py`: the model decided nothing), so a script that acts without asking would test
the harness-start rule instead of what it means to test.
"""

from __future__ import annotations

import sys

from openforgerl.harness.generic import CommandHarness

__all__ = ["CALL_MODEL", "after_a_model_call"]

CALL_MODEL = (
    f'{sys.executable} -c "import json, os, urllib.request as u; '
    "r = u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
    "json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(), "
    "{'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'], 'Content-Type': 'application/json'}); "
    'print(u.urlopen(r, timeout=60).status)"'
)
"""One chat call to the rollout's own base URL with its key (prints the HTTP status)."""


def after_a_model_call(script: str) -> CommandHarness:
    """`sh -c` running one model call, then `script` (the instruction arrives as $0)."""
    return CommandHarness(["sh", "-c", f"{CALL_MODEL} >/dev/null; {script}"])
