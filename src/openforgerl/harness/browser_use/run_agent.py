"""Run browser-use's own `Agent`, unmodified, for one task (standalone: browser-use's venv and the stdlib).

`$VENV/bin/python -I run_agent.py`, configured by environment variables (set by the `browser-use` adapter):
the gateway (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENFORGERL_MODEL`), the instruction, and the browser:
browser-use launches Debian's Chromium itself inside the sandbox (headless, 1280x720, DPR 1, no extensions
download, no Chromium sandbox under bubblewrap), and opens the task's start page (`.gui/config.json`'s
`start_url` on the task's apps, 127.0.0.1:8080) as its initial action, before the first model call.
Exit status: 0 the agent called `done`, 2 step cap or wall clock, 3 the model API failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

ENV = os.environ


def start_url() -> str:
    """The task's start page: `start_url` from the GUI config in the workdir, on the apps' origin."""
    explicit = ENV.get("OPENFORGERL_BROWSER_USE_START_URL", "")
    if explicit:
        return explicit
    config = Path(ENV.get("OPENFORGERL_WORKDIR", "/workdir")) / ".gui" / "config.json"
    try:
        url = str(json.loads(config.read_text()).get("start_url") or "")
    except (OSError, ValueError):
        return ""
    apps = ENV.get("OPENFORGERL_BROWSER_USE_APPS_URL", "http://127.0.0.1:8080")
    return url if "://" in url or not url else apps.rstrip("/") + "/" + url.lstrip("/")


def model_failed(history: object) -> bool:
    errors = [e for e in getattr(history, "errors", lambda: [])() if e]
    markers = (
        "ModelProviderError",
        "status_code",
        "Error code: 5",
        "APIConnectionError",
        "InternalServerError",
        "Connection error",
        "Request timed out",
        "ModelRateLimitError",
    )
    return bool(errors) and any(m in str(errors[-1]) for m in markers)


async def main() -> int:
    from browser_use import Agent, BrowserProfile, BrowserSession, ChatOpenAI

    home = Path(ENV.get("HOME", "/tmp"))
    width, height = (int(v) for v in ENV.get("OPENFORGERL_BROWSER_USE_SCREEN", "1280x720").split("x"))
    llm = ChatOpenAI(
        model=ENV.get("OPENFORGERL_MODEL", "default"),
        base_url=ENV["OPENAI_BASE_URL"],
        api_key=ENV.get("OPENAI_API_KEY", ""),
        max_retries=int(ENV.get("OPENFORGERL_BROWSER_USE_RETRIES", "2")),
        timeout=float(ENV.get("OPENFORGERL_BROWSER_USE_CALL_TIMEOUT_S", "120")),
    )
    profile = BrowserProfile(
        executable_path=ENV.get("OPENFORGERL_CHROMIUM", "/usr/lib/chromium/chromium"),
        headless=True,
        chromium_sandbox=False,
        user_data_dir=str(home / "browser-use-profile"),
        downloads_path=str(home / "browser-use-downloads"),
        viewport={"width": width, "height": height},
        window_size={"width": width, "height": height},
        device_scale_factor=1,
        enable_default_extensions=False,
        args=[
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
        ],
    )
    url = start_url()
    agent = Agent(
        task=ENV.get("OPENFORGERL_INSTRUCTION", " ".join(sys.argv[1:])),
        llm=llm,
        browser_session=BrowserSession(browser_profile=profile),
        initial_actions=[{"navigate": {"url": url}}] if url else None,
        directly_open_url=False,
        use_judge=False,
        max_failures=int(ENV.get("OPENFORGERL_BROWSER_USE_MAX_FAILURES", "1")),
        final_response_after_failure=False,
        calculate_cost=False,
        llm_timeout=int(float(ENV.get("OPENFORGERL_BROWSER_USE_CALL_TIMEOUT_S", "120"))),
        save_conversation_path=ENV.get("OPENFORGERL_BROWSER_USE_CONVERSATION") or None,
    )
    max_steps = int(ENV.get("OPENFORGERL_BROWSER_USE_MAX_STEPS", "30"))
    wall = float(ENV.get("OPENFORGERL_BROWSER_USE_WALL_CLOCK_S", "600"))
    try:
        history = await asyncio.wait_for(agent.run(max_steps=max_steps), wall)
    except TimeoutError:
        print("[browser-use] stopped: wall clock", file=sys.stderr)
        return 2
    if history.is_done():
        print(history.final_result() or "", flush=True)
        return 0
    if model_failed(history):
        print(f"[browser-use] stopped: model API failed: {str(history.errors()[-1])[:500]}", file=sys.stderr)
        return 3
    print(f"[browser-use] stopped: not done after {history.number_of_steps()} steps", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
