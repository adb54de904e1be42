"""The DynamoDB patch of :mod:`webhook_pipeline_ops.local.moto_patches` (item 1 there): moto's
``transact_write_items`` with a rollback snapshot of the touched items only, instead of a deep
copy of every table the transaction names."""

from __future__ import annotations

import copy
from typing import Any


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
            _write(self, op_type, op, key)
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


def _write(backend: Any, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> None:
    """One transaction entry's write (its condition already checked), as moto writes it."""
    common = {
        "condition_expression": op.get("ConditionExpression"),
        "expression_attribute_names": op.get("ExpressionAttributeNames"),
        "expression_attribute_values": op.get("ExpressionAttributeValues"),
    }
    if op_type == "Put":
        backend.put_item(op["TableName"], op["Item"], **common)
    elif op_type == "Delete":
        backend.delete_item(op["TableName"], key, **common)
    elif op_type == "Update":
        backend.update_item(
            op["TableName"], key, update_expression=op["UpdateExpression"], **common
        )
