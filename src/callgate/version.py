"""The version of callgate, below every other module (stages record it in what they write)."""

__version__ = "0.1.0"
