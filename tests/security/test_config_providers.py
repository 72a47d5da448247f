from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.security.config_providers import masked, resolve
from tierlog.security.errors import SecurityConfigError

PROVIDERS = {
    "config.providers": "file,env",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
}


def test_file_and_env_references(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("ssl.key.password=k3y\nadmin.password = adm1n\n")
    props = {
        **PROVIDERS,
        "ssl.key.password": f"${{file:{secrets}:ssl.key.password}}",
        "sasl.jaas.config": (
            f'x.M required password="${{env:ADMIN_PW}}" other="${{file:{secrets}:admin.password}}";'
        ),
        "untouched": "${vault:a:b}",
        "log.dirs": "/data",
    }
    resolved = resolve(props, environ={"ADMIN_PW": "from-env"})
    assert resolved["ssl.key.password"] == "k3y"
    assert resolved["sasl.jaas.config"] == 'x.M required password="from-env" other="adm1n";'
    assert resolved["untouched"] == "${vault:a:b}"  # not a configured provider: left as written
    assert resolved["log.dirs"] == "/data"


def test_without_providers_nothing_changes() -> None:
    props = {"a": "${env:HOME}"}
    assert resolve(props, environ={"HOME": "/root"}) == props


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("${env:NOPE}", "NOPE is not set"),
        ("${file:/no/such/file:key}", "cannot read"),
        ("${file::key}", "needs a path"),
    ],
)
def test_unresolvable_references_name_the_key(value: str, reason: str) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        resolve({**PROVIDERS, "ssl.key.password": value}, environ={})
    assert caught.value.key == "ssl.key.password" and reason in caught.value.reason


def test_missing_key_in_file(tmp_path: Path) -> None:
    (tmp_path / "s.properties").write_text("a=1\n")
    with pytest.raises(SecurityConfigError, match="has no key 'b'"):
        resolve({**PROVIDERS, "x": f"${{file:{tmp_path}/s.properties:b}}"})


def test_unknown_provider_class_and_env_allowlist() -> None:
    with pytest.raises(SecurityConfigError) as caught:
        resolve({"config.providers": "vault", "config.providers.vault.class": "com.x.Vault"})
    assert caught.value.key == "config.providers.vault.class"
    limited = {
        **PROVIDERS,
        "config.providers.env.param.allowlist.pattern": "KAFKA_.*",
        "a": "${env:SECRET}",
    }
    with pytest.raises(SecurityConfigError, match="allowlist"):
        resolve(limited, environ={"SECRET": "x"})


def test_directory_provider(tmp_path: Path) -> None:
    (tmp_path / "db_pw").write_text("dirpw")
    props = {
        "config.providers": "dir",
        "config.providers.dir.class": (
            "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
        ),
        "p": f"${{dir:{tmp_path}:db_pw}}",
    }
    assert resolve(props)["p"] == "dirpw"


def test_masked_copy_for_logs() -> None:
    shown = masked({"ssl.key.password": "k", "sasl.jaas.config": "x", "log.dirs": "/d"})
    assert shown == {
        "ssl.key.password": "[hidden]",
        "sasl.jaas.config": "[hidden]",
        "log.dirs": "/d",
    }


def test_broker_config_resolves_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tierlog.broker.config import BrokerConfig

    monkeypatch.setenv("TIERLOG_TEST_LOG_DIR", str(tmp_path / "logs"))
    properties = tmp_path / "server.properties"
    properties.write_text(
        "config.providers=env\n"
        "config.providers.env.class="
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "log.dirs=${env:TIERLOG_TEST_LOG_DIR}\n"
    )
    config = BrokerConfig.load(properties)
    assert config.log_dirs == [tmp_path / "logs"]
    monkeypatch.delenv("TIERLOG_TEST_LOG_DIR")
    with pytest.raises(SecurityConfigError) as caught:
        BrokerConfig.load(properties)
    assert caught.value.key == "log.dirs"


def test_tool_command_config_resolves_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tierlog.tools.client_config import ClientSettings, ToolError

    monkeypatch.setenv("TIERLOG_TEST_PW", "pw-from-env")
    command_config = tmp_path / "client.properties"
    command_config.write_text(
        "config.providers=env\n"
        "config.providers.env.class="
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "sasl.password=${env:TIERLOG_TEST_PW}\n"
    )
    settings = ClientSettings.from_options("127.0.0.1:9092", str(command_config))
    # Resolved, and the provider keys themselves are not passed to the client library.
    assert settings.properties == {"sasl.password": "pw-from-env"}
    monkeypatch.delenv("TIERLOG_TEST_PW")
    with pytest.raises(ToolError, match="TIERLOG_TEST_PW is not set"):
        ClientSettings.from_options("127.0.0.1:9092", str(command_config))
