"""Test mock service in upstream Claw-Eval's style: a ledger of accounts
(FastAPI, fixtures from LEDGER_FIXTURES)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from fastapi import FastAPI
from mock_services._base import add_error_injection
from pydantic import BaseModel

app = FastAPI(title="Test ledger")
add_error_injection(app)

FIXTURES = Path(
    os.environ.get(
        "LEDGER_FIXTURES",
        str(
            Path(__file__).resolve().parent.parent.parent
            / "tasks"
            / "T950_ledger_post"
            / "fixtures"
            / "ledger"
            / "accounts.json"
        ),
    )
)
_accounts: dict[str, dict[str, Any]] = {}
_posted: list[dict[str, Any]] = []
_calls: list[dict[str, Any]] = []


def _load() -> None:
    global _accounts
    _accounts = {a["account_id"]: dict(a) for a in json.loads(FIXTURES.read_text())}
    _posted.clear()


_load()


class Post(BaseModel):
    account_id: str
    amount: int
    memo: str = ""


@app.post("/ledger/accounts")
def accounts() -> dict[str, Any]:
    body = {"accounts": list(_accounts.values())}
    _calls.append({"endpoint": "/ledger/accounts", "request_body": {}, "response_body": body})
    return body


@app.post("/ledger/post")
def post(req: Post) -> dict[str, Any]:
    if req.account_id not in _accounts:
        return {"error": f"no account {req.account_id}"}
    _accounts[req.account_id]["balance"] += req.amount
    _posted.append(req.model_dump())
    body = {"ok": True, "balance": _accounts[req.account_id]["balance"]}
    _calls.append({"endpoint": "/ledger/post", "request_body": req.model_dump(), "response_body": body})
    return body


@app.post("/ledger/admin/credit")  # not a tool endpoint of any task: must be out of the agent's reach
def credit(req: Post) -> dict[str, Any]:
    _posted.append(req.model_dump())
    return {"ok": True}


@app.get("/ledger/audit")
def audit() -> dict[str, Any]:
    return {"calls": _calls, "posted": _posted, "accounts": list(_accounts.values())}


@app.post("/ledger/reset")
def reset() -> dict[str, Any]:
    _load()
    _calls.clear()
    return {"reset": True}
