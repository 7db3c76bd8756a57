"""The one configuration schema of the whole system: one YAML file (or a command's flags) -> one `Config`.

Every command (`train`, `eval`, `rollout`, `gateway`, `tasks calibrate`) and the veRL agent loop build a
`Config` and open what it names through the composition root (`openforgerl.stack.open_services`). The
sections are the stages:

    model, out_dir, seed         the policy, where a run writes, its seed
    engine                       the policy engine (embedded local engine, or vLLM / SGLang URLs)
    store                        the call log
    gateway                      the recording gateway's listeners and limits
    sandbox                      the sandbox backend (a name from `sandbox/registry.py`) and its options
    harness, harness_options     the harness (or a weighted mix) and constructor options per name
    tasks                        the training (or rollout) task selection
    rollout                      the orchestrator: GRPO group size, retries, budgets, concurrency
    reconstruction               trajectory reconstruction (lengths, overflow policy)
    train                        the built-in GRPO trainer
    eval                         held-out evaluation (train's, and `openforgerl eval`'s)
    verl                         veRL agent-loop specifics (row mode, task roots, server addresses)

Every section is strict: an unknown key is one line naming it and the nearest valid name. The stages
keep their own frozen contracts (`OrchestratorConfig`, `ReconstructionOptions`, `UpdateSettings`,
`KubernetesConfig`); each is built from this schema in one method here, never configured separately.
The train stage's own sections (`tasks`, `train`, `eval`) are defined beside the trainer that reads them
(`train/settings.py`) and imported here.
The gateway's per-call deadline is derived once, in `Config.call_deadline_s`.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from openforgerl.errors import UserError
from openforgerl.orchestrator.config import call_deadline_s, check_call_deadline, max_tokens_cap
from openforgerl.train.settings import EvalSettings, TaskSelection, TrainSettings

if TYPE_CHECKING:
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.kubernetes.config import KubernetesConfig
    from openforgerl.trajectory.options import ReconstructionOptions

__all__ = [
    "Config",
    "ConfigError",
    "EngineSettings",
    "EvalSettings",
    "GatewaySettings",
    "KubernetesSettings",
    "ReconstructionSettings",
    "RolloutSettings",
    "SandboxSettings",
    "StoreSettings",
    "TaskSelection",
    "TrainSettings",
    "VerlSettings",
    "from_flags",
    "load_config",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSettings(_Strict):
    kind: Literal["local", "remote"] = "local"
    """`local`: the embedded engine serving `model`; `remote`: vLLM/SGLang servers at `urls`."""
    urls: list[str] = Field(default_factory=list)
    dialect: Literal["vllm", "sglang"] = "vllm"
    weights_dir: str | None = None
    """Directory the engines reload weights from (default `<out_dir>/weights`)."""
    separate_process: bool = True
    """`local` only: serve the embedded engine from its own process (its own GIL and core; weights
    pushed through its vLLM-style reload route) rather than a thread of the training process."""
    served_model: str | None = None
    """`remote` only: the model name the servers serve (default: ask them)."""
    max_tokens_cap: int | None = None
    """Clamp clients' `max_tokens` to this before forwarding (None: derived from the rollout budget,
    `Config.max_tokens_cap`)."""
    max_tokens: int = 96
    """Sampling of the trainer's own harnesses (`zero`, `zero-gui`)."""
    temperature: float = 1.0


class StoreSettings(_Strict):
    path: str | None = None
    """The call log: a SQLite file (default `<out_dir>/calls.db`; `openforgerl gateway`: `runs/calls.db`),
    or a `postgresql://user@host/db` URL, one log shared by several gateway replicas (store/postgres.py)."""


