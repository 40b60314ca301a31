"""headwater.config: the server's settings from a properties file, --set and options."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.config import (
    SETTINGS,
    ConfigError,
    ServerConfig,
    as_mapping,
    defaults,
    load,
    parse_properties,
)


def test_defaults_are_the_documented_ones() -> None:
    config = load()
    assert config == ServerConfig()
    assert (config.host, config.port) == ("127.0.0.1", 8088)
    assert config.pull_table_scan_enabled is True
    shown = defaults()
    assert shown["listeners"] == "http://127.0.0.1:8088"
    assert shown["bootstrap.servers"] == ""
    assert set(shown) == {s.key for s in SETTINGS}


def test_properties_file_then_set_then_options(tmp_path: Path) -> None:
    file = tmp_path / "node.properties"
    file.write_text(
        "# a comment\n! another\n"
        "ksql.service.id = from_file\n"
        "listeners=http://0.0.0.0:9000\n"
        "ksql.query.pull.table.scan.enabled: false\n"
        "state.dir=/var/lib/\\\n    headwater\n",
        encoding="utf-8",
    )
    config = load(
        file,
        ["ksql.service.id=from_set", "ksql.query.pull.max.allowed.offset.lag=100"],
        bootstrap_servers="kafka:9092",
        service_id=None,
    )
    assert config.service_id == "from_set"
    assert config.listener == ("0.0.0.0", 9000)
    assert config.pull_table_scan_enabled is False
    assert config.state_dir == "/var/lib/headwater"
    assert config.pull_max_allowed_offset_lag == 100
    assert config.bootstrap_servers == "kafka:9092"
    assert as_mapping(config)["ksql.service.id"] == "from_set"
    assert load(file, ["ksql.service.id=x"], service_id="opt").service_id == "opt"


def test_unknown_key_is_an_error_naming_the_closest() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown setting 'ksql.query.pull.table.scan.enable' "
        r"\(did you mean 'ksql.query.pull.table.scan.enabled'\?\)",
    ):
        load(overrides=["ksql.query.pull.table.scan.enable=true"])
    with pytest.raises(ConfigError, match="unknown setting 'zzz'"):
        load(overrides=["zzz=1"])


def test_unknown_key_in_a_file_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "bad.properties"
    file.write_text("ksql.servce.id=x\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"bad.properties: unknown setting 'ksql.servce.id' "
        r"\(did you mean 'ksql.service.id'\?\)",
    ):
        load(file)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("ksql.query.pull.table.scan.enabled=yes", "expected true or false"),
        ("ksql.query.pull.max.allowed.offset.lag=-1", r"expected an integer in \[0, "),
        ("ksql.query.pull.max.concurrent.requests=many", "invalid literal"),
        ("listeners=http://localhost", "expected http://HOST:PORT"),
        ("ksql.service.id=has space", "letters, digits"),
        ("novalue", "expected key=value"),
        ("=x", "expected key=value"),
    ],
)
def test_bad_values_are_errors_naming_the_key(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(overrides=[item])


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(tmp_path / "nope.properties")


def test_parse_properties_separators_and_blank_values() -> None:
    assert parse_properties("a=1\nb: 2\nc 3\nd=\n  e = x=y \n") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "x=y",
    }


def test_cluster_settings_and_client_tags() -> None:
    config = load(
        overrides=[
            "client.tag.zone=z2",
            "client.tag.cluster=c1",
            "num.standby.replicas=2",
            "rack.aware.assignment.tags=zone, cluster",
            "cluster.peers=a:1,b:2",
            "ksql.advertised.listener=http://10.0.0.7:8088",
            "cluster.auth.secret=s",
            "ksql.heartbeat.send.interval.ms=50",
        ]
    )
    assert config.client_tags == (("cluster", "c1"), ("zone", "z2"))
    assert config.standby_replicas == 2 and config.rack_tags == ("zone", "cluster")
    assert config.peers == ("a:1", "b:2") and config.advertised == "10.0.0.7:8088"
    assert config.auth_secret == "s" and config.heartbeat_send_interval_ms == 50
    assert load().advertised == "127.0.0.1:8088"
    assert defaults()["num.standby.replicas"] == "1"


def test_heartbeat_settings_must_fit_together() -> None:
    with pytest.raises(ConfigError, match="heartbeat settings"):
        load(overrides=["ksql.heartbeat.window.ms=100"])


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["listeners=https://0.0.0.0:8443"], "needs ssl.certificate.location"),
        (["ssl.certificate.location=c.pem"], "go together"),
        (["authentication.method=BASIC"], "needs authentication.basic.credentials.file"),
        (["authentication.method=DIGEST"], "expected NONE or BASIC"),
    ],
)
def test_security_settings_that_do_not_fit_together(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(overrides=items)


def test_security_settings() -> None:
    config = load(
        overrides=[
            "listeners=https://0.0.0.0:8443",
            "ssl.certificate.location=c.pem",
            "ssl.key.location=k.pem",
            "authentication.method=basic",
            "authentication.basic.credentials.file=users",
            "authentication.skip.paths=/info, /x/*",
        ]
    )
    assert config.tls and config.scheme == "https" and config.auth_method == "BASIC"
    assert config.auth_skip_paths == ("/info", "/x/*") and config.auth_roles == ("*",)
    assert as_mapping(config)["ssl.key.location"] == "k.pem"
    from headwater.config import as_text

    assert as_text(config)["listeners"] == "https://0.0.0.0:8443"
    assert ServerConfig().scheme == "http"


def test_peer_urls_follow_the_listener() -> None:
    from headwater.cluster.tls import PeerTls, client_context, peer_url

    assert peer_url(None, "h:1", "/lag") == "http://h:1/lag"
    assert peer_url(PeerTls(), "h:1", "/lag") == "https://h:1/lag"
    assert client_context(None) is None
    context = client_context(PeerTls())
    assert context is not None and context.check_hostname


def test_secrets_are_never_shown_as_text() -> None:
    from headwater.config import as_text

    config = load(overrides=["cluster.auth.secret=s3cret", "ssl.key.password=pw"])
    shown = as_text(config)
    assert shown["cluster.auth.secret"] == shown["ssl.key.password"] == "[hidden]"
    assert "s3cret" not in repr(shown) and "pw" not in shown.values()
    assert config.auth_secret == "s3cret"


def test_tls_files_are_checked_before_the_server_starts(
    self_signed: tuple[Path, Path], tmp_path: Path
) -> None:
    import subprocess

    from headwater.server import check_tls

    cert, key = self_signed
    check_tls(load(overrides=[f"ssl.certificate.location={cert}", f"ssl.key.location={key}"]))
    for items in (
        [f"ssl.certificate.location={tmp_path / 'nope.pem'}", f"ssl.key.location={key}"],
        [f"ssl.certificate.location={cert}", f"ssl.key.location={cert}"],
        [
            f"ssl.certificate.location={cert}",
            f"ssl.key.location={key}",
            f"ssl.ca.location={tmp_path / 'nope.pem'}",
        ],
    ):
        with pytest.raises(ConfigError, match="TLS files"):
            check_tls(load(overrides=items))
    encrypted = tmp_path / "encrypted.pem"
    subprocess.run(
        [
            "openssl",
            "pkey",
            "-in",
            str(key),
            "-aes256",
            "-passout",
            "pass:pw",
            "-out",
            str(encrypted),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    base = [f"ssl.certificate.location={cert}", f"ssl.key.location={encrypted}"]
    check_tls(load(overrides=[*base, "ssl.key.password=pw"]))
    for wrong in ([], ["ssl.key.password=guess"]):  # never a terminal prompt
        with pytest.raises(ConfigError, match="TLS files"):
            check_tls(load(overrides=[*base, *wrong]))
