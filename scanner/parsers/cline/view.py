"""The two views of a Cline / Roo / Kilo task turned into messages (docs/formats.md §7); see scanner.parsers.cline.

**The join rule.** ``ui_messages.json`` is the timeline: every message the user saw, in order, with
its time. The model view (``api_conversation_history.json``) is used only for the *tool results the
UI never shows* — what a file read, listing or search returned — and for the exact input of a native
``tool_use``. Each such result is attached right after the UI ``tool`` message it answers: results
are queued per tool name in model-view order, and a UI tool message takes the first unused result
whose name belongs to its UI tool (``readFile`` -> ``read_file``, ``editedExistingFile`` ->
``replace_in_file``/``apply_diff``/…), preferring one whose ``[tool for 'path']`` header names the
same path. Results of tools whose output the UI already shows (commands, MCP calls, browser actions,
questions, completion) are never taken, so nothing is indexed twice; they and any result no UI
message claimed are counted (``duplicate_tool_result``, ``unmatched_tool_result``), not indexed.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aivault.scanner.model import KindName, Message, RoleName
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms

# Cline appends this to a command that waits for the user's approval (COMMAND_REQ_APP_STRING).
REQ_APP = "REQ_APP"
# How far down one tool's result queue a path match is looked for before taking the head.
PATH_LOOKAHEAD = 8

_XML_RESULT = re.compile(r"\[([A-Za-z_][\w-]*)(?: for '(.*?)')?\] Result:", re.S)
_ENVIRONMENT = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.S)
_WRAPPED = re.compile(r"^\s*<(task|feedback|answer|user_message)>\s*(.*?)\s*(?:</\1>\s*)?$", re.S)
_CWD = re.compile(r"# Current (?:Working|Workspace) Directory \((.+?)\) Files")
# Blocks the extension adds to a user turn: context, not speech, and the end of a tool's output.
_INJECTED_PREFIXES = ("<environment_details>", "[TASK RESUMPTION]", "<feedback>", "<answer>", "<user_message>")

_USER_SAYS = frozenset({"task", "user_feedback"})
_ASSISTANT_SAYS = frozenset({"text", "completion_result"})
_ASSISTANT_ASKS = frozenset({"followup", "plan_mode_respond", "act_mode_respond", "completion_result"})
_RESULTS = frozenset({"command_output", "browser_action_result", "mcp_server_response", "subtask_result",
                      "codebase_search_result"})
_SYSTEM = frozenset({"error", "error_retry", "diff_error", "clineignore_error", "rooignore_error",
                     "command_permission_denied", "info", "api_req_failed", "mistake_limit_reached",
                     "condense_context_error"})
# State the extension records for itself: request costs, checkpoints, hooks, progress, resumes.
BOOKKEEPING = frozenset({
    "api_req_started", "api_req_finished", "api_req_retried", "api_req_retry_delayed", "api_req_deleted",
    "deleted_api_reqs", "checkpoint_created", "checkpoint_saved", "shell_integration_warning",
    "shell_integration_warning_with_suggestion", "mcp_server_request_started", "mcp_notification",
    "task_progress", "hook_status", "hook_output_stream", "subagent", "subagent_usage",
    "conditional_rules_applied", "load_mcp_documentation", "generate_explanation", "condense_context",
    "sliding_window_truncation", "resume_task", "resume_completed_task", "condense", "summarize_task",
    "report_bug", "auto_approval_max_req_reached", "image", "user_edit_todos"})

# UI tool (ClineSayTool.tool) -> the model-view tool names that produce it.
_EDITS = frozenset({"replace_in_file", "apply_diff", "write_to_file", "search_and_replace", "insert_content",
                    "apply_patch", "edit_file", "search_replace", "edit"})
UI_TOOL_API: dict[str, frozenset[str]] = {
    "readFile": frozenset({"read_file"}), "listFilesTopLevel": frozenset({"list_files"}),
    "listFilesRecursive": frozenset({"list_files"}), "searchFiles": frozenset({"search_files"}),
    "listCodeDefinitionNames": frozenset({"list_code_definition_names"}), "editedExistingFile": _EDITS,
    "appliedDiff": _EDITS, "newFileCreated": _EDITS, "insertContent": _EDITS, "searchAndReplace": _EDITS,
    "fileDeleted": frozenset({"delete_file"}), "webFetch": frozenset({"web_fetch"}),
    "webSearch": frozenset({"web_search"}), "codebaseSearch": frozenset({"codebase_search"}),
    "fetchInstructions": frozenset({"fetch_instructions"}), "switchMode": frozenset({"switch_mode"}),
    "newTask": frozenset({"new_task"}), "updateTodoList": frozenset({"update_todo_list"}),
    "useSkill": frozenset({"use_skill"}), "runSlashCommand": frozenset({"run_slash_command"}),
    "summarizeTask": frozenset({"summarize_task"}), "generateImage": frozenset({"generate_image"}),
}
# Model-view tools whose output the UI already shows as its own message (command_output, an MCP or
# browser result, the user's answer): their results are never taken from the model view.
SHOWN_IN_UI = {
    "cline": frozenset({"execute_command", "ask_followup_question", "attempt_completion", "plan_mode_respond",
                        "act_mode_respond", "use_mcp_tool", "access_mcp_resource", "browser_action", "new_task",
                        "load_mcp_documentation", "condense", "report_bug", "use_subagents"}),
    "roo": frozenset({"execute_command", "ask_followup_question", "attempt_completion", "use_mcp_tool",
                      "access_mcp_resource", "browser_action", "condense", "report_bug"}),
}


def salvage_array(data: bytes) -> list[Any] | None:
    """The complete elements of a JSON array cut off mid-write; None when it is not an array."""
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    start = text.find("[")
    if start < 0 or text[:start].strip():
        return None
    decoder = json.JSONDecoder()
    items: list[Any] = []
    pos = start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return items
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return items
        items.append(value)


def _obj(text: str) -> Any:
    """The JSON a UI message's text holds, or None."""
    if not text or text[0] not in "{[":
        return None
    return loads_line(text.encode("utf-8", "surrogatepass"))


