"""A new environment is one package plus one entry point. The `stockroom` package below (under 60 lines)
is written outside `src/` with a `.dist-info` registering it, as `pip install` would, and the real console
script runs a rollout, an eval and a synthesis pass on it; nothing under `src/` names it.

Its world is a `synth.ToolEnv` (items and their stock, changed through `find_items` / `set_stock`),
served in the sandbox by the SDK's tool service (`env.tool_service`); its verifier reads the state from
that service with the host's token, never a file the agent could write. The scripted policy (the
`actions` oracle replaying each task's `solution/actions.json`) stands for the model's decisions.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from openforgerl.testing.markers import needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("openforgerl"))

WORLD = '''\
"""The stockroom's world: items and their stock, changed only through its tools. Run as a program, it is
the sandbox's service (`env.tool_service.serve`): the tools for the agent, the state for the host."""

import sys

from openforgerl.env.tool_service import serve
from openforgerl.synth import Collection, Param, Tool, ToolEnv

ITEMS = "stockroom.items"
RECORDS = ({"id": "i1", "name": "widget", "stock": 2}, {"id": "i2", "name": "gadget", "stock": 5})
FIND = Tool("find_items", "Search items by name.", (Param("query"),), kind="search", collection=ITEMS)
SET = Tool("set_stock", "Set a stock.", (Param("id"), Param("stock", "integer")), "write", "update", ITEMS)
ITEM = Collection(ITEMS, fields={"name": "word"}, records=RECORDS, id_prefix="i", entity="item")
ENV = ToolEnv("stockroom", (FIND, SET), (ITEM,)).with_answer()

if __name__ == "__main__":  # argv: port, the host's token
    world = ENV.open_session(ENV.initial_state())
    serve(int(sys.argv[1]), sys.argv[2], world.call, world.state)
'''

FAMILY = '''\
"""The stockroom family: set an item's stock through the service's tools; judged by the service's state."""

import json
import secrets
import sys
from pathlib import Path
from typing import Any

from openforgerl.env.contract import TaskDefaults, Verdict
from openforgerl.env.tool_service import function_tools, read_state, wait_for_service
from openforgerl.tasks import Task, TaskFamily, register_family
from stockroom.world import ENV

PORT, URL = "7790", "http://127.0.0.1:7790"
SERVICE = (Path(__file__).parent / "world.py").read_text()  # its source in argv: nothing to install inside


class StockroomRuntime(TaskDefaults):
    def __init__(self, task: Task, python: str = sys.executable, **_: Any) -> None:
        self.task, self.task_id, self.instruction, self.budget_s = task, task.task_id, task.instruction, 60.0
        self.python, self.token, self.tool_service_url = python, secrets.token_hex(16), URL
        self.want = json.loads((task.root / "tests" / "want.json").read_text())  # tests/: never in a sandbox

    def service_argv(self) -> list[str]:
        return [self.python, "-I", "-c", SERVICE, PORT, self.token]

    async def service_started(self, sandbox: Any) -> None:  # the agent starts once the service answers
        await wait_for_service(sandbox, URL, self.token, python=self.python)

    def function_tools(self) -> list[dict[str, Any]]:
        return function_tools(ENV.tools)

    async def verify(self, sandbox: Any) -> Verdict:
        state = await read_state(sandbox, URL, self.token, python=self.python)
        stock = {item["name"]: item["stock"] for item in state["stockroom"]["items"]}
        ok = all(stock.get(name) == n for name, n in self.want.items())
        return Verdict(float(ok), {"stock": float(ok)}, f"stock = {stock}")


