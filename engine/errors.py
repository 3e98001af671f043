"""Every error Fireside raises on purpose, in one tree, so callers catch by meaning.

    FiresideError
    ├── InvalidModelFile        a GGUF file is malformed, truncated or hostile
    │   └── HeaderIncomplete    the bytes given end inside the header (fetch more and retry)
    ├── ModelNotFound           no model in the library answers to that id
    ├── ModelTooLarge           the fit planner says it cannot fit in memory
    ├── HardwareError           llama.cpp's device API could not be read
    ├── RuntimeFailure          a runner failed to load or generate
    │   ├── RunnerCrashed       the runner process died mid-request
    │   │   └── DeviceGone      a paired device holding some of its layers went away (rpc/)
    │   ├── LoadCancelled       the user cancelled a load
    │   ├── ContextOverflow     the prompt does not fit in the context window
    │   ├── TemplateError       the chat template failed to render (or was refused)
    │   ├── QueueFull           too many requests are waiting for one model
    │   ├── RemoteError         a remote engine is unknown, unreachable, or answered with an error
    │   │   ├── RemoteUnsupported  it cannot honour a field the request set (a 400 naming the field)
    │   │   └── RemoteUnreachable  no connection could be made (refused, timed out, no route, a TLS
    │   │                          handshake refused): nothing of the request was answered
    │   ├── GrammarRejected     a JSON schema or grammar is over a limit or does not compile (a 400)
    │   ├── GrammarDeadEnd      mid-reply, the grammar allowed no next token (that request ends, a 400)
    │   ├── SchemaMismatch      a reply written under a JSON schema ended without matching it
    │   └── ReplyCut            a reply stopped because its model was unloaded, not because it ended
    ├── LibraryError            the model library or its index failed
    │   └── UnsafePath          a repo id, file name or path tried to leave its root
    ├── HubError                the Hugging Face hub answered with an error
    │   ├── GatedRepo           the repo needs accepted terms and a token
    │   └── DownloadError       a download failed for good
    │       ├── IntegrityError  the downloaded bytes do not match the hub's hash
    │       ├── DiskFull        not enough free space to start or finish
    │       └── DownloadCancelled  the user cancelled; the part file stays for a resume
    ├── ServerError             the local API server could not start or stop
    ├── DeviceError             sharing, pairing or a paired device failed (a wrong code, a changed certificate)
    ├── ReadOnlyData            saved data from a newer Fireside is open read-only; writes are refused
    ├── ImageRejected           an image is corrupt, not an image, too large or of a kind not read (a 400)
    ├── NoVision                the model cannot see images: it has no projector (a 400 naming ones that can)
    ├── EmbedsOnly              the model is an embedder (BERT and kin): it makes vectors and cannot write replies
    ├── DocumentRejected        a file cannot be read as a document: encrypted or corrupt, over a size limit,
    │                           a zip bomb, binary data, or a kind not read (the message says which)
    ├── DocumentNotFound        no uploaded file or collection (vector store) has that id (a 404)
    └── McpServerError          an MCP tool server is unknown, failed to start, crashed, or answered badly
        └── McpTimeout          an MCP server did not answer within its time limit

Each error carries a message meant for a person: what went wrong and, where there is one, what to do.
"""

from __future__ import annotations


class FiresideError(Exception):
    """Root of every error Fireside raises on purpose."""


class InvalidModelFile(FiresideError):
    """A GGUF file is malformed, truncated or hostile."""


class HeaderIncomplete(InvalidModelFile):
    """The bytes given end inside the GGUF header; ``needed`` says how many bytes were asked for."""

    def __init__(self, message: str, needed: int = 0):
        super().__init__(message)
        self.needed = needed


class ModelNotFound(FiresideError):
    """No model in the library answers to that id."""


class ModelTooLarge(FiresideError):
    """The model cannot fit in this machine's memory with the requested settings."""


class HardwareError(FiresideError):
    """llama.cpp's device API could not be read."""


class RuntimeFailure(FiresideError):
    """A runner failed to load a model or to generate."""


class RunnerCrashed(RuntimeFailure):
    """The runner process died while serving a request; ``signal`` is the signal that killed it, if any."""

    def __init__(self, message: str, signal: int | None = None):
        super().__init__(message)
        self.signal = signal


class DeviceGone(RunnerCrashed):
    """A paired device that held some of the model's layers (``rpc/``) went away: llama.cpp's RPC client
    ended the runner. Not a llama.cpp crash to heal around on this machine: the load is not retried."""


class LoadCancelled(RuntimeFailure):
    """A model load was cancelled before it finished."""


