"""evalkit: what post-training did to a reasoning LLM."""

__version__ = "0.1.0"
