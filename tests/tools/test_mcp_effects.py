"""The MCP rules, pure (nbagent/tools/mcp/effects.py, config.py, adapter.content): names, effects, claims, configurations, results."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from nbagent.tools.mcp import McpConfigError, parse
from nbagent.tools.mcp.adapter import DESCRIPTION_LIMIT, SCHEMA_LIMIT, bounded_description, bounded_schema, content
from nbagent.tools.mcp.effects import claims, effect, tool_name, verdict

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("db", "query", "mcp__db__query"),
        ("my-db", "run_sql", "mcp__my-db__run_sql"),
        ("my.db", "query", None),  # a dot: cleaned, with a hash
        ("my_db", "query", "mcp__my_db__query"),
        ("a__b", "c", None),  # a server name with '__' could collide with server 'a', tool 'b__c'
        ("a", "b__c", "mcp__a__b__c"),
        ("x" * 40, "y" * 40, None),  # too long: cut, with a hash
        ("db", "ünïcode tool", None),
    ],
)
def test_tool_names_fit_the_api_and_never_collide(server: str, tool: str, expected: str | None) -> None:
    name = tool_name(server, tool)
    assert API_NAME.match(name), name
    if expected is not None:
        assert name == expected
    else:
        assert re.search(r"_[0-9a-f]{8}$", name), name


def test_names_that_clean_alike_stay_apart() -> None:
    pairs = [("my.db", "q"), ("my_db", "q"), ("my-db", "q"), ("a__b", "c"), ("a", "b__c"), ("a_b", "c"), ("x" * 60, "q"), ("x" * 61, "q")]
    names = [tool_name(s, t) for s, t in pairs]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    ("annotations", "override", "trusted", "expected"),
    [
        # A server of the user's own settings: its annotations count, but a hint never makes a read (repeated after a crash).
        (None, None, True, "write"),
        ({}, None, True, "write"),
        ({"readOnlyHint": True}, None, True, "write"),
        ({"read_only_hint": True}, None, True, "write"),  # the SDK's field names
        ({"readOnlyHint": False}, None, True, "write"),
        ({"destructiveHint": True}, None, True, "irreversible"),
        ({"destructive_hint": True}, None, True, "irreversible"),
        ({"destructiveHint": False}, None, True, "write"),
        ({"readOnlyHint": True, "destructiveHint": True}, None, True, "write"),  # destructiveHint only means something for a non-read
        ({"readOnlyHint": False, "destructiveHint": True}, None, True, "irreversible"),
        ({"idempotentHint": True}, None, True, "write"),
        ({"readOnlyHint": "yes"}, None, True, "write"),  # not a boolean: no claim
        ({"destructiveHint": True}, "write", True, "write"),  # the user's override wins
        ({"readOnlyHint": True}, "irreversible", True, "irreversible"),
        ({}, "read", True, "read"),  # only the user's own settings make a read
        # A project's .mcp.json server: its claims do not count; the schema's default (destructive) holds: it asks.
        (None, None, False, "irreversible"),
        ({}, None, False, "irreversible"),
        ({"readOnlyHint": True}, None, False, "irreversible"),
        ({"destructiveHint": False}, None, False, "irreversible"),
        ({"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}, None, False, "irreversible"),
        ({"destructiveHint": True}, None, False, "irreversible"),
        ({"readOnlyHint": True}, "read", False, "read"),  # an override given to effect() wins (the adapter gives none for a project)
    ],
)
def test_effects_from_annotations(annotations: dict[str, Any] | None, override: Any, trusted: bool, expected: str) -> None:
    assert effect(annotations, override, trusted=trusted) == expected


def test_claims_say_what_the_server_says_and_nbagents_verdict_is_apart() -> None:
    said = claims("db", "drop", {"destructiveHint": True, "openWorldHint": False, "title": "Drop a table"})
    assert (
        said == "tool 'drop' titled 'Drop a table' of MCP server 'db' is: destructive, stays inside its own system (hints, not guarantees)."
    )
    assert "nothing about its effects" in claims("db", "q", None)
    assert "settings" not in said and "project" not in said  # the server's words only: nbagent's are the verdict's
    assert verdict("write") == "Your settings make this tool 'write', whatever the server claims."
    assert verdict(None, trusted=False) == "This server comes from a project's .mcp.json, so its claims are not used: each call asks."
    assert verdict(None) == ""


def test_config_in_claude_format() -> None:
    servers = parse(
        {
            "files": {"command": "npx", "args": ["-y", "server", "${HOME_DIR}"], "env": {"TOKEN": "${TOKEN:-none}"}},
            "api": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN:-x}"}},
            "inferred": {"url": "http://127.0.0.1:1/mcp", "effects": {"drop": "irreversible"}, "timeout": 5},
        },
        environ={"HOME_DIR": "/home/me"},
    )
    files, api, inferred = servers
    assert (files.transport, files.command, files.args, dict(files.env)) == (
        "stdio",
        "npx",
        ("-y", "server", "/home/me"),
        {"TOKEN": "none"},
    )
    assert (api.transport, api.url, dict(api.headers)) == ("http", "https://example.test/mcp", {"Authorization": "Bearer x"})
    assert inferred.transport == "http" and dict(inferred.effects) == {"drop": "irreversible"} and inferred.timeout == 5
    assert "x" not in api.describe().replace("example", "") and "Authorization" in api.describe()  # header names, never values
    assert parse({"mcpServers": {"a": {"command": "a"}}})[0].name == "a"  # a .mcp.json's wrapper
    assert files.key() != parse({"files": {"command": "npx"}})[0].key()


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ({"a": {"type": "sse", "url": "http://x"}}, "not supported"),
        ({"a": {"command": ""}}, "needs a command"),
        ({"a": {"command": "x", "args": "y"}}, "args must be a list"),
        ({"a": {"url": "ftp://x"}}, "must start with http"),
        ({"a": {"command": "x", "colour": 1}}, "unknown keys"),
        ({"a": {"command": "x", "effects": {"t": "maybe"}}}, "effects must map"),
        ({"a": {"command": "x", "timeout": 0}}, "more than 0"),
        ({"a": {"command": "${NOT_SET_ANYWHERE}"}}, "is not set"),
        ({"a": "npx server"}, "must be a mapping"),
        (["a"], "mapping of name"),
    ],
)
def test_config_errors_say_what_to_change(servers: Any, says: str) -> None:
    with pytest.raises(McpConfigError, match=says):
        parse(servers, environ={})


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"content": [{"type": "text", "text": "3"}], "structuredContent": {"result": 3}}, ("3", False)),
        ({"content": [{"type": "text", "text": '{"a": 1}'}], "structuredContent": {"a": 1}}, ('{"a": 1}', False)),
        ({"content": [], "structuredContent": {"rows": [1, 2]}}, ('structured content: {"rows": [1, 2]}', False)),
        ({"content": [{"type": "text", "text": "no"}], "isError": True}, ("no", True)),
        (
            {"content": [{"type": "audio", "data": "AA", "mimeType": "audio/wav"}]},
            ("[a audio block (audio/wav) the model cannot read was left out]", False),
        ),
        ({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "hi"}}]}, ("[resource file:///a]\nhi", False)),
    ],
)
def test_results_as_tool_result_content(result: dict[str, Any], expected: tuple[Any, bool]) -> None:
    assert content(result) == expected


def test_an_image_result_is_an_image_block() -> None:
    blocks, is_error = content({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
    assert not is_error and blocks == [
        {"type": "text", "text": "a"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]


def test_values_taken_from_the_environment_into_env_and_headers_are_secrets() -> None:
    environ = {"TOKEN": "tok-from-env-123", "HOST": "db.example.test", "USER_KEY": "user-key-4567"}
    stdio, http = parse(
        {
            "s": {
                "command": "x",
                "args": ["--host", "${HOST}"],
                "env": {"T": "${TOKEN}", "LITERAL": "written-in-settings", "D": "${NONE:-dflt}"},
            },
            "h": {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${USER_KEY}"}},
        },
        environ=environ,
    )
    assert stdio.secrets == ("tok-from-env-123",)  # not an argument's, a literal or a default
    assert http.secrets == ("user-key-4567",)


@pytest.mark.parametrize(
    ("schema", "expected", "says"),
    [
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "object", "properties": {"a": {"type": "integer"}}}, ""),
        (None, {"type": "object"}, ""),
        ("not a schema", {"type": "object"}, ""),
        (
            {"type": "object", "properties": {"a": {"description": "x" * 40_000}, "b": {}}, "required": ["a", "zz"]},
            {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]},
            "was cut to its argument names",
        ),
        ({"type": "object", "properties": {f"p{i:05}" * 30: {} for i in range(300)}}, {"type": "object"}, "was left out"),
    ],
)
def test_a_tool_schema_is_bounded(schema: Any, expected: dict[str, Any], says: str) -> None:
    sent, cut = bounded_schema(schema)
    assert sent == expected and (says in cut if says else cut == "")
    assert len(json.dumps(sent)) <= SCHEMA_LIMIT


@pytest.mark.parametrize(
    ("length", "cut"),
    [(10, False), (DESCRIPTION_LIMIT, False), (DESCRIPTION_LIMIT + 1, True), (2_100_000, True)],
)
def test_a_tool_description_is_bounded(length: int, cut: bool) -> None:
    text = "d" * (length - 3) + "END" if length > 3 else "d" * length
    sent, said = bounded_description(text)
    assert len(sent) <= DESCRIPTION_LIMIT + 100
    assert (sent == text and said == "") if not cut else ("more characters not shown" in sent and f"{length:,} characters" in said)
