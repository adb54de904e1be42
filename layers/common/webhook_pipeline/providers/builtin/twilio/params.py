"""Twilio's signed parameters read as an identity: their formats, and the other ways the signed
string can be split into parameters (re-cuts).

Twilio signs ``url + name1 + value1 + name2 + value2 ...`` with the names sorted and no separator
(:func:`webhook_pipeline.providers.builtin.twilio.form_parameters`). Any other list of parameters
whose sorted concatenation is the same string verifies as well: a captured status callback resent as
``MessageStatus=deliveredMessagingServiceSidMG...`` (the next parameter folded into the value)
verifies and once read as a second delivery id. Two defences, both after the signature:

1. the fields read (delivery id, event type, resource, sequence) must have Twilio's documented
   formats: a SID is two upper-case letters and 32 lower-case hex digits (``SM...``, ``CA...``),
   a status one of Twilio's documented message or call statuses (:data:`MESSAGE_STATUSES`,
   :data:`CALL_STATUSES`), a field read as an integer ASCII digits; else 400 ``field_invalid``;
2. :func:`readings` finds every way the signed string can be split so that each field read sits
   in a parameter of its own with a value of its format, the names of the split sorted as Twilio
   sorts them (whatever the names between); more than one reading of those fields is 400
   ``field_ambiguous``. A captured request can then be re-cut only into requests that read the
   same identity (a duplicate) or none (refused).

Why this suffices: a reading is a property of the signed string alone, so every request that
verifies with one signature has the same set of readings; accepting only a string with exactly
one reading gives every accepted re-cut that reading. The statuses form a prefix-free set and a
SID has a fixed length, so where a field's name sits its value is determined; what can vary is
where the name sits (``CallSid`` inside ``ParentCallSid``), and a placement is counted only when
the parameters around it can be named in sorted order: any gap between two fields read must
begin with a name strictly between theirs, and what follows the last one, a name after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import cache

from webhook_pipeline.errors import BadDeliveryError

#: Twilio's message statuses (the Message resource's ``Status`` enum in twilio/twilio-oai,
#: twilio.com/docs/messaging/api/message-resource#message-status-values).
MESSAGE_STATUSES = frozenset(
    {
        "queued",
        "sending",
        "sent",
        "failed",
        "delivered",
        "undelivered",
        "receiving",
        "received",
        "accepted",
        "scheduled",
        "read",
        "partially_delivered",
        "canceled",
    }
)
#: Twilio's call statuses (twilio.com/docs/voice/api/call-resource#call-status-values).
CALL_STATUSES = frozenset(
    {
        "queued",
        "initiated",
        "ringing",
        "in-progress",
        "completed",
        "busy",
        "no-answer",
        "canceled",
        "failed",
    }
)
_SID = re.compile(r"[A-Z]{2}[0-9a-f]{32}")
#: Most readings looked for: two are enough to know the string is ambiguous.
_ENOUGH = 2

#: The lengths a value of a field's format can have at a position of the signed string.
Lengths = Callable[[str, int], Sequence[int]]


def value_lengths(name: str, *, integer: bool = False) -> Lengths:
    """The format of the parameter ``name`` as a function giving, for the signed string and a
    position in it, the lengths a value of that format starting there can have."""
    if name.endswith("Sid"):
        return lambda text, at: [34] if _SID.fullmatch(text, at, at + 34) else []
    statuses = _statuses(name)
    if statuses:
        return lambda text, at: [len(s) for s in statuses if text.startswith(s, at)]
    if integer:
        return lambda text, at: range(1, _digits_end(text, at) - at + 1)
    return lambda text, at: range(1, len(text) - at + 1)


def check_format(name: str, value: str, *, integer: bool = False) -> None:
    """Refuse a value read from the parameter ``name`` that is not of its Twilio format.

    Raises
    ------
    BadDeliveryError
        ``field_invalid``: a ``...Sid`` that is not a SID, a ``MessageStatus``/``SmsStatus``
        or ``CallStatus`` that is not one of Twilio's, an integer field that is not digits.
    """
    lengths = value_lengths(name, integer=integer)(value, 0)
    if len(value) not in lengths:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise BadDeliveryError("field_invalid", f"{name} {shown!r} is not of Twilio's format")


def readings(signed: str, fields: Sequence[tuple[str, Lengths]]) -> list[tuple[str, ...]]:
    """Up to two distinct readings of ``fields`` (sorted by name) in the ``signed`` string:
    tuples of their values, every field present.

    A field is placed where its name occurs, followed by a value of one of the lengths its
    format allows; placements are in the order of the names; the text between two placed fields
    must begin with a name strictly between theirs (the next parameter's, in sorted order), and
    the text after the last, if any, must be a name after it. The text before the first field
    can always be parameters (or the URL).
    """

    @cache
    def after(index: int, start: int, previous: str) -> tuple[tuple[str, ...], ...]:
        if index == len(fields):
            rest = signed[start:]
            return ((),) if not rest or not previous or rest > previous else ()
        name, lengths = fields[index]
        found: list[tuple[str, ...]] = []
        for at in _occurrences(signed, name, start):
            if previous and not _gap_fits(signed[start:at], previous, name):
                continue
            begin = at + len(name)
            for length in lengths(signed, begin):
                value = signed[begin : begin + length]
                found += [(value, *tail) for tail in after(index + 1, begin + length, name)]
                if len(set(found)) >= _ENOUGH:
                    return tuple(dict.fromkeys(found))
        return tuple(dict.fromkeys(found))

    return list(after(0, 0, ""))[:_ENOUGH]


def _statuses(name: str) -> frozenset[str]:
    if name in ("MessageStatus", "SmsStatus"):
        return MESSAGE_STATUSES
    if name == "CallStatus":
        return CALL_STATUSES
    return frozenset()


def _digits_end(text: str, at: int) -> int:
    end = at
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return end


def _occurrences(text: str, name: str, start: int) -> Iterator[int]:
    at = text.find(name, start)
    while at >= 0:
        yield at
        at = text.find(name, at + 1)


def _gap_fits(gap: str, low: str, high: str) -> bool:
    """Whether ``gap`` (empty, or parameters) can start with a name strictly between ``low`` and
    ``high``: its prefixes grow, so the shortest one above ``low`` decides."""
    if not gap:
        return True
    for end in range(1, len(gap) + 1):
        if gap[:end] > low:
            return gap[:end] < high
    return False
