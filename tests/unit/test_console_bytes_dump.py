"""The console's view of a body that is not UTF-8: a hex dump capped at ``MAX_DUMP_BYTES``."""

from __future__ import annotations

import base64

import pytest
from webhook_pipeline_ops.console.bodies import MAX_DUMP_BYTES, MAX_SHOWN_BYTES, bytes_dump

pytestmark = pytest.mark.unit


def test_a_short_body_is_dumped_whole_sixteen_bytes_a_line() -> None:
    raw = bytes(range(0x1E, 0x1E + 20))
    dump = bytes_dump(raw)
    assert dump.size == 20 and not dump.truncated
    assert dump.hex_lines == [
        "00000000  1e 1f 20 21 22 23 24 25 26 27 28 29 2a 2b 2c 2d  |.. !\"#$%&'()*+,-|",
        "00000010  2e 2f 30 31                                      |./01|",
    ]
    assert base64.b64decode(dump.base64) == raw


def test_a_long_body_is_dumped_up_to_the_cap_and_says_so() -> None:
    raw = b"\xff" * (MAX_SHOWN_BYTES + 5)
    dump = bytes_dump(raw)
    assert dump.truncated and dump.size == len(raw)
    assert len(dump.hex_lines) == MAX_DUMP_BYTES // 16
    assert dump.hex_lines[-1].startswith(f"{MAX_DUMP_BYTES - 16:08x}  ff")
    assert base64.b64decode(dump.base64) == raw[:MAX_SHOWN_BYTES]
