"""Fireside's desktop app (PySide6): the main window and its pages, the bridge from engine threads to
the GUI thread, the chats store and the app's preferences. The engine never imports anything here.
"""