class GatewaySettings(_Strict):
    """The recording gateway (`gateway/server.start_gateway`). Port 0: any free port (embedded gateways)."""

    host: str = "127.0.0.1"
    port: int = 0
    admin_host: str | None = None
    """Default: `host`. Never an address a sandbox can reach."""
    admin_port: int = 0
    call_deadline_s: float | None = None
    """Per-call engine limit; None derives it from `rollout.budget_s` (budget - margin). A value not
    shorter than the rollout budget is refused."""
    pause_wait_s: float = 30.0
    max_in_flight: int = 4096
    max_in_flight_per_rollout: int = 64
    """One rollout's calls in flight (at most half of `max_in_flight`); one more is a 429 to that rollout
    only (a flood is its own doing)."""
    max_log_bytes_per_rollout: int = 512 * 1024 * 1024
    """One rollout's call log bytes (records and image blobs); a request past it is a 413 to that rollout."""
    policy_version: int = 0
    max_body_bytes: int = 64 * 1024 * 1024
    header_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    shutdown_timeout_s: float = 5.0
    verbatim_history: bool = True
    """Echoed assistant turns reach the engine as the model sampled them (`gateway/verbatim.py`)."""
    allow_image_urls: bool = False
    max_image_bytes: int = 20 * 1024 * 1024
    max_image_pixels: int = 40_000_000

    def server_options(self, call_deadline: float) -> dict[str, Any]:
        """`start_gateway`'s keyword arguments for this section (the one mapping from config to server)."""
        from openforgerl.gateway.images import ImagePolicy

        plain = self.model_dump(
            exclude={"call_deadline_s", "allow_image_urls", "max_image_bytes", "max_image_pixels"}
        )
        images = ImagePolicy(self.allow_image_urls, self.max_image_bytes, self.max_image_pixels)
        return {**plain, "call_deadline_s": call_deadline, "images": images}


class KubernetesSettings(_Strict):
    """What a user sets for `sandbox.backend: kubernetes`; unset keys come from `OPENFORGERL_K8S_*`
    (`KubernetesConfig.from_env`), then the backend's defaults."""

    namespace: str | None = None
    default_image: str | None = None
    gateway_url: str | None = None
    backend_id: str | None = None
    runtime_class_name: str | None = None
    service_account_name: str | None = None
    priority_class_name: str | None = None

    def build(self) -> KubernetesConfig:
        import dataclasses

        from openforgerl.sandbox.kubernetes.config import KubernetesConfig

        return dataclasses.replace(KubernetesConfig.from_env(), **self.model_dump(exclude_none=True))


class SandboxSettings(_Strict):
    backend: str = "local"
    """A registered backend (`sandbox/registry.py`: local, podman, kubernetes)."""
    image: str | None = None
    """Image for podman/kubernetes tasks that name none."""
    tools_dir: str | None = None
    """Where harness CLIs are installed (default: `$OPENFORGERL_TOOLS` or the package's `.tools`)."""
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)

    @field_validator("backend")
    @classmethod
    def _registered(cls, name: str) -> str:
        from openforgerl.sandbox.registry import BACKENDS

        if name not in BACKENDS:
            raise ValueError(str(BACKENDS.unknown(name)))
        return name


class RolloutSettings(_Strict):
    """The orchestrator (`orchestrator/config.OrchestratorConfig` is built from this)."""

    group_size: int = Field(default=8, ge=1)
    """Rollouts per task: one GRPO group (`rollout --group-size`, alias `--n`)."""
    min_group_size: int = Field(default=2, ge=1)
    """A group with fewer kept rollouts is dropped whole (capped at `group_size`)."""
    retries: int | None = Field(default=None, ge=0)
    """Extra attempts per group to refill infra-failed slots; None: `group_size`."""
    timeout_policy: Literal["drop", "zero"] = "drop"
    max_running: int = Field(default=32, ge=1)
    """Rollouts in flight at once (sandbox open to sandbox closed)."""
    max_booting: int = Field(default=16, ge=1)
    """Sandbox boots in flight at once."""
    budget_s: float | None = Field(default=None, gt=0)
    """Wall clock per rollout, overriding every task's own `budget_s` (None: the task's own)."""
    model_name: str = "policy"
    """Model name handed to the harness config (the gateway serves whatever it is called)."""
    verify_timeout_s: float = 600.0
    keep_output_bytes: int = 4096
    end_at_taint: bool = True
    """End a rollout's harness once the gateway has infra-tainted it, not at its budget (it is dropped
    anyway)."""


class ReconstructionSettings(_Strict):
    """Trajectory reconstruction (`trajectory/options.ReconstructionOptions` is built from this)."""

    max_prompt_len: int | None = None
    max_response_len: int | None = None
    overflow: Literal["truncate", "drop", "split"] = "truncate"
    compaction_ratio: float = 0.5
    related_prefix_tokens: int = 16


class VerlSettings(_Strict):
    """Our veRL agent loop (`compose/verl_loop.py`): keys of its `agent_loop_config_path` entry, with
    the sections above."""

    mode: Literal["auto", "v1", "classic"] = "auto"
    """`v1` (list of outputs), `classic` (one output), `auto`: `v1` when `trainer.use_v1`."""
    task_roots: list[str] = Field(default_factory=list)
    """Folders searched for a row's `task_id` / relative `task_dir` (default: the built-in Claw suite)."""
    engine_urls: list[str] = Field(default_factory=list)
    """Override the discovered veRL server addresses (e.g. a vLLM router in front of them)."""
    dialect: Literal["vllm", "sglang"] | None = None
    """Default: from `actor_rollout_ref.rollout.name`."""
    work_dir: str = ""
    """Call logs and sandboxes of a worker (default: `$TMPDIR/openforgerl-verl`)."""


