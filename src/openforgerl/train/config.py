"""The training run's configuration: the system's one schema (`openforgerl.config.Config`), under the
name the trainer has always used. A training YAML is a `Config` document (examples/quickstart.yaml)."""

from __future__ import annotations

from openforgerl.config import Config, ConfigError, EngineSettings, TaskSelection

__all__ = ["ConfigError", "EngineSettings", "TaskSelection", "TrainConfig"]

TrainConfig = Config
