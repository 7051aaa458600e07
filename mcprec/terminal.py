"""Text from a recording made safe for a terminal.

A cassette is data from elsewhere: a server's name, a method, a stderr line or a session name
can hold escape sequences that set the window title, clear the screen or move the cursor, and
so hide what mcprec prints after them. Every string from a recording that mcprec prints for a
person goes through :func:`safe` (one field, one line) or :func:`safe_lines` (a text whose line
breaks mcprec made). The control characters become visible escapes (``ESC`` is ``\\x1b``); the
rest of the text is unchanged. ``export`` and the raw dumps do not use it: they stay byte-exact.

Imports nothing: the stderr notices of replay's start-up go through it.
"""

from __future__ import annotations

# C0 controls, DEL, C1 controls; and the Unicode bidirectional embeddings, overrides and
# isolates, which reorder what a terminal shows ("Trojan source")
_CODES = [*range(0x00, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F),
          *range(0x2066, 0x206A)]
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_TABLE: dict[int, str] = {
    c: _NAMED.get(c) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CODES}
_LINES_TABLE = {c: v for c, v in _TABLE.items() if c != 0x0A}


def safe(text: str) -> str:
    """``text`` with every control character (line breaks included) as a visible escape."""
    if text.isprintable():  # the common case: nothing to do (isprintable is False for controls)
        return text
    return text.translate(_TABLE)


def safe_lines(text: str) -> str:
    """``text`` with every control character but the line feed as a visible escape: for a
    text of several lines made by mcprec."""
    if text.isprintable():
        return text
    return text.translate(_LINES_TABLE)
