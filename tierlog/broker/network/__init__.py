"""The broker's network side: what happens between a socket and a request handler.

Modules, one concern each:

- ``server``: the TCP front, one asyncio task per connection, frames in, responses out
  (Kafka's ``SocketServer``);
- ``listener_setup``: each listener's TLS context and SASL mechanisms from the broker's keys;
- ``connection_security``: how a connection gets its principal (TLS, SASL) before any
  request reaches a handler;
- ``connection_context``: what a connection's task knows of its client (context variables);
- ``quotas``: client byte-rate quotas and the throttle times answered for them (KIP-13,
  KIP-55, KIP-219).

What listeners a broker has (their names, addresses and security protocols, KIP-103) is
configuration, parsed in ``tierlog.broker.listeners`` beside ``tierlog.broker.config``.
"""
