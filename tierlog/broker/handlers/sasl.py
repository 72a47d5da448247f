"""SaslHandshake and SaslAuthenticate outside a SASL exchange.

On a SASL listener the connection's ``SaslSession`` answers both
(``tierlog.broker.network.connection_security``), before and after authentication; these handlers
see them only on the other listeners, where Kafka's KafkaApis answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tierlog.broker.services import BrokerServices
from tierlog.protocol import Request
from tierlog.security.sasl_codec import authenticate_response, handshake_response


async def handle_sasl_handshake(services: BrokerServices, request: Request) -> Any:
    return handshake_response(request, ErrorCode.illegal_sasl_state, ())


async def handle_sasl_authenticate(services: BrokerServices, request: Request) -> Any:
    return authenticate_response(
        request,
        ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate on a listener without SASL",
    )
