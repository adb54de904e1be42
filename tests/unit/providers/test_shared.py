"""Behaviour every provider shares, for every provider in the registry (no list kept by hand):
its vectors verify, its own signatures round-trip, rotation, tampering, missing and non-ASCII
headers, timestamp parsing (case C05) and freshness in both directions, secret format, sample
payloads, handshake samples, and that each built-in provider has a test module of its own.

A provider registered by another module (``PROVIDER_MODULES``) is covered too: set
``WEBHOOK_PIPELINE_TEST_PROVIDER_MODULES`` to its module names when running these tests.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import pkgutil
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from webhook_pipeline.errors import (
    ConfigurationError,
    IngestError,
    TimestampError,
    VerificationError,
)
from webhook_pipeline.fields import dig
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers import Provider, all_providers, load_provider_modules
from webhook_pipeline.providers.registry import builtin_module_names
from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import Source, load_sources, resolve
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import make_request

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
load_provider_modules(
    m for m in os.environ.get("WEBHOOK_PIPELINE_TEST_PROVIDER_MODULES", "").split(",") if m
)
PROVIDERS = all_providers()
NAMES = sorted(PROVIDERS)
TIMESTAMPED = sorted(n for n, cls in PROVIDERS.items() if cls.default_tolerance_seconds)
INTEGER_TIMESTAMPS = [
    n for n in TIMESTAMPED if PROVIDERS[n].timestamp_unit in ("seconds", "milliseconds")
]

NOW = 1_700_000_000
BODY = b'{"id":"evt_1","amount":1.50}'
# The exact C05 inputs plus neighbours of their class.
BAD_TIMESTAMPS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e9",
    "1E9",
    " 1700000000 ",
    " 1700000000",
    "1700000000 ",
    "-1",
    "+1700000000",
    "1700000000.0",
    "1.7e9",
    "0x10",
    "0b1",
    "1_700_000_000",
    "\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",  # Arabic-Indic digits
    "\uff11\uff17" + "\uff10" * 8,  # full-width digits
    "1" * 20,
    "9" * 400,
    "17000000OO",
    "\t1700000000",
]


def provider(name: str, tolerance: int | None = None) -> Provider:
    cls = PROVIDERS[name]
    return cls(dict(cls.example_options), tolerance)


def secrets(name: str) -> tuple[str, str, str]:
    """Signing secrets: the development one, a previous one, and an unrelated one."""
    p = provider(name)
    return (p.dev_secret, p.random_secret(bytes(range(32))), p.random_secret(b"\x7f" * 32))


def verifier(name: str, *signing: str) -> list[str]:
    """What a source stores for these signing secrets."""
    p = provider(name)
    return [p.verification_secret(s) for s in signing]


def shared_body(name: str) -> bytes:
    """What the shared tests sign: :data:`BODY`, or for a provider that does not sign the body
    bytes (its signature covers some fields, or nothing) its own sample, unsigned."""
    p = provider(name)
    if p.signs.body:
        return BODY
    return p.sample(
        delivery_id=p.new_delivery_id("cd" * 16),
        resource="res_1",
        sequence=NOW,
        event_type=None,
        timestamp=NOW,
    ).body


def request_to(url: str, headers: dict[str, str], body: bytes, **kw: Any) -> WebhookRequest:
    """A request sent to ``url`` (its path, host and query as the ingest reads them; the URL
    itself as ``public_url``, as the ingest sets it for providers that sign the URL)."""
    parts = urlsplit(url)
    return make_request(
        headers,
        body,
        path=parts.path,
        host=parts.netloc,
        raw_query=parts.query,
        query=dict(parse_qsl(parts.query, keep_blank_values=True)),
        public_url=url,
        **kw,
    )


def signed(
    name: str, *, secret: str | None = None, timestamp: int = NOW, body: bytes | None = None
) -> WebhookRequest:
    p = provider(name)
    url = f"https://webhooks.example.com/webhooks/{name}"
    sent = p.sign_request(
        shared_body(name) if body is None else body,
        secret or p.dev_secret,
        timestamp=timestamp,
        delivery_id="dlv_1",
        url=url,
    )
    return request_to(sent.url or url, sent.headers, sent.body)


def with_headers(req: WebhookRequest, headers: dict[str, str], body: bytes | None = None) -> Any:
    return make_request(
        headers,
        req.body if body is None else body,
        path=req.path,
        host=req.host,
        raw_query=req.raw_query,
        query=dict(req.query),
        public_url=req.public_url,
    )


def signed_fields_changed(name: str, body: bytes) -> list[bytes]:
    """``body`` (JSON) with one signed field of one event changed, for each signed field
    (providers whose signature covers fields, not the body bytes: ``signs.body_fields``)."""
    cls = PROVIDERS[name]
    document = json.loads(body)

    def events(doc: Any) -> list[Any]:
        found = dig(doc, cls.batch_path) if cls.batch_path is not None else [doc]
        assert isinstance(found, list) and found
        return found

    variants = []
    for index, event in enumerate(events(document)):
        for path in cls.signs.body_fields:
            *parents, last = path.split(".")
            value = dig(event, path)
            if value is None:
                continue
            changed = copy.deepcopy(document)
            parent = dig(events(changed)[index], ".".join(parents)) if parents else changed
            parent[last] = value + 1 if isinstance(value, int) else f"{value}x"
            variants.append(json.dumps(changed).encode())
    assert variants, f"{name}: no signed field found in the body"
    return variants


class TestRegistry:
    def test_every_builtin_module_registers_one_provider_under_its_module_name(self) -> None:
        for module in builtin_module_names():
            stem = module.rsplit(".", 1)[1]
            owners = [cls for cls in PROVIDERS.values() if cls.__module__ == module]
            assert [cls.name.replace("-", "_") for cls in owners] == [stem], module

    def test_the_building_blocks_hold_no_provider_and_the_builtin_package_nothing_else(
        self,
    ) -> None:
        # The registry lists the builtin package; no list of modules to skip is kept by hand.
        kit = importlib.import_module("webhook_pipeline.providers")
        modules = [
            f"{kit.__name__}.{info.name}"
            for info in pkgutil.iter_modules(kit.__path__)
            if not info.ispkg
        ]
        assert "webhook_pipeline.providers.schemes" in modules
        for module in modules:
            importlib.import_module(module)
        registered_in = {cls.__module__ for cls in all_providers().values()}
        assert registered_in.isdisjoint(modules)
        assert set(builtin_module_names()) <= registered_in

    def test_every_builtin_provider_has_its_own_test_module(self) -> None:
        # Adding a provider is its module AND its test file (docs/providers.md).
        for module in builtin_module_names():
            stem = module.rsplit(".", 1)[1]
            assert (ROOT / "tests" / "unit" / "providers" / f"test_{stem}.py").is_file(), stem

    @pytest.mark.parametrize("name", NAMES)
    def test_declarations_are_complete(self, name: str) -> None:
        cls = PROVIDERS[name]
        assert cls.title and cls.reference and cls.signs.note
        assert cls.vectors, f"{name} has no test vector"
        assert cls.retry_horizon_seconds >= 60 and cls.retry_horizon_reference
        assert all(400 <= s < 600 for s in cls.stop_statuses)
        p = provider(name)
        # Where the credential is: a header, the URL's query string, or a field of the body
        # (Google Ads google_key, Microsoft Graph clientState, Mailgun's signature object,
        # Adyen's per-item hmacSignature): exactly one of them.
        places = (p.signature_header, p.credential_parameter, p.signature_field)
        assert sum(bool(x) for x in places) == 1, places
        if cls.signs.body_fields:
            assert not cls.signs.body, "body_fields are for providers not signing the bytes"

    @pytest.mark.parametrize("name", TIMESTAMPED)
    def test_timestamped_providers_declare_where_the_timestamp_is(self, name: str) -> None:
        tolerance = PROVIDERS[name].default_tolerance_seconds
        assert tolerance is not None and 0 < tolerance <= 3600
        assert PROVIDERS[name].signs.timestamp

    def test_the_original_schemes_keep_their_300_second_tolerance(self) -> None:
        for name in ("stripe", "standard-webhooks", "slack", "generic-hmac"):
            assert PROVIDERS[name].default_tolerance_seconds == 300

    def test_unknown_provider_is_a_configuration_error(self) -> None:
        from webhook_pipeline.providers import provider_class

        with pytest.raises(ConfigurationError, match="unknown provider 'no-such-sender'"):
            provider_class("no-such-sender")

    def test_every_source_in_the_sources_file_resolves(self) -> None:
        for name, source in load_sources(ROOT / "layers/common/sources.toml").items():
            assert source.name == name and source.provider.name in PROVIDERS

    @pytest.mark.parametrize("name", [n for n in NAMES if not PROVIDERS[n].option_names])
    def test_providers_without_options_reject_any(self, name: str) -> None:
        with pytest.raises(ConfigurationError, match="unknown option"):
            PROVIDERS[name]({"header": "X-Other"})

    @pytest.mark.parametrize("tolerance", [0, -5, True, "300"])
    def test_tolerance_must_be_a_positive_integer(self, tolerance: object) -> None:
        with pytest.raises(ConfigurationError, match="tolerance_seconds"):
            PROVIDERS["stripe"](None, tolerance)  # type: ignore[arg-type]


def vector_request(vector: Any, body: bytes) -> WebhookRequest:
    """The request of ``vector`` with ``body`` (sent to ``vector.url`` when it has one)."""
    if vector.url:
        return request_to(vector.url, dict(vector.headers), body, method=vector.method)
    return make_request(vector.headers, body, method=vector.method, query=dict(vector.query))


@pytest.mark.parametrize("name", NAMES)
class TestEveryProvider:
    def test_published_and_sdk_vectors_verify(self, name: str) -> None:
        for vector in PROVIDERS[name].vectors:
            p = PROVIDERS[name](dict(vector.options) or dict(PROVIDERS[name].example_options))
            req = vector_request(vector, vector.body)
            verified = p.verify(req, [vector.secret], vector.now)
            assert verified.secret_index == 0, vector.reference
            if vector.delivery_id is not None:
                assert verified.delivery_id == vector.delivery_id

    def test_a_changed_vector_byte_is_rejected(self, name: str) -> None:
        # Where the provider signs the body (or fields of it) a change is refused; where it
        # declares the body unsigned (Postmark, Telegram, Mailgun's event-data) the declaration
        # is checked: the change verifies.
        cls = PROVIDERS[name]
        for vector in cls.vectors:
            p = cls(dict(vector.options) or dict(cls.example_options))
            if not cls.signs.body and not cls.signs.body_fields:
                req = vector_request(vector, vector.body + b" ")
                assert p.verify(req, [vector.secret], vector.now).secret_index == 0
                continue
            bodies = (
                [vector.body + b" "] if cls.signs.body else signed_fields_changed(name, vector.body)
            )
            for body in bodies:
                with pytest.raises(VerificationError):
                    p.verify(vector_request(vector, body), [vector.secret], vector.now)

    def test_own_signature_verifies_with_secret_index_0(self, name: str) -> None:
        current, _, _ = secrets(name)
        result = provider(name).verify(signed(name), verifier(name, current), NOW)
        assert result.secret_index == 0
        assert result.timestamp == (NOW if name in TIMESTAMPED else None)

    def test_previous_secret_matches_with_secret_index_1(self, name: str) -> None:
        current, previous, _ = secrets(name)
        req = signed(name, secret=previous)
        result = provider(name).verify(req, verifier(name, current, previous), NOW)
        assert result.secret_index == 1

    def test_current_secret_wins_when_listed_first(self, name: str) -> None:
        current, previous, _ = secrets(name)
        result = provider(name).verify(signed(name), verifier(name, current, previous), NOW)
        assert result.secret_index == 0

    def test_neither_secret_matches(self, name: str) -> None:
        current, previous, other = secrets(name)
        req = signed(name, secret=other)
        with pytest.raises(VerificationError) as err:
            provider(name).verify(req, verifier(name, current, previous), NOW)
        assert err.value.reason == "signature_invalid"
        assert err.value.status == 401

    def test_any_body_byte_change_is_rejected(self, name: str) -> None:
        current, _, _ = secrets(name)
        req = signed(name)
        cls = PROVIDERS[name]
        sent = req.body  # the signed body, with the signature in it for Mailgun-style providers
        if cls.signs.body:
            bodies = [sent + b" ", sent[:-1], b'{"id": "evt_1", "amount": 1.5}', b""]
        elif cls.signs.body_fields:
            bodies = signed_fields_changed(name, req.body)
        else:
            pytest.skip(f"{name} signs nothing in the body (TestUnsignedBodies covers it)")
        for body in bodies:
            with pytest.raises(VerificationError) as err:
                provider(name).verify(
                    with_headers(req, dict(req.headers), body), verifier(name, current), NOW
                )
            assert err.value.reason in ("signature_invalid", "signature_mismatch")

    def test_a_truncated_signature_is_401(self, name: str) -> None:
        # A signature a byte short (two hex digits or base64 characters) or cut in half never
        # verifies: the whole digest is compared, never a prefix of it.
        current, _, _ = secrets(name)
        req = signed(name)
        header = provider(name).signature_header.lower()
        if not header or header not in req.headers:
            pytest.skip(f"{name} carries its credential outside the headers")
        value = req.headers[header]
        for cut in (value[:-2], value[: len(value) // 2]):
            headers = dict(req.headers) | {header: cut}
            with pytest.raises(VerificationError) as err:
                provider(name).verify(with_headers(req, headers), verifier(name, current), NOW)
            assert err.value.status == 401, cut

    def test_an_unsigned_body_is_declared_so(self, name: str) -> None:
        # A provider declaring its body unsigned (signs.body False) really verifies a changed
        # body; one declaring it signed is held to that by the test above.
        if PROVIDERS[name].signs.body:
            pytest.skip("the provider signs the body (test_any_body_byte_change_is_rejected)")
        current, _, _ = secrets(name)
        req = signed(name)
        changed = with_headers(req, dict(req.headers), req.body + b" ")
        assert provider(name).verify(changed, verifier(name, current), NOW).secret_index == 0

    def test_no_headers_is_signature_missing_not_key_error(self, name: str) -> None:
        current, _, _ = secrets(name)
        with pytest.raises(VerificationError) as err:
            provider(name).verify(make_request({}, BODY), verifier(name, current), NOW)
        assert err.value.reason == "signature_missing"
        assert not isinstance(err.value, TimestampError)

    def test_each_signed_header_missing_is_401(self, name: str) -> None:
        current, _, _ = secrets(name)
        req = signed(name)
        for header in req.headers:
            headers = {k: v for k, v in req.headers.items() if k != header}
            try:
                provider(name).verify(with_headers(req, headers), verifier(name, current), NOW)
            except IngestError as exc:
                assert exc.status == 401, header
            else:  # only a header the signature does not need may go (an id header, say)
                assert header not in {provider(name).signature_header.lower()}

    def test_non_ascii_header_values_are_401_not_500(self, name: str) -> None:
        current, _, _ = secrets(name)
        req = signed(name)
        p = provider(name)
        required = {h.lower() for h in (p.signature_header, p.timestamp_header) if h}
        assert required <= set(req.headers)
        for header_name, value in req.headers.items():
            for bad in (value[:-1] + "é", "é" + value, value + "\u200b", "٣"):
                headers = {**req.headers, header_name: bad}
                if header_name in required:
                    with pytest.raises(VerificationError) as err:
                        p.verify(with_headers(req, headers), verifier(name, current), NOW)
                    assert err.value.status == 401, (header_name, bad)
                    continue
                try:  # a header the signature does not cover may carry anything
                    p.verify(with_headers(req, headers), verifier(name, current), NOW)
                except IngestError as exc:
                    assert exc.status == 401, (header_name, bad)
        if p.credential_parameter:  # a credential in the URL's query string
            value = req.query[p.credential_parameter]
            for bad in (value[:-1] + "é", "é" + value, value + "\u200b", "٣", ""):
                query = {**req.query, p.credential_parameter: bad}
                with pytest.raises(VerificationError) as err:
                    p.verify(
                        make_request(req.headers, req.body, query=query),
                        verifier(name, current),
                        NOW,
                    )
                assert err.value.status == 401, bad

    def test_signature_inside_the_body_missing_or_not_ascii_is_401(self, name: str) -> None:
        p = provider(name)
        if not p.signature_field:
            pytest.skip(f"{name} carries no signature inside the body")
        current, _, _ = secrets(name)
        req = signed(name)
        document = json.loads(req.body)
        *parents, last = p.signature_field.split(".")
        for bad in (None, "", "é" + "A" * 43, 7, {"x": 1}):
            changed = copy.deepcopy(document)
            first = dig(changed, p.batch_path)[0] if p.batch_path is not None else changed
            parent = dig(first, ".".join(parents)) if parents else first
            if bad is None:
                del parent[last]
            else:
                parent[last] = bad
            with pytest.raises(VerificationError) as err:
                p.verify(with_headers(req, dict(req.headers), json.dumps(changed).encode()),
                         verifier(name, current), NOW)  # fmt: skip
            assert err.value.status == 401, bad
            if bad is None:
                assert err.value.reason == "signature_missing"

    def test_error_messages_carry_no_secret_or_signature(self, name: str) -> None:
        current, _, other = secrets(name)
        req = signed(name, secret=other)
        with pytest.raises(VerificationError) as err:
            provider(name).verify(req, verifier(name, current), NOW)
        text = f"{err.value} {err.value.detail} {err.value.reason}"
        assert current not in text and other not in text
        for value in req.headers.values():
            if len(value) > 20:
                assert value not in text

    def test_no_secret_configured_is_a_configuration_error(self, name: str) -> None:
        for stored in ([], [""]):
            with pytest.raises(ConfigurationError):
                provider(name).verify(signed(name), stored, NOW)

    def test_development_secret_has_the_provider_format(self, name: str) -> None:
        p = provider(name)
        stored = parse_secret(p.dev_secret_value())
        for value in stored.signing:
            p.validate_secret(value)
        assert stored.signing[0] == p.verification_secret(p.dev_secret)
        with pytest.raises(ConfigurationError):
            p.validate_secret("")

    def test_sample_delivery_parses_and_carries_a_delivery_id(self, name: str) -> None:
        p = provider(name)
        sample = p.sample(
            delivery_id=p.new_delivery_id("ab" * 16),
            resource="res_1",
            sequence=NOW,
            event_type=None,
            timestamp=NOW,
        )
        source = resolve(Source(name=name, provider=name, options=dict(p.example_options)))
        url = f"https://webhooks.example.com/webhooks/{name}"
        sent = p.sign_request(
            sample.body, p.dev_secret, timestamp=NOW, delivery_id="dlv_s", url=url
        )
        req = request_to(sent.url, sample.headers | sent.headers, sent.body, request_id="req-1")
        verified = source.provider.verify(req, verifier(name, p.dev_secret), NOW)
        events = read_events(source, req, verified)
        assert events and all(e.delivery_id for e in events)
        if source.resource_key is not None:
            assert all(e.resource_key is not None and e.sequence is not None for e in events)

    def test_an_unsigned_handshake_never_answers_a_signature_of_a_body_the_caller_chose(
        self, name: str
    ) -> None:
        # An unsigned challenge answered with an HMAC under the delivery key (X's CRC, LinkedIn's
        # challengeCode) must not sign a delivery body put in its challenge value.
        p = provider(name)
        stored = parse_secret(p.dev_secret_value())
        body = signed(name).body
        headers = p.sign(body, p.dev_secret, timestamp=NOW, delivery_id="forged")
        signatures = {part for v in headers.values() for part in (v, v.split("=", 1)[-1]) if part}
        for handshake in (h for h in p.handshakes if not h.signed):
            sample = handshake.sample(stored)
            for parameter in sample.query:
                query = {**sample.query, parameter: body.decode("utf-8", "replace")}
                req = make_request(dict(sample.headers), sample.body, method=sample.method,
                                   query=query)  # fmt: skip
                if not handshake.matches(req):
                    continue
                try:
                    text = handshake.answer(req, stored).text()
                except VerificationError as err:
                    assert err.status == 401
                    continue
                assert not any(sig in text for sig in signatures), (handshake.name, parameter)

    def test_handshake_samples_are_recognised_and_answered(self, name: str) -> None:
        p = provider(name)
        stored = parse_secret(p.dev_secret_value())
        for handshake in p.handshakes:
            sample = handshake.sample(stored)
            headers, body = dict(sample.headers), sample.body
            if handshake.signed:
                sent = p.sign_request(body, p.dev_secret, timestamp=NOW, delivery_id="hs")
                body = sent.body
                headers |= sent.headers
                p.verify(make_request(headers, body), stored.signing, NOW)
            req = make_request(headers, body, method=sample.method, query=dict(sample.query))
            assert handshake.matches(req), handshake.name
            answer = handshake.answer(req, stored)
            assert answer.status == 200 and answer.text()


@pytest.mark.parametrize("name", sorted(n for n, cls in PROVIDERS.items() if not cls.signs.body))
class TestUnsignedBodies:
    """Providers whose credential is not a signature of the body (a shared token: GitLab, Google
    Ads, Microsoft Graph, Postmark, Telegram; a signature of other fields: Mailgun): any body
    passes with the right credential, and the module says so."""

    def test_a_changed_body_still_verifies_and_the_provider_says_the_body_is_unsigned(
        self, name: str
    ) -> None:
        current, _, _ = secrets(name)
        req = signed(name)
        changed = with_headers(req, dict(req.headers), req.body + b" ")
        assert provider(name).verify(changed, verifier(name, current), NOW).secret_index == 0
        note = PROVIDERS[name].signs.note
        assert re.search(r"not signed|no signature|nothing is signed|unsigned", note, re.I), note

    def test_the_wrong_token_is_still_rejected(self, name: str) -> None:
        current, _, other = secrets(name)
        with pytest.raises(VerificationError) as err:
            provider(name).verify(signed(name, secret=other), verifier(name, current), NOW)
        assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize("name", INTEGER_TIMESTAMPS)
class TestTimestamps:
    def restamped(self, name: str, raw: str | None) -> WebhookRequest:
        req = signed(name)
        headers = provider(name).restamp(dict(req.headers), raw)
        if headers is None:
            pytest.skip(f"{name} carries its timestamp outside the headers")
        return with_headers(req, headers)

    @pytest.mark.parametrize("raw", BAD_TIMESTAMPS)
    def test_c05_not_a_plain_integer_is_timestamp_invalid(self, name: str, raw: str) -> None:
        p = provider(name)
        if p.timestamp_fraction and re.fullmatch(r"[0-9]+\.[0-9]+", raw):
            # Seconds with a decimal fraction: the Standard Webhooks family reads them as the
            # Svix libraries do, the integer part signed (NOW here: the signature still holds)
            verified = p.verify(self.restamped(name, raw), verifier(name, p.dev_secret), NOW)
            assert verified.timestamp == int(raw.split(".")[0]) == NOW
            return
        with pytest.raises(VerificationError) as err:
            p.verify(self.restamped(name, raw), verifier(name, p.dev_secret), NOW)
        assert err.value.status == 401
        if p.timestamp_header == p.signature_header and not raw.isascii():
            # The timestamp is inside the signature header: the whole header is malformed.
            assert err.value.reason == "signature_malformed"
        else:
            assert isinstance(err.value, TimestampError)
            assert err.value.reason == "timestamp_invalid"

    def test_c05_empty_timestamp_is_timestamp_missing(self, name: str) -> None:
        p = provider(name)
        with pytest.raises(TimestampError) as err:
            p.verify(self.restamped(name, ""), verifier(name, p.dev_secret), NOW)
        assert err.value.reason == "timestamp_missing"

    def test_absent_timestamp_is_timestamp_missing(self, name: str) -> None:
        p = provider(name)
        with pytest.raises(TimestampError) as err:
            p.verify(self.restamped(name, None), verifier(name, p.dev_secret), NOW)
        assert err.value.reason == "timestamp_missing"

    def test_changed_timestamp_breaks_the_signature(self, name: str) -> None:
        # The timestamp checked is the signed one: moving it (even to a fresh value) fails.
        p = provider(name)
        unit = 1000 if p.timestamp_unit == "milliseconds" else 1
        with pytest.raises(VerificationError) as err:
            p.verify(self.restamped(name, str(NOW * unit + 1)), verifier(name, p.dev_secret), NOW)
        assert err.value.reason in ("signature_invalid", "signature_mismatch")

    def test_c05_milliseconds_where_seconds_expected_is_rejected(self, name: str) -> None:
        if provider(name).timestamp_unit != "seconds":
            pytest.skip("the provider's timestamps are milliseconds")
        # 1767267099257 ms is 2026-01-01; read as seconds it lies ~55,000 years ahead.
        ms = 1767267099257
        p = provider(name)
        with pytest.raises(TimestampError) as err:
            p.verify(signed(name, timestamp=ms), verifier(name, p.dev_secret), ms / 1000)
        assert err.value.reason == "timestamp_future"


@pytest.mark.parametrize("name", TIMESTAMPED)
class TestFreshness:
    def tolerance(self, name: str) -> int:
        value = PROVIDERS[name].default_tolerance_seconds
        assert value is not None
        return value

    def test_inside_the_tolerance_is_accepted(self, name: str) -> None:
        p, tol = provider(name), self.tolerance(name)
        for offset in (-tol, -1, 0, 1, tol):
            req = signed(name, timestamp=NOW + offset)
            assert p.verify(req, verifier(name, p.dev_secret), NOW).timestamp == NOW + offset

    def test_too_old_is_stale(self, name: str) -> None:
        p, tol = provider(name), self.tolerance(name)
        for offset in (-tol - 1, -3600 - tol, -NOW):
            with pytest.raises(TimestampError) as err:
                p.verify(signed(name, timestamp=NOW + offset), verifier(name, p.dev_secret), NOW)
            assert err.value.reason == "timestamp_stale"

    def test_too_far_ahead_is_future(self, name: str) -> None:
        p, tol = provider(name), self.tolerance(name)
        for offset in (tol + 1, 3600 + tol, 10**9):
            with pytest.raises(TimestampError) as err:
                p.verify(signed(name, timestamp=NOW + offset), verifier(name, p.dev_secret), NOW)
            assert err.value.reason == "timestamp_future"

    def test_source_tolerance_overrides_the_default(self, name: str) -> None:
        p = provider(name, tolerance=60)
        p.verify(signed(name, timestamp=NOW - 60), verifier(name, p.dev_secret), NOW)
        with pytest.raises(TimestampError):
            p.verify(signed(name, timestamp=NOW - 61), verifier(name, p.dev_secret), NOW)

    def test_fractional_now_is_compared_exactly(self, name: str) -> None:
        p, tol = provider(name), self.tolerance(name)
        req = signed(name, timestamp=NOW - tol)
        p.verify(req, verifier(name, p.dev_secret), NOW + 0.0)
        with pytest.raises(TimestampError):
            p.verify(req, verifier(name, p.dev_secret), NOW + 0.5)
