"""The caps on what a document reader takes in, in one place so docs/security.md can name each one.

A file over a cap is refused with a ``DocumentRejected`` that names the cap; nothing is read past it.
Text is streamed in blocks and counted as it comes, so a file that grows while it is read (or a size
the file system reports wrongly) still stops at the cap.
"""

from __future__ import annotations

MiB = 1024 * 1024

MAX_TEXT_BYTES = 32 * MiB        # plain text, Markdown, source code: about 8,000 book pages
MAX_HTML_BYTES = 16 * MiB        # one HTML page (the Python docs' largest is under 1 MB)
MAX_PDF_BYTES = 256 * MiB        # the PDF file itself, checked before pypdf opens it
MAX_PDF_PAGES = 5000
MAX_PDF_CONTENT = 32 * MiB       # page content parsed in all: each page's content streams (and the forms it
                                 # draws, times how often) summed over pages; a stream many pages share
                                 # counts once a page, as pypdf parses it again for each (~0.2-1 MB/s)
MAX_DOCX_BYTES = 64 * MiB        # the .docx (zip) file itself
MAX_DOCX_UNPACKED = 256 * MiB    # every part of a .docx unpacked, summed from the zip's declared sizes
MAX_DOCX_RATIO = 200             # one part's unpacked size over its packed size: a zip bomb runs at 1,000+
MAX_DOCX_XML = 16 * MiB          # the XML parsed: the body, its styles, core properties, relationships and
                                 # content types; lxml holds ~15x its size (headers, comments... are not parsed)
MAX_EXTRACTED_CHARS = 64 * MiB   # the text any one document yields, whatever its kind
MAX_READ_SECONDS = 600           # one file's reading in its reader process (``reader_process.py``), then it is
                                 # killed: the caps above keep a file to a few minutes of parsing at worst
READ_BLOCK = 1 * MiB             # text is read this much at a time
SNIFF_BYTES = 8192               # the first bytes checked for binary data
MAX_CONTROL_RATIO = 0.05         # more control characters than this in the sniff is binary data
MAX_QUERY_CHARS = 16 * 1024      # a search's query text; each word is an OR term of the keyword search
MAX_QUERY_TERMS = 256            # distinct words searched for (100,000 OR terms took 17.7 s; 256 take ~50 ms)
