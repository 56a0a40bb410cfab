"""The last server-sent event carrying an engine's figures, found in a stream fed chunk by chunk.

Only the current incomplete line and the last ``data:`` line mentioning the engine's marker (``"timings"``
for llama.cpp, ``"speculative_decoding"`` for vLLM, ...) are kept between chunks (the stream itself goes to the
client untouched); the kept line is parsed once, when the stream ends.
"""

from __future__ import annotations

import json


class LastEvent:
    __slots__ = ("marker", "error", "_line", "_partial")

    def __init__(self, marker: bytes):
        self.marker = marker
        self.error = False  # an event reported an error (vLLM and SGLang end a failed stream with one)
        self._line: bytes | None = None
        self._partial = b""

    def feed(self, chunk: bytes) -> None:
        if self._partial:
            chunk = self._partial + chunk
        end = chunk.rfind(b"\n")
        if end < 0:
            self._partial = chunk
            return
        self._partial = chunk[end + 1:]
        if b'{"error"' in chunk:
            self.error = self.error or any(line.startswith(b'data: {"error"') or line.startswith(b'data:{"error"')
                                           for line in chunk[:end].split(b"\n"))
        if self.marker not in chunk:
            return
        for line in chunk[:end].split(b"\n"):
            if line.startswith(b"data:") and self.marker in line:
                self._line = line[5:]

    def close(self) -> dict | None:
        """The stream ended (a last line without a newline counts too): the last marked event, parsed, or
        None when there was none or it is not a JSON object."""
        if self._partial.startswith(b"data:") and self.marker in self._partial:
            self._line = self._partial[5:]
        self._partial = b""
        return whole(self._line) if self._line is not None else None


def whole(body: bytes) -> dict | None:
    """A whole JSON object (an answer, or one event's data), None when it is not one."""
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