class Config(_Strict):
    """The whole system's configuration (module docstring)."""

    model: str = "tiny"
    """`tiny` (the shipped warm-up model), `tiny-vl`, `smollm2`, `smollm2-tools` (SmolLM2 warmed up on
    tool calls, 32k context), or a HF model directory."""
    engine: EngineSettings = Field(default_factory=EngineSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    harness: str | dict[str, float] = "zero"
    """One harness name, or a weighted mix such as {zero: 0.5, codex: 0.5}."""
    harness_options: dict[str, dict[str, object]] = Field(default_factory=dict)
    """Constructor options per harness name, e.g. {zero: {builtins: "", max_turns: 3}}."""
    tasks: TaskSelection | list[TaskSelection] = Field(default_factory=TaskSelection)
    """One selection, or several whose tasks are pooled (e.g. the Claw suite plus synthesised tasks)."""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    reconstruction: ReconstructionSettings = Field(default_factory=ReconstructionSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    verl: VerlSettings = Field(default_factory=VerlSettings)
    out_dir: str = "runs/quickstart"
    seed: int = 0

    @model_validator(mode="after")
    def _nested_deadlines(self) -> Config:
        check_call_deadline(self.gateway.call_deadline_s, self.rollout.budget_s)
        return self

    @property
    def call_deadline_s(self) -> float:
        """The gateway's per-call limit, nested inside the rollout budget: the one derivation."""
        return call_deadline_s(self.rollout.budget_s, self.gateway.call_deadline_s)

    @property
    def max_tokens_cap(self) -> int:
        """The clamp on one answer's `max_tokens`: `engine.max_tokens_cap`, else derived from the rollout
        budget (`orchestrator.config.max_tokens_cap`: the one derivation, and why)."""
        return max_tokens_cap(self.rollout.budget_s, self.engine.max_tokens_cap)

    def orchestrator(
        self, *, group_size: int | None = None, artifacts_dir: Path | None = None, **overrides: Any
    ) -> OrchestratorConfig:
        """The orchestrator's contract for this config; `group_size` (default `rollout.group_size`) lets
        evaluation and calibration run their own group size with everything else the same."""
        from openforgerl.orchestrator.config import OrchestratorConfig

        r = self.rollout
        size = group_size or r.group_size
        fields: dict[str, Any] = dict(
            group_size=size,
            min_group_size=min(r.min_group_size, size),
            retries=r.retries,
            timeout_policy=r.timeout_policy,
            max_running=r.max_running,
            max_booting=r.max_booting,
            budget_s=r.budget_s,
            model=r.model_name,
            verify_timeout_s=r.verify_timeout_s,
            keep_output_bytes=r.keep_output_bytes,
            end_at_taint=r.end_at_taint,
            artifacts_dir=artifacts_dir,
        )
        if self.sandbox.tools_dir:
            fields["harness_cache"] = Path(self.sandbox.tools_dir)
        return OrchestratorConfig(**{**fields, **overrides})

    def eval_orchestrator(self, artifacts_dir: Path | None = None) -> OrchestratorConfig:
        """`openforgerl eval`'s orchestrator: `eval.group_size` trials per task, every group kept (min size
        1), a timeout scored 0 (its own column in the report)."""
        return self.orchestrator(
            group_size=self.eval.group_size,
            artifacts_dir=artifacts_dir,
            min_group_size=1,
            timeout_policy="zero",
        )

    def reconstruction_options(self, **overrides: Any) -> ReconstructionOptions:
        """The reconstruction contract; `overrides` are what the trainer knows at run time (veRL's
        lengths when the section leaves them unset, the policy's image token)."""
        from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions

        fields: dict[str, Any] = self.reconstruction.model_dump()
        fields["overflow"] = OverflowPolicy(fields["overflow"])
        for key, value in overrides.items():  # the section's own setting wins where it has one
            if fields.get(key) is None:
                fields[key] = value
        return ReconstructionOptions(**fields)

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, object] | None = None) -> Config:
        """The config in `path` with `overrides` (dotted keys, e.g. `train.steps`) applied; a bad one
        raises `ConfigError` with one line naming every problem."""
        return load_config(_read_yaml(path), overrides, source=str(path))


