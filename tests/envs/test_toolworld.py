"""Tasks synthesised from a world that is all data run in sandboxes: an OpenAPI document is synthesised
into `tool-world` tasks and run through the real console script (rollouts with the scripted policy,
the no-op control, `tasks validate`), on bubblewrap, with the world served from the task's own copy.

The world's document reads back equal (`synth.world_doc`), so the sandbox serves the same world that
synthesis validated the task on; the agent sees neither the world's files nor its faults, and can
pass only by calling the tools: a forged state file, the state route without the host's token and a
rewrite of the world's files all leave it at 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from openforgerl.synth import Collection, Param, Tool, ToolEnv
from openforgerl.synth.importers import from_openapi
from openforgerl.synth.toolenv import env_from_document, load_toml
from openforgerl.synth.world_doc import env_document
from openforgerl.testing.markers import needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("openforgerl"))
sys.path.insert(0, str(ROOT / "tests" / "synth"))
from test_importers import PETSTORE  # noqa: E402  (the OpenAPI sample the importer tests use)

SHOP = """
name = "shop"
[[collections]]
name = "shop.orders"
label = "item"
fields = {item = "title", customer = "person"}
records = [{id = "o1", item = "lamp", customer = "Ada", status = "open"}]
id_prefix = "o"
[[tools]]
name = "cancel_order"
description = "Cancel an order."
effect = "write"
kind = "update"
collection = "shop.orders"
sets = {status = "cancelled"}
destructive = true
templates = ["Cancel the order {id}."]
parameters = {type = "object", properties = {id = {type = "string"}}, required = ["id"]}
param = {id = {ref = "shop.orders.id", ref_phrase = "the order of {label}"}}
"""


def _worlds(tmp_path: Path) -> dict[str, ToolEnv]:
    (tmp_path / "shop.toml").write_text(SHOP)
    plain = ToolEnv(
        "stock",
        (
            Tool(
                "find", "Find items.", (Param("query", enum=("a", "b")),), kind="search", collection="s.items"
            ),
            Tool(
                "set",
                "Set.",
                (Param("id"), Param("n", "integer", required=False)),
                "write",
                "update",
                "s.items",
            ),
        ),
        (Collection("s.items", records=({"id": "i1", "name": "a", "n": 1},), id_prefix="i", entity="item"),),
        fixtures={"s": {"owner": "me"}},
        values={"word": ("x", "y")},
    )
    return {
        "openapi": from_openapi(PETSTORE).with_answer(),
        "toml": load_toml(tmp_path / "shop.toml").with_answer(),
        "python": plain.with_answer(),
    }


def test_a_world_that_is_all_data_reads_back_equal(tmp_path: Path) -> None:
    for name, world in _worlds(tmp_path).items():
        doc = env_document(world)
        assert doc is not None, name
        assert env_from_document(json.loads(json.dumps(doc))) == world, name


def test_a_world_with_code_has_no_document() -> None:
    def op(state: dict[str, Any], args: dict[str, Any]) -> Any:
        return {}

    tool = Tool("lend", "Lend.", (Param("id"),), "write", "update", "lib.books")
    assert env_document(ToolEnv("lib", (tool,))) is not None  # control: the same tool, no code
    assert env_document(ToolEnv("lib", (replace(tool, op=op),))) is None
    assert env_document(ToolEnv("lib", (tool,), session_factory=lambda *a: None)) is None  # type: ignore[arg-type,return-value]


def openforgerl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600, cwd=str(cwd))


def rollout(tasks: Path, out: Path, *extra: str) -> dict[str, dict[str, Any]]:
    run = openforgerl(
        "rollout",
        "--tasks",
        str(tasks),
        "--engine",
        "scripted",
        "--n",
        "1",
        "--out",
        str(out),
        *extra,
        cwd=out.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = (out / "results.jsonl").read_text().splitlines()
    return {json.loads(x)["task_id"].split("/")[-1]: json.loads(x) for x in lines}


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("toolworld")
    (base / "petstore.json").write_text(json.dumps(PETSTORE))
    run = openforgerl(
        "tasks", "synthesize", "--env", "petstore.json", "--n", "6", "--seed", "3", "--out", "synth", cwd=base
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return base / "synth"


def test_synthesised_tasks_carry_their_world(synthesised: Path) -> None:
    folders = sorted(p.parent for p in synthesised.glob("*/task.toml"))
    assert len(folders) == 6
    for folder in folders:
        toml = (folder / "task.toml").read_text()
        assert 'kind = "tool-world"' in toml and "unsupported" not in toml
        world = env_from_document(json.loads((folder / "environment" / "world.json").read_text()))
        assert world == from_openapi(PETSTORE).with_answer()
        assert json.loads((folder / "solution" / "actions.json").read_text())


@needs_bwrap
def test_the_gold_scores_1_and_doing_nothing_0_in_a_sandbox(synthesised: Path) -> None:
    done = rollout(synthesised, synthesised.parent / "oracle")
    assert len(done) == 6 and {(r["status"], r["reward"]) for r in done.values()} == {("ok", 1.0)}, done
    assert all("PASS" in r["verifier_log"] for r in done.values())
    idle = rollout(synthesised, synthesised.parent / "noop", "--success-rate", "0")
    assert len(idle) == 6 and {(r["status"], r["reward"]) for r in idle.values()} == {("ok", 0.0)}, idle
    run = openforgerl("tasks", "validate", str(synthesised), cwd=synthesised.parent)
    assert run.returncode == 0 and "6/6 tasks valid" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]


# The agent's attempt to pass a creation task without calling its tool: read the world's files and
# faults, rewrite the world and its state, forge a state file, read the host's state route.
FORGE = """ls -a; cat .world/faults.json; mkdir -p .world; echo '{}' > .world/state.json;
echo '{"petstore": {"pets": [{"id": "x", "name": "FORGED"}]}}' > state.json; python3 -c "
import urllib.request as u
try: u.urlopen('http://127.0.0.1:7718/state')
except Exception as e: print('state refused', e)
\""""


@needs_bwrap
def test_a_forgery_scores_0_and_the_agent_never_sees_the_worlds_files(
    synthesised: Path, tmp_path: Path
) -> None:
    task = sorted(p.parent for p in synthesised.glob("*/task.toml"))[0]
    forged = tmp_path / "tasks" / task.name
    shutil.copytree(task, forged)
    (forged / "solution" / "actions.json").write_text(
        json.dumps([{"tool": "bash", "args": {"command": FORGE}}])
    )
    (record,) = rollout(tmp_path / "tasks", tmp_path / "forge").values()
    assert (record["status"], record["reward"]) == ("ok", 0.0), record
    artifacts = Path(record["metadata"]["artifacts"])
    seen = " ".join(p.read_text(errors="replace") for p in artifacts.glob("*transcript*"))
    assert ".world/faults.json: No such file" in seen and "state refused HTTP Error 404" in seen, seen[-2000:]
    # control: the forged file is there for a verifier that would read the workdir
    assert "FORGED" in (artifacts / "files" / "state.json").read_text()


@needs_bwrap
def test_the_sandbox_agrees_with_the_in_process_validator(tmp_path: Path) -> None:
    """Kept tasks and candidates synthesis rejected (a gold that only half passes) give the same no-op
    and oracle rewards in a sandbox as in-process (`tasks synthesize --sandbox K`)."""
    (tmp_path / "petstore.json").write_text(json.dumps(PETSTORE))
    run = openforgerl(
        "tasks",
        "synthesize",
        "--env",
        "petstore.json",
        "--n",
        "6",
        "--sandbox",
        "3",
        "--out",
        "s",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    agreement = json.loads((tmp_path / "s" / "synth_report.json").read_text())["sandbox"]
    assert agreement["kept_checked"] == 3 and agreement["rejected_checked"] >= 1, agreement
    assert agreement["agreed"] == agreement["checked"], agreement["rows"]
    assert any(0 < row["sandbox"][1] < 1 for row in agreement["rows"]), agreement["rows"]


def test_the_harness_is_offered_every_tool_the_service_answers(tmp_path: Path) -> None:
    """Synthesis picks the gold from every tool of a world (`offered` narrows only Claw's tasks), and the
    service answers every one: so the harness gets them all, the gold is reachable, nothing is hidden."""
    from openforgerl.synth import synthesize
    from openforgerl.tasks.loader import load_runtime

    world = replace(_worlds(tmp_path)["python"], offered=("find",))
    _, paths, _ = synthesize(world, 3, tmp_path / "out", seed=1)
    for path in paths:
        runtime = load_runtime(path)
        names = {t["function"]["name"] for t in runtime.function_tools()}
        assert names == {t.name for t in world.tools}, names
        gold = {a["tool"] for a in json.loads((path / "solution" / "actions.json").read_text())}
        assert gold <= names
