"""A minimal Chat Completions client for `zero` (stdlib only).

`zero` starts once per rollout, and importing the `openai` SDK costs ~0.5 s of CPU (its type
modules), which was most of a tiny-model rollout's CPU on 2 cores. This client sends the same
request and keeps the SDK's retry contract: connection errors, timeouts, 408/409/429 and 5xx are
retried `max_retries` times with capped exponential backoff (honouring `Retry-After`), every other
status fails at once. Answers are plain dicts, exactly as the server sent them.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

RETRY_STATUSES = frozenset({408, 409, 429})
_BACKOFF_S, _MAX_BACKOFF_S, _MAX_RETRY_AFTER_S = 0.5, 8.0, 60.0


class ModelAPIError(Exception):
    """The model API failed for good (after retries, or a status that is not retried)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ChatClient:
    """POST `{base_url}/chat/completions` with a Bearer key; one connection per call."""

    base_url: str
    api_key: str
    max_retries: int = 2

    def create(
        self, body: dict[str, Any], *, timeout: float, deadline: float | None = None
    ) -> dict[str, Any]:
        """The completion as a dict; raises ModelAPIError. `deadline` (monotonic) caps retries."""
        payload = json.dumps(body).encode()
        attempt = 0
        while True:
            status: int | None = None  # None: no HTTP answer at all
            try:
                code, headers, data = self._post(payload, timeout)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                headers, why = {}, f"connection error: {exc!r}"
            else:
                status = code
                if code == 200:
                    return _json_object(data, code)
                why = f"HTTP {code}: {data[:500].decode(errors='replace')}"
                if not (code in RETRY_STATUSES or code >= 500):
                    raise ModelAPIError(why, code)
            if attempt >= self.max_retries:
                raise ModelAPIError(why, status)
            wait = _retry_after(headers) or min(_BACKOFF_S * 2**attempt, _MAX_BACKOFF_S) * random.uniform(
                0.75, 1.0
            )
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise ModelAPIError(f"{why} (no time left to retry)", status)
            time.sleep(wait)
            attempt += 1

    def _post(self, payload: bytes, timeout: float) -> tuple[int, dict[str, str], bytes]:
        url = urllib.parse.urlsplit(self.base_url.rstrip("/") + "/chat/completions")
        conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(url.hostname or "localhost", url.port, timeout=max(timeout, 0.001))
        path = url.path + (f"?{url.query}" if url.query else "")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {self.api_key}",
            "User-Agent": "openforgerl-zero/1",
        }
        try:
            conn.request("POST", path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except TimeoutError as exc:
            raise TimeoutError(f"no answer within {timeout:.1f}s") from exc
        finally:
            conn.close()


def _json_object(data: bytes, status: int) -> dict[str, Any]:
    try:
        answer = json.loads(data)
    except ValueError as exc:
        raise ModelAPIError(f"answer is not JSON: {data[:200]!r}", status) from exc
    if not isinstance(answer, dict):
        raise ModelAPIError(f"answer is not a JSON object: {data[:200]!r}", status)
    return answer


def _retry_after(headers: dict[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            value = float(headers[name]) * scale
        except (KeyError, ValueError):
            continue
        if 0 < value <= _MAX_RETRY_AFTER_S:
            return value
    return None


def drop_none(value: Any) -> Any:
    """The message without null fields, recursively (what the SDK's `exclude_none` dump gave)."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value
