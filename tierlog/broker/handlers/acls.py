"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): what ``kafka-acls`` and the admin
clients send. The ACLs are the authorizer's (``authorizer.class.name``), kept where this
mode keeps metadata; without an authorizer every answer is SECURITY_DISABLED, as Kafka's.

Wire values are Kafka's codes (``tierlog.security.acl``'s enums); a code this broker does
not know reads as UNKNOWN, which the filters and ``validate_new_binding`` refuse with
INVALID_REQUEST and Kafka's message. DescribeAcls groups the matching bindings by
resource pattern, as Kafka does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, TypeVar

from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tierlog.security.errors import InvalidAclError

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

_NO_AUTHORIZER = "No Authorizer is configured."
_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _code(enum: type[_E], value: int) -> _E:
    try:
        return enum(int(value))
    except ValueError:
        return enum(0)  # UNKNOWN


def _filter(item: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            _code(ResourceType, item.resource_type_filter),
            item.resource_name_filter,
            _code(PatternType, item.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            item.principal_filter,
            item.host_filter,
            _code(AclOperation, item.operation),
            _code(AclPermissionType, item.permission_type),
        ),
    )


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


async def handle_describe_acls(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    authorizer = services.authz.authorizer
    error = services.authz.request_error(request)
    message = None
    acl_filter = _filter(body)
    if not error and authorizer is None:
        error, message = ErrorCode.security_disabled, _NO_AUTHORIZER
    if not error:
        try:
            acl_filter.check()
            if acl_filter.pattern.pattern_type is PatternType.UNKNOWN:
                raise InvalidAclError("Unknown patternFilter.")
        except InvalidAclError as exc:
            error, message = ErrorCode.invalid_request, str(exc)
    if error:
        return _answer(request, {"error_code": error, "error_message": message, "resources": []})
    assert authorizer is not None
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
    for binding in authorizer.acls(acl_filter):
        by_pattern[binding.pattern].append(binding.entry)
    resources = [
        {
            "resource_type": pattern.resource_type,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type,
            "acls": [
                {
                    "principal": entry.principal,
                    "host": entry.host,
                    "operation": entry.operation,
                    "permission_type": entry.permission_type,
                }
                for entry in sorted(by_pattern[pattern], key=str)
            ],
        }
        for pattern in sorted(by_pattern, key=str)
    ]
    return _answer(request, {"error_code": 0, "error_message": None, "resources": resources})


async def handle_create_acls(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    authorizer = services.authz.authorizer
    error = services.authz.request_error(request)
    if error or authorizer is None:
        message = None if error else _NO_AUTHORIZER
        error = error or ErrorCode.security_disabled
        results = [{"error_code": error, "error_message": message} for _ in body.creations]
        return _answer(request, {"results": results})
    bindings: list[AclBinding | None] = []
    refused: dict[int, str] = {}
    for index, item in enumerate(body.creations):
        try:
            pattern = ResourcePattern(
                _code(ResourceType, item.resource_type),
                item.resource_name,
                _code(PatternType, item.resource_pattern_type),
            )
        except InvalidAclError as exc:
            refused[index] = str(exc)
            bindings.append(None)
            continue
        entry = AccessControlEntry(
            item.principal,
            item.host,
            _code(AclOperation, item.operation),
            _code(AclPermissionType, item.permission_type),
        )
        bindings.append(AclBinding(pattern, entry))
    valid = [b for b in bindings if b is not None]
    outcomes = iter(await authorizer.create_acls(valid))
    results = []
    for index, binding in enumerate(bindings):
        if binding is None:
            results.append(
                {"error_code": ErrorCode.invalid_request, "error_message": refused[index]}
            )
            continue
        outcome = next(outcomes)
        if outcome.error is None:
            results.append({"error_code": 0, "error_message": None})
        else:
            code = (
                ErrorCode.unknown_server_error
                if outcome.store_failed
                else ErrorCode.invalid_request
            )
            results.append({"error_code": code, "error_message": outcome.error})
    return _answer(request, {"results": results})


def _matching(binding: AclBinding) -> dict[str, Any]:
    return {
        "error_code": 0,
        "error_message": None,
        "resource_type": binding.pattern.resource_type,
        "resource_name": binding.pattern.name,
        "pattern_type": binding.pattern.pattern_type,
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": binding.entry.operation,
        "permission_type": binding.entry.permission_type,
    }


async def handle_delete_acls(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    authorizer = services.authz.authorizer
    error = services.authz.request_error(request)
    if error or authorizer is None:
        message = None if error else _NO_AUTHORIZER
        error = error or ErrorCode.security_disabled
        refused: list[dict[str, Any]] = [
            {"error_code": error, "error_message": message, "matching_acls": []}
            for _ in body.filters
        ]
        return _answer(request, {"filter_results": refused})
    filters = [_filter(item) for item in body.filters]
    results: list[dict[str, Any]] = []
    for outcome in await authorizer.delete_acls(filters):
        if outcome.error is not None:
            code = (
                ErrorCode.unknown_server_error
                if outcome.store_failed
                else ErrorCode.invalid_request
            )
            results.append(
                {"error_code": code, "error_message": outcome.error, "matching_acls": []}
            )
        else:
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [_matching(b) for b in outcome.deleted],
                }
            )
    return _answer(request, {"filter_results": results})
