"""Exposure by transport (docs/contract.md §4, §6): diagnostics for local clients, fixed reasons for remote ones."""

from __future__ import annotations

from aivault.broker.exposure import UNVERIFIED_ROOT, redact_for_transport, redact_status

STATUS = {"enabled": True, "phase": "degraded", "filesIndexed": 3, "filesDue": 0, "filesFailed": 1,
          "degradedRoots": [{"root": "/home/me/.claude/projects", "reason": "cannot list /home/me/x: EACCES"},
                            {"root": "/mnt/old", "reason": "root does not exist"}],
          "lastReconcileAt": 1, "lastSweepCompletedAt": 1, "generation": 4}


def test_local_transports_get_full_diagnostics() -> None:
    """Desktop IPC and same-machine RPC see the raw reasons."""
    for t in ("desktop-ipc", "same-machine-rpc"):
        assert redact_status(STATUS, t) == STATUS


def test_relay_and_paired_clients_get_the_fixed_reason_and_the_same_count() -> None:
    """Remote clients get one fixed sentence per degraded root; the array length is kept."""
    for t in ("relay", "paired"):
        out = redact_status(STATUS, t)
        assert [r["reason"] for r in out["degradedRoots"]] == [UNVERIFIED_ROOT, UNVERIFIED_ROOT]
        assert {k: v for k, v in out.items() if k != "degradedRoots"} == \
            {k: v for k, v in STATUS.items() if k != "degradedRoots"}


def test_hits_keep_their_metadata_and_snippet_and_drop_a_missing_codex_home() -> None:
    """cwd, title and snippet cross as indexed; a remote-only CODEX_HOME is omitted."""
    hit = {"agent": "codex", "sessionId": "s", "title": "t", "cwd": "/srv/app", "evidence": {"snippet": "[[x]]"},
           "resumeCommand": "CODEX_HOME=/srv/.codex codex resume s"}
    out = redact_for_transport(hit, "paired")
    assert out["cwd"] == "/srv/app" and out["title"] == "t" and out["evidence"] == {"snippet": "[[x]]"}
    assert out["resumeCommand"] == "codex resume s"
    assert redact_for_transport(hit, "desktop-ipc") == hit


def test_every_hit_a_merged_search_step_carries_is_redacted() -> None:
    """A page's rows and a hybrid search's hits step reach a paired client with their hits redacted, as a
    search's hits are; the same machine sees them whole."""
    from aivault.broker.exposure import redact_shard

    hit = {"sessionId": "s", "resumeCommand": "CODEX_HOME=/srv/c codex resume s"}
    page = {"identity": "i", "rows": [{"sessionId": "s", "hit": hit}]}
    hits = {"identity": "i", "hits": [[7, hit]]}
    assert redact_shard(page, "paired")["rows"][0]["hit"]["resumeCommand"] == "codex resume s"
    assert redact_shard(hits, "relay")["hits"] == [[7, {**hit, "resumeCommand": "codex resume s"}]]
    assert redact_shard(hits, "same-machine-rpc") == hits and redact_shard(page, "desktop-ipc") == page
