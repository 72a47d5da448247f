"""The SCRAM credentials SASL listeners check against: a cache over the users' configs
(``UserConfigs``: ZooKeeper's ``/config/users`` in Kafka's layout, or the single node's
metadata store), which ``tierlog users``, AlterUserScramCredentials (KIP-554) and
``kafka-configs --entity-type users`` write.

The SASL exchange is sans-I/O and synchronous, so it reads this cache; the network layer
awaits ``refresh`` before answering a SaslHandshake, which reads the store again when the
cache is older than ``max_age_ms`` (one read at a time, shared by concurrent handshakes).
A credential stored or removed is therefore seen by the next login at most ``max_age_ms``
later, without a watch on every user znode. Only salts, stored and server keys are kept;
never a password.
"""

from __future__ import annotations

import asyncio
import logging

from tierlog.broker.coordination.api import UserConfigs
from tierlog.security.scram import DelegationTokenCredential
from tierlog.security.scram_credentials import (
    ScramCredential,
    ScramCredentialError,
    ScramMechanism,
    parse_credential,
)
from tierlog.util.clock import Clock

__all__ = ["ScramCredentialCache"]

log = logging.getLogger(__name__)


class ScramCredentialCache:
    """``ScramCredentials`` over ``UserConfigs``; event loop only."""

    def __init__(self, users: UserConfigs, clock: Clock, max_age_ms: int = 1000) -> None:
        self._users = users
        self._clock = clock
        self._max_age_ms = max_age_ms
        self._credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        self._read_at: int | None = None
        self._reading: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        """Read the store again if the cache is older than ``max_age_ms``."""
        now = self._clock.monotonic_ms()
        if self._read_at is not None and now - self._read_at < self._max_age_ms:
            return
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read())
        await asyncio.shield(self._reading)

    async def _read(self) -> None:
        try:
            configs = await self._users.describe(None)
        except Exception as exc:  # the store is down: keep what we had, say so once
            log.warning("cannot read SCRAM credentials (keeping the cached ones): %s", exc)
            return
        credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        for user, config in configs.items():
            for name, text in config.items():
                mechanism = ScramMechanism.by_name(name)
                if mechanism is None:
                    continue  # a quota, not a credential
                try:
                    credentials[(user, mechanism)] = parse_credential(text)
                except ScramCredentialError as exc:
                    log.warning("ignoring %s's %s credential: %s", user, name, exc)
        self._credentials = credentials
        self._read_at = self._clock.monotonic_ms()

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def delegation_token(
        self, token_id: str, mechanism: ScramMechanism
    ) -> DelegationTokenCredential | None:
        return None  # delegation tokens (KIP-48) are not built
