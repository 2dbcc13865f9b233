"""Server settings (design §5): MEMFS_* variables, matching flags, refusals at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memfs.config import Settings, load
from memfs.errors import InvalidRequest

INTEGERS = {
    "MEMFS_PORT": ("port", 8750),
    "MEMFS_WORKERS": ("workers", 1),
    "MEMFS_PAGE_ITEMS": ("page_items", 200),
    "MEMFS_MEMORY_BYTES": ("memory_bytes", 102_400),
    "MEMFS_WEBHOOK_BODY_BYTES": ("webhook_body_bytes", 262_144),
    "MEMFS_WEBHOOK_TOLERANCE_SECONDS": ("webhook_tolerance_seconds", 300),
    "MEMFS_RUN_CONCURRENCY": ("run_concurrency", 4),
}


def _refused(env: dict[str, str], overrides: dict[str, object | None] | None = None) -> str:
    with pytest.raises(InvalidRequest) as caught:
        load(env, overrides or {})
    return caught.value.message


def test_defaults_are_the_documented_ones() -> None:
    settings = load({}, {})
    assert settings == Settings()
    assert settings.data == Path("data")
    assert settings.admin_key is None
    assert (settings.host, settings.port) == ("127.0.0.1", 8750)
    for _var, (name, default) in INTEGERS.items():
        assert getattr(settings, name) == default, name


def test_unrelated_environment_is_ignored() -> None:
    assert load({"HOME": "/root", "PORT": "x", "MEMFS": "y"}, {}) == Settings()


def test_environment_variables_are_read() -> None:
    env = {
        "MEMFS_DATA": "/srv/memfs",
        "MEMFS_ADMIN_KEY": "a-long-enough-admin-key",
        "MEMFS_HOST": "0.0.0.0",
        "MEMFS_PORT": "9000",
        "MEMFS_WORKERS": "3",
        "MEMFS_PAGE_ITEMS": "50",
        "MEMFS_MEMORY_BYTES": "2048",
        "MEMFS_WEBHOOK_BODY_BYTES": "4096",
        "MEMFS_WEBHOOK_TOLERANCE_SECONDS": "60",
        "MEMFS_RUN_CONCURRENCY": "8",
    }
    settings = load(env, {})
    assert settings.data == Path("/srv/memfs")
    assert settings.admin_key == "a-long-enough-admin-key"
    assert settings.host == "0.0.0.0"
    assert (settings.port, settings.workers, settings.page_items) == (9000, 3, 50)
    assert (settings.memory_bytes, settings.webhook_body_bytes) == (2048, 4096)
    assert (settings.webhook_tolerance_seconds, settings.run_concurrency) == (60, 8)


def test_ipv6_and_localhost_hosts_are_accepted() -> None:
    for host in ("::1", "::", "localhost", "127.0.0.1", "10.1.2.3"):
        assert load({"MEMFS_HOST": host}, {}).host == host


def test_flags_override_the_environment() -> None:
    env = {"MEMFS_PORT": "9000", "MEMFS_PAGE_ITEMS": "50", "MEMFS_HOST": "0.0.0.0"}
    settings = load(env, {"port": "9100", "page_items": None, "host": "127.0.0.1"})
    assert settings.port == 9100
    assert settings.page_items == 50  # a flag not given (None) leaves the variable
    assert settings.host == "127.0.0.1"
    assert load({"MEMFS_DATA": "/a"}, {"data": "/b"}).data == Path("/b")


def test_a_bad_flag_is_refused_even_when_the_variable_is_good() -> None:
    message = _refused({"MEMFS_PORT": "9000"}, {"port": "http"})
    assert "--port" in message and "http" in message


@pytest.mark.parametrize("var", sorted(INTEGERS))
def test_every_integer_refuses_non_integers_and_out_of_range(var: str) -> None:
    for bad in ("", "abc", "1.5", "-1", "0", "1e3", "0x10", "+5", "١٢", "99999999999"):
        message = _refused({var: bad})
        assert var in message, (var, bad, message)
        assert "integer" in message


def test_port_range_is_1_to_65535() -> None:
    assert load({"MEMFS_PORT": "1"}, {}).port == 1
    assert load({"MEMFS_PORT": "65535"}, {}).port == 65535
    message = _refused({"MEMFS_PORT": "65536"})
    assert "MEMFS_PORT" in message and "65535" in message


@pytest.mark.parametrize("host", ["", "example.com", "256.1.1.1", "127.0.0.1:80", "a b"])
def test_bad_host_is_refused_naming_the_variable(host: str) -> None:
    message = _refused({"MEMFS_HOST": host})
    assert "MEMFS_HOST" in message


@pytest.mark.parametrize("key", ["", "short", "x" * 15, "has a space in it!!", "tab\there-x-x-x-x"])
def test_bad_admin_key_is_refused_without_echoing_it(key: str) -> None:
    message = _refused({"MEMFS_ADMIN_KEY": key})
    assert "MEMFS_ADMIN_KEY" in message
    assert "16" in message
    if key:
        assert key not in message


def test_bad_admin_key_flag_names_the_flag() -> None:
    message = _refused({}, {"admin_key": "tiny"})
    assert "--admin-key" in message


def test_empty_data_folder_is_refused() -> None:
    message = _refused({"MEMFS_DATA": ""})
    assert "MEMFS_DATA" in message


def _memfs(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", "--data", str(tmp_path / "data"), "serve", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


def test_serve_with_a_bad_port_flag_exits_with_one_clear_line(tmp_path: Path) -> None:
    done = _memfs(tmp_path, "--port", "notaport")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "--port" in lines[0] and "notaport" in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    # It failed before doing anything: no admin key was generated.
    assert not (tmp_path / "data" / "admin.key").exists()


def test_serve_with_a_bad_variable_exits_with_one_clear_line(tmp_path: Path) -> None:
    done = _memfs(tmp_path, env={"MEMFS_PAGE_ITEMS": "lots"})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "MEMFS_PAGE_ITEMS" in lines[0]
    assert not (tmp_path / "data" / "admin.key").exists()


def test_command_settings_are_off_by_default_and_checked() -> None:
    assert load({}, {}).allow_commands is False and load({}, {}).run_user == "nobody"
    assert load({"MEMFS_ALLOW_COMMANDS": "1"}, {}).allow_commands is True
    assert load({"MEMFS_ALLOW_COMMANDS": "1"}, {"allow_commands": None}).allow_commands
    assert load({}, {"allow_commands": True}).allow_commands is True
    assert load({"MEMFS_RUN_USER": "memfs-run"}, {}).run_user == "memfs-run"
    for env in ({"MEMFS_ALLOW_COMMANDS": "maybe"}, {"MEMFS_RUN_USER": "root"}):
        with pytest.raises(InvalidRequest, match=next(iter(env))):
            load(env, {})


def test_objects_settings_name_a_bucket_folder() -> None:
    from memfs.config import load_objects, objects

    assert objects(load({}, {})).bucket is None  # unset: the data folder
    where = load_objects({"MEMFS_OBJECTS": "s3://team-memfs/a/b/"}, {})
    assert (where.bucket, where.prefix, where.region) == ("team-memfs", "a/b", "us-east-1")
    where = load_objects(
        {"MEMFS_OBJECTS": "s3://one-bucket", "MEMFS_S3_REGION": "eu-west-1"},
        {"objects": "s3://other-bucket/p", "s3_endpoint": "http://127.0.0.1:8333/"},
    )
    assert (where.bucket, where.prefix) == ("other-bucket", "p")  # the flag wins
    assert (where.endpoint, where.region) == ("http://127.0.0.1:8333", "eu-west-1")
    # load_objects ignores the server's settings: a CLI command must not fail on them
    assert load_objects({"MEMFS_PORT": "nope"}, {}).bucket is None


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("MEMFS_OBJECTS", "bucket-without-scheme"),
        ("MEMFS_OBJECTS", "s3://UPPER"),
        ("MEMFS_OBJECTS", "s3://ab"),
        ("MEMFS_OBJECTS", "s3://-leading-hyphen"),
        ("MEMFS_OBJECTS", "s3://good-bucket/../escape"),
        ("MEMFS_OBJECTS", "s3://good-bucket/a/./b"),
        ("MEMFS_S3_ENDPOINT", "127.0.0.1:8333"),
        ("MEMFS_S3_ENDPOINT", "ftp://host"),
        ("MEMFS_S3_REGION", "us east"),
    ],
)
def test_bad_objects_settings_are_refused_naming_the_variable(var: str, value: str) -> None:
    from memfs.config import load_objects

    message = _refused({var: value})
    assert var in message
    with pytest.raises(InvalidRequest, match=var):
        load_objects({var: value}, {})
