"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554: what
``kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'``
and ``--describe`` send.

The client salts the password itself and sends the salt, the iteration count and the
salted password, never the password; the broker derives StoredKey and ServerKey from it
(RFC 5802) and keeps Kafka's text form of those in the user's config
(``tierlog.security.scram_credentials``; ``UserConfigs`` says where). Nothing secret is
logged or answered: Describe gives mechanisms and iteration counts only.

Refusals and their messages are Kafka's (``ZkAdminManager``/``ScramControlManager``):
UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, UNACCEPTABLE_CREDENTIAL for iterations
outside [4096, 16384] or an empty user name, DUPLICATE_RESOURCE for a user named twice,
RESOURCE_NOT_FOUND for a missing credential.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.scram_credentials import (
    ScramCredentialError,
    ScramMechanism,
    from_salted_password,
    parse_credential,
)

if TYPE_CHECKING:
    from tierlog.broker.coordination.api import UserConfigs
    from tierlog.broker.services import BrokerServices

log = logging.getLogger(__name__)


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


def _infos(config: dict[str, str]) -> list[dict[str, int]]:
    infos = []
    for mechanism in ScramMechanism:
        text = config.get(mechanism.mechanism_name)
        if text is None:
            continue
        try:
            iterations = parse_credential(text).iterations
        except ScramCredentialError:
            continue  # not a credential Kafka could use either
        infos.append({"mechanism": mechanism.type_id, "iterations": iterations})
    return infos


async def handle_describe_user_scram_credentials(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    error = services.authz.request_error(request)
    store = services.user_configs
    if error or store is None:
        return _answer(
            request,
            {
                "error_code": error or ErrorCode.unknown_server_error,
                "error_message": None if error else "no store for user configs",
                "results": [],
            },
        )
    wanted = None if not body.users else [user.name for user in body.users]
    configs = await store.describe(None if wanted is None else list(dict.fromkeys(wanted)))
    results = []
    if wanted is None:
        for user, config in sorted(configs.items()):
            infos = _infos(config)
            if infos:
                results.append(_result(user, 0, None, infos))
    else:
        counts = Counter(wanted)
        for user in dict.fromkeys(wanted):
            infos = _infos(configs.get(user, {}))
            if counts[user] > 1:
                message = (
                    "Cannot describe SCRAM credentials for the same user twice in a single request"
                )
                results.append(_result(user, ErrorCode.duplicate_resource, message, []))
            elif not infos:
                message = "Attempt to describe a user credential that does not exist"
                results.append(_result(user, ErrorCode.resource_not_found, message, []))
            else:
                results.append(_result(user, 0, None, infos))
    return _answer(request, {"error_code": 0, "error_message": None, "results": results})


def _result(
    user: str, code: int, message: str | None, infos: list[dict[str, int]]
) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": infos}


async def handle_alter_user_scram_credentials(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    users = list(
        dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    )
    error = services.authz.request_error(request)
    store = services.user_configs
    if error or store is None:
        code = error or ErrorCode.unknown_server_error
        message = None if error else "no store for user configs"
        return _answer(
            request,
            {"results": [{"user": u, "error_code": code, "error_message": message} for u in users]},
        )
    refused: dict[str, tuple[int, str]] = {}
    seen: Counter[tuple[str, int]] = Counter(
        (item.name, item.mechanism) for item in (*body.deletions, *body.upsertions)
    )
    for item in (*body.deletions, *body.upsertions):
        if item.name in refused:
            continue
        mechanism = ScramMechanism.by_type(item.mechanism)
        if not item.name:
            refused[item.name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif seen[(item.name, item.mechanism)] > 1:
            refused[item.name] = (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        elif mechanism is None:
            refused[item.name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif hasattr(item, "iterations"):
            if item.iterations < mechanism.min_iterations:
                refused[item.name] = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif item.iterations > mechanism.max_iterations:
                refused[item.name] = (ErrorCode.unacceptable_credential, "Too many iterations")
    results = []
    for user in users:
        if user in refused:
            code, message = refused[user]
            results.append({"user": user, "error_code": code, "error_message": message})
            continue
        deletions = [d.mechanism for d in body.deletions if d.name == user]
        upsertions = [u for u in body.upsertions if u.name == user]
        code, message = await _alter_user(store, user, deletions, upsertions)
        results.append({"user": user, "error_code": code, "error_message": message})
    return _answer(request, {"results": results})


async def _alter_user(
    store: UserConfigs, user: str, deletions: list[int], upsertions: list[Any]
) -> tuple[int, str | None]:
    """Delete and upsert one user's credentials in one store change (checked already)."""
    removed = [m for m in (ScramMechanism.by_type(code) for code in deletions) if m is not None]
    added = {}
    for item in upsertions:
        mechanism = ScramMechanism.by_type(item.mechanism)
        assert mechanism is not None
        credential = from_salted_password(
            mechanism, bytes(item.salted_password), bytes(item.salt), item.iterations
        )
        added[mechanism.mechanism_name] = credential.to_kafka()
    missing: list[str] = []

    def change(current: dict[str, str]) -> dict[str, str]:
        missing.clear()
        config = dict(current)
        for mechanism in removed:
            if config.pop(mechanism.mechanism_name, None) is None:
                missing.append(mechanism.mechanism_name)
        if missing:
            return current  # refused whole: nothing changes
        config.update(added)
        return config

    try:
        await store.alter(user, change)
    except Exception as exc:
        log.warning("storing the SCRAM credentials of user %r failed: %r", user, exc)
        return ErrorCode.unknown_server_error, "cannot store the credentials"
    if missing:
        return (
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        )
    done = [f"{name} set" for name in sorted(added)]
    done += [f"{m.mechanism_name} deleted" for m in removed]
    log.info("SCRAM credentials of user %r: %s", user, ", ".join(done))
    return 0, None
