"""An SQS poller that invokes a function like Lambda's event source mapping.

Per the function's SQS event in the template: ``ReceiveMessage`` up to ``BatchSize`` messages
(several receives of at most 10 while ``MaximumBatchingWindowInSeconds`` runs), build the SQS
event records, invoke the handler, then

* ``ReportBatchItemFailures`` on: delete every record not listed in ``batchItemFailures``; the
  listed ones stay on the queue and come back when their visibility timeout runs out (after the
  queue's ``maxReceiveCount`` receives, the queue's redrive policy moves them to the DLQ);
  a failure entry with an unknown or empty ``itemIdentifier`` fails the whole batch, as on AWS;
* off: any return value deletes the whole batch;
* a handler exception leaves the whole batch on the queue.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import traceback
from typing import Any

from webhook_pipeline_ops.local.resources import QueueInfo, SqsEventSource
from webhook_pipeline_ops.local.runtime import FunctionUnavailable, LocalFunction

log = logging.getLogger(__name__)

MAX_RECEIVE = 10  # per ReceiveMessage call


def _message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")

    out: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues") or []),
        "binaryListValues": [b64(b) for b in value.get("BinaryListValues") or []],
        "dataType": value.get("DataType", "String"),
    }
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        out["binaryValue"] = b64(value["BinaryValue"])
    return out


def sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda SQS event record for one ``ReceiveMessage`` message."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {
            k: _message_attribute(v) for k, v in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


class SqsPoller:
    """One event source mapping: ``queue`` -> ``function``, run on a thread until stopped.

    Attributes
    ----------
    stats : dict[str, int]
        Counters: batches, records, deleted, failed (left on the queue), errors (handler raised).
    """

    def __init__(
        self,
        sqs: Any,
        queue: QueueInfo,
        source: SqsEventSource,
        function: LocalFunction,
        region: str,
        poll_wait_seconds: int = 1,
    ) -> None:
        self.sqs = sqs
        self.queue = queue
        self.source = source
        self.function = function
        self.region = region
        self.poll_wait_seconds = poll_wait_seconds
        self.stats = {"batches": 0, "records": 0, "deleted": 0, "failed": 0, "errors": 0}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"sqs-poller-{self.function.spec.logical_id}"
        )
        self._thread.start()

    def request_stop(self) -> None:
        """Receive no more batches (returns at once; a batch being processed goes on until its
        invocation returns or the function is stopped, which leaves it on the queue)."""
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop polling; a batch being processed finishes first (``timeout`` seconds at most)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    # ---------------------------------------------------------------------------------------
    def _receive(self, max_messages: int, wait_seconds: int) -> list[dict[str, Any]]:
        response = self.sqs.receive_message(
            QueueUrl=self.queue.url,
            MaxNumberOfMessages=max(1, min(MAX_RECEIVE, max_messages)),
            WaitTimeSeconds=max(0, wait_seconds),
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages") or [])

    def receive_batch(self) -> list[dict[str, Any]]:
        """Receive one batch: up to ``BatchSize`` messages within the batching window."""
        messages = self._receive(self.source.batch_size, self.poll_wait_seconds)
        if not messages:
            return []
        deadline = time.monotonic() + self.source.maximum_batching_window_seconds
        while len(messages) < self.source.batch_size and not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            more = self._receive(self.source.batch_size - len(messages), min(int(remaining), 20))
            if not more and remaining < 1:
                time.sleep(remaining)
            messages.extend(more)
        return messages

    def process(self, messages: list[dict[str, Any]]) -> None:
        """Invoke the function with ``messages`` and settle them as the mapping does."""
        records = [sqs_record(m, self.queue.arn, self.region) for m in messages]
        self.stats["batches"] += 1
        self.stats["records"] += len(records)
        try:
            result = self.function.invoke({"Records": records})
        except FunctionUnavailable as exc:  # the stack is stopping: the batch stays queued
            self.stats["failed"] += len(records)
            log.info(
                "%s: the batch of %d stays on the queue (%s)", self.queue.name, len(records), exc
            )
            return
        except Exception as exc:
            self.stats["errors"] += 1
            self.stats["failed"] += len(records)
            log.error(
                "%s raised; the batch of %d stays on the queue:\n%s",
                self.function.spec.logical_id,
                len(records),
                getattr(exc, "trace", "") or traceback.format_exc(),
            )
            return
        failed: set[str] = set()
        if self.source.report_batch_item_failures and isinstance(result, dict):
            ids = {r["messageId"] for r in records}
            for item in result.get("batchItemFailures") or []:
                ident = item.get("itemIdentifier") if isinstance(item, dict) else None
                if not ident or ident not in ids:
                    log.error("invalid batchItemFailures entry %r: the whole batch fails", item)
                    failed = ids
                    break
                failed.add(ident)
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), MAX_RECEIVE):
            chunk = done[start : start + MAX_RECEIVE]
            response = self.sqs.delete_message_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)
                ],
            )
            for err in response.get("Failed") or []:
                log.warning("delete failed for a processed message: %s", err)
        self.stats["deleted"] += len(done)
        self.stats["failed"] += len(failed)
        if failed:
            log.info(
                "%s: %d of %d records left on the queue (batchItemFailures)",
                self.function.spec.logical_id,
                len(failed),
                len(records),
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self.receive_batch()
            except Exception as exc:
                log.warning("receive from %s failed: %s", self.queue.name, exc)
                self._stop.wait(1.0)
                continue
            if messages:
                self.process(messages)
