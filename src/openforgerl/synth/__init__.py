"""Task synthesis: environments as data, tasks composed from their tools, validated before they are kept.

- `toolenv`: the format (`ToolEnv`, `Tool`, `Param`, `Collection`), `loading.load_env`; `importers` reads an
  MCP `tools/list` result or an OpenAPI 3 document.
- `compose`: atoms along the data flow between tool schemas, and variants (dup, fault, impossible).
- `filters`: in-process validation with the verifier's evaluator; `dedup`: exact + MinHash.
- `pipeline.synthesize` (= `openforgerl tasks synthesize`), `agreement.sandbox_agreement`.
- `calibrate`: pass rates per task, `select_band`, `refresh`, `pools`; `measure` runs a live policy
  (`train`'s `refresh_every`); `tasks synthesize --calibrate` runs it through `cli/live_calibration.py`
  (`train`'s services and harness: wiring, so in the CLI, and `synth` never imports `train`).
- `plugins`: what environments give synthesis through entry points: their tool environments (`--env claw`,
  `--env claw-family`, re-expressed from the Claw services in `envs/claw/synth.py`) and the task writer.
"""

from openforgerl.synth.calibrate import (
    calibrate,
    inprocess_runner,
    orchestrator_runner,
    pools,
    refresh,
    select_band,
)
from openforgerl.synth.loading import load_env
from openforgerl.synth.pipeline import Report, synthesize
from openforgerl.synth.toolenv import Collection, Param, Tool, ToolEnv

__all__ = [
    "Collection",
    "Param",
    "Report",
    "Tool",
    "ToolEnv",
    "calibrate",
    "inprocess_runner",
    "load_env",
    "orchestrator_runner",
    "pools",
    "refresh",
    "select_band",
    "synthesize",
]
