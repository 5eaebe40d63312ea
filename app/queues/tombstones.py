"""A tombstone's field, as lua/includes/tombstones.lua's `tombstone_field` makes it: the service computes it for the
ends it asks for and passes it with each (end_held), where Redis decoded each id's base64 one character at a time in
Lua, about a fifth of a batched end's Redis CPU (docs/benchmarks.md). tests/queues/test_tombstones.py holds the two
to each other."""

from __future__ import annotations

import binascii

# URL-safe base64 to the standard alphabet; '+', '/' and '=' are no id's characters, so they become one that fails
# the strict decode, as they fail the Lua one.
_STANDARD_ALPHABET = bytes.maketrans(b"-_+/=", b"+/!!!")
# An id as inserts make them (app/work/insert.py): 16 URL-safe base64 characters, 12 bytes.
_INSERTED_ID_CHARACTERS = 16
_BINARY_BYTES = 12


def tombstone_field(request_id: str) -> bytes:
    """The id's 12 bytes for an id as inserts make them, else its text when shorter than 12 bytes, else its text and
    ':' (so that no two ids share a field)."""
    text = request_id.encode()
    if len(text) == _INSERTED_ID_CHARACTERS:
        try:
            return binascii.a2b_base64(text.translate(_STANDARD_ALPHABET), strict_mode=True)
        except binascii.Error:
            pass  # not an id as inserts make them
    return text if len(text) < _BINARY_BYTES else text + b":"
