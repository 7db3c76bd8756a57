"""One rollout, start to finish: sandbox -> gateway rollout -> harness -> verifier -> close -> outcome.

Each step runs inside `boundary(<Fault>)` (errors.py), so an infrastructure failure anywhere ends
the rollout as data (`infra_error:<where>`), never as a crash of the batch and never as a reward.

Nested deadlines (engine call < rollout budget < sandbox lifetime). The rollout id is chosen here, the sandbox
boots first (a slow or queued boot never eats the agent's time), then the gateway rollout is opened carrying
its deadline `deadline_at = now + budget`. The harness runs until that deadline: past it the sandbox
kills the whole process tree and the rollout is a `timeout`. The gateway bounds every engine call of
the rollout by min(its per-call limit, deadline - margin): a call cut at the rollout's deadline is
`rollout_deadline` -> `timeout` (a long answer is the agent's), and a hung engine (no byte for the
stall window, then a failed health probe) ends the call as `engine_deadline` -> `infra_error:engine`
before the harness's time is up. The sandbox lifetime
(budget x 2 + margin), which the backend enforces itself, is longer than both. A rollout the gateway
has tainted (an infra error on one of its calls) is dropped whatever happens next, so its harness is
ended as soon as the gateway says so (`_until_tainted`, a long-poll), not at the budget: a broken engine
replica would otherwise hold every rollout routed to it for its whole budget (measured: the CLI fault
tests ran 45-120 s each, to their budgets, while the first infra error came within 5 s of the start).

The rollout record has one writer, the gateway: the orchestrator reports its verdict once, through
`report` (`POST /rollouts/{id}/outcome`), when the rollout's GRPO group has settled (batch.py).
Cleanup (sandbox `aclose`, gateway `close`) always runs, also on cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openforgerl.env.contract import SERVICE_ENV, TaskRuntime
from openforgerl.harness.base import HarnessAdapter, HarnessContext, HarnessLaunch
from openforgerl.orchestrator.classify import (
    first_prompt_lacks_task_tools,
    offered_tool_names,
    rollout_status,
)
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.errors import (
    EngineFault,
    GatewayFault,
    HarnessStartFault,
    RolloutFault,
    SandboxFault,
    VerifierFault,
    boundary,
)
from openforgerl.orchestrator.gateway_client import GatewayClient, OpenedRollout
from openforgerl.records import CallRecord, RolloutOutcome, RolloutRecord, RolloutStatus
from openforgerl.sandbox.base import (
    CommandNotFoundError,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    TamperError,
)

__all__ = ["Outcome", "RolloutRequest", "RolloutRunner"]

log = logging.getLogger(__name__)
LIFETIME_MARGIN_S = 300.0
TAINT_WAIT_S = 20.0  # one long-poll of the gateway per running rollout per this many seconds at most


@dataclass(frozen=True)
class RolloutRequest:
    task: TaskRuntime
    harness: HarnessAdapter
    group_id: str
    sample_index: int = 0
    attempt: int = 0


@dataclass(frozen=True)
class Outcome:
    status: RolloutStatus
    reward: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    verifier_log: str = ""
    error: str = ""


@dataclass
class _Run:
    """Mutable state of one rollout while it runs (never shared)."""

    req: RolloutRequest
    started_at: float = field(default_factory=time.time)
    rollout_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    deadline_at: float | None = None  # epoch seconds: the harness and every engine call end by it
    opened: OpenedRollout | None = None
    sandbox: Sandbox | None = None
    instruction: str = ""  # the harness's prompt for this rollout (`_instruction`)
    result: ExecResult | None = None
    versions: set[int] = field(default_factory=set)
    calls: list[CallRecord] = field(
        default_factory=list
    )  # the call log, read once the harness ended (`_read_log`)
    timings: dict[str, float] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def mark(self, name: str, since: float) -> None:
        self.timings[name] = round(time.monotonic() - since, 6)


class RolloutRunner:
    """Runs rollouts under two caps: `max_running` rollouts and `max_booting` sandbox boots."""

    def __init__(
        self,
        gateway: GatewayClient,
        backend: SandboxBackend,
        config: OrchestratorConfig,
        gateway_addr: tuple[str, int],
        on_done: Callable[[RolloutRecord], None] | None = None,
    ) -> None:
        self.gateway = gateway
        self.backend = backend
        self.config = config
        self.gateway_addr = gateway_addr  # host:port the sandbox forwarder connects to
        self.on_done = on_done
        self._running = asyncio.Semaphore(config.max_running)
        self._booting = asyncio.Semaphore(config.max_booting)

    async def run(self, req: RolloutRequest) -> RolloutRecord:
        """One rollout; always returns a record (faults are data), re-raises only cancellation."""
        async with self._running:
            run = _Run(req)
            t0 = time.monotonic()
            try:
                outcome = await self._lifecycle(run)
            except RolloutFault as fault:
                outcome = Outcome(fault.status, error=str(fault))
            finally:
                await self._teardown(run)
            run.mark("total_s", t0)
        record = self._record(run, outcome)
        if self.on_done is not None:
            self.on_done(record)
        return record

    def budget(self, task: TaskRuntime) -> float:
        return float(self.config.budget_s or task.budget_s)

    async def report(self, record: RolloutRecord) -> RolloutRecord:
        """Send the verdict to the gateway (the record's only writer); the record as stored.

        When the gateway cannot take it, the verdict is not stored, so the stored record is never
        trained; the returned record is then marked out of the batch too, so every consumer agrees.
        """
        if record.metadata.get("unopened"):  # the gateway never heard of it: nothing to report
            return record
        outcome = RolloutOutcome.model_validate(
            {k: getattr(record, k) for k in RolloutOutcome.model_fields if hasattr(record, k)}
        )
        try:
            stored = await self.gateway.report_outcome(record.rollout_id, outcome)
        except Exception as e:  # the gateway is gone or refused: nothing of this rollout is trained
            log.warning("outcome of %s not recorded: %s", record.rollout_id, e)
            return record.model_copy(update={"in_batch": False, "drop_reason": "outcome_not_recorded"})
        return stored.model_copy(update={"metadata": {**stored.metadata, **record.metadata}})

    # ---- steps ------------------------------------------------------------------------------
    async def _lifecycle(self, run: _Run) -> Outcome:
        sandbox = await self._boot(run)
        run.instruction = await self._instruction(run, sandbox)
        await self._open(run)
        launch = await self._prepare(run, sandbox)
        result = await self._harness(run, sandbox, launch)
        await self._keep_artifacts(run, sandbox, launch, result)
        info = await self._read_log(run)
        status, why = rollout_status(result, run.calls, info, tools_missed=self._tools_missed(run))
        if status not in (RolloutStatus.OK, RolloutStatus.AGENT_FAILED):  # classify.py decides; no verdict
            return Outcome(status, error=why)
        return await self._judge(run, sandbox, status)

    async def _open(self, run: _Run) -> None:
        """Open the gateway rollout with its deadline (the budget starts now, after the boot)."""
        req, budget = run.req, self.budget(run.req.task)
        run.deadline_at = time.time() + budget
        with boundary(GatewayFault):
            run.opened = await self.gateway.open_rollout(
                rollout_id=run.rollout_id,
                task_id=req.task.task_id,
                harness=req.harness.name,
                group_id=req.group_id,
                sample_index=req.sample_index,
                metadata={"attempt": req.attempt},
                deadline_at=run.deadline_at,
                budget_s=budget,
            )
            if run.opened.rollout_id != run.rollout_id:
                raise GatewayFault(f"gateway opened {run.opened.rollout_id!r}, not {run.rollout_id!r}")

    async def _instruction(self, run: _Run, sandbox: Sandbox) -> str:
        """The harness's prompt: the task's own for this rollout when it makes one (`rollout_instruction`:
        tau2's customer opens the dialogue, its message written by the user engine on the host), else the
        task's static instruction. Done before the budget starts: the user
        engine's time is not the agent's."""
        task = run.req.task
        with boundary(EngineFault):  # the user engine failed: infra, never the agent's zero
            made = await task.rollout_instruction(sandbox)
        return task.instruction if made is None else made

    def _spec(self, run: _Run) -> SandboxSpec:
        task = run.req.task
        budget = self.budget(task)
        lifetime = budget * 2 + LIFETIME_MARGIN_S
        assert lifetime > budget, "the sandbox must outlive the rollout budget"
        return SandboxSpec(
            rollout_id=run.rollout_id,
            gateway_host=self.gateway_addr[0],
            gateway_port=self.gateway_addr[1],
            image=task.image,
            files=dict(task.files()),
            limits=task.limits or self.config.limits,
            lifetime_s=lifetime,
            ro_binds=self._tool_binds(),
        )

    def _tool_binds(self) -> tuple[Path, ...]:
        """The harness CLIs' folder, shown read-only inside when it is not the default one the sandbox
        binds anyway (the sandbox root is an allow-list, not the host root)."""
        from openforgerl.harness.install import tools_dir

        cache = Path(self.config.harness_cache)
        return () if cache.resolve() == tools_dir().resolve() else (cache,)

    async def _boot(self, run: _Run) -> Sandbox:
        """Open the sandbox and start the task's service, under the boot cap."""
        async with self._booting:
            t0 = time.monotonic()
            with boundary(SandboxFault):
                run.sandbox = await self.backend.open_sandbox(self._spec(run))
                argv = run.req.task.service_argv()
                if argv:
                    await run.sandbox.spawn(list(argv), env=SERVICE_ENV)
                    await asyncio.sleep(run.req.task.service_ready_s)
                    await run.req.task.service_started(run.sandbox)  # before the agent can touch /workdir
            run.mark("boot_s", t0)
        return run.sandbox

    def _context(self, run: _Run, sandbox: Sandbox) -> HarnessContext:
        task, opened = run.req.task, run.opened
        assert opened is not None
        return HarnessContext(
            instruction=run.instruction,
            openai_base_url=sandbox.gateway_url + urlsplit(opened.openai_base_url).path,
            anthropic_base_url=sandbox.gateway_url + urlsplit(opened.anthropic_base_url).path,
            api_key=opened.api_key,
            model=self.config.model,
            mcp_servers=tuple(task.mcp_servers()),
            shell_tools_hint=task.shell_tools_hint(),
            tools=tuple(task.function_tools()),
            tool_service_url=task.tool_service_url,
            max_turns=getattr(task, "max_turns", None),
        )

    async def _prepare(self, run: _Run, sandbox: Sandbox) -> HarnessLaunch:
        """The adapter's config files and command line, written into the sandbox."""
        with boundary(HarnessStartFault):
            launch = run.req.harness.launch(self._context(run, sandbox), self.config.harness_cache)
        with boundary(SandboxFault):
            for path, data in launch.files.items():
                await sandbox.write_file(path, data)
        return launch

    async def _harness(self, run: _Run, sandbox: Sandbox, launch: HarnessLaunch) -> ExecResult:
        t0 = time.monotonic()
        with boundary(SandboxFault, {CommandNotFoundError: HarnessStartFault}):
            run.result = await self._until_tainted(
                run, sandbox.exec(list(launch.argv), env=dict(launch.env), timeout_s=self._time_left(run))
            )
            _refuse_outside_kill(run.result)
        run.mark("harness_s", t0)
        if (
            run.result.limits_hit
        ):  # why the agent failed: "memory" (OOM kill), "pids", "disk", "cpu" (throttled at its quota)
            run.notes["limits_hit"] = list(run.result.limits_hit)
        return run.result

    async def _until_tainted(self, run: _Run, harness: Coroutine[Any, Any, ExecResult]) -> ExecResult:
        """The harness's result; or, once the gateway has tainted the rollout, an empty one right away:
        the harness is cut (cancelling its exec kills the sandbox's process group) and `_read_log` then
        reads the call log's infra status, as it would have at the budget (classify.py)."""
        if not self.config.end_at_taint:
            return await harness
        running = asyncio.ensure_future(harness)
        watch = asyncio.ensure_future(self._watch_taint(run))
        t0 = time.monotonic()
        try:
            await asyncio.wait({running, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not running.done() and not watch.result():  # closed from outside: the harness ends on its own
                await asyncio.wait({running})
        finally:
            for task in (watch, running):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if not running.cancelled():
            return running.result()
        run.notes["harness_ended"] = "infra taint in the call log"
        return ExecResult(returncode=-1, stdout=b"", stderr=b"", duration_s=time.monotonic() - t0)

    async def _watch_taint(self, run: _Run) -> bool:
        """True once the gateway reports the rollout infra-tainted, False once it was closed (its calls are
        refused); never returns while neither. Best effort: a gateway that cannot answer leaves the harness
        to its budget (the call log decides)."""
        assert run.opened is not None
        while True:
            try:
                info = await self.gateway.wait_taint(run.opened.rollout_id, TAINT_WAIT_S)
            except Exception as exc:  # the admin plane is down or slow: poll again later, never fail here
                log.debug("taint watch of %s: %s", run.opened.rollout_id, exc)
                await asyncio.sleep(TAINT_WAIT_S)
                continue
            if info.get("infra_tainted") or info.get("closed"):
                return bool(info.get("infra_tainted"))

    def _time_left(self, run: _Run) -> float:
        """Seconds until the rollout's deadline (the harness's whole budget when none was set)."""
        if run.deadline_at is None:
            return self.budget(run.req.task)
        return max(0.0, run.deadline_at - time.time())

    async def _keep_artifacts(
        self, run: _Run, sandbox: Sandbox, launch: HarnessLaunch, result: ExecResult
    ) -> None:
        """Save stdout/stderr and the adapter's output files (never fails the rollout)."""
        if self.config.artifacts_dir is None or run.opened is None:
            return
        files = {"harness.stdout": result.stdout, "harness.stderr": result.stderr}
        for path in launch.outputs:
            with contextlib.suppress(Exception):
                files["output." + path.strip("/").replace("/", "__")] = await sandbox.read_file(path)
        dest = self.config.artifacts_dir / run.opened.rollout_id
        await asyncio.to_thread(_write_files, dest, files)
        run.notes["artifacts"] = str(dest)

    async def _read_log(self, run: _Run) -> dict[str, Any]:
        """The gateway's call log of this rollout (into `run.calls`) and its stored record: what the host
        saw, whatever the harness printed (classify.py reads both)."""
        assert run.opened is not None
        with boundary(GatewayFault):
            calls = await self.gateway.list_calls(run.opened.rollout_id)
            info = await self.gateway.get_rollout(run.opened.rollout_id)
        run.versions = {c.policy_version for c in calls}
        run.notes["calls"] = len(calls)
        run.calls = calls
        return info

    def _tools_missed(self, run: _Run) -> bool:
        """The harness asked the model before the task's tools reached it
        (see `first_prompt_lacks_task_tools`)."""
        if not getattr(run.req.harness, "lists_task_tools", False) or not run.req.task.mcp_servers():
            return False
        names = offered_tool_names({"tools": list(run.req.task.function_tools())})
        return first_prompt_lacks_task_tools(run.calls, names)

    async def _capture(self, run: _Run, sandbox: Sandbox) -> None:
        """The service audit log and the agent's files, for `analyze` / `view` (best effort, never fails
        the rollout; only the reward's verifier decides anything)."""
        if self.config.artifacts_dir is None or run.opened is None:
            return
        from openforgerl.analytics.capture import capture_rollout

        why = await capture_rollout(sandbox, run.req.task, self.config.artifacts_dir / run.opened.rollout_id)
        if why:
            run.notes["capture_error"] = why

    async def _judge(self, run: _Run, sandbox: Sandbox, status: RolloutStatus) -> Outcome:
        """Verify; the reward reaches the gateway with the rollout's verdict (`report`), in one call.

        A verifier crash is infra; what the agent left behind can only make it fail: a `TamperError`
        from the verifier, or a file the sandbox refused to read or write for it (a link out of the
        workdir, a FIFO, a device, an oversized file — `sandbox.violations`), ends as reward 0 and
        `agent_failed`, the reason in the verifier log.
        """
        t0 = time.monotonic()
        await self._capture(run, sandbox)
        seen = len(getattr(sandbox, "violations", ()))
        with boundary(VerifierFault, {SandboxError: SandboxFault}):
            try:
                verdict = await asyncio.wait_for(run.req.task.verify(sandbox), self.config.verify_timeout_s)
            except TamperError as exc:
                verdict = (0.0, {}, "")
                run.notes.setdefault("tampered", []).append(str(exc)[-500:])
            reward, components, vlog = verdict
            reward, components = float(reward), {k: float(v) for k, v in dict(components).items()}
        run.mark("verify_s", t0)
        tampered = [*run.notes.get("tampered", []), *list(getattr(sandbox, "violations", ()))[seen:]]
        if tampered:
            run.notes["tampered"] = tampered
            status, reward, components = RolloutStatus.AGENT_FAILED, 0.0, {"reward": 0.0, "tampered": 1.0}
            vlog = "\n".join(f"VIOLATION {t}" for t in tampered) + "\n" + str(vlog)
        return Outcome(status, reward, components, str(vlog))  # reported with the verdict (`report`)

    async def _teardown(self, run: _Run) -> None:
        """Close the sandbox and the gateway rollout; failures here are logged, not raised."""
        t0 = time.monotonic()
        if run.sandbox is not None:
            try:
                await run.sandbox.aclose()
            except Exception as e:  # a leak is logged; the rollout's data is still valid
                log.warning("sandbox close failed for %s: %s", run.opened, e)
                run.notes["cleanup_error"] = str(e)
        if run.opened is not None:
            with contextlib.suppress(Exception):
                await self.gateway.close_rollout(run.opened.rollout_id)
        run.mark("teardown_s", t0)

    # ---- record -----------------------------------------------------------------------------
    def _record(self, run: _Run, outcome: Outcome) -> RolloutRecord:
        req = run.req
        meta: dict[str, Any] = {"attempt": req.attempt, "timings": run.timings, **run.notes}
        if outcome.error:
            meta["error"] = outcome.error
        if run.result is not None:
            meta.update(self._output_tails(run.result))
        if run.opened is None:
            meta["unopened"] = True
        return RolloutRecord(
            rollout_id=run.rollout_id,
            task_id=req.task.task_id,
            harness=req.harness.name,
            group_id=req.group_id,
            sample_index=req.sample_index,
            status=outcome.status,
            reward=outcome.reward,
            reward_components=outcome.components,
            verifier_log=outcome.verifier_log,
            started_at=run.started_at,
            finished_at=time.time(),
            policy_versions=sorted(run.versions),
            infra_tainted=outcome.status.is_infra,
            closed=True,
            deadline_at=run.deadline_at,
            metadata={**req.task.metadata, **meta},
        )

    def _output_tails(self, result: ExecResult) -> dict[str, Any]:
        n = self.config.keep_output_bytes
        return {
            "harness_returncode": result.returncode,
            "harness_timed_out": result.timed_out,
            "harness_stdout_tail": result.stdout[-n:].decode(errors="replace"),
            "harness_stderr_tail": result.stderr[-n:].decode(errors="replace"),
        }


def _refuse_outside_kill(result: ExecResult) -> None:
    """A harness whose launcher died of a signal we did not send was cut from outside the sandbox
    (nothing inside can signal it: other PID namespace). Infra, never re-run: a second run in the same
    sandbox would mix two runs in one call log. An OOM kill is the agent's own doing (`limits_hit`)."""
    if result.killed_by_signal is not None and "memory" not in result.limits_hit:
        raise SandboxError(f"harness killed by signal {result.killed_by_signal} from outside the sandbox")


def _write_files(dest: Path, files: dict[str, bytes]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (dest / name).write_bytes(data)