register_family(TaskFamily("stockroom", StockroomRuntime, kinds=("stockroom",)))
'''

PACKAGE = {"stockroom/world.py": WORLD, "stockroom/__init__.py": FAMILY}
ENTRY_POINTS = """\
[openforgerl.environments]
stockroom = stockroom

[openforgerl.synth_envs]
stockroom = stockroom.world:ENV.with_answer
"""

# The agent's attempt to pass without doing the task: a state file of its own, the service's port, and
# the service's state route without the host's token.
FORGE = """echo '{"stockroom": {"items": [{"name": "widget", "stock": 9}]}}' > state.json; python3 -c "
import socket, urllib.request as u
try: socket.socket().bind(('127.0.0.1', 7790))
except OSError as e: print('bind refused', e.errno)
try: u.urlopen('http://127.0.0.1:7790/state')
except Exception as e: print('state refused', e)
\""""
TASKS: dict[str, tuple[str, dict[str, int], list[dict[str, Any]]]] = {
    "restock-widget": (
        "Set the stock of the widget to 7.",
        {"widget": 7},
        [
            {"tool": "find_items", "args": {"query": "widget"}},
            {"tool": "set_stock", "args": {"id": "i1", "stock": 7}},
        ],
    ),
    "sell-out-gadget": (
        "The gadgets are sold out: set their stock to 0.",
        {"gadget": 0},
        [
            {"tool": "find_items", "args": {"query": "gadget"}},
            {"tool": "set_stock", "args": {"id": "i2", "stock": 0}},
        ],
    ),
    "forge-widget": (
        "Make the stockroom report 9 widgets.",
        {"widget": 9},
        [{"tool": "bash", "args": {"command": FORGE}}],
    ),
}


def install(site: Path, *, dist_info: bool = True) -> Path:
    """The package as an installed distribution: its modules, and (unless left out) the `.dist-info` whose
    `entry_points.txt` is how the core finds it."""
    for rel, text in PACKAGE.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    if dist_info:
        info = site / "stockroom-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: stockroom\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


def write_tasks(root: Path, names: tuple[str, ...] = tuple(TASKS)) -> Path:
    for name in names:
        instruction, want, gold = TASKS[name]
        task = root / name
        (task / "tests").mkdir(parents=True)
        (task / "solution").mkdir()
        (task / "task.toml").write_text(
            f'[task]\nname = "stockroom/{name}"\n[environment]\nkind = "stockroom"\n'
        )
        (task / "instruction.md").write_text(instruction + "\n")
        (task / "tests" / "want.json").write_text(json.dumps(want))
        (task / "solution" / "actions.json").write_text(json.dumps(gold))
    return root


def openforgerl(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it, with the package's folder on the path."""
    env = {k: v for k, v in os.environ.items() if k != "OPENFORGERL_DEBUG"} | {"PYTHONPATH": str(site)}
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600, cwd=str(cwd), env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("stockroom")
    return install(base / "site"), write_tasks(base / "tasks")


def results(out: Path) -> dict[str, list[dict[str, Any]]]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        by_task.setdefault(record["task_id"].removeprefix("stockroom/"), []).append(record)
    return by_task


def test_the_package_is_under_60_lines() -> None:
    lines = sum(len(text.splitlines()) for text in PACKAGE.values())
    assert lines <= 60, lines


@needs_bwrap
def test_a_rollout_scores_the_work_done_and_not_a_no_op_or_a_forgery(installed: tuple[Path, Path]) -> None:
    site, tasks = installed
    out = tasks.parent / "rollout"
    run = openforgerl(
        site,
        "rollout",
        "--tasks",
        str(tasks),
        "--engine",
        "scripted",
        "--n",
        "2",
        "--out",
        str(out),
        cwd=tasks.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    by_task = results(out)
    for name, stock in {"restock-widget": "'widget': 7", "sell-out-gadget": "'gadget': 0"}.items():
        assert [(r["status"], r["reward"]) for r in by_task[name]] == [("ok", 1.0)] * 2, by_task[name]
        assert all(stock in r["verifier_log"] for r in by_task[name])
    # the forgery: each attempt ran and was refused, its file is in the workdir, and it scores 0
    forged = by_task["forge-widget"]
    assert [(r["status"], r["reward"]) for r in forged] == [("ok", 0.0)] * 2, forged
    for record in forged:
        assert "'widget': 2" in record["verifier_log"]
        artifacts = Path(record["metadata"]["artifacts"])
        seen = " ".join(p.read_text(errors="replace") for p in artifacts.glob("*transcript*"))
        assert "bind refused 98" in seen and "state refused HTTP Error 404" in seen, seen[-2000:]
        # control: a verifier that trusted the workdir would have read 9 widgets
        assert (
            json.loads((artifacts / "files" / "state.json").read_text())["stockroom"]["items"][0]["stock"]
            == 9
        )

    # control: the same task, a policy that does nothing
    noop = tasks.parent / "rollout-noop"
    only = str(tasks / "restock-widget")
    run = openforgerl(
        site,
        "rollout",
        "--tasks",
        only,
        "--engine",
        "scripted",
        "--success-rate",
        "0",
        "--n",
        "2",
        "--out",
        str(noop),
        cwd=tasks.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = results(noop)["restock-widget"]
    assert [(r["status"], r["reward"]) for r in records] == [("ok", 0.0)] * 2, records
    assert all("'widget': 2" in r["verifier_log"] for r in records)


@needs_bwrap
def test_an_eval_reports_each_task_of_the_environment(installed: tuple[Path, Path]) -> None:
    site, tasks = installed
    out = tasks.parent / "eval"
    run = openforgerl(
        site,
        "eval",
        "--tasks",
        str(tasks),
        "--scripted-oracle",
        "1.0",
        "--trials",
        "2",
        "--out",
        str(out),
        cwd=tasks.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    zero = report["harnesses"]["zero"]
    assert (zero["tasks"], zero["trials"], zero["infra_dropped"]) == (3, 6, 0)
    assert zero["pass_at"]["1"]["value"] == pytest.approx(2 / 3)
    solved = {t["task_id"]: (t["n"], t["c"]) for t in report["tasks"]["zero"]}
    assert solved == {
        "stockroom/restock-widget": (2, 2),
        "stockroom/sell-out-gadget": (2, 2),
        "stockroom/forge-widget": (2, 0),
    }
    assert "| zero | 3 | 6 |" in run.stdout


def test_a_synthesis_pass_composes_validated_tasks_over_its_tools(installed: tuple[Path, Path]) -> None:
    from openforgerl.tasks.format import load_task

    site, tasks = installed
    out = tasks.parent / "synth"
    run = openforgerl(
        site, "tasks", "synthesize", "--env", "stockroom", "--n", "12", "--out", str(out), cwd=tasks.parent
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / "synth_report.json").read_text())
    assert report["env"] == "stockroom" and report["kept"] == 12
    assert report["generated"] == report["kept"] + sum(report["rejected"].values())
    written = sorted(p.parent for p in out.glob("*/task.toml"))
    assert len(written) == 12
    for folder in written:
        synth = load_task(folder).config.metadata["synth"]
        gold = json.loads((folder / "solution" / "actions.json").read_text())
        assert (
            synth["env"] == "stockroom"
            and gold
            and {a["tool"] for a in gold} <= {"find_items", "set_stock", "submit_answer"}
        )
    assert any(
        a["tool"] == "set_stock"
        for folder in written
        for a in json.loads((folder / "solution" / "actions.json").read_text())
    )
    # The world is all data, so each task carries it and runs where the package is not installed: the
    # sandbox's Python never imports `stockroom` (`-I`, and the site is only on the host's path).
    if shutil.which("bwrap") is None:
        return
    picked = out.parent / "picked"
    for folder in written[:3]:
        shutil.copytree(folder, picked / folder.name)
    ran = out.parent / "synth-rollout"
    run = openforgerl(
        site,
        "rollout",
        "--tasks",
        str(picked),
        "--engine",
        "scripted",
        "--n",
        "1",
        "--out",
        str(ran),
        cwd=out.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scored = [(r["status"], r["reward"]) for rs in results(ran).values() for r in rs]
    assert scored == [("ok", 1.0)] * 3, scored


def test_the_core_never_names_it_and_finds_it_only_through_its_entry_point(tmp_path: Path) -> None:
    grep = subprocess.run(["grep", "-rIil", "stockroom", str(ROOT / "src")], capture_output=True, text=True)
    assert grep.returncode == 1 and grep.stdout == "", grep.stdout
    bare = install(tmp_path / "site", dist_info=False)  # the same modules, importable, but not installed
    tasks = write_tasks(tmp_path / "tasks", ("restock-widget",))
    run = openforgerl(
        bare,
        "rollout",
        "--tasks",
        str(tasks),
        "--engine",
        "scripted",
        "--n",
        "2",
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    text = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in text, text[-3000:]
    [line] = [x for x in text.splitlines() if x.strip()]
    assert line.startswith("error: ") and "no installed environment runs 'stockroom'" in line, line


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _request(url: str, body: Any = None, token: str = "") -> tuple[int, Any]:
    from openforgerl.env.tool_client import with_retry

    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return with_retry(urllib.request.Request(url, data=data, headers=headers), 10.0, 10.0)


def test_the_service_answers_tools_to_the_agent_and_its_state_only_to_the_host() -> None:
    """The package's own service program, as the family starts it (`python -I -c WORLD PORT TOKEN`)."""
    port, token = _free_port(), "host-only-token"
    service = subprocess.Popen([sys.executable, "-I", "-c", WORLD, str(port), token])
    url = f"http://127.0.0.1:{port}"
    try:
        assert _request(f"{url}/tools/find_items", {"query": "widget"})[1]["result"]["items"][0]["id"] == "i1"
        assert _request(f"{url}/call/set_stock", {"id": "i1", "stock": 7}) == (
            200,
            {"result": {"updated": True, "id": "i1"}},
        )
        assert _request(f"{url}/tools/set_stock", {"id": "i1", "stock": "many"})[0] == 400
        assert _request(f"{url}/tools/set_stock", ["i1", 7])[0] == 400
        # the attack: the state without the host's token, with a guessed one, or as a tool
        for guess in ("", "host-only", "host-only-token-and-more", "HOST-ONLY-TOKEN"):
            assert _request(f"{url}/state", token=guess) == (404, {"error": "not found"})
        assert _request(f"{url}/tools/state", {})[0] == 404
        # control: the host's token reads it, with the agent's change and nothing else
        status, state = _request(f"{url}/state", token=token)
        assert status == 200
        assert state["stockroom"]["items"] == [
            {"id": "i1", "name": "widget", "stock": 7},
            {"id": "i2", "name": "gadget", "stock": 5},
        ]
    finally:
        service.kill()
        service.wait()


def test_eval_loads_a_family_of_plain_task_specs(tmp_path: Path) -> None:
    """The smallest family returns a `TaskSpec`, which keeps no task folder: `eval` still loads it (it read
    `rt.task.flags` and raised AttributeError), and a `--split` leaves it out rather than failing."""
    from openforgerl.cli.eval import _load
    from openforgerl.env.contract import TaskSpec, Verdict
    from openforgerl.tasks import Task, TaskFamily, register_family
    from openforgerl.tasks.families import FAMILIES

    async def verify(sandbox: Any) -> Verdict:
        return Verdict(0.0, {}, "")

    def runtime(task: Task, **_: Any) -> TaskSpec:
        return TaskSpec(task.task_id, task.instruction, verify)

    register_family(TaskFamily("plain-spec", runtime, kinds=("plain-spec",)))
    try:
        (tmp_path / "t" / "one").mkdir(parents=True)
        (tmp_path / "t" / "one" / "task.toml").write_text(
            '[task]\nname = "p/one"\n[environment]\nkind = "plain-spec"\n'
        )
        (tmp_path / "t" / "one" / "instruction.md").write_text("Do it.\n")
        runtimes, summary = _load(tmp_path / "t", None, {"transcript"})
        assert [type(rt).__name__ for rt in runtimes] == [
            "TaskSpec"
        ] and summary.runnable == summary.total == 1
        assert _load(tmp_path / "t", "test", {"transcript"})[0] == []
    finally:
        FAMILIES.unregister("plain-spec")


def test_the_scripted_oracle_plays_a_family_of_plain_task_specs() -> None:
    """`--engine scripted` / `--scripted-oracle` built its table from `runtime.task` and `cli_program()`,
    which a `TaskSpec` has neither of: the command failed before the first rollout. Now a spec has no gold
    to play and its rollout is ended at once (the verifier then judges what is there)."""
    from openforgerl.engines.scripted import Turn
    from openforgerl.env.contract import TaskSpec, Verdict
    from openforgerl.envs.claw.oracle_policy import oracle_policy

    async def verify(sandbox: Any) -> Verdict:
        return Verdict(0.0, {}, "")

    policy = oracle_policy([TaskSpec("p/one", "Set counter.txt to 3.", verify)])
    bash = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    turn = Turn([{"role": "user", "content": "Set counter.txt to 3."}], [bash], 0, "r1", {}, "p/one")
    assert policy(turn) == "Done."
    # control: a turn of a task it does not know is refused, not ended as done
    other = Turn([{"role": "user", "content": "Something else."}], [bash], 0, "r2", {}, "p/two")
    assert policy(other) == "I do not recognise this task."
