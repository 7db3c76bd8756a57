"""The `zero-gui` agent loop: screenshot, ask, act, repeat; stop on `terminate`/`answer`/a text reply,
a malformed action (policy `stop`), or the budget.

Per turn: the pruned history goes to the model with the one `computer_use` tool; every tool call of the
answer is parsed (`tool.parse_call`) and executed in order through the computer service; the last one
asks for the next screenshot, which rides in its `tool` message. A malformed call (bad arguments, or a
400 from the service) is the agent's error: under `feedback` its text is the call's result and the loop
goes on (no new screenshot: the screen did not change), under `stop` the rollout ends (exit 4).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, Protocol

from openforgerl.env.computer.actions import ActionError, Screen
from openforgerl.env.computer.client import ComputerUnavailable
from openforgerl.harness.zero.client import ModelAPIError, drop_none
from openforgerl.harness.zero.loop import Budget
from openforgerl.harness.zero_gui.history import Pruning, observation, prune, task_message
from openforgerl.harness.zero_gui.tool import (
    COMPACT_SYSTEM_PROMPT,
    Act,
    MalformedAction,
    Terminal,
    compact_schema,
    computer_use_schema,
    parse_call,
)

__all__ = ["SYSTEM_PROMPT", "AgentResult", "ComputerLike", "ExitCode", "ModelClient", "Options", "run_agent"]

SYSTEM_PROMPT = (
    "You are a GUI agent. You see the screen as screenshots and operate it with the "
    "`computer_use` tool, one action at a time. When the task is done, call it with "
    "action `terminate` (or `answer` if the task asks a question)."
)
ACT_TIMEOUT_S = 60.0
"""Longer than the computer service's own worst case for one request (its settle wait and two 10 s
screenshot tries, envs/browser/computer.py): a screen that hangs is then reported by the service (a 503 it
counts as its fault: infra), never by this client's timeout, which nothing counts (the agent's failure)."""
_CUT_SHORT_S = 0.5
"""A computer call that fails this close to the wall clock ran under the clock's remainder as its timeout:
the budget ended, the service did not fail (exit 2, not 5)."""
OnMalformed = Literal["feedback", "stop"]
Prompt = Literal["full", "compact"]


class ExitCode(IntEnum):
    """Process exit status (0/2/3 as `zero`'s)."""

    ANSWERED = 0  # terminate / answer / a reply without a tool call
    BUDGET = 2  # turn cap or wall clock
    MODEL_ERROR = 3  # the model API failed after retries (recorded as infra by the gateway)
    MALFORMED = 4  # a malformed action under `--on-malformed stop`
    COMPUTER_ERROR = 5  # the computer service did not answer


class ModelClient(Protocol):
    """What the loop needs of `zero.client.ChatClient` (the edge; tests fake it)."""

    def create(
        self, body: dict[str, Any], *, timeout: float, deadline: float | None = None
    ) -> dict[str, Any]: ...


class ComputerLike(Protocol):
    """What the loop needs of `env.computer.client.HttpComputer` (the edge; tests fake it)."""

    timeout_s: float
    kind: str  # the environment's ("browser", "desktop"), known after `wait_ready`; "" when it does not say

    def wait_ready(self, timeout_s: float = 60.0) -> Screen: ...

    def screenshot(self) -> bytes: ...

    def act(self, action: dict[str, Any], screenshot: bool = False) -> Any: ...


@dataclass(frozen=True)
class Options:
    pruning: Pruning = field(default_factory=Pruning)
    on_malformed: OnMalformed = "feedback"
    ready_timeout_s: float = 60.0
    """How long to wait for the screen (the browser starts beside the harness)."""
    kind: str = ""
    """Stated in the tool description ("an interface to a desktop GUI"); "" (the default): the kind the
    computer service reports in `/info`, so one harness config serves browser and desktop tasks alike
    (a mixed run), "desktop" when the service does not say."""
    prompt: Prompt = "full"
    """`full`: Qwen3-VL's `computer_use` tool with every action and the screen size; `compact`: the short
    system prompt and one-action tool `tiny-vl` was warmed up on (`tool.compact_schema`), image first."""


@dataclass
class AgentResult:
    exit_code: ExitCode
    answer: str = ""
    turns: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


class _Stop(Exception):
    def __init__(self, code: ExitCode, error: str = "", answer: str = "") -> None:
        super().__init__(error)
        self.code, self.error, self.answer = code, error, answer


Sink = Callable[[dict[str, Any]], None]


@dataclass
class _Episode:
    client: ModelClient
    computer: ComputerLike
    model: str
    budget: Budget
    options: Options
    on_message: Sink
    sampling: dict[str, Any]
    screen: Screen = field(default_factory=Screen)
    messages: list[dict[str, Any]] = field(default_factory=list)
    pointer: tuple[int, int] | None = None
    turns: int = 0
    unseen: dict[str, Any] | None = None
    """This turn's last executed action's message while it has no screenshot yet."""

    def append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.on_message(message)

    def start(self, instruction: str) -> None:
        self.screen = self._computer(
            lambda: self.computer.wait_ready(self._left(self.options.ready_timeout_s))
        )
        png = self._computer(self.computer.screenshot)
        compact = self.options.prompt == "compact"
        self.append({"role": "system", "content": COMPACT_SYSTEM_PROMPT if compact else SYSTEM_PROMPT})
        self.append(task_message(instruction, png, image_first=compact))

    def turn(self) -> None:
        self.turns += 1
        assistant = self.ask()
        self.append(assistant)
        calls = assistant.get("tool_calls") or []
        if not calls:
            raise _Stop(ExitCode.ANSWERED, answer=str(assistant.get("content") or ""))
        self.unseen = None
        for n, call in enumerate(calls):
            self.run_call(call, last=n == len(calls) - 1)
        if self.unseen is not None:  # the turn's last call was refused after others ran: show their result
            self.unseen["content"] = observation("", "ok", self._computer(self.computer.screenshot))[
                "content"
            ]

    def ask(self) -> dict[str, Any]:
        """One model call on the pruned history, under the wall clock."""
        timeout = self.budget.call_timeout()
        if timeout <= 0:
            raise _Stop(ExitCode.BUDGET, "wall clock")
        self.messages = prune(self.messages, self.options.pruning)
        tool = (
            compact_schema()
            if self.options.prompt == "compact"
            else computer_use_schema(
                self.screen.width, self.screen.height, self.options.kind or self.computer.kind or "desktop"
            )
        )
        body = {"model": self.model, "messages": self.messages, "tools": [tool], **self.sampling}
        try:
            return _assistant_message(
                self.client.create(body, timeout=timeout, deadline=self.budget.deadline)
            )
        except ModelAPIError as exc:
            raise _Stop(ExitCode.MODEL_ERROR, repr(exc)) from None

    def run_call(self, call: dict[str, Any], last: bool) -> None:
        fn, call_id = call.get("function") or {}, str(call.get("id", ""))
        try:
            step = parse_call(
                str(fn.get("name", "")),
                fn.get("arguments") or "{}",
                self.screen.width,
                self.screen.height,
                self.pointer,
            )
            if isinstance(step, Terminal):
                self.append(observation(call_id, f"ended: {step.status}"))
                raise _Stop(ExitCode.ANSWERED, answer=step.text or step.status)
            png = self._act(step, last)
        except (MalformedAction, ActionError) as exc:
            self.append(observation(call_id, f"error: {exc}"))
            if self.options.on_malformed == "stop":
                raise _Stop(ExitCode.MALFORMED, f"malformed action: {exc}") from None
            return
        self.append(observation(call_id, "ok", png))
        self.unseen = None if png is not None else self.messages[-1]

    def _act(self, step: Act, screenshot: bool) -> bytes | None:
        self.computer.timeout_s = self._left(ACT_TIMEOUT_S)
        out = self._computer(lambda: self.computer.act(step.body, screenshot=screenshot))
        self.pointer = step.pointer
        self.on_message({"event": "action", "executed": step.body})
        return out if screenshot else None

    def _left(self, cap: float) -> float:
        return max(0.1, min(cap, self.budget.deadline - time.monotonic()))

    def _computer(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ComputerUnavailable as exc:
            if (
                self.budget.deadline - time.monotonic() < _CUT_SHORT_S
            ):  # its timeout was what the clock had left
                raise _Stop(ExitCode.BUDGET, f"wall clock (a computer call cut short: {exc})") from None
            raise _Stop(ExitCode.COMPUTER_ERROR, f"computer service: {exc}") from None


def _assistant_message(completion: dict[str, Any]) -> dict[str, Any]:
    try:
        message: dict[str, Any] = drop_none(completion["choices"][0]["message"])
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelAPIError(f"answer has no choices[0].message: {str(completion)[:200]}") from exc
    return message


def run_agent(
    client: ModelClient,
    computer: ComputerLike,
    model: str,
    instruction: str,
    budget: Budget,
    options: Options = Options(),
    on_message: Sink = lambda m: None,
    **sampling: Any,
) -> AgentResult:
    """Drive one GUI task to its end; never raises for model, action or computer failures."""
    ep = _Episode(client, computer, model, budget, options, on_message, sampling)
    try:
        ep.start(instruction)
        while ep.turns < budget.max_turns:
            ep.turn()
    except _Stop as stop:
        return AgentResult(stop.code, stop.answer, ep.turns, ep.messages, stop.error)
    return AgentResult(ExitCode.BUDGET, turns=ep.turns, messages=ep.messages, error="turn cap")
