"""Structured output: JSON schemas and grammars bounded (``limits.py``, ``schemakeys.py``), converted
(``strictjson.py``, ``grammar.py``) and compiled once by llama.cpp in a throwaway process
(``grammarcheck.py``) before a runner sees them; replies under a schema validated after (``replycheck.py``);
reasoning and tool calls read out of a reply as it streams (``parsing.py``).

Offers: ``grammar_for``, ``checked``, ``no_call_grammar``, ``forced_tool_names``; ``check_reply`` and
``expected_schema``; ``StreamParser`` and ``prompt_opens_reasoning``. Names load on first use (llama.cpp's
grammar converter only when a schema needs it).
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "checked": "grammar",
    "forced_tool_names": "grammar",
    "grammar_for": "grammar",
    "no_call_grammar": "grammar",
    "prompt_opens_reasoning": "parsing",
    "StreamParser": "parsing",
    "check_reply": "replycheck",
    "expected_schema": "replycheck",
}
__all__ = ["StreamParser", "check_reply", "checked", "expected_schema", "forced_tool_names", "grammar_for",
           "no_call_grammar", "prompt_opens_reasoning"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
