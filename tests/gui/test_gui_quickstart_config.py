"""`examples/gui_quickstart.yaml` selects what it says (`builtin:gui`, `names` globs, the test split for eval)
and the trainer hands `zero-gui` the engine's sampling settings and the compact prompt."""

from __future__ import annotations

from pathlib import Path

from openforgerl.compose.train import harness_for
from openforgerl.config import Config
from openforgerl.train.services import select_tasks

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "gui_quickstart.yaml"


def test_gui_quickstart_selects_one_task_per_screen_and_the_held_out_families() -> None:
    cfg = Config.from_yaml(CONFIG)
    train = sorted(rt.task_id for rt in select_tasks(cfg.tasks, cfg.seed))
    assert train == ["gui/board-move-03", "gui/calendar-delete-01"]  # one board, one calendar (see the yaml)
    assert cfg.train.tasks_per_step == len(train)  # both tasks in every step
    assert cfg.eval.tasks is not None
    held_out = sorted(rt.task_id for rt in select_tasks(cfg.eval.tasks, cfg.seed))
    assert held_out == ["gui/board-move-04", "gui/calendar-delete-03"]
    assert all(rt.kind == "browser" for rt in select_tasks(cfg.tasks, cfg.seed))


def test_zero_gui_gets_the_trainers_sampling_and_the_compact_prompt() -> None:
    cfg = Config.from_yaml(CONFIG)
    launch = harness_for(cfg, 0)
    assert launch.name == "zero-gui" and launch.prompt == "compact" and launch.kind == "browser"
    assert launch.sampling == {"--max-tokens": cfg.engine.max_tokens, "--temperature": cfg.engine.temperature}
    assert launch.wall_clock_s == cfg.rollout.budget_s and launch.max_turns == 2


def test_a_mixed_gui_config_assigns_each_harness_with_its_own_options() -> None:
    """`harness: {zero-gui: 1, ui-tars: 1}` in a training config, as for text harnesses: each step gets one
    of them (seeded), each with its own `harness_options`; zero-gui left to the service's kind."""
    cfg = Config.model_validate(
        {
            **Config.from_yaml(CONFIG).model_dump(),
            "harness": {"zero-gui": 1, "ui-tars": 1},
            "harness_options": {"zero-gui": {"prompt": "compact"}, "ui-tars": {"wall_clock_s": 80}},
        }
    )
    adapters = [harness_for(cfg, step) for step in range(12)]
    assert {a.name for a in adapters} == {"zero-gui", "ui-tars"}
    assert [a.name for a in adapters] == [harness_for(cfg, step).name for step in range(12)]  # deterministic
    zero_gui = next(a for a in adapters if a.name == "zero-gui")
    assert (
        zero_gui.kind == ""
        and zero_gui.prompt == "compact"
        and zero_gui.sampling["--max-tokens"] == cfg.engine.max_tokens
    )
    assert next(a for a in adapters if a.name == "ui-tars").wall_clock_s == 80


def test_compact_prompt_is_the_warm_up_prompt_image_first() -> None:
    import time
    from typing import Any

    from openforgerl.env.computer.actions import Screen
    from openforgerl.harness.zero.loop import Budget
    from openforgerl.harness.zero_gui.loop import ExitCode, Options, run_agent
    from openforgerl.harness.zero_gui.tool import COMPACT_SYSTEM_PROMPT, compact_schema

    class Computer:
        timeout_s = 5.0
        kind = "browser"

        def wait_ready(self, timeout_s: float = 60.0) -> Screen:
            return Screen()

        def screenshot(self) -> bytes:
            return b"\x89PNG fake"

        def act(self, action: dict[str, Any], screenshot: bool = False) -> Any:
            return b"\x89PNG next" if screenshot else {"ok": True}

    bodies: list[dict[str, Any]] = []

    class Client:
        def create(
            self, body: dict[str, Any], *, timeout: float, deadline: float | None = None
        ) -> dict[str, Any]:
            bodies.append(body)
            return {"choices": [{"message": {"role": "assistant", "content": "done"}}]}

    result = run_agent(
        Client(),
        Computer(),
        "m",
        "Delete the event.",
        Budget(time.monotonic() + 30, 2, 10.0),
        Options(kind="browser", prompt="compact"),
    )
    assert result.exit_code == ExitCode.ANSWERED
    [body] = bodies
    assert body["tools"] == [compact_schema()]
    assert body["messages"][0] == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}
    assert [p["type"] for p in body["messages"][1]["content"]] == ["image_url", "text"]
