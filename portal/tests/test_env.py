"""The strict environment helpers refuse what they cannot read."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_float, env_int, env_list, env_secret, env_str


def test_env_bool_accepts_only_clear_values(monkeypatch):
    for raw, expected in [("true", True), ("FALSE", False), ("1", True), ("off", False)]:
        monkeypatch.setenv("X_FLAG", raw)
        assert env_bool("X_FLAG", not expected) is expected
    monkeypatch.setenv("X_FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG must be true or false"):
        env_bool("X_FLAG", False)
    monkeypatch.delenv("X_FLAG")
    assert env_bool("X_FLAG", True) is True


def test_env_numbers_are_checked(monkeypatch):
    monkeypatch.setenv("X_NUM", "10s")
    with pytest.raises(ImproperlyConfigured, match="integer"):
        env_int("X_NUM", 1)
    with pytest.raises(ImproperlyConfigured, match="number"):
        env_float("X_NUM", 1.0)
    monkeypatch.setenv("X_NUM", "-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("X_NUM", 1, minimum=0)
    monkeypatch.setenv("X_NUM", "2.5")
    assert env_float("X_NUM", 1.0) == 2.5


def test_env_list_and_str(monkeypatch):
    monkeypatch.setenv("X_LIST", " a, b ,,c ")
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    monkeypatch.delenv("X_LIST")
    assert env_list("X_LIST", ["d"]) == ["d"]
    with pytest.raises(ImproperlyConfigured, match="X_REQ must be set"):
        env_str("X_REQ", required=True)


def test_env_secret_prefers_the_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET", "from-env")
    assert env_secret("X_SECRET") == "from-env"
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_secret("X_SECRET") == "from-file"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("X_SECRET")
