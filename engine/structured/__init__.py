"""Structured output: grammars and JSON schemas checked before a runner sees them, replies checked after."""
