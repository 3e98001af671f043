"""One model across your machines: llama.cpp's RPC backend between paired devices, inside their TLS.

``build.py`` gives an install built without ``-DGGML_RPC=on`` the RPC backend as a ggml module (seconds,
once); ``worker.py`` is the lending machine's RPC server, a process of its own on loopback; ``tunnel.py``
carries its bytes through the shared TLS listener (a paired device's token only) and, on the main
machine, from a loopback port the runner connects to; ``lending.py`` is the lending side a sharing
server runs, ``lenders.py`` the main side: the paired devices a load names, as devices the planner
places layers on (``LoadOptions.with_devices``), each with its tunnel.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

_WHERE = {
    "module": "build",
    "module_path": "build",
    "Lender": "lending",
    "Lenders": "lenders",
    "lent_now": "lenders",
    "LEND_PATH": "tunnel",
    "RPC_PATH": "tunnel",
    "serve_tunnel": "tunnel",
    "Tunnel": "tunnel",
    "Worker": "worker",
}
__all__ = ["LEND_PATH", "Lender", "Lenders", "RPC_PATH", "Tunnel", "Worker", "lent_now", "module", "module_path", "serve_tunnel"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
