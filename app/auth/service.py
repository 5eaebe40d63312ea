"""API keys, principals and the bootstrap admin."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import record
from app.auth.models import ApiKey, Principal, ServerPermit
from app.auth.roles import PrincipalInfo, Role, effective_roles
from app.auth.schemas import ApiKeyIn, PrincipalIn, PrincipalUpdate
from app.db import utcnow
from app.errors import Conflict, NotFound, Unauthenticated, ValidationFailed
from app.queues.keys import key_changes_channel
from app.redis.broadcast import Subscription
from app.shared.ttl_cache import TtlCache

log = logging.getLogger(__name__)

BOOTSTRAP_PRINCIPAL = "admin"
KEY_PREFIX = "wlm_"


def hash_key(key: str) -> str:
    # Keys are 256-bit random strings, so a plain SHA-256 is enough; a slow password hash would only cost latency.
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyCache:
    """The keys this process verified, kept `ttl_seconds` so a busy server's every call does not read the database.

    A revoked key or a changed principal does not wait for the TTL: the process that makes the change forgets the
    keys at once and announces it on Redis, and every other process forgets them as it hears it. The TTL is the
    backstop for when the word cannot get through; what is announced while a process is not subscribed is lost to
    it, so it forgets the keys again whenever its subscription is (re)confirmed. All keys are forgotten, not just
    those concerned: changes are rare, and a forgotten key costs one read. The cache's generation keeps a lookup
    under way at the time from putting back what it read before the change."""

    def __init__(self, ttl_seconds: float, prefix: str, redis: Redis, events_redis: Redis) -> None:
        """Announces with `redis`; hears on a connection of `events_redis`, the pool of long-lived reads."""
        self.verified = TtlCache[PrincipalInfo](ttl_seconds)
        self._redis = redis
        self._channel = key_changes_channel(prefix)
        self._changes = Subscription(
            events_redis, "API key changes", lambda _: self.verified.clear(), channels=[self._channel], on_subscribed=self.verified.clear
        )

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """Hear the other processes' changes while the app runs."""
        self._changes.start()
        try:
            yield
        finally:
            await self._changes.stop()

    async def forget_everywhere(self, change: str) -> None:
        """After a committed change that may narrow what keys grant; `change` says which, to whoever listens in."""
        self.verified.clear()  # this process before it answers, whatever Redis does
        try:
            await self._redis.publish(self._channel, change)
        except RedisError as exc:
            # The change is made: failing the call would only hide that. The others hold their copies up to the TTL.
            log.warning("could not announce %s (%s); other processes serve their cached keys up to %s s", change, exc, self.verified.ttl)


async def authenticate(sessions: async_sessionmaker[AsyncSession], key: str, cache: KeyCache) -> PrincipalInfo:
    """The key's principal: from the cache, else from the database in a short session of its own (requests
    do not hold a database connection for authentication)."""
    key_hash = hash_key(key)
    principal = await cache.verified.get_or_load(key_hash, lambda: _principal_of_key(sessions, key_hash))
    # Checked on every call, not when loading, so a cached key ends when it does. The process's clock is compared
    # with an instant the database holds: replicas end a key as far apart as their clocks are.
    if principal.key_expires_at is not None and principal.key_expires_at <= utcnow():
        raise Unauthenticated("the API key has expired", code="expired_api_key")
    return principal


async def _principal_of_key(sessions: async_sessionmaker[AsyncSession], key_hash: str) -> PrincipalInfo:
    async with sessions() as session:
        api_key = await session.scalar(select(ApiKey).where(ApiKey.key_hash == key_hash))
        if api_key is None or api_key.revoked_at is not None:
            raise Unauthenticated("unknown or revoked API key", code="invalid_api_key")
        principal = api_key.principal
        info = PrincipalInfo(
            id=principal.id,
            name=principal.name,
            roles=effective_roles(principal.roles),
            permits=tuple(p.profile for p in principal.permits),
            key_id=api_key.id,
            key_expires_at=api_key.expires_at,
        )
    return info


async def get_principal(session: AsyncSession, name: str) -> Principal:
    principal = await session.scalar(select(Principal).where(Principal.name == name))
    if principal is None:
        raise NotFound(f"no principal {name!r}", code="unknown_principal")
    return principal


async def list_principals(session: AsyncSession) -> list[Principal]:
    return list(await session.scalars(select(Principal).order_by(Principal.name)))


async def create_principal(session: AsyncSession, actor: str, data: PrincipalIn) -> Principal:
    principal = Principal(
        name=data.name,
        description=data.description,
        roles=sorted({r.value for r in data.roles}),
        created_by=actor,
        permits=[ServerPermit(profile=p) for p in dict.fromkeys(data.permits)],
    )
    session.add(principal)
    record(session, actor, "principal.create", data.name, roles=principal.roles, permits=list(data.permits))
    try:
        await session.commit()
    except IntegrityError as exc:
        await session.rollback()
        raise Conflict(f"principal {data.name!r} already exists", code="duplicate_principal") from exc
    return principal


async def update_principal(session: AsyncSession, actor: str, name: str, data: PrincipalUpdate, cache: KeyCache) -> Principal:
    principal = await get_principal(session, name)
    if data.description is not None:
        principal.description = data.description
    if data.roles is not None:
        principal.roles = sorted({r.value for r in data.roles})
    if data.permits is not None:
        wanted = list(dict.fromkeys(data.permits))
        principal.permits = [p for p in principal.permits if p.profile in wanted]
        have = {p.profile for p in principal.permits}
        principal.permits += [ServerPermit(profile=p) for p in wanted if p not in have]
    record(session, actor, "principal.update", name, **data.model_dump(exclude_none=True, mode="json"))
    await session.commit()
    await cache.forget_everywhere(f"principal.update {name}")
    await session.refresh(principal)
    return principal


