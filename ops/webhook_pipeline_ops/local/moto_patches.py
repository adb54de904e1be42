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

import base64
import contextlib
import copy
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

_VALID_XML_CHARS = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_originals: dict[str, Any] = {}


def invalid_character(value: str) -> str | None:
    """The first character of ``value`` SQS refuses (as ``"#x7"``), or ``None``."""
    match = _VALID_XML_CHARS.search(value)
    return f"#x{ord(match.group()):X}" if match else None


# ------------------------------------------------------------------------------------------------
# DynamoDB


def _key_of(table: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    attrs = op["Item"]
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


class _Snapshot:
    """The items a transaction may touch, as they were before it ran, and how to put them back."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], tuple[Any, Any, Any, Any]] = {}
        self._streams: dict[str, tuple[Any, int]] = {}

    def take(self, backend: Any, table_name: str, key: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = backend.tables.get(table_name)
        if table is None:
            return
        ident = (table_name, repr(sorted(key.items())))
        if ident in self._items:
            return
        try:
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = (
                DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
            )
        except KeyError:
            return  # a malformed key: the operation itself fails before changing anything
        if table.range_key_attr is not None:
            had_hash = hash_value in table.items
            current = table.items[hash_value].get(range_value) if had_hash else None
        else:
            had_hash = True
            current = table.items.get(hash_value)
        self._items[ident] = (table, hash_value, range_value, (copy.deepcopy(current), had_hash))
        if table.stream_shard is not None and table_name not in self._streams:
            self._streams[table_name] = (table.stream_shard, len(table.stream_shard.items))

    def restore(self) -> None:
        for table, hash_value, range_value, (item, had_hash) in self._items.values():
            if table.range_key_attr is None:
                if item is None:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = item
                continue
            if item is None:
                bucket = table.items.get(hash_value)
                if bucket is not None:
                    bucket.pop(range_value, None)
                    if not bucket and not had_hash:
                        del table.items[hash_value]
            else:
                table.items[hash_value][range_value] = item
        for shard, length in self._streams.values():
            del shard.items[length:]


def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto's ``transact_write_items`` with a rollback snapshot of the touched items only."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    snapshot = _Snapshot()
    target_items: set[tuple[str, str]] = set()
    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            snapshot.restore()
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            table = self.get_table(table_name)
            key = _key_of(table, op_type, op)
            ident = (str(table_name), str(dict(sorted(key.items()))))
            if ident in target_items:
                raise MultipleTransactionsException()
            target_items.add(ident)
            snapshot.take(self, table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(condition_expression, names, values)
                if not condition_op.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            snapshot.restore()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))  # type: ignore[arg-type]
        except Exception as e:
            errors.append((type(e).__name__, str(e), original_item))  # type: ignore[arg-type]
    if any(code is not None for code, _, _ in errors):
        snapshot.restore()
        raise TransactionCanceledException(errors)


# ------------------------------------------------------------------------------------------------
# SQS


def _attribute_problem(attributes: dict[str, Any] | None) -> str | None:
    for name, value in (attributes or {}).items():
        strings = [value.get("StringValue"), *(value.get("StringListValues") or [])]
        for text in strings:
            if isinstance(text, str) and (bad := invalid_character(text)):
                return (
                    f"Message (user) attribute '{name}' value contains invalid characters "
                    f"(character {bad}). Valid unicode characters are #x9 | #xA | #xD | "
                    "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
                )
    return None


def _binary_length(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    try:
        return len(base64.b64decode(value, validate=True))
    except (ValueError, TypeError):
        return len(str(value).encode())


def message_size(body: str, attributes: dict[str, Any] | None) -> int:
    """Bytes SQS counts against ``MaximumMessageSize``: the UTF-8 body and, for every message
    attribute, its name, data type and value."""
    size = len(body.encode("utf-8", "surrogatepass"))
    for name, value in (attributes or {}).items():
        size += len(name.encode()) + len(str(value.get("DataType", "")).encode())
        if value.get("StringValue") is not None:
            size += len(str(value["StringValue"]).encode("utf-8", "surrogatepass"))
        if value.get("BinaryValue") is not None:
            size += _binary_length(value["BinaryValue"])
    return size


def _check_message(queue: Any, body: str, attributes: dict[str, Any] | None) -> None:
    from moto.sqs.exceptions import InvalidParameterValue

    problem = _attribute_problem(attributes)
    if problem:
        raise InvalidParameterValue(problem)
    bad = invalid_character(body)
    if bad:
        raise _InvalidMessageContents(
            f"Invalid characters found. Character {bad} is not allowed. Valid unicode characters "
            "are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
        )
    limit = int(queue.maximum_message_size)
    if message_size(body, attributes) > limit:
        raise InvalidParameterValue(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{limit} bytes."
        )


class _InvalidMessageContents(Exception):
    """A body SQS refuses (raised to the client as ``InvalidMessageContents``)."""


def _invalid_contents(message: str) -> Exception:
    from moto.sqs.exceptions import SQSException

    return SQSException("InvalidMessageContents", message)


def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
    """moto's ``SQSBackend.send_message`` after the SQS checks moto lacks."""
    attributes = kwargs.get("message_attributes", args[0] if args else None)
    try:
        _check_message(self.get_queue(queue_name), message_body, attributes)
    except _InvalidMessageContents as exc:
        raise _invalid_contents(str(exc)) from None
    return _originals["send_message"](self, queue_name, message_body, *args, **kwargs)


def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
    """moto's ``send_message_batch``; an entry SQS would refuse fails alone (``Failed``)."""
    queue = self.get_queue(queue_name)
    failed: list[dict[str, Any]] = []
    valid: dict[str, dict[str, Any]] = {}
    for index, entry in entries.items():
        try:
            _check_message(queue, entry["MessageBody"], entry.get("MessageAttributes"))
        except _InvalidMessageContents as exc:
            code, message = "InvalidMessageContents", str(exc)
        except Exception as exc:
            code, message = "InvalidParameterValue", str(getattr(exc, "message", exc))
        else:
            valid[index] = entry
            continue
        failed.append({"Id": entry["Id"], "SenderFault": True, "Code": code, "Message": message})
    if not valid:
        return [], failed
    messages, more_failed = _originals["send_message_batch"](self, queue_name, valid)
    return messages, failed + list(more_failed)


class LazyQueueAttributes(Mapping[str, Any]):
    """moto's ``Queue.attributes`` document, each value computed when it is read."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._names = list(dict.fromkeys(names))

    def __getitem__(self, name: str) -> Any:
        from moto.core.utils import camelcase_to_underscores

        if name not in self._names:
            raise KeyError(name)
        if name == "RedrivePolicy" and self._queue.redrive_policy:
            return json.dumps(self._queue.redrive_policy)
        value = getattr(self._queue, camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _lazy_attributes(self: Any) -> LazyQueueAttributes:
    return LazyQueueAttributes(self)


def _visible_messages(self: Any) -> list[Any]:
    """moto's ``Queue.messages``: visible (``now > visible_at``), not delayed (``now >=
    delayed_until``), with one clock reading."""
    from moto.core.utils import unix_time_millis

    now = unix_time_millis()
    return [m for m in self._messages if now > m.visible_at and now >= m.delayed_until]


def _delete_message(self: Any, receipt_handle: str) -> None:
    """moto's ``Queue.delete_message`` in one walk of the queue."""
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    if receipt_handle in self.deleted_messages:
        return  # already deleted: SQS accepts deleting it again
    kept, removed = [], []
    for message in self._messages:
        if (
            message.receipt_handle == receipt_handle
            or receipt_handle in message._old_receipt_handles
        ):
            removed.append(message)
        else:
            kept.append(message)
    if not removed:
        raise ReceiptHandleIsInvalid()
    for message in removed:
        self.pending_messages.discard(message)
        self.deleted_messages.update(message.all_receipt_handles)
    self._messages = kept


# ------------------------------------------------------------------------------------------------


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
