"""The app's windows: one module per page (chat, discover, models, server, settings), the main window
that holds them, and the dialogs and widgets they share."""
