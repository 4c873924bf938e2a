"""Encrypted agent stores (scanner.encrypted): found at their Linux and macOS places, counted, never read."""

from __future__ import annotations

from pathlib import Path

from aivault.scanner.encrypted import STORES, present


def test_nothing_is_reported_on_a_machine_without_them(tmp_path: Path) -> None:
    """An empty home holds no encrypted store; an empty Cascade folder does not count as one."""
    assert present({"HOME": str(tmp_path)}) == []
    (tmp_path / ".codeium" / "windsurf" / "cascade").mkdir(parents=True)
    assert present({"HOME": str(tmp_path)}) == []


def test_windsurf_and_trae_are_found_with_the_reason(tmp_path: Path) -> None:
    """Cascade .pb files (Linux and macOS share the place) and Trae's database under ~/.config (Linux, or
    $XDG_CONFIG_HOME) and ~/Library/Application Support (macOS) are each one entry naming why they are left out."""
    cascade = tmp_path / ".codeium" / "windsurf" / "cascade"
    cascade.mkdir(parents=True)
    for name in ("a.pb", "b.pb", "index.json"):
        (cascade / name).write_bytes(b"\x08\x01")
    mac = tmp_path / "Library" / "Application Support" / "Trae CN" / "ModularData" / "ai-agent" / "database.db"
    xdg = tmp_path / "xdg" / "Trae" / "ModularData" / "ai-agent" / "database.db"
    for db in (mac, xdg):
        db.parent.mkdir(parents=True)
        db.write_bytes(b"SQLCipher bytes")
    found = present({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert [(f["label"], f["path"], f["files"]) for f in found] == [
        ("Windsurf Cascade", str(cascade), 2), ("Trae IDE", str(xdg), 1), ("Trae IDE", str(mac), 1)]
    reasons = {s.label: s.reason for s in STORES}
    assert all(f["reason"] == reasons[str(f["label"])] for f in found) and "encrypted" in reasons["Trae IDE"]
