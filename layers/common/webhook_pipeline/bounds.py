"""Bounds of the values that end in a key, in UTF-8 bytes (never characters).

A delivery id is in the record's partition key ``DELIVERY#<source>#<id>`` (DynamoDB: 2,048
bytes) and the time index sort key ``<received_at>#<source>#<id>`` (1,024 bytes), a resource key
in the partition key ``RESOURCE#<source>#<key>``; with a source name of at most 64 bytes every one
fits (``adapters/dynamodb_items.py`` states the sums). Longer values are 400 at ingest
(``delivery_id_too_long``, ``event_type_too_long``, ``resource_key_too_long``) and malformed in
an envelope.
"""

from __future__ import annotations

MAX_DELIVERY_ID_BYTES = 256
MAX_EVENT_TYPE_BYTES = 256
MAX_RESOURCE_KEY_BYTES = 1024


def utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes (a lone surrogate counts as the 3 bytes of its
    ``surrogatepass`` encoding, as a JSON ``\\ud800`` escape decodes to one)."""
    return len(text.encode("utf-8", "surrogatepass"))
