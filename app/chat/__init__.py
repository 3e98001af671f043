"""The Chat page's wing: the session that owns a reply, tool turns, and the chat widgets."""
