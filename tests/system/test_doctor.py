"""`aivault doctor` and the status census: every root looked at, and no silent zero."""

from __future__ import annotations

import json
from pathlib import Path

from aivault.home import Home
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import cli_env, run_cli
from tests.support.daemons import DaemonProcess


def _args(roots: dict[str, Path], *extra: str) -> list[str]:
    out = ["--no-default-roots"]
    for agent, path in roots.items():
        out += ["--root", f"{agent}={path}"]
    return out + list(extra)


def test_doctor_reports_each_root_what_it_found_and_what_it_skipped(home: Home, roots: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    """For every root: found/absent, units, indexed sessions and skips by reason; healthy roots exit 0."""
    c = ClaudeWriter(roots["claude"])
    c.user("a healthy claude session about gnus")
    with c.path.open("ab") as fh:
        fh.write(b"{not json\n")
    CodexWriter(roots["codex"]).user("and a codex one").assistant("about okapis")
    run_cli(home.path, "index", *_args(roots), check=True)
    missing = tmp_path / "nowhere"
    out = run_cli(home.path, "doctor", "--json", *_args(roots), "--root", f"claude={missing}")
    report = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout  # an absent explicit root is a warning, not a silent zero
    rows = {r["path"]: r for a in report["agents"] for r in a["roots"]}
    claude = rows[str(roots["claude"])]
    assert claude["state"] == "found" and claude["units"] == 1 and claude["indexed"]["sessions"] == 1
    assert claude["skipped"] == {"malformed-line": 1}
    assert rows[str(roots["codex"])]["indexed"]["sessions"] == 1
    assert rows[str(missing)]["state"] == "absent"
    assert any(str(missing) in w for w in report["warnings"])
    human = run_cli(home.path, "doctor", *_args(roots)).stdout
    assert "claude (Claude Code): 1 session(s) indexed" in human and "1 × malformed line" in human


def test_a_root_of_transcript_shaped_files_that_yields_nothing_is_loud(home: Home, roots: dict[str, Path]) -> None:
    """A Codex root full of rollout-*.jsonl files that parse to no message is a warning naming the path and
    what was expected, a non-zero exit from doctor, and a degraded root in status (within the contract)."""
    day = roots["codex"] / "2026" / "03" / "01"
    day.mkdir(parents=True)
    for i in range(3):
        (day / f"rollout-2026-03-01T10-00-0{i}-0199aaaa-bbbb-7ccc-8ddd-00000000000{i}.jsonl").write_text(
            '{"some":"future format"}\n')
    run_cli(home.path, "index", *_args(roots), check=True)
    out = run_cli(home.path, "doctor", "--json", *_args(roots))
    assert out.returncode != 0
    report = json.loads(out.stdout)
    [warning] = [w for w in report["warnings"] if "no session was indexed" in w]
    assert str(roots["codex"]) in warning and "rollout-" in warning
    status = json.loads(run_cli(home.path, "status", "--json", check=True).stdout)
    assert status["phase"] == "idle" and any(
        d["root"] == str(roots["codex"]) and "no session was indexed" in d["reason"] for d in status["degradedRoots"])
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        live = d.status()
        assert live["phase"] == "degraded"
        assert any(x["root"] == str(roots["codex"]) for x in live["degradedRoots"])
        through_daemon = run_cli(home.path, "doctor", "--json", *_args(roots))
        assert through_daemon.returncode != 0 and json.loads(through_daemon.stdout)["mode"] == "daemon"
    finally:
        d.stop()


def test_skip_lines_add_up_reasons_of_one_kind_and_name_them() -> None:
    """Skips of one kind (bookkeeping:<type>) are one figure with their types named; duplicates are not losses."""
    from aivault.thin.render import skip_lines

    lines = skip_lines({"cline": {"bookkeeping:api_req_started": 2, "bookkeeping:checkpoint": 1},
                        "codex": {"malformed-line": 3, "duplicate_stream": 4, "unknown_record:world_event": 1}})
    assert lines == [
        "cline: 3 × bookkeeping record (api_req_started, checkpoint; no message in it)",
        "codex: 3 × malformed line (not JSON, or not a record this reader knows), "
        "1 × record of an unknown type (world_event; a newer format? aivault doctor lists them)",
    ]


def test_an_encrypted_store_is_present_but_not_readable(home: Home, tmp_path: Path) -> None:
    """With the default roots, a Windsurf Cascade folder of .pb files is reported with its path, file count and
    why it cannot be read, in --json and in the text report, without failing the check."""
    fake = tmp_path / "user"
    cascade = fake / ".codeium" / "windsurf" / "cascade"
    cascade.mkdir(parents=True)
    (cascade / "0d9f.pb").write_bytes(b"\x0a\x10encrypted")
    env = cli_env(home.path, HOME=str(fake), XDG_CONFIG_HOME=str(fake / ".config"),
                  XDG_DATA_HOME=str(fake / ".local" / "share"))
    out = run_cli(home.path, "doctor", "--json", env=env)
    report = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout
    assert report["unreadable"] == [{"label": "Windsurf Cascade", "path": str(cascade), "files": 1,
                                     "reason": "encrypted protobuf (.pb) with no public key or schema"}]
    human = run_cli(home.path, "doctor", env=env).stdout
    assert f"Windsurf Cascade: present but not readable: {cascade} (1 file(s))" in human
    assert json.loads(run_cli(home.path, "doctor", "--json", "--no-default-roots", env=env).stdout)["unreadable"] == []
