"""Narrow patches of moto, applied only in the local stack's moto server process.

1. ``DynamoDBBackend.transact_write_items``: moto deep-copies every table a transaction names before
   running it (a rollback snapshot), so each ``TransactWriteItems`` costs time and memory in
   proportion to the whole table (the processor writes a transaction per delivery, or per resource
   of a batch: the local stack slowed down as the table grew). The patched version snapshots only
   the items the transaction touches (a deep copy of each, or "absent") and, when the transaction is
   cancelled, puts exactly those back. Behaviour kept: all or nothing (a failed condition on the
   second item leaves the first unchanged), ``TransactionCanceledException`` with one cancellation
   reason per item in request order, ``ReturnValuesOnConditionCheckFailure``, the validation errors
   (more than 100 items, two operations on one item, more than one operation per entry) raised
   before anything is kept, and stream records of a cancelled transaction dropped.
2. SQS ``SendMessage``/``SendMessageBatch`` refuse what SQS refuses and moto accepts: message
   attribute values with characters outside ``#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
   #x10000-#x10FFFF`` (``InvalidParameterValue``), bodies with such characters
   (``InvalidMessageContents``) and messages whose size (the UTF-8 body plus every attribute's
   name, type and value) exceeds the queue's ``MaximumMessageSize`` (``InvalidParameterValue``;
   moto counts only the body's characters). In a batch an invalid entry fails alone, as in SQS.
3. SQS ``Queue.attributes``: moto builds every queue attribute each time one is read, the three
   ``ApproximateNumberOf...`` counts included (each a scan of every message in the queue), and
   ``SendMessage`` reads one (``ContentBasedDeduplication``): each send cost time in proportion
   to the queue's depth. The patched property computes an attribute only when it is read; the
   attributes ``GetQueueAttributes`` returns are unchanged.
4. SQS ``Queue.messages`` (the visible messages, built at every receive) and
   ``Queue.delete_message``: moto read the clock twice per message in the queue and walked the
   queue twice per delete; the patched versions read the clock once per call and walk the queue
   once (same results, same errors).

:func:`apply` installs both (idempotent); :func:`patched` installs them for a ``with`` block and
restores moto's own methods afterwards (for tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from webhook_pipeline_ops.local.moto_dynamodb_patch import transact_write_items
from webhook_pipeline_ops.local.moto_sqs_patch import (
    _delete_message,
    _lazy_attributes,
    _originals,
    _visible_messages,
    invalid_character,
    message_size,
    send_message,
    send_message_batch,
)


def apply() -> None:
    """Install the patches into moto's backends (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.sqs.models import Queue, SQSBackend

    if _originals:
        return
    _originals["transact_write_items"] = DynamoDBBackend.transact_write_items
    _originals["send_message"] = SQSBackend.send_message
    _originals["send_message_batch"] = SQSBackend.send_message_batch
    _originals["queue_attributes"] = Queue.__dict__["attributes"]
    _originals["queue_messages"] = Queue.__dict__["messages"]
    _originals["queue_delete_message"] = Queue.delete_message
    Queue.attributes = property(_lazy_attributes)  # type: ignore[assignment,method-assign]
    Queue.messages = property(_visible_messages)  # type: ignore[assignment,method-assign]
    Queue.delete_message = _delete_message  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    SQSBackend.send_message = send_message  # type: ignore[method-assign]
    SQSBackend.send_message_batch = send_message_batch  # type: ignore[method-assign]


def restore() -> None:
    """Put moto's own methods back."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.sqs.models import Queue, SQSBackend

    if not _originals:
        return
    DynamoDBBackend.transact_write_items = _originals.pop("transact_write_items")  # type: ignore[method-assign]
    SQSBackend.send_message = _originals.pop("send_message")  # type: ignore[method-assign]
    SQSBackend.send_message_batch = _originals.pop("send_message_batch")  # type: ignore[method-assign]
    Queue.attributes = _originals.pop("queue_attributes")  # type: ignore[method-assign]
    Queue.messages = _originals.pop("queue_messages")  # type: ignore[method-assign]
    Queue.delete_message = _originals.pop("queue_delete_message")  # type: ignore[method-assign]


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """The patches for a ``with`` block (moto's own methods restored after it)."""
    apply()
    try:
        yield
    finally:
        restore()


__all__ = [
    "apply",
    "invalid_character",
    "message_size",
    "patched",
    "restore",
    "transact_write_items",
]
