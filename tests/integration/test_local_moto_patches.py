"""The local stack's moto patches (applied only in its moto server process; here for each test).

TransactWriteItems copies only the items it touches and stays all or nothing; SQS refuses the
attribute characters, body characters and sizes that SQS refuses.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from webhook_pipeline_ops.local import moto_patches

from tests.conftest import REGION

TABLE = "deliveries"


@pytest.fixture
def ddb(aws: None) -> Iterator[Any]:
    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    with moto_patches.patched():
        yield client


def _key(pk: str, sk: str = "R") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _get(client: Any, pk: str, sk: str = "R") -> dict[str, Any] | None:
    return client.get_item(TableName=TABLE, Key=_key(pk, sk), ConsistentRead=True).get("Item")


def _put(pk: str, value: str, *, new_only: bool = True, sk: str = "R") -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": TABLE, "Item": {**_key(pk, sk), "v": {"S": value}}}
    if new_only:
        op["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": op}


def _update(pk: str, value: str, condition: str, sk: str = "R") -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": _key(pk, sk),
            "UpdateExpression": "SET v = :v",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":v": {"S": value}},
        }
    }


def test_a_failed_second_condition_leaves_the_first_item_unchanged(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "old"}})
    ddb.put_item(TableName=TABLE, Item={**_key("b"), "v": {"S": "b0"}})
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(
            TransactItems=[
                _update("a", "new", "attribute_exists(pk)"),  # holds: applied, then rolled back
                _put("b", "b1"),  # fails: b exists
                _put("c", "c1"),  # holds: a new item, rolled back
            ]
        )
    error = caught.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in error["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed", "None"]
    assert _get(ddb, "a") == {**_key("a"), "v": {"S": "old"}}
    assert _get(ddb, "b") == {**_key("b"), "v": {"S": "b0"}}
    assert _get(ddb, "c") is None
    assert ddb.scan(TableName=TABLE)["Count"] == 2


def test_a_failed_first_condition_cancels_with_its_reason_and_old_item(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "old"}})
    failed = {
        "Put": {
            **_put("a", "x")["Put"],
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=[failed, _put("z", "z1", sk="other")])
    reasons = caught.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["ConditionalCheckFailed", "None"]
    assert reasons[0]["Item"] == {**_key("a"), "v": {"S": "old"}}
    assert _get(ddb, "z", "other") is None
    assert _get(ddb, "a") == {**_key("a"), "v": {"S": "old"}}


def test_a_transaction_that_holds_applies_every_item(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "old"}})
    ddb.transact_write_items(
        TransactItems=[_update("a", "new", "attribute_exists(pk)"), _put("b", "b1")]
    )
    assert _get(ddb, "a")["v"] == {"S": "new"}  # type: ignore[index]
    assert _get(ddb, "b")["v"] == {"S": "b1"}  # type: ignore[index]


def test_two_operations_on_one_item_are_a_validation_error_and_change_nothing(ddb: Any) -> None:
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=[_put("a", "1"), _put("a", "2")])
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert _get(ddb, "a") is None


def test_only_the_touched_items_are_copied(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models.table import Table

    for i in range(50):
        ddb.put_item(TableName=TABLE, Item={**_key(f"k{i}"), "v": {"S": "x"}})
    copied: list[type] = []
    real = copy.deepcopy

    def spy(value: Any, *args: Any) -> Any:
        copied.append(type(value))
        return real(value, *args)

    monkeypatch.setattr(copy, "deepcopy", spy)
    with pytest.raises(ClientError):
        ddb.transact_write_items(
            TransactItems=[_update("k1", "y", "attribute_exists(pk)"), _put("k2", "z")]
        )
    from moto.dynamodb.models.dynamo_type import Item

    assert Table not in copied
    assert copied.count(Item) < 10  # the touched item (and moto's own update copies), not 50
    assert _get(ddb, "k1")["v"] == {"S": "x"}  # type: ignore[index]


# ------------------------------------------------------------------------------------------------
# SQS


@pytest.fixture
def queue(aws: None) -> Iterator[tuple[Any, str]]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="main", Attributes={"MaximumMessageSize": "262144"})[
        "QueueUrl"
    ]
    with moto_patches.patched():
        yield sqs, url


@pytest.mark.parametrize("bad", ["ord\u0000", "id\u0007x", "x\ufffe", "\x1f"])
def test_attribute_values_sqs_refuses_are_refused(queue: tuple[Any, str], bad: str) -> None:
    sqs, url = queue
    with pytest.raises(ClientError) as caught:
        sqs.send_message(
            QueueUrl=url,
            MessageBody="{}",
            MessageAttributes={"delivery_id": {"DataType": "String", "StringValue": bad}},
        )
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "invalid characters" in caught.value.response["Error"]["Message"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_allowed_characters_pass(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    value = "tab\tnl\ncr\r \ud7ff\ue000\ufffd\U00010000\U0010ffff"
    sqs.send_message(
        QueueUrl=url,
        MessageBody="{}",
        MessageAttributes={"delivery_id": {"DataType": "String", "StringValue": value}},
    )
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert message["MessageAttributes"]["delivery_id"]["StringValue"] == value


def test_a_body_with_a_refused_character_is_invalid_message_contents(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody='{"a": "\u0000"}')
    assert caught.value.response["Error"]["Code"] == "InvalidMessageContents"


def test_size_counts_utf8_body_and_attributes_against_the_queue_limit(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    attributes = {"delivery_id": {"DataType": "String", "StringValue": "evt_1"}}
    overhead = len("delivery_id") + len("String") + len("evt_1")
    sqs.send_message(
        QueueUrl=url, MessageBody="x" * (262144 - overhead), MessageAttributes=attributes
    )
    with pytest.raises(ClientError) as caught:
        sqs.send_message(
            QueueUrl=url, MessageBody="x" * (262144 - overhead + 1), MessageAttributes=attributes
        )
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError):  # 131,073 characters, 262,146 bytes in UTF-8
        sqs.send_message(QueueUrl=url, MessageBody="é" * 131073)


def test_a_refused_batch_entry_fails_alone(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    response = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "{}"},
            {
                "Id": "bad",
                "MessageBody": "{}",
                "MessageAttributes": {"d": {"DataType": "String", "StringValue": "\u0000"}},
            },
        ],
    )
    assert [e["Id"] for e in response["Successful"]] == ["ok"]
    (failed,) = response["Failed"]
    assert failed["Id"] == "bad" and failed["Code"] == "InvalidParameterValue"
    assert failed["SenderFault"] is True


def test_queue_attributes_are_unchanged_and_a_send_does_not_count_the_queue(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.sqs.models import Queue

    sqs = boto3.client("sqs", region_name=REGION)
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    redrive = {"deadLetterTargetArn": dlq_arn["QueueArn"], "maxReceiveCount": "5"}
    main = sqs.create_queue(QueueName="main", Attributes={"RedrivePolicy": json.dumps(redrive)})
    fifo = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})
    for i in range(30):
        sqs.send_message(QueueUrl=main["QueueUrl"], MessageBody=f"m{i}")
    sqs.receive_message(QueueUrl=main["QueueUrl"], MaxNumberOfMessages=10)
    urls = (dlq, main["QueueUrl"], fifo["QueueUrl"])
    before = [sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["All"]) for u in urls]
    with moto_patches.patched():
        after = [sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["All"]) for u in urls]
        assert [a["Attributes"] for a in after] == [b["Attributes"] for b in before]
        assert after[1]["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "10"
        counted: list[str] = []
        original = Queue.__dict__["approximate_number_of_messages"]

        def spy(self: Any) -> int:
            counted.append(self.name)
            return int(original.fget(self))

        monkeypatch.setattr(Queue, "approximate_number_of_messages", property(spy))
        sqs.send_message(QueueUrl=main["QueueUrl"], MessageBody="one more")
        assert counted == []  # the send read no count (moto's own property scans the queue)
        attrs = sqs.get_queue_attributes(QueueUrl=main["QueueUrl"], AttributeNames=["All"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "21" and counted == ["main"]


def _receive_and_delete_story(sqs: Any, name: str) -> dict[str, Any]:
    """Sends, receives, deletes (twice, and an unknown handle); what SQS answered."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for i in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", DelaySeconds=60 if i == 4 else 0)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=30)
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    handle = first["Messages"][0]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)  # again: accepted
    with pytest.raises(ClientError) as caught:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]  # fmt: skip
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return {
        "first": sorted(m["Body"] for m in first["Messages"]),
        "rest": sorted(m["Body"] for m in rest["Messages"]),
        "error": caught.value.response["Error"]["Code"],
        "attributes": attrs,
    }


def test_receive_and_delete_answer_as_moto_does(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sqs.models import Message, sqs_backends

    sqs = boto3.client("sqs", region_name=REGION)
    expected = _receive_and_delete_story(sqs, "plain")
    assert expected["attributes"] == {
        "ApproximateNumberOfMessages": "2",
        "ApproximateNumberOfMessagesNotVisible": "1",
        "ApproximateNumberOfMessagesDelayed": "1",
    }
    with moto_patches.patched():
        assert _receive_and_delete_story(sqs, "patched") == expected
        clock_reads: list[int] = []
        original = Message.__dict__["visible"]
        monkeypatch.setattr(
            Message, "visible", property(lambda m: clock_reads.append(1) or original.fget(m))
        )
        queue = sqs_backends["123456789012"][REGION].get_queue("patched")
        assert len(queue.messages) == 2  # the two visible ones, read without a clock per message
        assert clock_reads == []
