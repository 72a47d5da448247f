"""zk_auth: the brokers' ZooKeeper identity from Kafka's JAAS Client entry, and which ACL a
new znode gets (Kafka's ZkData.defaultAcls). With a real ZooKeeper:
tests/integration/test_zookeeper_acls.py."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, Id, Permissions

from tierlog.broker.cluster import zookeeper_identity
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.zk_auth import (
    ZnodeAcls,
    is_sensitive,
    parse_identity,
    session_security,
)
from tierlog.security.errors import SecurityConfigError
from tierlog.util.configdef import ConfigError

MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule required"
ENTRY = f'{MODULE} username="kafka" password="s3cret";'
CREATOR_ALL = ACL(Permissions.ALL, Id("auth", ""))
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))


def test_the_identity_is_the_digest_login_entry() -> None:
    identity = parse_identity(ENTRY)
    assert identity.username == "kafka"
    assert identity.auth_data() == [("digest", "kafka:s3cret")]
    assert "s3cret" not in repr(identity)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", "not supported"),
        (
            'org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka";',
            "password",
        ),
        ('org.apache.zookeeper.server.auth.DigestLoginModule required password="x";', "username"),
        (
            f'{MODULE} username="a:b" password="x";',
            "':'",
        ),
        ("org.apache.zookeeper.server.auth.DigestLoginModule required username=", "JAAS"),
    ],
)
def test_a_bad_entry_names_the_key(text: str, reason: str) -> None:
    with pytest.raises(SecurityConfigError) as raised:
        parse_identity(text)
    assert raised.value.key == "zookeeper.jaas.config"
    assert reason.lower() in str(raised.value).lower()


def test_sensitive_roots_are_kafkas() -> None:
    for path in ("/config/users", "/config/users/alice", "/config/brokers/<default>"):
        assert is_sensitive(path)
    for path in ("/config", "/config/topics/t", "/config/usersx", "/brokers/ids/0"):
        assert not is_sensitive(path)


def test_secure_acls_give_the_creator_everything_and_the_world_read_outside_sensitive_roots() -> (
    None
):
    acls = ZnodeAcls(secure=True)
    assert acls.for_path("/brokers/topics/t") == [CREATOR_ALL, WORLD_READ]
    assert acls.for_path("/config/users/alice") == [CREATOR_ALL]
    assert ZnodeAcls(secure=False).for_path("/config/users/alice") is None


def test_set_acl_without_an_identity_is_refused_naming_the_key() -> None:
    config = BrokerConfig(
        {"zookeeper.connect": "127.0.0.1:2181", "zookeeper.set.acl": "true", "log.dirs": "/tmp/x"}
    )
    with pytest.raises(ConfigError) as raised:
        zookeeper_identity(config)
    assert raised.value.key == "zookeeper.set.acl"
    assert "zookeeper.jaas.config" in str(raised.value)


def test_a_tools_properties_give_its_identity_and_acls() -> None:
    identity, secure = session_security(
        {"zookeeper.set.acl": "true", "zookeeper.jaas.config": ENTRY}
    )
    assert identity is not None and identity.username == "kafka" and secure
    assert session_security({}) == (None, False)
    with pytest.raises(SecurityConfigError) as raised:
        session_security({"zookeeper.set.acl": "yes"})
    assert raised.value.key == "zookeeper.set.acl"
