"""The one config schema (`openforgerl.config`): strict sections, one-line errors naming the nearest valid
key, dotted overrides, and the stage contracts built from it in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from openforgerl.config import Config, ConfigError, from_flags, load_config
from openforgerl.orchestrator.config import call_deadline_s
from openforgerl.trajectory.options import OverflowPolicy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"rollout": {"grup_size": 3}}, "unknown key rollout.grup_size (did you mean rollout.group_size?)"),
        ({"stepz": 3}, "unknown key stepz (did you mean train.steps?)"),
        ({"modle": "tiny"}, "unknown key modle (did you mean model?)"),
        ({"eval_trials": 4}, "unknown key eval_trials (did you mean eval.group_size?)"),
        ({"rollout_budget_s": 60}, "unknown key rollout_budget_s (did you mean rollout.budget_s?)"),
        (
            {"eval": {"tasks": {"splt": "test"}}},
            "unknown key eval.tasks.splt (did you mean eval.tasks.split?)",
        ),
        ({"tasks": [{"dri": "x"}]}, "unknown key tasks.0.dri (did you mean tasks.0.dir?)"),
        (
            {"sandbox": {"backend": "nope"}},
            "sandbox.backend: unknown backend 'nope' (known: local | podman | kubernetes)",
        ),
        ({"rollout": {"retries": -1}}, "rollout.retries: Input should be greater than or equal to 0"),
        ({"zzz": 1}, "unknown key zzz (valid here: model, engine,"),
    ],
)
def test_a_bad_key_is_one_line_naming_what_to_write(data: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(data)
    assert "\n" not in str(info.value) and line in str(info.value), str(info.value)


def test_every_shipped_training_config_loads() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        config = Config.from_yaml(path)
        assert config.rollout.budget_s is not None, path
        assert config.call_deadline_s < config.rollout.budget_s, path


def test_overrides_are_dotted_keys_on_top_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("train: {steps: 5, lr: 0.1}\nrollout: {group_size: 2}\n")
    config = Config.from_yaml(path, {"train.steps": 1, "engine.kind": "remote", "engine.urls": ["http://e"]})
    assert (config.train.steps, config.train.lr, config.rollout.group_size) == (1, 0.1, 2)
    assert (config.engine.kind, config.engine.urls) == ("remote", ["http://e"])
    flags = from_flags(None, {"rollout.group_size": 3, "rollout.retries": None, "sandbox.backend": None})
    assert (flags.rollout.group_size, flags.rollout.retries, flags.sandbox.backend) == (3, None, "local")


def test_the_call_deadline_is_derived_once_from_the_rollout_budget() -> None:
    assert Config().call_deadline_s == call_deadline_s(None) == 600.0  # no budget: the gateway's default
    budgeted = load_config({"rollout": {"budget_s": 60}})
    assert budgeted.call_deadline_s == call_deadline_s(60.0) < 60
    assert (
        load_config({"rollout": {"budget_s": 60}, "gateway": {"call_deadline_s": 20}}).call_deadline_s == 20
    )
    with pytest.raises(ConfigError, match="must be shorter than the rollout budget"):
        load_config({"rollout": {"budget_s": 60}, "gateway": {"call_deadline_s": 60}})
    options = budgeted.gateway.server_options(budgeted.call_deadline_s)
    assert options["call_deadline_s"] == budgeted.call_deadline_s and options["images"].allow_urls is False


def test_the_orchestrator_contract_is_built_from_the_rollout_section(tmp_path: Path) -> None:
    config = load_config(
        {
            "rollout": {"group_size": 4, "budget_s": 30, "max_running": 3},
            "sandbox": {"tools_dir": str(tmp_path)},
        }
    )
    built = config.orchestrator(artifacts_dir=tmp_path / "a")
    assert (built.group_size, built.min_group_size, built.budget_s, built.max_running) == (4, 2, 30, 3)
    assert built.retries is None and built.retry_budget == 4, "unset retries: the group size"
    assert built.harness_cache == tmp_path.resolve() and built.artifacts_dir == tmp_path / "a"
    one = config.orchestrator(group_size=1)
    assert (one.group_size, one.min_group_size) == (1, 1), "the minimum group never exceeds the group"
    evaluated = load_config({"eval": {"group_size": 5}, "rollout": {"retries": 0}}).eval_orchestrator()
    assert (evaluated.group_size, evaluated.min_group_size, evaluated.timeout_policy) == (5, 1, "zero")
    assert evaluated.retry_budget == 0


def test_reconstruction_and_kubernetes_contracts_are_built_from_their_sections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = load_config(
        {
            "reconstruction": {"overflow": "split", "max_response_len": 64},
            "sandbox": {"kubernetes": {"namespace": "ns1"}},
        }
    )
    options = config.reconstruction_options(max_prompt_len=128, max_response_len=999, image_token_id=3)
    assert options.overflow is OverflowPolicy.SPLIT
    assert (options.max_prompt_len, options.max_response_len, options.image_token_id) == (128, 64, 3)
    monkeypatch.setenv("OPENFORGERL_K8S_NAMESPACE", "from-env")
    monkeypatch.setenv("OPENFORGERL_K8S_BACKEND_ID", "run-1")
    kube = config.sandbox.kubernetes.build()
    assert (kube.namespace, kube.backend_id) == ("ns1", "run-1"), "the config wins over the environment"


def test_the_trainer_update_settings_come_from_the_train_section() -> None:
    pytest.importorskip("torch")
    settings = load_config({"train": {"clip_high": 0.3, "ppo_epochs": 2}}).train.update_settings()
    assert (settings.clip_high, settings.epochs) == (0.3, 2)


def test_the_docs_yaml_example_is_the_quickstart_config() -> None:
    import yaml

    page = (EXAMPLES.parent / "docs" / "getting-started.md").read_text()
    block = page.split("## The quickstart", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert load_config(yaml.safe_load(block)) == Config.from_yaml(EXAMPLES / "quickstart.yaml")
