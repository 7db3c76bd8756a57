"""`claw_eval_grader` checks: run an imported Claw-Eval task's own `grader.py` (upstream's leaderboard
scorer).

```toml
[[checks]]
kind = "claw_eval_grader"        # trusted task code: tests/claw_eval/grader.py, run by the verifier only
script = "claw_eval/grader.py"   # an AbstractGrader subclass, unmodified from upstream
task = "claw_eval/task.yaml"     # the TaskDefinition it is given
```

What the grader is given, built here from the verifier's evidence (all of it written by the host or the
task's service, never by the agent's hand):
- `messages`: the transcript the host built from the gateway's call log (`Evidence.transcript`), as trace
  messages with text, tool-use and tool-result blocks (tool names back to upstream's);
- `dispatches` and `audit_data`: the Claw service's /audit calls under upstream's tool, argument and
  service names (`{"gmail": {"calls": [...], "drafts": [...], "sent_messages": [...]}, ...}`); our audit
  keeps no response bodies of our own tools, so their `response_body` is None. A service that ran
  upstream's own code (`services/upstream.py`) gives its own /audit verbatim (`Evidence.upstream_audit`,
  read with the token), and its tools' dispatches carry the reply the agent got;
- `judge`: an object with upstream's `evaluate` / `evaluate_actions` / `evaluate_visual` (its images named
  by hash when they are the env snapshot's, which the host holds too, else carried), and the raw
  `client.chat.completions.create` / `model_id` two upstream graders use (the reply's text comes back). The
  verifier sandbox cannot reach the judge, so a call is answered from the host's earlier answers
  (`Evidence.judge_answers`, by a hash of the request); an unanswered one is recorded
  (`Evidence.judge_requests`) and gets a placeholder, and the verifier exits `EXIT_NEEDS_JUDGE` so the host
  (`--judge-engine`) answers them and runs it again.
- `media_events`: upstream's `MediaLoad` events, one per distinct image the gateway recorded reaching
  the model in the rollout's prompts (`Evidence.media_events`, from the host's call log); upstream's
  runner writes one per attachment it put in the model's input;
- the simulated user's turns (`user_agent` tasks): upstream's runner appends the user agent's reply as a
  user message `[user_agent]\n<reply>`; here the agent asks through the `ask_user` tool, so each
  `ask_user` call becomes the assistant's question (text) and its result becomes that user message, with
  the reply taken from the host's own record of the relay (`Evidence.user_record`), never from the tool
  result the sandbox returned (the agent can write its own answer file there);
- `task.task_file`: the imported `task.yaml` (`tests/claw_eval/task.yaml`), as upstream sets it, so a grader
  finds files beside it (image-QA's `fixtures/oracle.json`, copied there by the importer).
- `env_snapshot`: the host's snapshot of the agent's final workdir (`Evidence.env_snapshot`: upstream's
  `cmd:<command>` and `file:<path>` entries, taken on a copy by `envs/claw/snapshot.py`), plus
  `local_file:<path>` for the task's `local_grader_files` (its ground truth, from the tests folder);
  `{}` for a task that takes none.

The score is upstream's `compute_task_score` (safety × (0.8 completion + 0.2 robustness)); the dimensions
are reward components too (`check.<name>.completion`, ...). A grader that returns something else, or
raises also on an empty run (no messages, no tool calls), is a broken verifier (`GraderUnavailable` →
infra, never a trained 0: upstream's batch runner, too, marks such a trial as errored and leaves it out
of the metrics). One that grades the empty run but raises on this rollout's data was tripped by what
the agent sent (a malformed argument, an odd message): that is a 0, or the policy could turn any 0 into
a retried infra fault by tripping the grader.

The compatibility package (`envs/claw/claw_eval_compat/`) goes on `sys.path` only here, in the verifier.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import json
import math
import os
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from openforgerl.env.checks import evaluate as _checks
from openforgerl.env.checks import spec as _spec
from openforgerl.envs.claw.verify.claw_eval_inputs import audit_data, dispatches, trace_messages
from openforgerl.envs.claw.verify.graders import GraderUnavailable, _inside, read_task_file

__all__ = ["COMPAT_ROOT", "ClawEvalGraderCheck", "judge_request_key"]

COMPAT_ROOT = Path(__file__).resolve().parents[1] / "claw_eval_compat"


@dataclass
class ClawEvalGraderCheck(_spec.Check):
    script: str = ""
    task: str = ""


def judge_request_key(request: Mapping[str, Any]) -> str:
    """The same request (method and texts) gets the same key in every verifier run."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


class _Completions:
    def __init__(self, judge: HostAnsweredJudge) -> None:
        self.judge = judge

    def create(self, model: str = "", messages: Sequence[Mapping[str, Any]] = (), **sampling: Any) -> Any:
        """A chat completion the grader builds itself (upstream's T001/T002 call `judge.client` so): its
        messages go to the host's judge engine as they are; the reply text comes back. Unanswered yet:
        empty content (the grader parses nothing out of it and grades on; this run's reward is void)."""
        said = [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in messages]
        text = self.judge._ask_text({"method": "chat", "messages": said})
        message = types.SimpleNamespace(role="assistant", content=text)
        return types.SimpleNamespace(
            choices=[types.SimpleNamespace(index=0, message=message, finish_reason="stop")]
        )


