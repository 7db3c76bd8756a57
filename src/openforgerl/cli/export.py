"""`openforgerl export`: reconstruct a call log into veRL-ready training rows.

The reconstruction settings come from the one config schema (`openforgerl.config`), as the trainer
reads them: `--config FILE` (its `reconstruction` section, e.g. the training config the log was
recorded under) with `--max-prompt-len`, `--max-response-len` and `--overflow` given on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from openforgerl.export.pipeline import ExportFormat
from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions


def command(
    store: Annotated[
        str,
        typer.Option(
            help="the call log written by the gateway: a SQLite file, or a postgresql://user@host/db URL"
        ),
    ],
    out: Annotated[Path, typer.Option(help="output file (.parquet or .jsonl)")],
    format: Annotated[
        ExportFormat, typer.Option("--format", help="verl | parquet | jsonl")
    ] = ExportFormat.VERL,
    config: Annotated[Path | None, typer.Option(help="a config YAML (openforgerl.config); flags win")] = None,
    max_prompt_len: Annotated[int | None, typer.Option(help="trainer prompt length")] = None,
    max_response_len: Annotated[int | None, typer.Option(help="trainer response length")] = None,
    overflow: Annotated[OverflowPolicy | None, typer.Option(help="truncate (default) | drop | split")] = None,
    classic: Annotated[bool, typer.Option(help="one row per rollout (veRL classic path)")] = False,
    image_token_id: Annotated[
        int | None,
        typer.Option(help="<|image_pad|> id for the pad-count check where a call recorded no processor"),
    ] = None,
    inline_images: Annotated[
        bool, typer.Option(help="image bytes (base64) in the rows instead of call-log blob references")
    ] = False,
    metrics_out: Annotated[Path | None, typer.Option(help="metrics JSON (default: OUT.metrics.json)")] = None,
) -> None:
    """Reconstruct chains from a call log and write veRL AgentLoopOutput rows (+ metrics JSON)."""
    from openforgerl.export.images import ImageMode
    from openforgerl.export.pipeline import export_rows, reconstruct_log, write_rows
    from openforgerl.store import is_postgres_url, open_store
    from openforgerl.trajectory import aggregate_by_harness

    if not is_postgres_url(store) and not Path(store).exists():
        raise typer.BadParameter(f"no call log at {store}", param_hint="--store")
    want = ".jsonl" if format is ExportFormat.JSONL else ".parquet"
    if out.suffix != want:  # a JSONL file named .parquet (or the reverse) breaks whatever reads it next
        raise typer.BadParameter(
            f"--format {format.value} writes {want}, but the path ends in "
            f"{out.suffix or 'no suffix'}: name it {out.with_suffix(want).name}",
            param_hint="--out",
        )
    options = reconstruction_options(
        config,
        {
            "reconstruction.max_prompt_len": max_prompt_len,
            "reconstruction.max_response_len": max_response_len,
            "reconstruction.overflow": overflow and overflow.value,
        },
        image_token_id,
    )
    log = open_store(store)  # a PostgreSQL server that is unreachable, or refuses us: one line, exit 2
    # where a reader of `ref` rows finds the bytes: the file, or the URL without its password
    blob_store = log.path if is_postgres_url(store) else str(Path(store).resolve())
    try:
        results = list(reconstruct_log(log, options))
        rows = export_rows(
            results,
            format,
            classic=classic,
            image_token_id=image_token_id,
            images=ImageMode.INLINE if inline_images else ImageMode.REF,
            read_blob=log.read_blob,
            blob_store=str(blob_store),
        )
    finally:
        log.close()
    write_rows(rows, format, out)
    per_harness = {k: v.as_dict() for k, v in aggregate_by_harness(r.metrics for r in results).items()}
    report = {
        "rows": len(rows),
        "per_harness": per_harness,
        "rollouts": [r.metrics.as_dict() for r in results],
    }
    (metrics_out or out.with_name(out.name + ".metrics.json")).write_bytes(
        orjson.dumps(report, option=orjson.OPT_INDENT_2)
    )
    typer.echo(f"wrote {len(rows)} rows from {len(results)} rollouts to {out}")
    for name, m in per_harness.items():
        typer.echo(_summary_line(name, m))
    for line in drop_lines([r.metrics.dropped_reason for r in results]):
        typer.echo(line)


def reconstruction_options(
    config_file: Path | None, flags: dict[str, object], image_token_id: int | None
) -> ReconstructionOptions:
    """The config's reconstruction contract (`Config.reconstruction_options`) with the flags given on top;
    `image_token_id` is what this log's model knows, not a config key."""
    from openforgerl.config import from_flags

    return from_flags(config_file, flags).reconstruction_options(image_token_id=image_token_id)


_WHY = (  # reason prefix (trajectory/trainable.py) -> what it means and what to do about it
    (
        "infra:",
        "an infrastructure fault hit it; such rollouts are retried by the orchestrator, never trained",
    ),
    ("unfinished", "it was never closed: send its outcome (POST /rollouts/{id}/outcome)"),
    ("status:", "its status is not trained (only ok, agent_failed and a kept timeout are)"),
    (
        "not_in_batch:undecided",
        "no orchestrator decided on it: send `in_batch: true` and `group_valid: true` "
        "in its outcome to train it (docs: gateway-api.md, The outcome)",
    ),
    ("not_in_batch:", "the orchestrator left it out of the batch"),
    (
        "group_invalid:undecided",
        "no orchestrator decided on its group: send `group_valid: true` in its outcome",
    ),
    ("group_invalid:", "its GRPO group kept fewer than min_group_size rollouts"),
    ("no_reward", "it has no reward: send `reward` in its outcome"),
)


def drop_lines(reasons: list[str | None]) -> list[str]:
    """`dropped N of M rollouts:` and one line per reason with its count and what to do, so an export of
    0 rows says why without opening the metrics file."""
    from collections import Counter

    counts = Counter(r.split(" ", 1)[0] for r in reasons if r)
    if not counts:
        return []
    lines = [f"dropped {sum(counts.values())} of {len(reasons)} rollouts (not trainable):"]
    for reason, n in counts.most_common():
        why = next((text for prefix, text in _WHY if reason.startswith(prefix)), "")
        lines.append(f"  {n} {reason}" + (f": {why}" if why else ""))
    return lines


def _summary_line(name: str, m: dict[str, object]) -> str:
    rate = m["merge_rate"]
    rate_text = f"{rate:.3f}" if isinstance(rate, float) else "n/a"
    return (
        f"  {name}: rollouts={m['rollouts']} dropped={m['dropped_rollouts']} chains={m.get('chains', 0)} "
        f"merge_rate={rate_text} trained={m.get('tokens_trained', 0)} seen={m.get('tokens_seen', 0)} "
        f"breaks={m['break_causes']}"
    )
