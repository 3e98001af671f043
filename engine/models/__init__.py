"""Knowing a model before loading it: GGUF inspection, this machine's hardware, and the fit planner."""