class ContextOverflow(RuntimeFailure):
    """The prompt is longer than the model's context window."""

    def __init__(self, message: str, prompt_tokens: int = 0, context: int = 0):
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context = context


class TemplateError(RuntimeFailure):
    """The chat template failed to render, or tried something the sandbox refuses."""


class QueueFull(RuntimeFailure):
    """Too many requests are already waiting for this model."""


class RemoteError(RuntimeFailure):
    """A remote engine is unknown, unreachable, refused the request, or answered with an error."""


class RemoteUnreachable(RemoteError):
    """No connection to a remote engine or device could be made (refused, timed out, no route, or its TLS
    refused): no byte of the request was answered, so asking again elsewhere cannot repeat it. A paired
    device that raises it is looked for on the local network (``devices/relocate.py``)."""


class RemoteUnsupported(RemoteError):
    """A remote engine answered without honouring a field the request set (``logprobs``); ``param``
    names the field, so the client gets a 400 naming it rather than a reply that silently lacks it."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


class LibraryError(FiresideError):
    """The model library or its index failed."""


class UnsafePath(LibraryError):
    """A repo id, file name or path would leave the models root."""


class HubError(FiresideError):
    """The Hugging Face hub answered with an error."""


class GatedRepo(HubError):
    """The repo is gated: the user must accept its terms on the hub and set a token."""


class DownloadError(HubError):
    """A download failed for good."""


class IntegrityError(DownloadError):
    """The downloaded bytes do not match the hash the hub published."""


class DiskFull(DownloadError):
    """Not enough free disk space for the download."""


class DownloadCancelled(DownloadError):
    """The download was cancelled; its part file is kept so it can resume."""


class ServerError(FiresideError):
    """The local API server could not start or stop."""


class DeviceError(FiresideError):
    """Sharing with your other devices failed: a pairing code was wrong or spent, a device is unknown, or a
    device answered with a certificate other than the one pinned when it was paired."""


class ReadOnlyData(FiresideError):
    """Saved data (the chats database) comes from a newer Fireside: it is shown, but not written."""


class ImageRejected(FiresideError):
    """An image cannot be used: truncated or corrupt, not the image it claims to be, a format Fireside does
    not read (SVG), or more pixels than the cap (a decompression bomb). ``param`` names where it was."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class NoVision(FiresideError):
    """A request holds an image, but its model reads text only (no vision projector is paired with it)."""


class EmbedsOnly(FiresideError):
    """A reply was asked of an embedding model (an encoder such as all-MiniLM or bge): it makes vectors for
    search (``/v1/embeddings``, the documents' embedder) and cannot write text."""


class DocumentRejected(FiresideError):
    """A file cannot be read as a document: an encrypted or corrupt PDF, a DOCX whose parts unpack past
    the caps (a zip bomb), a text file over its size cap, binary data under a text name, or a kind Fireside
    does not read. ``reason`` is a short code (``encrypted``, ``corrupt``, ``too_large``, ``zip_bomb``,
    ``binary``, ``unsupported``, ``missing``) and ``path`` the file."""

    def __init__(self, message: str, reason: str = "", path: str = ""):
        super().__init__(message)
        self.reason = reason
        self.path = path


class DocumentNotFound(FiresideError):
    """No uploaded file or collection (an API vector store) has that id; ``kind`` is ``file`` or ``collection``."""

    def __init__(self, message: str, kind: str = "", param: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.param = param


class GrammarRejected(RuntimeFailure):
    """A JSON schema or grammar is over a limit, or llama.cpp cannot compile it; ``limit`` names which."""

    def __init__(self, message: str, limit: str = ""):
        super().__init__(message)
        self.limit = limit


class GrammarDeadEnd(RuntimeFailure):
    """Mid-reply, the request's grammar allowed no token at all (``grammar_dead_end``); ``position`` is the
    count of tokens the reply had produced. Only that request ends: the runner and its other slots go on."""

    def __init__(self, message: str, position: int = 0):
        super().__init__(message)
        self.position = position


class McpServerError(FiresideError):
    """An MCP tool server is unknown, failed to start, crashed mid-call, or answered with something malformed."""


class McpTimeout(McpServerError):
    """An MCP server did not start, list its tools or finish a call within its time limit."""


class SchemaMismatch(RuntimeFailure):
    """A reply written under a JSON schema ended (on its own, not at the token limit) without matching
    it: a keyword the grammar keeps only partly was broken (see ``structured/replycheck.py``)."""


class ReplyCut(RuntimeFailure):
    """A reply was cut short by an unload or a stopped runner, not by its client or its end."""
