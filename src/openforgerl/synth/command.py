"""The body of `openforgerl tasks synthesize` (the typer command in `envs/command.py` only parses)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

__all__ = ["run_synthesize"]


def run_synthesize(env: str, n: int, out: Path, seed: int, paraphrase_engine: str | None, paraphrase_model: str,
                   sandbox: int, echo: Callable[[str], None] = print) -> int:
    """Synthesize, print the report table, optionally check agreement with the sandbox; exit code."""
    from openforgerl.synth.paraphrase import http_paraphraser
    from openforgerl.synth.pipeline import REPORT, synthesize

    engine = http_paraphraser(paraphrase_engine, paraphrase_model) if paraphrase_engine else None
    try:
        report, paths, rejected = synthesize(env, n, out, seed=seed, paraphraser=engine,
                                             keep_rejected=min(5, sandbox) if sandbox else 0)
    except ValueError as exc:  # an --env that is not an environment
        echo(f"error: {exc}")
        return 2
    echo(report.table())
    echo(f"wrote {len(paths)} tasks to {out} (report: {out / REPORT})")
    if sandbox:
        from openforgerl.synth.agreement import sandbox_agreement

        report.sandbox = sandbox_agreement(env, paths, rejected, sandbox, seed=seed)
        (out / REPORT).write_text(json.dumps(report.__dict__, indent=1, default=str) + "\n")
        s = report.sandbox
        if "skipped" in s:
            echo(f"sandbox check skipped: {s['skipped']}")
        else:
            echo(f"sandbox agreement: {s['agreed']}/{s['checked']} (kept valid in sandbox: "
                 f"{s['sandbox_valid_kept']}/{s['kept_checked']}, rejected re-checked: {s['rejected_checked']})")
            if s["agreed"] != s["checked"]:
                return 1
    return 0 if report.kept else 1