async def create_api_key(session: AsyncSession, actor: str, data: ApiKeyIn) -> tuple[ApiKey, str]:
    principal = await get_principal(session, data.principal)
    if data.expires_at is not None:
        if data.expires_at.tzinfo is None:
            raise ValidationFailed([{"path": "expires_at", "message": "give a time zone (e.g. Z or +00:00)"}])
        if data.expires_at <= utcnow():
            raise ValidationFailed([{"path": "expires_at", "message": "must be in the future"}])
    key = new_key()
    api_key = _new_api_key(principal, key, actor, data.description, data.expires_at)
    session.add(api_key)
    record(session, actor, "api_key.create", api_key.id, principal=principal.name)
    await session.commit()
    return api_key, key


def _new_api_key(principal: Principal, key: str, actor: str, description: str, expires_at: datetime | None) -> ApiKey:
    return ApiKey(
        id="k_" + secrets.token_hex(8),
        principal=principal,
        key_hash=hash_key(key),
        description=description,
        created_by=actor,
        expires_at=expires_at,
    )


async def list_api_keys(session: AsyncSession, principal: str | None) -> list[ApiKey]:
    query = select(ApiKey).order_by(ApiKey.created_at)
    if principal is not None:
        query = query.join(ApiKey.principal).where(Principal.name == principal)
    return list(await session.scalars(query))


async def revoke_api_key(session: AsyncSession, actor: str, key_id: str, cache: KeyCache) -> ApiKey:
    api_key = await session.get(ApiKey, key_id)
    if api_key is None:
        raise NotFound(f"no API key {key_id!r}", code="unknown_api_key")
    if api_key.revoked_at is None:
        api_key.revoked_at = utcnow()
        record(session, actor, "api_key.revoke", key_id, principal=api_key.principal.name)
        await session.commit()
    # Announced again when it was revoked already: the first announcement may not have got through.
    await cache.forget_everywhere(f"api_key.revoke {key_id}")
    return api_key


async def ensure_bootstrap_admin(factory: async_sessionmaker[AsyncSession], configured_key: str | None, data_dir: Path) -> str | None:
    """Make sure an admin can get in. Returns a newly generated key (to print once), else None.

    With `configured_key` (WLM_BOOTSTRAP_ADMIN_KEY) that key is made valid for the bootstrap admin. Without it,
    a key is generated only when no principal holds the admin role yet. Several replicas may start at once: the
    unique constraints make one of them win and the others find its work done.
    """
    async with factory() as session:
        admin = await session.scalar(select(Principal).where(Principal.name == BOOTSTRAP_PRINCIPAL))
        if configured_key is None:
            principals = await session.scalars(select(Principal))
            if any(Role.ADMIN.value in p.roles for p in principals):
                return None
        elif await session.scalar(select(ApiKey.id).where(ApiKey.key_hash == hash_key(configured_key))):
            return None
        if admin is None:
            admin = Principal(
                name=BOOTSTRAP_PRINCIPAL, description="bootstrap administrator", roles=[Role.ADMIN.value], created_by="bootstrap"
            )
            session.add(admin)
        key = configured_key or new_key()
        session.add(_new_api_key(admin, key, "bootstrap", "bootstrap admin key", None))
        record(session, "bootstrap", "api_key.create", BOOTSTRAP_PRINCIPAL, bootstrap=True)
        try:
            await session.commit()
        except IntegrityError:
            await session.rollback()
            return None
    if configured_key is not None:
        return None
    _save_key(data_dir, key)
    return key


LAUNCHER_PRINCIPAL = "wlm-launcher"
LAUNCHER_KEY_FILE = "launcher.key"


async def ensure_launcher_key(factory: async_sessionmaker[AsyncSession], data_dir: Path) -> str:
    """The key the servers the service starts itself connect with: principal `wlm-launcher` (role server, permit
    `**`), created on first need; the key is kept in the data directory (mode 0600) so every replica and restart
    sharing it uses one key. A key that was revoked there is replaced."""
    path = data_dir / LAUNCHER_KEY_FILE
    key = path.read_text().strip() if path.exists() else None
    async with factory() as session:
        if key is not None:
            api_key = await session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key)))
            if api_key is not None and api_key.revoked_at is None:
                return key
        principal = await session.scalar(select(Principal).where(Principal.name == LAUNCHER_PRINCIPAL))
        if principal is None:
            data = PrincipalIn(name=LAUNCHER_PRINCIPAL, description="servers started by the service", roles=[Role.SERVER], permits=["**"])
            principal = await create_principal(session, "launcher", data)
        key = new_key()
        session.add(_new_api_key(principal, key, "launcher", "the key of servers the service starts", None))
        record(session, "launcher", "api_key.create", LAUNCHER_PRINCIPAL)
        await session.commit()
    _save_key(data_dir, key, LAUNCHER_KEY_FILE)
    return key


def _save_key(data_dir: Path, key: str, name: str = "admin.key") -> None:
    """Kept beside the data (mode 0600) so the local CLI works after `make run`; delete it once copied elsewhere."""
    path = data_dir / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