class HostAnsweredJudge:
    """upstream `LLMJudge`'s interface; answers come from the host (see the module docstring)."""

    model_id = "judge"  # the host's --judge-engine decides the model; a grader only passes this back

    def __init__(self, answers: Mapping[str, float | str], pending: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.pending = pending
        self.known: set[str] = set()  # base64 images the host has too (the env snapshot's, local files')
        self.client = types.SimpleNamespace(chat=types.SimpleNamespace(completions=_Completions(self)))

    def know(self, snapshot: Mapping[str, Any]) -> None:
        """The images of the env snapshot the grader was given: the host holds them, so a visual request
        names them by hash instead of carrying them (the verifier's output files are capped)."""
        self.known = {
            str(e["content"])
            for e in snapshot.values()
            if isinstance(e, Mapping) and e.get("encoding") == "base64" and e.get("content")
        }

    def evaluate_visual(
        self, rubric: str, reference_images_b64: list[str], candidate_images_b64: list[str], context: str = ""
    ) -> Any:
        def ref(image: str) -> dict[str, str]:
            digest = hashlib.sha256(str(image).encode()).hexdigest()
            return {"sha256": digest} if image in self.known else {"sha256": digest, "b64": str(image)}

        return self._ask(
            {
                "method": "evaluate_visual",
                "rubric": str(rubric),
                "context": str(context),
                "reference_images": [ref(i) for i in reference_images_b64],
                "candidate_images": [ref(i) for i in candidate_images_b64],
            }
        )

    def evaluate(self, task_prompt: str, conversation: str, actions_summary: str, rubric: str) -> Any:
        return self._ask(
            {
                "method": "evaluate",
                "task_prompt": str(task_prompt),
                "conversation": str(conversation),
                "actions": str(actions_summary),
                "rubric": str(rubric),
            }
        )

    def evaluate_actions(self, task_prompt: str, artifacts: str, rubric: str) -> Any:
        return self._ask(
            {
                "method": "evaluate_actions",
                "task_prompt": str(task_prompt),
                "actions": str(artifacts),
                "rubric": str(rubric),
            }
        )

    def _ask(self, request: dict[str, Any]) -> Any:
        from claw_eval.graders.llm_judge import JudgeResult

        key = judge_request_key(request)
        if key in self.answers:
            return JudgeResult(
                score=float(self.answers[key]), reasoning="judged on the host (--judge-engine)"
            )
        self._pend(key, request)
        return JudgeResult(score=0.0, reasoning="pending: the host has not judged this yet")

    def _ask_text(self, request: dict[str, Any]) -> str:
        key = judge_request_key(request)
        if key in self.answers:
            return str(self.answers[key])
        self._pend(key, request)
        return ""

    def _pend(self, key: str, request: dict[str, Any]) -> None:
        if all(p["key"] != key for p in self.pending):
            self.pending.append({"key": key, **request})


# ------------------------------------------------------------------ running it


def _compat_on_path() -> None:
    if str(COMPAT_ROOT) not in sys.path:
        sys.path.insert(0, str(COMPAT_ROOT))


def _grader_class(source: bytes, path: Path) -> type:
    from claw_eval.graders.base import AbstractGrader

    module = types.ModuleType(f"task_grader_{abs(hash(str(path)))}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # pydantic models defined in the grader resolve their module
    exec(compile(source, str(path), "exec"), module.__dict__)  # trusted task code
    found = [
        c
        for c in vars(module).values()
        if inspect.isclass(c)
        and issubclass(c, AbstractGrader)
        and c is not AbstractGrader
        and c.__module__ == module.__name__
    ]
    if not found:
        raise GraderUnavailable(f"{path.name} defines no AbstractGrader subclass")
    return found[0]


LOCAL_FILES = "claw_eval/local_grader_files"  # under tests/: the host files upstream's runner reads


def env_snapshot(ev: _checks.Evidence, task: Any) -> dict[str, Any]:
    """What upstream's runner gives the grader as `env_snapshot`: the host's snapshot of the agent's final
    workdir (`cmd:` / `file:` entries, `envs/claw/snapshot.py`) plus `local_file:<path>` = the task's own
    ground-truth files, base64 (`{"error"}` when one is missing, as upstream's)."""
    out = dict(ev.env_snapshot or {})
    for rel in getattr(task, "local_grader_files", None) or []:
        try:
            data = read_task_file(ev, f"{LOCAL_FILES}/{rel}")
        except GraderUnavailable:
            out[f"local_file:{rel}"] = {"error": f"not found: {rel}"}
        else:
            out[f"local_file:{rel}"] = {
                "encoding": "base64",
                "content": base64.b64encode(data).decode("ascii"),
            }
    return out


def _grade(grader: Any, ev: _checks.Evidence, task: Any, judge: HostAnsweredJudge) -> Any:
    audit = {**audit_data(ev.audit, task), **(ev.upstream_audit or {})}  # upstream's own audit wins
    from claw_eval.models.trace import MediaLoad

    media = [MediaLoad.model_validate(e) for e in ev.media_events or []]
    kwargs: dict[str, Any] = {"audit_data": audit, "judge": judge, "media_events": media}
    if "env_snapshot" in inspect.signature(grader.grade).parameters:  # upstream passes it only when asked
        kwargs["env_snapshot"] = env_snapshot(ev, task)
        judge.know(kwargs["env_snapshot"])
    with _sleeps_skipped():
        return grader.grade(
            trace_messages(ev.transcript or [], ev.user_record), dispatches(ev.audit, task), task, **kwargs
        )


@contextlib.contextmanager
def _sleeps_skipped() -> Iterator[None]:
    """`time.sleep` returns at once while a grader runs. Why: upstream's T001/T002 retry a judge call 30
    times with sleeps of up to 17 s on any failure, an unparseable reply included; here a request's answer
    is fixed (the host's, by request key), so a retry can only read the same reply, and the sleeps (~8 min)
    would time the verifier out: an agent that made the judge answer badly would turn its 0 into infra."""
    import time

    real = time.sleep
    time.sleep = lambda seconds: None
    try:
        yield
    finally:
        time.sleep = real


def _grades_an_empty_run(grader_class: type, ev: _checks.Evidence, task: Any) -> bool:
    """Whether the grader scores a run with no messages and no tool calls without raising (its judge
    calls get placeholders): if so, it works here, and what made it raise came from the rollout."""
    empty = _checks.Evidence(
        {},
        [],
        None,
        tests_dir=ev.tests_dir,
        transcript=[],
        upstream_audit={k: {} for k in ev.upstream_audit or {}},
    )
    try:
        _grade(grader_class(), empty, task, HostAnsweredJudge({}, []))
    except Exception:
        return False
    return True


DIMENSIONS = ("completion", "robustness", "communication", "safety")


def _task_score(scores: Any) -> tuple[float, str]:
    from claw_eval.models.scoring import compute_task_score
    from claw_eval.models.trace import DimensionScores

    if not isinstance(scores, DimensionScores):
        raise GraderUnavailable(f"grader returned {type(scores).__name__}, want DimensionScores")
    score = compute_task_score(scores)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise GraderUnavailable(f"task score {score} from {scores!r} is not in [0, 1]")
    dims = f"completion={scores.completion:.3f} robustness={scores.robustness:.3f} safety={scores.safety:.3f}"
    return score, f"grader.py: task score {score:.3f} ({dims} communication={scores.communication:.3f})"


def _claw_eval_grader(c: ClawEvalGraderCheck, ev: _checks.Evidence) -> tuple[float, str]:
    if ev.tests_dir is None:
        raise GraderUnavailable("claw_eval_grader needs the tests folder (Evidence.tests_dir)")
    if ev.transcript is None:
        raise GraderUnavailable("claw_eval_grader needs the rollout's messages (no transcript given)")
    _compat_on_path()
    from claw_eval.graders.base import PEERS_ENV
    from claw_eval.models.task import TaskDefinition

    os.environ[PEERS_ENV] = str(ev.tests_dir / Path(c.script).parent / "peers")
    task = TaskDefinition.model_validate(yaml.safe_load(read_task_file(ev, c.task)) or {})
    task.task_file = str(ev.tests_dir / c.task)  # upstream's loader sets it: graders read files beside it
    judge = HostAnsweredJudge(ev.judge_answers or {}, ev.judge_requests)
    grader_class = _grader_class(read_task_file(ev, c.script), ev.tests_dir / c.script)
    try:
        scores = _grade(grader_class(), ev, task, judge)
    except GraderUnavailable:
        raise
    except Exception as exc:  # the benchmark's code broke, or this rollout's data broke it
        if judge.pending:
            return 0.0, f"grader.py needs {len(judge.pending)} judge call(s) answered by the host"
        if _grades_an_empty_run(grader_class, ev, task):
            # The agent's own messages and tool calls made it raise (a malformed argument, an odd
            # message): a 0, never infra, or a policy could escape any 0 by tripping the grader.
            return (
                0.0,
                f"grader.py raised {type(exc).__name__} on this rollout's data (it grades an empty run): 0",
            )
        raise GraderUnavailable(f"grader.py raised {type(exc).__name__}: {exc}") from exc
    if judge.pending:
        return 0.0, f"grader.py needs {len(judge.pending)} judge call(s) answered by the host"
    score, detail = _task_score(scores)
    # upstream reports the dimensions per trial: kept as reward components (check.<name>.<dimension>)
    ev.sub_scores.update({f"{c.name}.{d}": float(getattr(scores, d)) for d in DIMENSIONS})
    return score, detail


def register() -> None:
    kind = _spec.CheckKind(
        ClawEvalGraderCheck, {"script": _inside, "task": _inside}, ("script", "task"), _claw_eval_grader
    )
    _spec.CHECK_KINDS.register("claw_eval_grader", kind, replace=True)


register()
