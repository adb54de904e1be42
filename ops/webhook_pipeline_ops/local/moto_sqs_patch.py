"""The SQS patches of :mod:`webhook_pipeline_ops.local.moto_patches` (items 2-4 there): what SQS
refuses and moto accepts on a send, queue attributes computed when read, the visible messages
and deletes in one walk of the queue."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

#: moto's own methods while the patches are installed (filled by ``moto_patches.apply``): the
#: patched sends call moto's after their own checks.
_originals: dict[str, Any] = {}
_VALID_XML_CHARS = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def invalid_character(value: str) -> str | None:
    """The first character of ``value`` SQS refuses (as ``"#x7"``), or ``None``."""
    match = _VALID_XML_CHARS.search(value)
    return f"#x{ord(match.group()):X}" if match else None


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
