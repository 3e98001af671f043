"""Ready-to-copy client snippets for the Server page, filled in with the server's real address, the
key when one is required, and the model the chat uses (``starter`` by default); and for each coding
agent ``fireside launch`` sets up (``engine/agents.py``), the command that runs it on this server."""

from __future__ import annotations

# tab title -> (the agent's name for `fireside launch`, its npm package)
AGENT_SNIPPETS = {"Claude Code": ("claude", "@anthropic-ai/claude-code"), "Codex CLI": ("codex", "@openai/codex"),
                  "opencode": ("opencode", "opencode-ai")}
SNIPPETS = ("curl", "Python (openai)", "Python (ollama)", "Python (anthropic)", *AGENT_SNIPPETS)


def agent_snippet(name: str, url: str, key: str, model: str) -> str:
    agent, package = AGENT_SNIPPETS[name]
    env = f"FIRESIDE_API_KEY={key} " if key else ""
    return (f"# {name} on this server, set up for a local model (your own {name} settings are left alone).\n"
            f"# Install it once: npm install -g {package}\n"
            f"# The model needs a context as long as {name}'s first request: see docs/agents/{agent}.md\n"
            f"{env}fireside launch {agent} --model {model} --url {url}\n")


def snippet(name: str, url: str, key: str = "", model: str = "starter") -> str:
    if name in AGENT_SNIPPETS:
        return agent_snippet(name, url, key, model)
    shown_key = key or "not-needed"
    auth = f' \\\n  -H "Authorization: Bearer {key}"' if key else ""
    if name == "curl":
        return (f"curl {url}/v1/chat/completions \\\n  -H \"Content-Type: application/json\"{auth} \\\n"
                f"  -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'\n")
    if name == "Python (openai)":
        return (f"from openai import OpenAI\n\nclient = OpenAI(base_url=\"{url}/v1\", api_key=\"{shown_key}\")\n"
                f"reply = client.chat.completions.create(\n    model=\"{model}\",\n"
                f"    messages=[{{\"role\": \"user\", \"content\": \"Hello!\"}}],\n)\n"
                f"print(reply.choices[0].message.content)\n")
    if name == "Python (ollama)":
        headers = f", headers={{\"Authorization\": \"Bearer {key}\"}}" if key else ""
        return (f"from ollama import Client\n\nclient = Client(host=\"{url}\"{headers})\n"
                f"reply = client.chat(model=\"{model}\", messages=[{{\"role\": \"user\", \"content\": \"Hello!\"}}])\n"
                f"print(reply.message.content)\n")
    return (f"import anthropic\n\nclient = anthropic.Anthropic(base_url=\"{url}\", api_key=\"{shown_key}\")\n"
            f"reply = client.messages.create(\n    model=\"{model}\", max_tokens=256,\n"
            f"    messages=[{{\"role\": \"user\", \"content\": \"Hello!\"}}],\n)\n"
            f"print(reply.content[0].text)\n")
