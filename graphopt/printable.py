"""Text from a model, made safe to show: on a terminal, in a text file, in a picture.

Names, op types and the messages of ONNX's checker and ONNX Runtime that quote them come from the
input file, which is untrusted. Written raw, an escape sequence in a node name could set the terminal's
title, clear its screen or plant a hyperlink, a carriage return or newline could forge a line of output
(an error is one line), a control character makes an SVG ill-formed XML, and a ``[link=...]`` tag would
be obeyed as rich markup. Every such character is shown as its escape instead (``\\x1b``), and text
printed through rich has its markup escaped.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls; line and paragraph separators; the bidirectional overrides and
# isolates, which reorder what a reader sees.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# Characters a name keeps in a table, a text file or a picture's label (the JSON report keeps it whole;
# dot refuses labels of some 100,000).
NAME_LIMIT = 200
# Lone surrogates, which no UTF-8 stream can hold.
_SURROGATES = re.compile("[\ud800-\udfff]")


def printable(text: object, limit: int | None = None) -> str:
    """``text`` with every control character shown as its escape, cut to ``limit`` characters."""
    text = str(text)
    text = _UNSAFE.sub(_escape, text)
    text = _SURROGATES.sub(_escape, text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def rich_text(text: object, limit: int | None = None) -> str:
    """``printable(text)`` with rich's markup escaped, for a string that a rich Console or Table parses."""
    from rich.markup import escape

    return escape(printable(text, limit))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
