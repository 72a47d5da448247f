"""Security: who a connection is (TLS, SASL) and what it may do (ACLs), with Kafka's keys,
wire messages and ZooKeeper layout.

Mechanisms are sans-I/O (bytes in, values or actions out); the network layer, handlers
and ZooKeeper client drive them. Modules, bottom up:

- ``errors``, ``password`` (secrets that never print), ``principal`` (``User:alice``)
- ``jaas``: ``sasl.jaas.config`` login entries
- ``plain``, ``scram`` + ``scram_credentials``, ``oauthbearer`` + ``oauth_unsecured`` +
  ``oauth_jwt`` (+ ``jwks_fetch``, the one I/O helper): the SASL mechanisms' servers
- ``sasl_codec``, ``sasl_session``: one connection's SaslHandshake/SaslAuthenticate exchange
- ``dn``, ``ssl_principal_mapper``, ``tls``, ``local_ca``: certificates, DNs, contexts
- ``acl``, ``acl_zk``, ``acl_cache``, ``acl_authorizer``: the ACL model, its ZooKeeper JSON,
  the index and the decisions; ``authz_table``: which API checks what
- ``api`` (the Authenticator and Authorizer interfaces), ``authenticator`` (the default
  one), ``registry`` (plugins by Kafka's class names)
- ``config_providers``: ``${file:...}`` and ``${env:...}`` in configs (KIP-297)
- ``fuzz``: the fuzz entry point for every parser of untrusted bytes
"""

from tierlog.security.errors import (
    AuthenticationError,
    IllegalSaslStateError,
    InvalidAclError,
    SecurityConfigError,
    SecurityError,
    UnsupportedSaslMechanismError,
)
from tierlog.security.password import Password
from tierlog.security.principal import ANONYMOUS, KafkaPrincipal, parse_principal

__all__ = [
    "ANONYMOUS",
    "AuthenticationError",
    "IllegalSaslStateError",
    "InvalidAclError",
    "KafkaPrincipal",
    "Password",
    "SecurityConfigError",
    "SecurityError",
    "UnsupportedSaslMechanismError",
    "parse_principal",
]