def _read_yaml(path: str | Path) -> dict[str, Any]:
    with open(
        path
    ) as stream:  # a named stream: `cli.user_mistake` names the file, line and column of bad YAML
        data = yaml.safe_load(stream) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of sections, not {type(data).__name__}")
    return data


def load_config(
    data: Mapping[str, Any] | None = None,
    overrides: Mapping[str, object] | None = None,
    *,
    source: str = "config",
) -> Config:
    """`data` (a YAML document, a command's flags) with dotted `overrides` set on top, validated;
    `ConfigError` (one line, every problem, nearest valid names) when it cannot run."""
    merged = _with_overrides(dict(data or {}), overrides or {})
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_one_line(exc)}") from None


def from_flags(
    config_file: Path | None, flags: Mapping[str, object], defaults: Mapping[str, object] | None = None
) -> Config:
    """A command's config: its `--config` YAML (else the defaults) with the flags the user gave on top
    (`flags`: dotted key -> value, None for a flag not given). `defaults` (dotted) are the command's own,
    under the YAML: what it sets where the YAML says nothing (`openforgerl gateway`'s fixed ports)."""
    given = {key: value for key, value in flags.items() if value is not None}
    data = _read_yaml(config_file) if config_file is not None else {}
    data = _with_overrides(
        data, {key: value for key, value in (defaults or {}).items() if not _has(data, key)}
    )
    return load_config(data, given, source=str(config_file) if config_file is not None else "flags")


class ConfigError(UserError, ValueError):
    """A config that cannot run (the message is one line, for the CLI)."""


def _has(data: Mapping[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _with_overrides(data: dict[str, Any], overrides: Mapping[str, object]) -> dict[str, Any]:
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, Mapping) else {}
            node = child
        node[leaf] = value
    return data


_MOVED = {
    "backend": "sandbox.backend",
    "eval_tasks": "eval.tasks",
    "eval_trials": "eval.group_size",
    "eval_every": "eval.every",
    "rollout_budget_s": "rollout.budget_s",
    "call_deadline_s": "gateway.call_deadline_s",
    "n": "rollout.group_size",
    "trials": "eval.group_size",
    "max_retries": "rollout.retries",
}
"""Names a key had before the one schema (flat training configs, `n`/`trials`), for the error line."""

_WRONG_SHAPE = {"model_type", "dict_type", "list_type"}


def _one_line(exc: ValidationError) -> str:
    errors = [(_plain_loc(err["loc"]), err) for err in exc.errors(include_url=False, include_input=False)]
    specific = {loc[:1] for loc, err in errors if err["type"] not in _WRONG_SHAPE}
    parts = []
    for loc, err in errors:
        if err["type"] in _WRONG_SHAPE and loc[:1] in specific and len(errors) > 1:
            continue  # the union branch the value was not meant for (`tasks`: one selection or a list)
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where}{_nearest(loc)}")
            continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(dict.fromkeys(parts))


def _plain_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The location as the user wrote it: pydantic's union-branch tags (`list[...]`, `TaskSelection`) left
    out."""
    return tuple(
        p for p in loc if isinstance(p, int) or (not any(c in p for c in "[(") and not p[:1].isupper())
    )


def _nearest(loc: tuple[int | str, ...]) -> str:
    """`(did you mean X?)` for an unknown key: X the closest name valid at that place or one section below
    it (a key of a flat training config, `steps`, is now `train.steps`), else the names valid there."""
    key, prefix = str(loc[-1]), [str(p) for p in loc[:-1]]
    if not prefix and key in _MOVED:
        return f" (did you mean {_MOVED[key]}?)"
    names = _names_at(Config, loc[:-1])
    candidates = {name: name for name in names}  # dotted name -> the part compared with the key
    for section in names:
        candidates.update({f"{section}.{inner}": inner for inner in _names_at(Config, (*loc[:-1], section))})

    def likeness(name: str) -> float:  # a name at the key's own level first (`modle` is `model`)
        return difflib.SequenceMatcher(None, key, candidates[name]).ratio() + (0.15 if name in names else 0.0)

    best = max(candidates, key=likeness, default=None)
    if best is not None and likeness(best) >= 0.6 + (0.15 if best in names else 0.0):
        return f" (did you mean {'.'.join([*prefix, best])}?)"
    return f" (valid here: {', '.join(names)})" if names else ""


def _names_at(model: type[BaseModel], path: tuple[int | str, ...]) -> list[str]:
    """The field names of the section at `path` (list indices skipped); [] where `path` is no section."""
    for part in path:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = None if field is None else _model_in(field.annotation)
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
