from __future__ import annotations

from kio.schema.errors import ErrorCode

from tierlog.protocol.versions import ADVERTISED
from tierlog.security.acl import AclOperation, ResourceType
from tierlog.security.authz_table import AUTHORIZATION, SECURITY_APIS, Denial, When, denial_error


def test_every_advertised_and_security_api_has_a_row() -> None:
    missing = sorted((set(ADVERTISED) | SECURITY_APIS) - set(AUTHORIZATION))
    assert missing == [], f"APIs without an authorization row: {missing}"


def test_only_authentication_and_telemetry_apis_skip_checks() -> None:
    unchecked = {key for key, row in AUTHORIZATION.items() if not row.checks}
    # Client metrics (KIP-714) are answered to any authenticated client, as KafkaApis does.
    assert unchecked == {17, 18, 36, 71, 72}
    before = {key for key, row in AUTHORIZATION.items() if row.before_authentication}
    assert before == {17, 18, 36}


def test_rows_carry_kafkas_checks() -> None:
    produce = AUTHORIZATION[0].checks
    assert (produce[0].operation, produce[0].resource, produce[0].when) == (
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        When.TRANSACTIONAL,
    )
    init = AUTHORIZATION[22].checks[1]
    assert init.operation is AclOperation.IDEMPOTENT_WRITE and init.fallback is not None
    assert init.fallback.denial is Denial.BY_RESOURCE_TYPE
    acl_apis = {key: AUTHORIZATION[key].checks[0].operation for key in (29, 30, 31)}
    assert acl_apis == {29: AclOperation.DESCRIBE, 30: AclOperation.ALTER, 31: AclOperation.ALTER}
    assert AUTHORIZATION[16].checks[0].denial is Denial.FILTERED  # ListGroups never fails


def test_denial_error_codes_are_kafkas() -> None:
    assert denial_error(ResourceType.TOPIC) == ErrorCode.topic_authorization_failed == 29
    assert denial_error(ResourceType.GROUP) == 30
    assert denial_error(ResourceType.CLUSTER) == 31
    assert denial_error(ResourceType.TRANSACTIONAL_ID) == 53
    assert denial_error(ResourceType.DELEGATION_TOKEN) == 65


def test_no_check_names_a_wildcard_operation() -> None:
    for row in AUTHORIZATION.values():
        for check in row.checks:
            for item in (check, check.fallback):
                if item is not None:
                    assert item.operation not in (
                        AclOperation.ANY,
                        AclOperation.UNKNOWN,
                        AclOperation.ALL,
                    )
                    assert item.resource not in (ResourceType.ANY, ResourceType.UNKNOWN)
