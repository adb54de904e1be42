"""Worker processes of a local search read their own objects from S3 (a moto server over HTTP,
reached from each process with a client built from ``S3Settings``): no object passes through the
searching process, and the answer is the one the searching process alone gives."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from webhook_pipeline.archive.predicate import parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter, S3Settings, search
from webhook_pipeline.archive.record import encode_object, hour_of, object_key

from tests.conftest import free_port
from tests.unit.test_archive_record import BUCKET, T0, record

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    s3 = client(url)
    s3.create_bucket(Bucket=BUCKET)
    for hour in range(6):
        at = T0 + timedelta(hours=hour)
        for source in ("stripe-live", "github"):
            records = [
                record(
                    f"ev-{source}-{hour}-{i}",
                    source=source,
                    received=at + timedelta(minutes=i),
                    body=f'{{"amount": {i * 100}}}'.encode(),
                )
                for i in range(40)
            ]
            records.append(records[3].model_copy(update={"outcome": "retry"}))
            key = object_key(source, hour_of(at), at)
            s3.put_object(Bucket=BUCKET, Key=key, Body=encode_object(records))
    s3.put_object(
        Bucket=BUCKET, Key=object_key("github", hour_of(T0), T0, "f" * 32), Body=b"not gzip"
    )
    try:
        yield url
    finally:
        server.stop()


def client(url: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_workers_read_their_own_objects_and_give_the_same_answer(endpoint: str) -> None:
    settings = S3Settings(
        region="us-east-1", endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )
    filters = [
        ArchiveFilter(where=(parse_predicate("amount>=3000"),)),
        ArchiveFilter(sources=("github",), start=T0 + timedelta(hours=2)),
        ArchiveFilter(delivery_id_prefix="ev-stripe-live-1-"),
    ]
    for flt in filters:
        alone = search(client(endpoint), BUCKET, flt)
        s3 = client(endpoint)
        reads: list[str] = []
        s3.meta.events.register(
            "before-call.s3.GetObject", lambda params, **_: reads.append(params["url_path"])
        )
        found = search(s3, BUCKET, flt, processes=2, settings=settings)
        assert reads == []  # every object was read by a worker
        assert found == alone
        assert found.records and found.objects_read >= 3
    everything = search(client(endpoint), BUCKET, filters[0], processes=2, settings=settings)
    assert len(everything.records) == 12 * 10  # amounts 3000..3900 of 12 objects, deduplicated
    assert [p.reason for p in everything.problems] == ["not a gzip JSON Lines object: BadGzipFile"]


def test_the_cli_gives_workers_its_endpoint_region_and_credentials(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhook_pipeline_ops.archive.search_run import s3_settings
    from webhook_pipeline_ops.aws import Aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token-example")
    args = argparse.Namespace(endpoint_url=endpoint, region="eu-west-3", profile=None, local=False)
    settings = s3_settings(Aws(args))
    assert settings == S3Settings(
        region="eu-west-3",
        endpoint_url=endpoint,
        access_key="AKIDEXAMPLE",
        secret_key="secret-example",
        token="token-example",
    )
    made = settings.client()
    assert made.meta.endpoint_url == endpoint and made.meta.region_name == "eu-west-3"
    frozen = boto3.session.Session().get_credentials()
    assert frozen is not None and frozen.access_key == "AKIDEXAMPLE"


def test_objects_a_worker_cannot_read_are_read_by_the_searching_process(endpoint: str) -> None:
    nowhere = S3Settings(
        region="us-east-1",
        endpoint_url=f"http://127.0.0.1:{free_port()}",  # nothing listens
        access_key="testing",
        secret_key="testing",
        config={"retries": {"total_max_attempts": 1}},
    )
    flt = ArchiveFilter(where=(parse_predicate("amount>=3000"),))
    alone = search(client(endpoint), BUCKET, flt)
    s3 = client(endpoint)
    reads: list[str] = []
    s3.meta.events.register(
        "before-call.s3.GetObject", lambda params, **_: reads.append(params["url_path"])
    )
    assert search(s3, BUCKET, flt, processes=2, settings=nowhere) == alone
    assert len(reads) == alone.objects_read == 13
