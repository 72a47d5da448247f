"""Entity configs: ``/config/<type>/<name>`` and the change notifications every broker
follows (``/config/changes/config_change_<seq>``), Kafka's ``AdminZkClient.changeConfigs``.

A write replaces an entity's whole config, then announces it with a sequential notification
naming the entity (``topics/<t>``, ``clients/<c>``, ``users/<u>``,
``users/<u>/clients/<c>``); brokers read the entity again when they see it
(``zk_cache``). Topic overrides, client quotas, SCRAM credentials (``/config/users/<user>``,
beside the user's quotas), client-metrics subscriptions and dynamic broker configs
(``/config/brokers/<id>`` and ``/config/brokers/<default>``, through ``entities`` and
``set_entity``) live here. A user's znode holds both its quotas and its credentials, so
each write keeps the other's keys (``alter_user``, a conditional read-modify-write; quota
writes keep every non-numeric key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, ZkSession

try:
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
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
        ``changeClientIdConfig`` / ``changeUserOrUserClientIdConfig``); a user's other
        keys (SCRAM credentials) are kept."""
        quotas = {k: _quota_text(v) for k, v in values.items()}

        def change(current: dict[str, str]) -> dict[str, str]:
            return {**{k: v for k, v in current.items() if not _is_number(v)}, **quotas}

        self._alter(entity, change)

    # -- users (SCRAM credentials beside the quotas) ----------------------------------------

    def users(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """The configs of ``names`` (every user under ``/config/users`` when None), by
        user name; users without a config are left out."""
        users_type = zk_data.USERS_CONFIG_TYPE
        if names is None:
            segments = self._session.children(zk_data.config_type_path(users_type))
        else:
            segments = [zk_data.sanitize(name) for name in names]
        found = {}
        for segment in segments:
            path = zk_data.config_znode_path(f"{users_type}/{segment}")
            got = self._session.get(path)
            config = zk_data.decode_config_at(path, got.data) if got is not None else {}
            if config:
                found[zk_data.desanitize(segment)] = config
        return found

    def alter_user(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Replace ``user``'s config by ``change(current)`` conditionally on the znode's
        version, and announce it (``users/<sanitized user>``)."""
        return self._alter(f"{zk_data.USERS_CONFIG_TYPE}/{zk_data.sanitize(user)}", change)

    def _alter(
        self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        kazoo = self._session.kazoo
        path = zk_data.config_znode_path(entity)
        for _ in range(MAX_ATTEMPTS):
            try:
                data, stat = kazoo.get(path)
                current, version = zk_data.decode_config_at(path, data), stat.version
            except NoNodeError:
                current, version = {}, None
            new = change(dict(current))
            try:
                if version is None:
                    kazoo.create(
                        path,
                        zk_data.encode_config(new),
                        acl=self._session.acls.for_path(path),
                        makepath=True,
                    )
                else:
                    kazoo.set(path, zk_data.encode_config(new), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another writer won since the read: read again
            kazoo.create(
                zk_data.config_change_prefix_path(),
                zk_data.encode_config_change(entity),
                sequence=True,
            )
            return new
        raise RuntimeError(f"{path}: too many concurrent updates, gave up")

    # -- other entities (client-metrics, brokers) --------------------------------------

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
            kazoo.create(path, data, acl=self._session.acls.for_path(path), makepath=True)
        kazoo.create(
            zk_data.config_change_prefix_path(),
            zk_data.encode_config_change(entity),
            sequence=True,
        )


class ZkUserConfigs:
    """``UserConfigs`` over ``EntityConfigs`` (ZooKeeper calls off the event loop)."""

    def __init__(self, configs: EntityConfigs) -> None:
        self._configs = configs

    async def describe(self, users: list[str] | None = None) -> dict[str, dict[str, str]]:
        return await asyncio.to_thread(self._configs.users, users)

    async def alter(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        return await asyncio.to_thread(self._configs.alter_user, user, change)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _quota_text(value: float) -> str:
    # Byte rates are whole numbers: stored as Kafka writes them ("1048576").
    return str(int(value)) if value == int(value) else repr(value)
