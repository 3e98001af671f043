"""Turning messages into prompts: chat templates rendered in sandboxed worker processes, and images."""
