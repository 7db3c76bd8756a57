"""The embedded local engine: a transformers model behind vLLM's OpenAI-compatible token API."""

from openforgerl.engines.local.engine import Generation, LocalEngine
from openforgerl.engines.local.sampling import SamplingParams

__all__ = ["Generation", "LocalEngine", "SamplingParams"]
