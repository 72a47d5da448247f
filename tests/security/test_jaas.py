from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.security.errors import SecurityConfigError
from tierlog.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
    parse_jaas_entries,
)

KEY = "listener.name.sasl_ssl.plain.sasl.jaas.config"


def test_plain_entry_as_kafka_documents_it() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";'
    )
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag == "required"
    assert dict(entry.options) == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }


def test_scram_entry_without_options_and_oauth_options() -> None:
    assert parse_jaas_config(f"{SCRAM_LOGIN_MODULE} required;").options == {}
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule Required "
        'unsecuredLoginStringClaim_sub="thePrincipalName" '
        "unsecuredValidatorRequiredScope='LOGIN_TO_KAFKA' "
        'unsecuredValidatorAllowableClockSkewMs="3000";'
    )
    assert entry.control_flag == "required"
    assert entry.option("unsecuredValidatorRequiredScope") == "LOGIN_TO_KAFKA"
    assert entry.option("unsecuredValidatorAllowableClockSkewMs") == "3000"


def test_comments_escapes_and_bare_words() -> None:
    entry = parse_jaas_config(
        '/* a comment */ x.y.Module optional // another\n key=bare-word.v1 q="a\\"b\\\\c";'
    )
    assert entry.login_module == "x.y.Module"
    assert dict(entry.options) == {"key": "bare-word.v1", "q": 'a"b\\c'}


def test_repr_hides_secrets() -> None:
    entry = parse_jaas_config(
        f'{PLAIN_LOGIN_MODULE} required username="admin" password="pw1" user_bob="pw2";'
    )
    shown = repr(entry)
    assert "pw1" not in shown and "pw2" not in shown
    assert "admin" in shown


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "Login module not specified"),
        ("x.Module", "control flag not specified"),
        ("x.Module mandatory;", "Invalid login module control flag 'mandatory'"),
        ("x.Module required username=;", "Value not specified for key 'username'"),
        ("x.Module required iterations=4096;", "Value not specified for key 'iterations'"),
        ('x.Module required username="a"', "not terminated by semi-colon"),
        ('x.Module required username="a;', "unterminated quoted value"),
        ("x.A required; x.B required;", "contains 2 login modules, should be 1"),
    ],
)
def test_errors_name_the_key_and_the_reason(text: str, reason: str) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        parse_jaas_config(text, KEY)
    assert caught.value.key == KEY
    assert reason in caught.value.reason


def test_several_entries_read_in_order() -> None:
    entries = parse_jaas_entries('a.A required x="1"; b.B sufficient;')
    assert [(e.login_module, e.control_flag) for e in entries] == [
        ("a.A", "required"),
        ("b.B", "sufficient"),
    ]


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_values = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=30)


@given(st.dictionaries(_names, _values, max_size=6))
def test_any_options_written_quoted_read_back(options: dict[str, str]) -> None:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = (
        "org.example.Module required "
        + " ".join(f"{k}={quote(v)}" for k, v in options.items())
        + ";"
    )
    assert dict(parse_jaas_config(text).options) == options
