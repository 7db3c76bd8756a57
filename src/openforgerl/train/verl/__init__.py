"""veRL integration: an agent loop that runs veRL's prompt rows as our rollouts, and a mask-aware GRPO
estimator for veRL's classic path. Nothing here imports veRL at package import; see ``agent_loop``."""
