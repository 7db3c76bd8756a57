"""Prometheus text metrics, kept as plain counters (no client library on the hot path)."""

from __future__ import annotations

from collections import Counter

from openforgerl.gateway.flow import FlowGate


class Metrics:
    """Counters updated per call; rendered in Prometheus exposition format on `/metrics`."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # (protocol, outcome)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.seconds_sum = 0.0
        self.rollouts_opened = 0
        # Calls refused for passing their rollout's share (`calls.serve_call`), by the refusal's code:
        # a rollout flooding the gateway or filling its log shows here, not as failed calls of others.
        self.share_refusals: Counter[str] = Counter()

    def observe(self, protocol: str, outcome: str, prompt: int, completion: int, seconds: float) -> None:
        self.calls[(protocol, outcome)] += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.seconds_sum += seconds

    def render(self, gate: FlowGate) -> str:
        lines = ["# TYPE openforgerl_gateway_calls_total counter"]
        for (protocol, outcome), n in sorted(self.calls.items()):
            lines.append(f'openforgerl_gateway_calls_total{{protocol="{protocol}",outcome="{outcome}"}} {n}')
        total = sum(self.calls.values())
        lines.append("# TYPE openforgerl_gateway_share_refusals_total counter")
        for code, n in sorted(self.share_refusals.items()):
            lines.append(f'openforgerl_gateway_share_refusals_total{{reason="{code}"}} {n}')
        lines += [
            "# TYPE openforgerl_gateway_prompt_tokens_total counter",
            f"openforgerl_gateway_prompt_tokens_total {self.prompt_tokens}",
            "# TYPE openforgerl_gateway_completion_tokens_total counter",
            f"openforgerl_gateway_completion_tokens_total {self.completion_tokens}",
            "# TYPE openforgerl_gateway_call_seconds summary",
            f"openforgerl_gateway_call_seconds_sum {self.seconds_sum:.6f}",
            f"openforgerl_gateway_call_seconds_count {total}",
            "# TYPE openforgerl_gateway_rollouts_opened_total counter",
            f"openforgerl_gateway_rollouts_opened_total {self.rollouts_opened}",
            "# TYPE openforgerl_gateway_in_flight gauge",
            f"openforgerl_gateway_in_flight {gate.in_flight}",
            "# TYPE openforgerl_gateway_paused gauge",
            f"openforgerl_gateway_paused {int(gate.paused)}",
            "# TYPE openforgerl_gateway_policy_version gauge",
            f"openforgerl_gateway_policy_version {gate.policy_version}",
        ]
        return "\n".join(lines) + "\n"
