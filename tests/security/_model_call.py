"""One model call from inside a sandbox, as a shell command: an agent acts only after a model answer, and a
harness that ends before its first model call is infra (orchestrator/classify.py), so a scripted harness
that stands in for an agent asks the model once before it acts."""

from __future__ import annotations

import sys

CALL_MODEL = (f"{sys.executable} -c \"import json, os, urllib.request as u; "
              "r = u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
              "json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(), "
              "{'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'], 'Content-Type': 'application/json'}); "
              "print(u.urlopen(r, timeout=60).status)\"")
