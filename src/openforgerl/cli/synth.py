"""The body of `openforgerl tasks synthesize` (the typer command in `cli/tasks.py` only parses)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openforgerl.errors import UserError

__all__ = ["CalibrateOptions", "run_synthesize"]


@dataclass(frozen=True)
class CalibrateOptions:
    """`--calibrate` and the flags that only mean something with it."""

    calibrate: bool = False
    k: int | None = None
    gateway: str | None = None
    model: str | None = None
    config: Path | None = None

    def check(self) -> None:
        """Flag combinations that cannot mean what the user wants: one `error:` line each (UserError)."""
        given = [
            f"--{'group-size' if name == 'k' else name}"
            for name in ("k", "gateway", "model", "config")
            if getattr(self, name) is not None
        ]
        if given and not self.calibrate:
            raise UserError(f"{', '.join(given)}: only meaningful with --calibrate (add it, or drop them)")
        if self.gateway is not None and self.model is not None:
            raise UserError(
                "--model picks the policy of the embedded stack; with --gateway the policy is the one "
                "that gateway serves (drop one of them)"
            )
        if self.gateway is not None:
            from openforgerl.gateway.access import ADMIN_TOKEN_ENV, read_admin_token

            if not read_admin_token():
                raise UserError(
                    f"no admin token for {self.gateway}: set ${ADMIN_TOKEN_ENV} to the gateway's admin token"
                )
        if self.k is not None and self.k < 1:
            raise UserError(f"--group-size {self.k}: need at least 1 rollout per task")
        if self.config is not None and not self.config.is_file():
            raise UserError(f"--config {self.config}: no such training config")
        if (
            self.model is not None and self.model != "smollm2"
        ):  # smollm2 is fetched and converted on first use
            from openforgerl.engines.local.model import resolve_model_path

            try:
                resolve_model_path(self.model)
            except FileNotFoundError as exc:
                raise UserError(f"--model {exc}") from None


def run_synthesize(
    env: str,
    n: int,
    out: Path,
    seed: int,
    paraphrase_engine: str | None,
    paraphrase_model: str,
    sandbox: int,
    echo: Callable[[str], None] = print,
    calibration: CalibrateOptions | None = None,
) -> int:
    """Synthesize, print the report table, optionally check agreement with the sandbox and calibrate the
    kept tasks with the current policy; exit code."""
    from openforgerl.synth.paraphrase import http_paraphraser
    from openforgerl.synth.pipeline import REPORT, synthesize

    cal = calibration or CalibrateOptions()
    cal.check()  # before minutes of work, not after
    engine = http_paraphraser(paraphrase_engine, paraphrase_model) if paraphrase_engine else None
    try:
        report, paths, rejected = synthesize(
            env, n, out, seed=seed, paraphraser=engine, keep_rejected=min(5, sandbox) if sandbox else 0
        )
    except ValueError as exc:  # an --env that is not an environment
        echo(f"error: {exc}")
        return 2
    echo(report.table())
    echo(f"wrote {len(paths)} tasks to {out} (report: {out / REPORT})")
    code = 0 if report.kept else 1
    if sandbox:
        from openforgerl.synth.agreement import sandbox_agreement

        report.sandbox = sandbox_agreement(env, paths, rejected, sandbox, seed=seed)
        (out / REPORT).write_text(json.dumps(report.__dict__, indent=1, default=str) + "\n")
        s = report.sandbox
        if "skipped" in s:
            echo(f"sandbox check skipped: {s['skipped']}")
        else:
            echo(
                f"sandbox agreement: {s['agreed']}/{s['checked']} (kept valid in sandbox: "
                f"{s['sandbox_valid_kept']}/{s['kept_checked']}, "
                f"rejected re-checked: {s['rejected_checked']})"
            )
            if s["agreed"] != s["checked"]:
                code = 1
    if cal.calibrate and paths:
        report.calibration = _calibrate(out, cal, echo)
        (out / REPORT).write_text(json.dumps(report.__dict__, indent=1, default=str) + "\n")
    return code


def _calibrate(out: Path, cal: CalibrateOptions, echo: Callable[[str], None]) -> dict[str, object]:
    from openforgerl.cli.live_calibration import calibrate_embedded, calibrate_on_gateway

    k = cal.k or 4
    if cal.gateway is not None:
        results = calibrate_on_gateway(out, cal.gateway, k=k, config=cal.config)
        where = cal.gateway
    else:
        results = calibrate_embedded(out, k=k, model=cal.model, config=cal.config)
        where = "the embedded stack"
    rates = [c.pass_rate for c in results if c.pass_rate is not None]
    summary: dict[str, object] = {
        "k": k,
        "policy": where,
        "tasks": len(results),
        "scored": len(rates),
        "in_band": sum(1 for r in rates if 0.0 < r < 1.0),
        "never": sum(1 for r in rates if r == 0.0),
        "always": sum(1 for r in rates if r == 1.0),
        "mean_pass_rate": round(sum(rates) / len(rates), 4) if rates else None,
    }
    echo(
        f"calibrated {len(results)} tasks on {where} (k={k}): {summary['in_band']} with 0 < pass rate < 1, "
        f"{summary['never']} never solved, {summary['always']} always solved, "
        f"{len(results) - len(rates)} unscored (infra)"
    )
    return summary
