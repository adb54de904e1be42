"""S3 claim-check store for bodies over the inline threshold of an envelope.

The ingest function ``put``s a large body and sends a :class:`BodyPointer` in the envelope; the
processor ``get``s it back and checks it against the envelope's ``body_size``/``body_sha256``
(:func:`webhook_pipeline.process.bodies.load_body`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.envelope import BodyPointer
from webhook_pipeline.errors import PayloadIntegrityError, PayloadUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


class S3PayloadStore:
    """Claim-check bodies as S3 objects in one bucket.

    Parameters
    ----------
    client : botocore S3 client | None
        Created once per container with explicit timeouts and retry config; or ``None`` with
        ``client_factory``.
    bucket : str
        The payload bucket (``PAYLOAD_BUCKET``).
    client_factory : Callable[[], botocore S3 client] | None
        Builds the client on the first ``put`` or ``get``: most bodies are under the claim-check
        threshold and never need S3, so the ingest function never builds the client for them
        (33-60 ms of a cold start).

    Raises
    ------
    ValueError
        Neither or both of ``client`` and ``client_factory`` given.
    """

    def __init__(
        self,
        client: S3Client | None,
        bucket: str,
        client_factory: Callable[[], S3Client] | None = None,
    ) -> None:
        if (client is None) == (client_factory is None):
            raise ValueError("give exactly one of client and client_factory")
        self._client_instance = client
        self._factory = client_factory
        self._bucket = bucket

    @property
    def _client(self) -> S3Client:
        """The S3 client, built by the factory on first use."""
        if self._client_instance is None:
            assert self._factory is not None  # one of the two is given (__init__)
            self._client_instance = self._factory()
        return self._client_instance

    def put(self, key: str, body: bytes) -> BodyPointer:
        """Store the raw ``body`` bytes at ``s3://<bucket>/<key>``.

        Returns
        -------
        BodyPointer
            The bucket and key to carry in the envelope's ``body_ref``.

        Raises
        ------
        PayloadUnavailableError
            S3 did not accept the object (throttling, timeout, 5xx, access denied).
        """
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                ContentType="application/octet-stream",
            )
        except (ClientError, BotoCoreError) as exc:
            raise PayloadUnavailableError(f"claim-check put failed: {_code(exc)}") from exc
        return BodyPointer(bucket=self._bucket, key=key)

    def get(self, pointer: BodyPointer) -> bytes:
        """Return the raw bytes at ``pointer``.

        Raises
        ------
        PayloadIntegrityError
            The pointer names another bucket than the payload bucket (never followed), or the
            object does not exist (poison: retrying cannot bring it back).
        PayloadUnavailableError
            Any other S3 or transport error (retried).
        """
        if pointer.bucket != self._bucket:
            raise PayloadIntegrityError("claim-check pointer names another bucket than ours")
        try:
            response = self._client.get_object(Bucket=pointer.bucket, Key=pointer.key)
            data: bytes = response["Body"].read()
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                raise PayloadIntegrityError(
                    f"claim-check object missing: s3://{pointer.bucket}/{pointer.key}"
                ) from exc
            raise PayloadUnavailableError(f"claim-check get failed: {_code(exc)}") from exc
        except BotoCoreError as exc:
            raise PayloadUnavailableError(f"claim-check get failed: {_code(exc)}") from exc
        return data


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "Unknown"))
    return type(exc).__name__
