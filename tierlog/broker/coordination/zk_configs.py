"""Entity configs: ``/config/<type>/<name>`` and the change notifications every broker
follows (``/config/changes/config_change_<seq>``), Kafka's ``AdminZkClient.changeConfigs``.

A write replaces an entity's whole config, then announces it with a sequential notification
naming the entity (``topics/<t>``, ``clients/<c>``, ``users/<u>``,
``users/<u>/clients/<c>``); brokers read the entity again when they see it
(``zk_cache``). Topic overrides and client quotas live here today. SCRAM credentials
(``/config/users/<user>``, beside the user's quotas) and dynamic broker configs
(``/config/brokers/<id>`` and ``/config/brokers/<default>``) are the same kind of entity
and belong here too, each a few methods over ``_replace``.
"""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_session import ZkSession

try:
    from kazoo.exceptions import NoNodeError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e


class EntityConfigs:
    """Args:
    session: a started session.
    """

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    # -- topics ---------------------------------------------------------------------------------

    def topic(self, topic: str) -> dict[str, str]:
        """The topic's config overrides ({} when it has none)."""
        found = self._session.get(zk_data.topic_config_path(topic))
        if found is None:
            return {}
        return zk_data.decode_config(zk_data.TOPIC_CONFIG_TYPE, topic, found.data)

    def set_topic(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides and announce the change (Kafka's
        ``changeTopicConfig``).

        Raises:
            UnknownTopicError.
        """
        if not self._session.exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        self._replace(
            zk_data.topic_config_path(topic),
            zk_data.encode_config(configs),
            zk_data.config_change_entity_path(zk_data.TOPIC_CONFIG_TYPE, topic),
        )

    # -- client quotas ------------------------------------------------------------------------

    def client_quotas(self) -> dict[str, dict[str, float]]:
        """Client quotas by entity path (``clients/<c>``, ``users/<u>``,
        ``users/<u>/clients/<c>``, Kafka's ``/config`` layout); entities without quota
        keys are left out."""
        session = self._session
        found: dict[str, dict[str, float]] = {}
        clients_type, users_type = zk_data.CLIENTS_CONFIG_TYPE, zk_data.USERS_CONFIG_TYPE
        paths = [
            zk_data.config_change_entity_path(clients_type, c)
            for c in session.children(zk_data.config_type_path(clients_type))
        ]
        for user in session.children(zk_data.config_type_path(users_type)):
            paths.append(zk_data.config_change_entity_path(users_type, user))
            clients = session.children(zk_data.user_clients_path(user))
            paths += [zk_data.user_client_entity_path(user, c) for c in clients]
        for path in paths:
            znode = zk_data.config_znode_path(path)
            got = session.get(znode)
            if got is None or not got.data:
                continue
            try:
                config = zk_data.decode_config_at(znode, got.data)
            except zk_data.ZkDataError:
                continue  # not ours to judge: what Kafka's own tools wrote may differ
            values = {}
            for key, value in config.items():
                try:
                    values[key] = float(value)
                except ValueError:
                    continue  # not a quota (Kafka's SCRAM credentials live here too)
            if values:
                found[path] = values
        return found

    def set_client_quotas(self, entity: str, values: Mapping[str, float]) -> None:
        """Replace ``entity``'s quotas and announce the change (Kafka's
        ``changeClientIdConfig`` / ``changeUserOrUserClientIdConfig``)."""
        self._replace(
            zk_data.config_znode_path(entity),
            zk_data.encode_config({k: _quota_text(v) for k, v in values.items()}),
            entity,
        )

    # -- other entities (client-metrics) ---------------------------------------------------

    def entities(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of ``entity_type`` with configs: name -> key -> value."""
        session = self._session
        found: dict[str, dict[str, str]] = {}
        for name in session.children(zk_data.config_type_path(entity_type)):
            got = session.get(zk_data.config_entity_path(entity_type, name))
            if got is None or not got.data:
                continue
            try:
                config = zk_data.decode_config(entity_type, name, got.data)
            except zk_data.ZkDataError:
                continue  # written by another tool in another shape: not ours to judge
            if config:
                found[name] = config
        return found

    def set_entity(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Replace the entity's configs ({} empties it) and announce the change."""
        self._replace(
            zk_data.config_entity_path(entity_type, name),
            zk_data.encode_config(configs),
            zk_data.config_change_entity_path(entity_type, name),
        )

    # -- one write path for every entity --------------------------------------------------------

    def _replace(self, path: str, data: bytes, entity: str) -> None:
        """Write the entity's config, then the notification naming it (after the write, so
        a broker that reads on the notification sees the new config)."""
        kazoo = self._session.kazoo
        try:
            kazoo.set(path, data)
        except NoNodeError:
            kazoo.create(path, data, makepath=True)
        kazoo.create(
            zk_data.config_change_prefix_path(),
            zk_data.encode_config_change(entity),
            sequence=True,
        )


def _quota_text(value: float) -> str:
    # Byte rates are whole numbers: stored as Kafka writes them ("1048576").
    return str(int(value)) if value == int(value) else repr(value)
