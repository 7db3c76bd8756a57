"""`openforgerl gateway`'s settings: the standalone defaults, under a `--config` YAML, under the flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import openforgerl.cli.gateway as gateway_command
from openforgerl.config import Config


def _served(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[Any, list[Config]]:
    """Run the command up to the point it would serve; the config it would serve."""
    served: list[Config] = []
    monkeypatch.setattr(gateway_command, "serve", lambda config, token, secret: served.append(config))
    monkeypatch.setenv("OPENFORGERL_ADMIN_TOKEN", "t" * 32)
    app = typer.Typer()
    app.command()(gateway_command.command)
    return CliRunner().invoke(app, args), served


def test_a_config_yamls_gateway_settings_reach_the_gateway_and_flags_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    yaml = tmp_path / "train.yaml"
    yaml.write_text(f"""
engine: {{kind: remote, urls: ["http://10.0.0.5:8000"], dialect: sglang}}
store: {{path: {tmp_path / "calls.db"}}}
gateway: {{port: 9100, admin_port: 9101, pause_wait_s: 5, max_in_flight: 7, allow_image_urls: true}}
rollout: {{budget_s: 120}}
""")
    res, served = _served(monkeypatch, ["--config", str(yaml), "--max-in-flight", "9"])
    assert res.exit_code == 0, res.output
    [config] = served
    options = config.gateway.server_options(config.call_deadline_s)  # what start_gateway gets
    assert (options["port"], options["admin_port"], options["pause_wait_s"]) == (9100, 9101, 5.0)
    assert options["max_in_flight"] == 9 and options["images"].allow_urls  # the flag over the YAML
    assert options["admin_host"] == "127.0.0.1"  # a standalone gateway's default, where the YAML says nothing
    assert options["call_deadline_s"] < 120  # derived from the YAML's rollout budget
    assert config.engine.urls == ["http://10.0.0.5:8000"] and config.engine.dialect == "sglang"
    assert config.store.path == str(tmp_path / "calls.db")


def test_without_a_config_the_flags_and_standalone_defaults_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    res, served = _served(monkeypatch, ["--engine", "http://127.0.0.1:9", "--host", "0.0.0.0"])
    assert res.exit_code == 0, res.output
    [config] = served
    assert (config.gateway.host, config.gateway.port) == ("0.0.0.0", 8080)
    assert (config.gateway.admin_host, config.gateway.admin_port) == (
        "127.0.0.1",
        8081,
    )  # admin stays loopback
    assert config.store.path == "runs/calls.db" and config.call_deadline_s == 600.0
    assert config.engine.kind == "remote" and config.engine.urls == ["http://127.0.0.1:9"]


def test_a_config_without_engine_urls_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    yaml = tmp_path / "local.yaml"
    yaml.write_text("engine: {kind: local}\n")
    res, served = _served(monkeypatch, ["--config", str(yaml)])
    assert res.exit_code != 0 and not served and "engine.urls" in " ".join(res.output.split())
