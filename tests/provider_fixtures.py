"""Throw-away providers written into a temporary module, as a user's own provider would be.

``write_provider_module`` writes a complete provider module (HMAC-SHA256 hex of the body in
``X-Test-Signature``, or of each event for a SendGrid-style batch) to a folder and returns its
module name; put the folder on ``sys.path`` (or ``PYTHONPATH``) and name the module in
``PROVIDER_MODULES``.
"""

from __future__ import annotations

from pathlib import Path

_TEMPLATE = '''
"""A throw-away provider for tests: {title}."""

from __future__ import annotations

import hashlib
import hmac
import json

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers import (
    Answer, Defaults, Provider, Sample, Signs, Vector, Verified, register,
)
from webhook_pipeline.providers.crypto import (
    decode_hex, hmac_digest, match_secrets, signature_header,
)

HEADER = "X-Test-Signature"
SECRET = "throwaway-secret"
BODY = b'{{"id":"e1","type":"t"}}'


@register
class Throwaway(Provider):
    name = "{name}"
    title = "{title}"
    reference = "tests/provider_fixtures.py"
    signs = Signs(id={signed_id!r}, timestamp=None, note="test provider")
    defaults = Defaults(
        delivery_id=FieldLocation(body="{id_field}"),
        event_type=FieldLocation(body="event"),
        resource_key=FieldLocation(body="resource"),
        sequence=FieldLocation(body="timestamp", format="int"),
    )
    retry_horizon_seconds = {horizon}
    retry_horizon_reference = "test"
    batch_path = {batch_path!r}
    stop_statuses = frozenset({stop_statuses!r})
    signature_header = HEADER
    dev_secret = SECRET
    vectors = (
        Vector(
            secret=SECRET,
            headers={{HEADER: hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()}},
            body=BODY,
            now=0,
            origin="self",
            reference="stdlib hmac",
        ),
    )

    def verify(self, request, secrets, now):
        digest = decode_hex(signature_header(request, HEADER))
        if digest is None:
            raise VerificationError("signature_malformed")
        index = match_secrets(
            secrets, lambda s: hmac_digest(s.encode(), request.body), [digest]
        )
        return Verified(secret_index=index, replay_token={token_expr})

    def sign(self, body, secret, *, timestamp, delivery_id, url=""):
        return {{HEADER: hmac_digest(secret.encode(), body).hex()}}

    def sample(self, *, delivery_id, resource, sequence, event_type, timestamp):
        event = {{"{id_field}": delivery_id, "event": event_type or "delivered",
                  "resource": resource, "timestamp": sequence}}
        return Sample.json([event] if self.batch_path is not None else event)
{extra}
'''

_ACK = """
    def acknowledgement(self, status, body):
        return Answer(status, "[accepted]", "text/plain")
"""


def write_provider_module(
    folder: Path,
    module: str,
    name: str,
    *,
    batch: bool = False,
    fixed_ack: bool = False,
    stop_statuses: frozenset[int] = frozenset(),
    horizon: int = 7_200,
    replay_token: bool = False,
) -> str:
    """Write ``folder/<module>.py`` defining provider ``name``; return the module name."""
    folder.mkdir(parents=True, exist_ok=True)
    text = _TEMPLATE.format(
        name=name,
        title=f"Throw-away {name}",
        signed_id="body field, inside the signed body",
        id_field="sg_event_id" if batch else "id",
        horizon=horizon,
        batch_path="" if batch else None,
        stop_statuses=set(stop_statuses) or set(),
        extra=_ACK if fixed_ack else "",
        token_expr='request.header("X-Test-Token")' if replay_token else "None",
    )
    (folder / f"{module}.py").write_text(text)
    return module
