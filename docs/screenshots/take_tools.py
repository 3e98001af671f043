"""Take docs/screenshots/tool-approval.png: a chat with one tool call done and one awaiting approval.

    xvfb-run -a -s "-screen 0 1280x800x24" python docs/screenshots/take_tools.py

The real app, in a throwaway Fireside home, with the real SmolLM2 starter model and the test MCP server
from ``tests/helpers`` (over stdio) turned on for the chat. The first call is forced to ``weather`` so
the picture is the same every time; it is approved (Run), the model answers, then a second question's
call waits for approval when the picture is taken.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
os.environ["FIRESIDE_HOME"] = tempfile.mkdtemp(prefix="fireside-shots-")

from PySide6.QtWidgets import QApplication  # noqa: E402

from docs.screenshots.take import shot, wait  # noqa: E402

FORCE_WEATHER = {"type": "function", "function": {"name": "weather"}}


def pending(page):
    from fireside.app.chat.toolcard import ToolCallView

    return [v for v in page.transcript.views.values() if isinstance(v, ToolCallView) and v.message.state == "pending"]


def ask(page, text: str) -> None:
    page.session.tool_turn.tool_choice = FORCE_WEATHER
    page.composer.setPlainText(text)
    page.send()
    wait(until=lambda: pending(page) and pending(page)[0].isVisible(), timeout_ms=300_000)


def main() -> None:
    app = QApplication(sys.argv[:1])
    app.setApplicationName("Fireside")
    from fireside.app.main import Fireside
    from fireside.engine.mcp import McpConfig
    from tests.helpers.mcp_fixtures import stdio_server

    fireside = Fireside(tray=False)
    McpConfig(fireside.settings).add(stdio_server("weather-station"))
    window = fireside.start()
    window.resize(1280, 800)
    window.show()
    page = window.chat
    page.new_chat()
    wait(until=lambda: "weather-station" in page.settings_panel.server_boxes, timeout_ms=20_000)
    panel = page.settings_panel
    panel.server_boxes["weather-station"].setChecked(True)
    panel.max_steps.setValue(1)
    panel.max_tokens.setValue(40)
    panel.temperature.setValue(0)
    page.model_bar.set_model("starter")
    page.ctx.loader.ensure_loaded("starter")
    wait(until=lambda: fireside.ctx.runtime.is_loaded("starter"), timeout_ms=300_000)
    ended = []
    page.reply_ended.connect(lambda *a: ended.append(a))
    ask(page, "What is the weather in Paris today?")
    pending(page)[0].decision_buttons["run"].click()
    wait(until=lambda: ended, timeout_ms=300_000)
    ask(page, "And in Lisbon?")
    wait(500)
    shot(window, "tool-approval")
    page.stop()
    wait(until=lambda: len(ended) > 1, timeout_ms=60_000)
    fireside.stop()


if __name__ == "__main__":
    main()
