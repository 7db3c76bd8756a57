"""Test stand-in for upstream's error-injection helper: `add_error_injection(app)` answers 503 to the
first POST of a path named in `FAIL_ONCE` (comma-separated), so a test can see a transient error."""

from __future__ import annotations

import os

from fastapi import Request
from fastapi.responses import JSONResponse

_failed: set[str] = set()


def add_error_injection(app):
    @app.middleware("http")
    async def _fail_once(request: Request, call_next):
        wanted = {p for p in os.environ.get("FAIL_ONCE", "").split(",") if p}
        path = request.url.path
        if request.method == "POST" and path in wanted and path not in _failed:
            _failed.add(path)
            return JSONResponse(status_code=503, content={"error": "unavailable, retry"})
        return await call_next(request)
