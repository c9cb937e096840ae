"""callgate: evaluate how well an LLM calls tools, and gate releases on it."""

__version__ = "0.1.0"
