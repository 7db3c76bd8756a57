"""veRL integration, the stage's veRL-free half: dataset rows -> tasks (``rows``), a finished rollout ->
the rows the agent loop returns (``outputs``), and a mask-aware GRPO estimator for veRL's classic path
(``advantage``). Nothing here imports veRL at package import; the agent loop veRL loads, which wires
these from the one config, is ``openforgerl.compose.verl_loop``."""
