"""SAF-style resource profiles for the server connect check (pure).

A server connects for the resource `sstype.subsys.applenv[.node]`; its principal needs a permit whose
profile matches. Profiles are generic as in RACF: `%` is one character, `*` any characters within one
qualifier (so `*` alone is any one qualifier), `**` any number of qualifiers, none included. Case-insensitive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from spark_jobs.manager.wildcards import wildcard_match

PROFILE_PATTERN = r"^[A-Za-z0-9$#@_%*-]+(\.[A-Za-z0-9$#@_%*-]+)*$"


def server_resource(subsystem_type: str, subsystem_name: str, application_environment: str, node: str | None) -> str:
    parts = [subsystem_type, subsystem_name, application_environment] + ([node] if node else [])
    return ".".join(parts).upper()


def is_permitted(profiles: Iterable[str], resource: str) -> bool:
    qualifiers = tuple(resource.upper().split("."))
    return any(_matches(_split(profile), qualifiers) for profile in profiles)


@lru_cache(maxsize=4096)
def _split(profile: str) -> tuple[str, ...]:
    return tuple(profile.upper().split("."))


def _matches(profile: Sequence[str], resource: Sequence[str]) -> bool:
    if not profile:
        return not resource
    head, rest = profile[0], profile[1:]
    if head == "**":
        return any(_matches(rest, resource[i:]) for i in range(len(resource) + 1))
    if not resource or not wildcard_match(head, resource[0], any_one="%"):
        return False
    return _matches(rest, resource[1:])
