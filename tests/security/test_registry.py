from __future__ import annotations

import pytest

from tierlog.security.acl_authorizer import AclAuthorizer
from tierlog.security.authenticator import ListenerAuthenticator
from tierlog.security.errors import SecurityConfigError
from tierlog.security.registry import authenticator_class, open_authorizer


@pytest.mark.parametrize(
    "name",
    [
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "tierlog.security.AclAuthorizer",
    ],
)
def test_kafkas_and_tierlogs_authorizer_names(name: str) -> None:
    authorizer = open_authorizer(name, {"super.users": "User:admin"})
    assert isinstance(authorizer, AclAuthorizer)


def test_no_name_means_no_authorizer_and_unknown_names_are_refused() -> None:
    assert open_authorizer("", {}) is None and open_authorizer(None, {}) is None
    with pytest.raises(SecurityConfigError) as caught:
        open_authorizer("com.example.Mine", {})
    assert caught.value.key == "authorizer.class.name" and "AclAuthorizer" in caught.value.reason


def test_principal_builder() -> None:
    assert authenticator_class(None) is ListenerAuthenticator
    assert authenticator_class("tierlog.security.ListenerAuthenticator") is ListenerAuthenticator
    with pytest.raises(SecurityConfigError, match=r"principal\.builder\.class"):
        authenticator_class("x.Y")
