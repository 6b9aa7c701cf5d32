"""Where the per-user secret lives: ``$NBAGENT_DATA_DIR``, else an existing secret's old folder, else the platform's folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs
import pytest

from nbagent.record import signing


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway home folder, with no NBAGENT_DATA_DIR and no XDG_DATA_HOME."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NBAGENT_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def old_secret(folder: Path) -> Path:
    """A secret written by an nbagent from before platformdirs, in ``folder``/nbagent."""
    (folder / "nbagent").mkdir(parents=True)
    secret = folder / "nbagent" / "secret"
    secret.write_bytes(b"s" * 32)
    return secret


def test_nbagent_data_dir_wins_over_everything(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_secret(home / ".local" / "share")
    monkeypatch.setenv("NBAGENT_DATA_DIR", "~/elsewhere")
    assert signing.data_dir() == home / "elsewhere"
    assert signing.secret_path() == home / "elsewhere" / "secret"


def test_a_secret_in_the_old_default_folder_is_kept(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = old_secret(home / ".local" / "share")
    assert signing.secret_path() == secret
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))  # set later: the secret stays where it is
    assert signing.secret_path() == secret


def test_a_secret_under_the_old_xdg_data_home_is_kept(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))
    secret = old_secret(home / "xdg")
    old_secret(home / ".local" / "share")  # the XDG one was the one in use
    assert signing.secret_path() == secret


def test_a_linked_old_secret_is_kept_so_that_it_is_refused_rather_than_silently_replaced(home: Path) -> None:
    (home / ".local" / "share" / "nbagent").mkdir(parents=True)
    (home / ".local" / "share" / "nbagent" / "secret").symlink_to(home / "nowhere")
    assert signing.data_dir() == home / ".local" / "share" / "nbagent"
    with pytest.raises(OSError):
        signing.load_secret()


def test_without_an_old_secret_the_platform_folder_is_used(home: Path) -> None:
    expected = Path(platformdirs.user_data_dir("nbagent", appauthor=False))
    if sys.platform == "darwin":
        assert expected == home / "Library" / "Application Support" / "nbagent"
    elif sys.platform.startswith("linux"):
        assert expected == home / ".local" / "share" / "nbagent"  # the XDG default, as before
    assert signing.data_dir() == expected
    made = signing.load_secret()
    assert made is not None and (expected / "secret").read_bytes() == made
    assert signing.data_dir() == expected  # and it stays there
    assert os.stat(expected).st_mode & 0o777 == 0o700


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_DATA_HOME is the Linux convention")
def test_on_linux_the_platform_folder_follows_xdg_data_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))
    assert signing.data_dir() == home / "xdg" / "nbagent"
