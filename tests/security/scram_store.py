"""An in-memory ``ScramCredentials`` store for the SCRAM tests (a unit-test fake: the real
stores are ZooKeeper's ``/config/users`` and single-node metadata)."""

from __future__ import annotations

from tierlog.security.scram import DelegationTokenCredential
from tierlog.security.scram_credentials import ScramCredential, ScramMechanism, make_credential


class MemoryScramStore:
    def __init__(self) -> None:
        self.users: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        self.tokens: dict[tuple[str, ScramMechanism], DelegationTokenCredential] = {}

    def add_user(
        self, user: str, password: str, mechanism: ScramMechanism, iterations: int = 4096
    ) -> None:
        self.users[(user, mechanism)] = make_credential(mechanism, password, iterations)

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.users.get((user, mechanism))

    def delegation_token(
        self, token_id: str, mechanism: ScramMechanism
    ) -> DelegationTokenCredential | None:
        return self.tokens.get((token_id, mechanism))
