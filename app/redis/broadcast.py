"""Process-long Redis pub/sub subscriptions: how one process hears what the others announce."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.errors import closed_while_writing
from app.redis.topology import primaries, slot_owner

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.1
MAX_RETRY_SECONDS = 5.0
STOP_CHECK_SECONDS = 1.0

Message = dict[str, Any]


class Subscription:
    """Hands every message on `channels` and `patterns` to `on_message` while it runs, on one connection of
    `redis`'s pool held all that time.

    A Redis error ends the connection, not the subscription: it subscribes again after a growing pause, with a
    warning. What is published meanwhile is lost, so `on_subscribed` runs each time Redis confirms the
    subscription (the first time too): whatever a listener keeps from earlier announcements must be redone then."""

    def __init__(
        self,
        redis: Redis,
        name: str,
        on_message: Callable[[Message], None],
        *,
        channels: Iterable[str] = (),
        patterns: Iterable[str] = (),
        on_subscribed: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self._redis = redis
        self._on_message = on_message
        self._on_subscribed = on_subscribed
        self._channels = list(channels)
        self._patterns = list(patterns)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # Whether Redis confirmed every channel and pattern since the connection was last seen lost. It stays set
        # while redis-py reconnects and subscribes again by itself inside a read: the confirmations then run
        # `on_subscribed` again.
        self.confirmed = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name=f"wlm-subscription-{self.name}")

    async def stop(self) -> None:
        # The flag, not only the cancellation: redis-py (8.1) can lose a cancellation that arrives while it subscribes
        # (seen: a task cancelled 1 ms after it started read on for ever), or turn one into a connection error.
        self._stopping = True
        self.confirmed = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)

    def _hand_over(self, message: Message) -> None:
        # A message its listener cannot take is dropped with a traceback: the connection, and what comes after, stay.
        try:
            self._on_message(message)
        except Exception:
            log.exception("%s: a message on %s was not taken", self.name, message.get("channel"))

    async def _listen(self) -> None:
        # Each confirmation carries how many subscriptions the connection has: the last one completes it.
        subscriptions = len(self._channels) + len(self._patterns)
        retry_in = FIRST_RETRY_SECONDS
        while not self._stopping:
            try:
                async with self._redis.pubsub() as pubsub:
                    if self._channels:
                        await pubsub.subscribe(*self._channels)
                    if self._patterns:
                        await pubsub.psubscribe(*self._patterns)
                    # The client reconnects and subscribes again by itself after a dropped connection, if it can:
                    # the confirmations come through here as well. Reads end every second to look at the flag.
                    while not self._stopping:
                        message = await pubsub.get_message(timeout=STOP_CHECK_SECONDS)
                        if message is None:
                            continue
                        if message["type"] in ("message", "pmessage"):
                            self._hand_over(message)
                        elif message["type"] in ("subscribe", "psubscribe") and message["data"] == subscriptions:
                            retry_in = FIRST_RETRY_SECONDS
                            self.confirmed = True
                            self._on_subscribed()
            except Exception as exc:
                self.confirmed = False
                if self._stopping:
                    return
                # Redis going away (a restart, a failover, a killed connection) is expected: a line, not a traceback.
                expected = isinstance(exc, RedisError | OSError) or closed_while_writing(exc)
                log.warning("%s: subscription lost (%s); subscribing again in %.1f s", self.name, exc, retry_in, exc_info=not expected)
                await asyncio.sleep(retry_in)
                retry_in = min(retry_in * 2, MAX_RETRY_SECONDS)


def keeper(owner: str | None, confirmed: Iterable[str]) -> str | None:
    """Pure: the primary whose copy of a message is kept (OnEveryPrimary): the owner of the message's slot (where a
    script that published it ran) if the subscription there is confirmed; else the first confirmed one, since every
    subscription hears every message; None with none confirmed."""
    listening = sorted(confirmed)
    return owner if owner in listening else next(iter(listening), None)


class OnEveryPrimary:
    """Subscriptions to `patterns` on every primary of a cluster (on a standalone Redis, its one server), and to a
    channel of each primary's own (`own_channel(primary)`), kept in step with the primaries the client knows (looked
    at every RESYNC_SECONDS).

    What a PUBLISH answers counts the subscribers of the node it ran on: a script that publishes to the own channel of
    the primary it runs on counts this listener, and the copies the cluster bus brings the other primaries find
    nobody listening there, so `on_message` hears it once. A pattern is heard through every primary: `on_message`
    hears one copy, the one through the primary of the message's slot (`slot_key` names a key of it), or through
    another while that one is not subscribed (`keeper`): once each while the slot map and the subscriptions hold
    still (as the map changes under a message, a copy may be kept twice or not at all, a wake-up more or a lost one
    that the listener's fallback covers). `on_subscribed(primary)` runs each time a primary's subscription is
    confirmed: what it kept, or would have, while it was down may be lost."""

    RESYNC_SECONDS = 5.0

    def __init__(
        self,
        redis: Redis,
        name: str,
        on_message: Callable[[Message], None],
        *,
        slot_key: Callable[[Message], str],
        own_channel: Callable[[str], str] | None = None,
        patterns: Iterable[str] = (),
        on_subscribed: Callable[[str], None] = lambda primary: None,
    ) -> None:
        self.name = name
        self._redis = redis
        self._on_message = on_message
        self._slot_key = slot_key
        self._own_channel = own_channel
        self._patterns = list(patterns)
        self._on_subscribed = on_subscribed
        self._subscriptions: dict[str, Subscription] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._resync()
        self._task = asyncio.create_task(self._follow_primaries(), name=f"wlm-subscription-{self.name}-primaries")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)
        # A departed primary's subscription stays listed until it stopped: none is left running however stop comes.
        subscriptions, self._subscriptions = list(self._subscriptions.values()), {}
        await asyncio.gather(*(subscription.stop() for subscription in subscriptions))

    def listening(self) -> list[str]:
        """The primaries whose subscription Redis has confirmed."""
        return sorted(primary for primary, subscription in self._subscriptions.items() if subscription.confirmed)

    def _heard(self, primary: str, message: Message) -> None:
        if primary not in self._subscriptions:  # a departed primary's, stopping
            return
        # A primary's own channel, or one subscription (a standalone server), hears each message once: no slot to look up.
        if (
            message["type"] == "message"
            or len(self._subscriptions) == 1
            or primary == keeper(slot_owner(self._redis, self._slot_key(message)), self.listening())
        ):
            self._on_message(message)

    def _resync(self) -> list[str]:
        """Subscribes on the primaries new to the client; returns those no longer primaries."""
        current = primaries(self._redis)
        for primary, client in current.items():
            if primary not in self._subscriptions:
                subscription = Subscription(
                    client,
                    f"{self.name} on {primary or 'redis'}",
                    functools.partial(self._heard, primary),
                    channels=[] if self._own_channel is None else [self._own_channel(primary)],
                    patterns=self._patterns,
                    on_subscribed=functools.partial(self._on_subscribed, primary),
                )
                self._subscriptions[primary] = subscription
                subscription.start()
        return sorted(set(self._subscriptions) - set(current))

    async def _follow_primaries(self) -> None:
        # A failover or a new primary changes the client's slot map (redis-py reads it again after an error or a
        # redirect); until this follows, a primary without this subscription counts no listener here, and the
        # publisher's fallback takes over (app/work/long_poll.py).
        while True:
            await asyncio.sleep(self.RESYNC_SECONDS)
            try:
                for departed in self._resync():
                    await self._subscriptions[departed].stop()
                    del self._subscriptions[departed]
            except Exception:
                log.exception("%s: could not follow the primaries", self.name)
