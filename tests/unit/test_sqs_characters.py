"""``adapters.sqs.SQS_REFUSED`` is exactly SQS's rule for message contents, over every code point.

SQS accepts ``#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF`` in a body or a string
attribute value (anything else: ``InvalidMessageContents`` / ``InvalidParameterValue``). The
pattern is written as the complement of that set (it compiles much faster); this checks the two
agree on all 1,114,112 code points.
"""

from __future__ import annotations

from webhook_pipeline.adapters.sqs import SQS_REFUSED


def sqs_accepts(code_point: int) -> bool:
    return (
        code_point in (0x9, 0xA, 0xD)
        or 0x20 <= code_point <= 0xD7FF
        or 0xE000 <= code_point <= 0xFFFD
        or 0x10000 <= code_point <= 0x10FFFF
    )


def test_the_pattern_refuses_exactly_what_sqs_refuses() -> None:
    text = "".join(map(chr, range(0x110000)))
    refused = {m.start() for m in SQS_REFUSED.finditer(text)}
    expected = {c for c in range(0x110000) if not sqs_accepts(c)}
    assert refused == expected
    assert len(expected) == 29 + 2048 + 2  # C0 controls but 3, surrogates, U+FFFE/U+FFFF
