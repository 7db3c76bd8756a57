"""openforgerl: RL for LLM agents inside the real harnesses they are deployed in."""

__version__ = "0.1.0"
