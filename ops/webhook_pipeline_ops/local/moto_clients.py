"""boto3 clients of the local stack at its moto server (:class:`MotoClients`), with the fake
credentials every process of the stack uses (:data:`FAKE_CREDENTIALS`)."""

from __future__ import annotations

import threading
from typing import Any

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",  # moto accepts any credentials
    "AWS_SESSION_TOKEN": "testing",
}


class MotoClients:
    """boto3 clients at the moto server, created on first use."""

    def __init__(self, endpoint: str, region: str) -> None:
        import boto3

        self._session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106
            region_name=region,
        )
        self._endpoint = endpoint
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getattr__(self, service: str) -> Any:
        if service.startswith("_"):
            raise AttributeError(service)
        with self._lock:
            if service not in self._clients:
                from botocore.config import Config

                # A client per attribute name: the name is only known at run time.
                self._clients[service] = self._session.client(  # type: ignore[call-overload]
                    service,
                    endpoint_url=self._endpoint,
                    config=Config(
                        retries={"mode": "standard", "max_attempts": 3},
                        read_timeout=30,
                        connect_timeout=5,
                    ),
                )
            return self._clients[service]
