"""Harnesses: unmodified agent CLIs (and our own `zero`) configured to talk to the gateway.

`get_harness(name)` gives an adapter (`HarnessAdapter`: `install`, `launch`); `HarnessMix` assigns
harnesses to rollouts for mixed runs; `run_on_host` runs a launch without a sandbox (development, tests).
"""

from openforgerl.harness.base import HarnessAdapter, HarnessContext, HarnessLaunch, McpServer
from openforgerl.harness.harness_mix import HarnessMix, split_by_harness
from openforgerl.harness.registry import get_harness, harness_names

__all__ = ["HarnessAdapter", "HarnessContext", "HarnessLaunch", "HarnessMix", "McpServer", "get_harness",
           "harness_names", "split_by_harness"]
