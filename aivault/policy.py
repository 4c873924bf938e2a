"""The persisted consent and retention policy (docs/contract.md §8, "Agent Session History").

``{enabled, historyDays}`` lives in ``policy.json`` in the data directory, written atomically.
The default is *disabled*: nothing is indexed until the user says so. ``historyDays`` null
means keep everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aivault.errors import PolicyInvalid
from aivault.home import Home, read_private, unusable, write_private

POLICY_FILE = "policy.json"


@dataclass(frozen=True, slots=True)
class Policy:
    enabled: bool = False
    history_days: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"enabled": self.enabled, "historyDays": self.history_days}


def load(home: Home) -> Policy:
    path = home.path / POLICY_FILE
    try:
        raw = json.loads(read_private(path).decode("utf-8"))
    except FileNotFoundError:
        return Policy()
    except OSError as exc:
        raise unusable(path, exc, "read") from exc
    except ValueError as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}. Fix it, or run `aivault disable` to rewrite it.") from exc
    if not isinstance(raw, dict):
        raise PolicyInvalid(f"{path} must hold a JSON object; run `aivault disable` to rewrite it")
    enabled = raw.get("enabled", False)
    days = raw.get("historyDays")
    if not isinstance(enabled, bool) or not (days is None or (isinstance(days, int) and days > 0)):
        raise PolicyInvalid(f"{path} has invalid values; run `aivault policy` to rewrite it")
    return Policy(enabled, days)


def save(home: Home, policy: Policy) -> None:
    if policy.history_days is not None and policy.history_days <= 0:
        raise PolicyInvalid("historyDays must be a positive number of days, or null to keep everything")
    home.ensure()
    try:
        write_private(home.path / POLICY_FILE, (json.dumps(policy.to_json(), indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise unusable(home.path / POLICY_FILE, exc, "write") from exc


# --- relay consent (docs/contract.md §8.1) -------------------------------------------------------
# Whether `aivault relay --stdio` on this machine answers: the owner's own switch, separate from the
# index's consent, so that enabling search on a client grants nothing on the machines it reaches.
RELAY_FILE = "relay.json"


def relay_allowed(home: Home) -> bool:
    path = home.path / RELAY_FILE
    try:
        raw = json.loads(read_private(path).decode("utf-8"))
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise unusable(path, exc, "read") from exc
    except ValueError as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}. Rewrite it with `aivault policy --relay on|off`.") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("enabled"), bool):
        raise PolicyInvalid(f"{path} must hold {{\"enabled\": true|false}}; rewrite it with "
                            "`aivault policy --relay on`")
    return bool(raw["enabled"])


def set_relay(home: Home, allowed: bool) -> None:
    home.ensure()
    try:
        write_private(home.path / RELAY_FILE, (json.dumps({"enabled": allowed}) + "\n").encode("utf-8"))
    except OSError as exc:
        raise unusable(home.path / RELAY_FILE, exc, "write") from exc
