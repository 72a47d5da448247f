"""Request handlers, one module per family of APIs; ``routes.HANDLERS`` maps API key ->
handler.

A handler is ``async (services, request) -> answer``: it sees only the broker's narrow
``BrokerServices`` (tierlog.broker.services), never the ``Broker``. The answer is a kio
response entity, an ``EncodedFetchResponse`` (zero-copy Fetch), or None (acks=0 produce:
no answer). Handlers translate the protocol and sit on top of the broker: the coordinators,
replication and the controller below them never import them, and this package imports
none of its modules, so importing one handler loads only what it needs.
"""
