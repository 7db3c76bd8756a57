"""The records that pass between stages (docs/architecture.md).

These are the contract: the gateway writes `CallRecord`s, the orchestrator writes `RolloutRecord`s,
trajectory/ turns both into `Sample`s. Field names are stable; tools and users rely on them.
Pydantic models because they cross process and storage boundaries (JSON in SQLite, HTTP admin API).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, Field


class WireProtocol(StrEnum):
    """The wire protocol a harness used for one call."""

    CHAT = "chat_completions"
    RESPONSES = "responses"
    ANTHROPIC = "anthropic_messages"


class CallErrorKind(StrEnum):
    """Typed errors recorded on a call; `rollout_status` says what each means for its rollout.

    `rollout_status` is the one error-kind -> status table (gateway taint and orchestrator
    classification both read it; the rule behind it is stated once, in `orchestrator/classify.py`):
    a component outside the sandbox that failed on its own is infra (`infra_error:engine`,
    `infra_error:gateway`); whatever follows from what the agent sent (its sizes, parameters, context
    length, request rate, how long it let the model write) is never infra.
    """

    ENGINE_HTTP = "engine_http"  # engine answered 5xx (or an unexpected status)
    ENGINE_CONNECTION = "engine_connection"  # connect/reset/EOF talking to the engine
    # the engine made no progress (no byte) for the stall window and then failed its health probe: a
    # hung engine (the gateway's own probe, not the agent's request, is the evidence)
    ENGINE_DEADLINE = "engine_deadline"
    ENGINE_PROTOCOL = "engine_protocol"  # engine reply lacked token ids / was malformed
    GATEWAY_INTERNAL = "gateway_internal"  # a bug or overload inside the gateway
    CLIENT_DISCONNECTED = "client_disconnected"  # the harness went away mid-stream
    CLIENT_BAD_REQUEST = "client_bad_request"  # the harness sent something we refused (4xx)
    # the engine refused the prompt (+ max_tokens) as longer than its context: a configuration error
    # when it is the harness's own first prompt (see `orchestrator/classify.py`)
    CONTEXT_OVERFLOW = "context_overflow"
    # the call was still running when its rollout's time ran out (deadline - margin): the rollout is a
    # `timeout`, whatever the engine was doing (a long answer is the agent's own choice)
    ROLLOUT_DEADLINE = "rollout_deadline"
    # the per-call limit fired while a healthy engine was still answering (a long answer the client
    # asked for): the client's 504, never infra
    CALL_LIMIT = "call_limit"

    @property
    def rollout_status(self) -> RolloutStatus | None:
        """The status an error of this kind gives its rollout (None: not infra, the agent's doing)."""
        return _STATUS_BY_KIND[self]

    @property
    def is_infra(self) -> bool:
        status = self.rollout_status
        return status is not None and status.is_infra


class CallError(BaseModel):
    kind: CallErrorKind
    message: str
    status: int | None = None


class CallRecord(BaseModel):
    """One model call made by a harness, as the engine saw and answered it.

    `prompt_token_ids` are the ids the engine actually consumed (after its own chat template), and
    `completion_token_ids` / `completion_logprobs` what it sampled. Training data is built from these
    only, never from the text.
    """

    rollout_id: str
    index: int
    protocol: WireProtocol
    request: dict[str, Any] = Field(default_factory=dict)
    # The chat-completions body the gateway sent to the engine (after protocol translation).
    engine_request: dict[str, Any] | None = None
    response_text: str | None = None
    prompt_token_ids: list[int] = Field(default_factory=list)
    completion_token_ids: list[int] = Field(default_factory=list)
    completion_logprobs: list[float] = Field(default_factory=list)
    finish_reason: str | None = None
    policy_version: int = 0
    engine: str | None = None
    started_at: float = 0.0
    first_token_at: float | None = None
    finished_at: float | None = None
    error: CallError | None = None
    side_call: bool = False
    agent_id: str | None = None
    parent_agent_id: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # The prompt's images in the order the engine request holds them (after protocol translation),
    # bytes in the call log's blob store; `request`/`engine_request` then hold `BLOB_REF_PREFIX`
    # references in place of the inline base64 (see `ImageRef`).
    images: list[ImageRef] = Field(default_factory=list)
    # The image processor settings the engine reported using (None: not reported, or no image).
    processor: dict[str, Any] | None = None

    @property
    def is_infra_error(self) -> bool:
        return self.error is not None and self.error.kind.is_infra

    @property
    def trainable(self) -> bool:
        return self.error is None and not self.side_call and bool(self.completion_token_ids)

    def stored_json(self) -> bytes:
        """This record as the call log stores it (`encode_record`, the one encoder)."""
        return encode_record(self.__dict__)


def json_default(value: object) -> object:
    """orjson's `default` for records dumped from their attributes (`orjson.dumps(record.__dict__,
    default=json_default)`): nested models as objects; the same JSON as `model_dump(mode="json")`
    for these plain models (enums by value), at a quarter of the cost."""
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def encode_record(fields: Mapping[str, Any]) -> bytes:
    """The one encoder of stored call records: a record's fields (its `__dict__`, or the gateway's
    `recording.record_json` with raw JSON pieces as `orjson.Fragment`s) to JSON. Pydantic only reads
    it back (`CallRecord.model_validate_json`), which is how tests check it."""
    return orjson.dumps(fields, default=json_default)


class RolloutStatus(StrEnum):
    OK = "ok"
    AGENT_FAILED = "agent_failed"
    TIMEOUT = "timeout"
    INFRA_SANDBOX = "infra_error:sandbox"
    INFRA_ENGINE = "infra_error:engine"
    INFRA_GATEWAY = "infra_error:gateway"
    INFRA_VERIFIER = "infra_error:verifier"
    INFRA_HARNESS_START = "infra_error:harness_start"
    CONFIG_CONTEXT = "config_error:context"  # a prompt longer than the engine's context: fix the setup

    @property
    def is_infra(self) -> bool:
        return self.value.startswith("infra_error:")

    @property
    def is_config(self) -> bool:
        """A setup error (never trained, never retried: another attempt would fail the same way)."""
        return self.value.startswith("config_error:")


_STATUS_BY_KIND: dict[CallErrorKind, RolloutStatus | None] = {
    CallErrorKind.ENGINE_HTTP: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.ENGINE_CONNECTION: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.ENGINE_DEADLINE: RolloutStatus.INFRA_ENGINE,  # stalled and failed its health probe
    CallErrorKind.ENGINE_PROTOCOL: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.GATEWAY_INTERNAL: RolloutStatus.INFRA_GATEWAY,
    CallErrorKind.CLIENT_DISCONNECTED: None,
    CallErrorKind.CLIENT_BAD_REQUEST: None,  # a client's malformed request is never infra
    CallErrorKind.CONTEXT_OVERFLOW: RolloutStatus.CONFIG_CONTEXT,  # only the first prompt's (classify.py)
    CallErrorKind.ROLLOUT_DEADLINE: RolloutStatus.TIMEOUT,
    CallErrorKind.CALL_LIMIT: None,
}


class RolloutRecord(BaseModel):
    """One harness run on one task. The gateway (or its store) is the only writer: it opens the
    record, taints it, and writes the orchestrator's `RolloutOutcome` into it under its lock.

    The verdict is typed: `status`, `reward`, and the orchestrator's batch decision `in_batch`
    (None: never decided, e.g. a rollout opened outside any batch), `drop_reason` and `group_valid`
    (its GRPO group kept enough rollouts). `trajectory.trainable` reads only these fields.
    `deadline_at` (epoch seconds) bounds the harness run and every engine call of the rollout.
    """

    rollout_id: str
    task_id: str | None = None
    harness: str | None = None
    group_id: str | None = None
    sample_index: int = 0
    status: RolloutStatus | None = None
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    verifier_log: str = ""
    started_at: float = 0.0
    finished_at: float | None = None
    policy_versions: list[int] = Field(default_factory=list)
    infra_tainted: bool = False
    closed: bool = False
    in_batch: bool | None = None
    drop_reason: str | None = None
    group_valid: bool | None = None
    deadline_at: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Sample(BaseModel):
    """One training sequence (one chain of merged calls), in veRL's AgentLoopOutput vocabulary."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    multi_modal_data: dict[str, list[Any]] = Field(default_factory=dict)
    reward_score: float | None = None
    num_turns: int = 0
    rollout_id: str
    group_id: str | None = None
    chain_index: int = 0
    is_final_chain: bool = False
    weight: float = 1.0
    harness: str | None = None
    task_id: str | None = None
    agent_id: str | None = None
    policy_version_min: int = 0
    policy_version_max: int = 0
    status: str | None = None
    extra_fields: dict[str, Any] = Field(default_factory=dict)


class RolloutOutcome(BaseModel):
    """The orchestrator's verdict on one rollout, sent once through the admin plane
    (`POST /rollouts/{id}/outcome`); the gateway writes it into the `RolloutRecord` under the
    rollout's lock, so the record has one writer."""

    status: RolloutStatus
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    verifier_log: str = ""
    in_batch: bool | None = None
    drop_reason: str | None = None
    group_valid: bool | None = None
    finished_at: float | None = None
    # merged into the record's metadata (timings, harness output tails, notes), never replacing it
    metadata: dict[str, Any] = Field(default_factory=dict)


# A stored request's reference to an image's bytes in the call log's blob store: wherever the client
# sent inline base64 (a `data:` URL, or an Anthropic `source.data`) the recorded `request` and
# `engine_request` hold `openforgerl-blob:sha256:<64 hex>` instead; the engine got the exact bytes.
BLOB_REF_PREFIX = "openforgerl-blob:sha256:"


class ImageRef(BaseModel):
    """One image of a call's prompt: its bytes are the blob `sha256` (hex of the decoded bytes) in
    the call log's blob store (`CallStore.get_blob`/`read_blob`). `width`/`height` come from the
    image header; `grid_thw` (patch grid) and `tokens` (pads in its placeholder run) are the
    engine's, when it reports them. A URL image (forwarded only when the gateway allows it) has no
    bytes here: `sha256` is "", sizes 0, and `url` says where the engine fetched it."""

    sha256: str
    media_type: str
    width: int
    height: int
    grid_thw: list[int] | None = None
    tokens: int | None = None
    url: str | None = None


CallRecord.model_rebuild()