def _blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _block_text(content: object) -> str:
    parts = [b["text"] for b in _blocks(content) if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(parts).strip()


# --- tool results from the model view ----------------------------------------------------------------
@dataclass(slots=True)
class ApiResult:
    name: str
    target: str | None  # the "for '<path>'" of an XML result header
    input: Any  # a native tool_use's input (None for the XML tool protocol)
    output: str
    pos: int = 0
    used: bool = False


def api_tool_results(api: list[Any]) -> list[ApiResult]:
    """Every tool result of the model view in order: native tool_result blocks (named by their
    tool_use) and the XML protocol's ``[tool for 'x'] Result:`` block with the blocks after it."""
    uses: dict[str, tuple[str, Any]] = {}
    out: list[ApiResult] = []
    for msg in api:
        if not isinstance(msg, dict):
            continue
        blocks = _blocks(msg.get("content"))
        if msg.get("role") == "assistant":
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    uses[b["id"]] = (str(b.get("name") or ""), b.get("input"))
            continue
        if msg.get("role") != "user":
            continue
        current: ApiResult | None = None
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_result":
                name, tool_input = uses.get(str(b.get("tool_use_id")), ("", None))
                out.append(ApiResult(name, None, tool_input, _block_text(b.get("content")), len(out)))
                current = None
            elif b.get("type") == "text" and isinstance(b.get("text"), str):
                text = b["text"]
                m = _XML_RESULT.match(text.lstrip())
                if m:
                    current = ApiResult(m[1], m[2], None, text.lstrip()[m.end():].strip(), len(out))
                    out.append(current)
                elif current is not None and not text.lstrip().startswith(_INJECTED_PREFIXES):
                    current.output = (current.output + "\n" + text.strip()).strip()
                else:
                    current = None
    return out


class ToolResults:
    """The model view's results, handed to UI tool messages by the join rule (module docstring)."""

    def __init__(self, results: list[ApiResult], family: str) -> None:
        self.results = results
        self.shown = SHOWN_IN_UI[family]
        self.by_name: dict[str, deque[ApiResult]] = {}
        for r in results:
            if r.name not in self.shown:
                self.by_name.setdefault(r.name, deque()).append(r)

    def take(self, ui_tool: str, path: object) -> ApiResult | None:
        names = UI_TOOL_API.get(ui_tool) or frozenset({re.sub(r"(?<!^)([A-Z])", r"_\1", ui_tool).lower()})
        best: ApiResult | None = None
        for name in names:
            queue = self.by_name.get(name)
            if not queue:
                continue
            pick = queue[0]
            if isinstance(path, str) and path:
                pick = next((r for r in list(queue)[:PATH_LOOKAHEAD] if r.target == path), pick)
            if best is None or (pick.target == path) > (best.target == path) \
                    or ((pick.target == path) == (best.target == path) and pick.pos < best.pos):
                best = pick
        if best is not None:
            self.by_name[best.name].remove(best)
            best.used = True
        return best

    def count_unmatched(self, skips: dict[str, int]) -> None:
        for r in self.results:
            if not r.used:
                count_skip(skips, "duplicate_tool_result" if r.name in self.shown else "unmatched_tool_result")


# --- the UI view ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class Conversation:
    messages: list[Message] = field(default_factory=list)
    first_prompt: str | None = None
    times: list[int] = field(default_factory=list)  # times of bookkeeping records (activity, no message)

    def add(self, role: RoleName, kind: KindName, text: str, ts: int | None) -> None:
        text = text.strip()
        if text:
            self.messages.append(Message(role, kind, text, ts))


def _same_slot(a: dict[str, Any], b: dict[str, Any]) -> bool:
    kind = str(a.get("type"))
    return kind == b.get("type") and a.get(kind) == b.get(kind) \
        and str(b.get("text") or "").startswith(str(a.get("text") or ""))


def from_ui(ui: list[Any], results: ToolResults, skips: dict[str, int]) -> Conversation:
    conv = Conversation()
    items = []
    requested = False  # an api_req_started was seen: the model is answering from here on
    for m in ui:
        if isinstance(m, dict) and m.get("type") in ("say", "ask") and isinstance(m.get(m["type"]), str):
            items.append(m)
        else:
            count_skip(skips, "malformed-record")
    for i, m in enumerate(items):
        if m.get("partial") is True and i + 1 < len(items) and _same_slot(m, items[i + 1]):
            count_skip(skips, "partial-superseded")  # a streaming snapshot the final message replaced
            continue
        ts = to_epoch_ms(m.get("ts"))
        before = len(conv.messages)
        reasoning = m.get("reasoning")
        if isinstance(reasoning, str) and m[m["type"]] != "reasoning":
            conv.add("assistant", "thinking", reasoning, ts)
        text = m.get("text")
        text = text if isinstance(text, str) else ""
        name = m[m["type"]]
        requested = requested or name == "api_req_started"
        if m["type"] == "say" and name == "text" and not requested and conv.first_prompt is None:
            # Roo and Kilo record the task as the first say:text (Cline as say:task).
            conv.first_prompt = text if text.strip() else None
            conv.add("user", "text", text, ts)
        else:
            _ui_record(conv, m["type"], name, text, ts, results, skips)
        if isinstance(m.get("images"), list) and m["images"]:
            skips["image"] = skips.get("image", 0) + len(m["images"])
        if len(conv.messages) == before and ts is not None:
            conv.times.append(ts)
    return conv


def _ui_record(conv: Conversation, kind: str, name: str, text: str, ts: int | None, results: ToolResults,
               skips: dict[str, int]) -> None:
    if kind == "say" and name in _USER_SAYS:
        if name == "task" and conv.first_prompt is None and text.strip():
            conv.first_prompt = text
        conv.add("user", "text", text, ts)
    elif kind == "say" and name == "user_feedback_diff":
        edit = _obj(text)
        conv.add("user", "text", f"{edit.get('path', '')}\n{edit.get('diff', '')}" if isinstance(edit, dict)
                 else text, ts)
    elif (kind == "say" and name in _ASSISTANT_SAYS) or (kind == "ask" and name in _ASSISTANT_ASKS):
        conv.add("assistant", "text", _question_text(text), ts)
    elif name == "reasoning":
        conv.add("assistant", "thinking", text, ts)
    elif name == "tool":
        _tool(conv, text, ts, results)
    elif name in ("command", "browser_action_launch", "new_task"):
        key = {"command": "command", "browser_action_launch": "url", "new_task": "context"}[name]
        value = text[: -len(REQ_APP)].rstrip() if name == "command" and text.endswith(REQ_APP) else text
        call: dict[str, Any] = {key: value}
        if name == "browser_action_launch":
            call = {"action": "launch", **call}
        label = {"command": "execute_command", "browser_action_launch": "browser_action"}.get(name, name)
        conv.add("assistant", "tool_call", f"{label} {compact_json(call)}", ts)
    elif name in ("use_mcp_server", "browser_action", "use_subagents"):
        args = _obj(text)
        label = name
        if name == "use_mcp_server" and isinstance(args, dict):
            label = str(args.pop("type", None) or name)
            if isinstance(args.get("arguments"), str):
                args["arguments"] = _obj(args["arguments"]) or args["arguments"]
        conv.add("assistant", "tool_call", f"{label} {compact_json(args) if args is not None else text}", ts)
    elif name in _RESULTS:
        shown = _obj(text) if name == "browser_action_result" else None
        if isinstance(shown, dict):  # the screenshot is a data URL: not text anyone searches
            text = "\n".join(str(shown[k]) for k in ("currentUrl", "logs") if shown.get(k))
        conv.add("tool", "tool_result", text, ts)
    elif name in _SYSTEM:
        conv.add("system", "text", text, ts)
    elif name in BOOKKEEPING:
        count_skip(skips, f"bookkeeping:{name}")
    else:
        count_skip(skips, "unknown_record", f"{kind}:{name}")


def _question_text(text: str) -> str:
    """A followup / plan-mode message: its question or response, then its options."""
    obj = _obj(text)
    if not isinstance(obj, dict):
        return text
    head = obj.get("question") or obj.get("response") or obj.get("text") or ""
    options = obj.get("options") or obj.get("suggest") or []
    lines = [str(head)]
    for opt in options if isinstance(options, list) else []:
        answer = opt.get("answer") if isinstance(opt, dict) else opt
        if answer:
            lines.append(f"- {answer}")
    return "\n".join(lines)


def _tool(conv: Conversation, text: str, ts: int | None, results: ToolResults) -> None:
    obj = _obj(text)
    if not isinstance(obj, dict) or not isinstance(obj.get("tool"), str):
        conv.add("assistant", "tool_call", f"tool {text}", ts)
        return
    ui_tool = obj["tool"]
    result = results.take(ui_tool, obj.get("path"))
    if result is not None and result.input is not None:
        conv.add("assistant", "tool_call", f"{result.name} {compact_json(result.input)}", ts)
    else:
        conv.add("assistant", "tool_call", f"{ui_tool} {compact_json({k: v for k, v in obj.items() if k != 'tool'})}",
                 ts)
    if result is not None:
        conv.add("tool", "tool_result", result.output, ts)


# --- the model view alone (no ui_messages.json) --------------------------------------------------------
def from_api(api: list[Any], skips: dict[str, int]) -> Conversation:
    conv = Conversation()
    uses: dict[str, str] = {}
    for msg in api:
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            count_skip(skips, "malformed-record")
            continue
        ts = to_epoch_ms(msg.get("ts"))
        before = len(conv.messages)
        if msg["role"] == "assistant":
            _api_assistant(conv, _blocks(msg.get("content")), ts, uses, skips)
        else:
            _api_user(conv, _blocks(msg.get("content")), ts, skips)
        if len(conv.messages) == before and ts is not None:
            conv.times.append(ts)
    return conv


def _api_assistant(conv: Conversation, blocks: list[Any], ts: int | None, uses: dict[str, str],
                   skips: dict[str, int]) -> None:
    for b in blocks:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            conv.add("assistant", "text", str(b.get("text") or ""), ts)
        elif kind == "thinking":
            conv.add("assistant", "thinking", str(b.get("thinking") or ""), ts)
        elif kind == "tool_use":
            uses[str(b.get("id"))] = str(b.get("name") or "")
            conv.add("assistant", "tool_call", f"{b.get('name') or 'tool'} {compact_json(b.get('input'))}", ts)
        elif kind == "redacted_thinking":
            count_skip(skips, "redacted-thinking")
        else:
            count_skip(skips, "unknown_block", str(kind))


def _api_user(conv: Conversation, blocks: list[Any], ts: int | None, skips: dict[str, int]) -> None:
    in_result = False
    for b in blocks:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "tool_result":
            conv.add("tool", "tool_result", _block_text(b.get("content")), ts)
            in_result = False
        elif kind == "text" and isinstance(b.get("text"), str):
            text = b["text"].strip()
            m = _XML_RESULT.match(text)
            if m:
                conv.add("tool", "tool_result", text[m.end():], ts)
                in_result = True
                continue
            cleaned = _ENVIRONMENT.sub("", text).strip()
            if cleaned != text:
                count_skip(skips, "injected-context")
            if not cleaned:
                in_result = False
                continue
            if in_result and not cleaned.startswith(_INJECTED_PREFIXES) and conv.messages:
                last = conv.messages[-1]
                last.text = f"{last.text}\n{cleaned}".strip()
                continue
            in_result = False
            if cleaned.startswith("[TASK RESUMPTION]"):
                conv.add("system", "text", cleaned, ts)
                continue
            wrapped = _WRAPPED.match(cleaned)
            if wrapped and wrapped[1] == "task" and conv.first_prompt is None:
                conv.first_prompt = wrapped[2]
            conv.add("user", "text", wrapped[2] if wrapped else cleaned, ts)
        elif kind == "image":
            count_skip(skips, "image")
        else:
            count_skip(skips, "unknown_block", str(kind))


def cwd_from_environment(api: list[Any], ui: list[Any]) -> str | None:
    """The workspace the extension printed into the first request's environment details (a fallback
    for tasks the index does not list)."""
    texts: list[str] = []
    for msg in api[:2]:
        if isinstance(msg, dict) and msg.get("role") == "user":
            texts.append(_block_text(msg.get("content")))
    for m in ui[:8]:
        if isinstance(m, dict) and m.get("say") == "api_req_started" and isinstance(m.get("text"), str):
            req = _obj(m["text"])
            if isinstance(req, dict) and isinstance(req.get("request"), str):
                texts.append(req["request"])
    for text in texts:
        found = _CWD.search(text)
        if found:
            return found[1].strip()
    return None
