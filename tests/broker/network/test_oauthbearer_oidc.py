"""OAUTHBEARER with OIDC on the wire (KIP-768, issue 22): an identity provider on loopback
HTTP (a client-credentials token endpoint and a JWKS endpoint), a broker configured as a
Kafka operator configures one (the JWT validator's callback handler class, the JWKS URL,
the expected issuer and audience), and librdkafka's own OIDC login
(``sasl.oauthbearer.method=oidc``), which fetches its token over HTTP. The broker fetches
the provider's keys over HTTP, takes the principal from the token's ``sub``, fetches the
keys again when the provider rotates them, and refuses a token no published key signed."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.broker.harness import BrokerProcess

pytestmark = pytest.mark.timeout(180)

OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
AUDIENCE = "kafka"
SECRETS = {"alice": "alice-secret", "bob": "bob-secret"}


class IdentityProvider(ThreadingHTTPServer):
    """Serves ``GET /jwks`` (the published public keys) and ``POST /token`` (client
    credentials in HTTP Basic auth, as librdkafka sends them: an RS256 JWT whose ``sub``
    is the client id, signed by the current key). Counts what it served."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.issuer = f"http://127.0.0.1:{self.server_address[1]}"
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.published: list[str] = []
        self.signing = ""
        self.jwks_gets = 0
        self.tokens = 0
        self.lock = threading.Lock()
        self.rotate("rsa-1")

    def rotate(self, kid: str, *, publish: bool = True) -> None:
        """Sign with a new key from now on; ``publish`` it in the JWKS (both keys stay)."""
        with self.lock:
            self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.signing = kid
            if publish:
                self.published.append(kid)

    def jwks(self) -> bytes:
        with self.lock:
            self.jwks_gets += 1
            keys = []
            for kid in self.published:
                key = json.loads(RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
                keys.append({**key, "kid": kid, "use": "sig", "alg": "RS256"})
        return json.dumps({"keys": keys}).encode()

    def token(self, client_id: str) -> bytes:
        now = int(time.time())
        with self.lock:
            self.tokens += 1
            claims = {
                "sub": client_id,
                "iss": self.issuer,
                "aud": AUDIENCE,
                "iat": now,
                "exp": now + 3600,
                "scope": "kafka",
            }
            signed = jwt.encode(
                claims, self.keys[self.signing], "RS256", headers={"kid": self.signing}
            )
        body = {"access_token": signed, "token_type": "bearer", "expires_in": 3600}
        return json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    server: IdentityProvider

    def do_GET(self) -> None:
        if self.path != "/jwks":
            self.send_error(404)
            return
        self._answer(self.server.jwks())

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(
            self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        )
        client_id, secret = _basic_auth(self.headers.get("Authorization", ""))
        if (
            self.path != "/token"
            or form.get("grant_type") != ["client_credentials"]
            or SECRETS.get(client_id) != secret
        ):
            self.send_error(401)
            return
        self._answer(self.server.token(client_id))

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _basic_auth(header: str) -> tuple[str, str]:
    if not header.startswith("Basic "):
        return "", ""
    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    return urllib.parse.unquote(user), urllib.parse.unquote(password)


@dataclass
class Oidc:
    broker: BrokerProcess
    idp: IdentityProvider

    def client(self, user: str) -> dict[str, Any]:
        """librdkafka's OIDC login, as a Kafka client configures it."""
        return {
            "bootstrap.servers": f"127.0.0.1:{self.broker.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": user,
            "sasl.oauthbearer.client.secret": SECRETS[user],
            "sasl.oauthbearer.token.endpoint.url": f"{self.idp.issuer}/token",
            "sasl.oauthbearer.scope": "kafka",
        }


@pytest.fixture(scope="module")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oidc]:
    idp = IdentityProvider()
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    data: Path = tmp_path_factory.mktemp("oidc")
    broker = BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                JWT_VALIDATOR
            ),
            "sasl.oauthbearer.jwks.endpoint.url": f"{idp.issuer}/jwks",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": idp.issuer,
            "connection.failed.authentication.delay.ms": "100",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
            "auto.create.topics.enable": "false",
        },
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
        admin.create_topics([NewTopic("a", 1, 1)])["a"].result(30)
        binding = AclBinding(
            ResourceType.TOPIC,
            "a",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([binding])[binding].result(30)
        yield Oidc(broker, idp)
    finally:
        broker.stop()
        idp.shutdown()


def produce(config: dict[str, Any], timeout_ms: int = 20000) -> tuple[Any, list[KafkaError]]:
    """One record to topic ``a``: (its delivery error or None, the client's errors)."""
    delivered: list[KafkaError | None] = []
    errors: list[KafkaError] = []
    producer = Producer({**config, "message.timeout.ms": timeout_ms, "error_cb": errors.append})
    producer.produce("a", b"v", on_delivery=lambda err, _msg: delivered.append(err))
    assert producer.flush(timeout_ms / 1000 + 10) == 0
    return delivered[0], errors


def test_oidc_tokens_from_the_provider_name_the_principal(oidc: Oidc) -> None:
    tokens, reads = oidc.idp.tokens, oidc.idp.jwks_gets
    error, _ = produce(oidc.client("alice"))
    assert error is None
    # bob authenticates (his own token) and is refused by the ACLs: the principal is sub.
    error, _ = produce(oidc.client("bob"))
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert oidc.idp.tokens >= tokens + 2
    assert oidc.idp.jwks_gets >= max(reads, 1)  # the broker fetched the keys over HTTP


def test_a_rotated_key_is_fetched_and_an_unpublished_one_refused(oidc: Oidc) -> None:
    produce(oidc.client("alice"))  # the broker has the current keys
    reads = oidc.idp.jwks_gets
    oidc.idp.rotate("rsa-2")
    error, _ = produce(oidc.client("alice"))
    assert error is None
    assert oidc.idp.jwks_gets > reads  # an unknown key id: fetched again
    oidc.idp.rotate("rogue", publish=False)
    try:
        error, errors = produce(oidc.client("alice"), timeout_ms=5000)
    finally:
        oidc.idp.rotate("rsa-3")
    assert error is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert "signature" in oidc.broker.log_text() or "rogue" in oidc.broker.log_text()
