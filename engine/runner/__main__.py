"""``python -m fireside.engine.runner``: how ``client.runner_command()`` starts a runner process."""

from .process import main

main()
