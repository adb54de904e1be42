"""DynamoDB errors read by code and HTTP status (never by message text): transient or a bug."""

from __future__ import annotations

from botocore.exceptions import ClientError

from webhook_pipeline.errors import StoreBugError, TransientError

# Error codes that a later attempt may not hit again.
TRANSIENT_ERRORS = frozenset(
    {
        "TransactionConflictException",
        "TransactionInProgressException",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "LimitExceededException",
    }
)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def classify(exc: ClientError) -> Exception:
    """Map a DynamoDB error to :class:`TransientError` or :class:`StoreBugError` (by code and
    HTTP status, never by message text)."""
    code = error_code(exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in TRANSIENT_ERRORS or status >= 500:
        return TransientError(f"DynamoDB {exc.operation_name} failed: {code or status}")
    return StoreBugError(f"DynamoDB {exc.operation_name} rejected: {code or status}")
