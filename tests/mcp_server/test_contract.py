"""The agent tools' table (memory_platform_client.contract) against every side that states a tool
again: the REST API's OpenAPI schema (drf-spectacular, from the serializers), the SDK's methods (their
signatures, and what each one sends), both MCP servers' tool lists (over their real transports) and
the operations the platform's /mcp calls (those of the REST views).

Each side is compared by a function listing the differences. The tests assert none for the real
sides, then that each function finds one when a single side is altered: every argument of every
tool taken out of the table or made (not) required, an argument or a tool added to one side alone,
an enum value dropped, an SDK method that drops an argument."""

import copy
import dataclasses
import inspect
import json
import re
from pathlib import Path
from urllib.parse import quote

import anyio
import httpx2 as httpx
import pytest
from django.test import Client
from django.urls import resolve
from memory_platform_client import AsyncMemoryClient, MemoryClient
from memory_platform_client.contract import TOOLS, TOOLS_BY_NAME, Arg, Tool, markdown, sdk_method
from memory_platform_client.mcp_server.tools import build_server

from apps.core.api import operation_of
from apps.core.schema import DATETIME_PATTERN
from apps.mcp_server.backend import operation_arguments, operation_for
from tests.factories import ClientFactory
from tests.mcp_server.mcp_client import http_transport, run, stdio_transport

API = "/api/v1/"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
ARGUMENTS = [pytest.param(tool, arg, id=f"{tool.name}.{arg.name}") for tool in TOOLS for arg in tool.args]
TOOL_ARGUMENTS = [pytest.param(tool, arg, id=f"{tool.name}.{arg.name}") for tool in TOOLS for arg in tool.tool_args]
ENUM_ARGUMENTS = [param for param in ARGUMENTS if param.values[1].enum]
BY_TOOL = [pytest.param(tool, id=tool.name) for tool in TOOLS]
EXTRA = Arg("extra", "string", "An argument only one side has.")


@pytest.fixture(scope="module")
def schema():
    return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


@pytest.fixture(scope="module")
def listed():
    """The tools as an MCP server lists them, in process (the transports are checked below)."""
    return {tool.name: tool for tool in anyio.run(build_server(lambda ctx: None).list_tools)}


def without(tool: Tool, name: str) -> Tool:
    return dataclasses.replace(tool, args=tuple(arg for arg in tool.args if arg.name != name))


def altered(tool: Tool, name: str, **changes) -> Tool:
    return dataclasses.replace(
        tool, args=tuple(dataclasses.replace(arg, **changes) if arg.name == name else arg for arg in tool.args)
    )


def applies(arg: Arg, selected: dict) -> bool:
    return not arg.only_for or any(value in arg.only_for for value in selected.values())


# The OpenAPI schema ---------------------------------------------------------------------------------


def resolved(schema: dict, node: dict) -> dict:
    """A property's schema without $ref, a lone allOf, or the null branch of an anyOf."""
    while True:
        if "$ref" in node:
            node = {**schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]], **node}
            node.pop("$ref")
        elif len(node.get("allOf", ())) == 1:
            node = {**node, **resolved(schema, node["allOf"][0])}
            node.pop("allOf")
        elif "anyOf" in node and {"type": "null"} in node["anyOf"] and "properties" not in node:
            rest = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
            node = {**{key: value for key, value in node.items() if key != "anyOf"}, **rest[0]}
        else:
            return node


def shape(read, node: dict) -> dict:
    """What the table states of an argument, read from a JSON Schema (OpenAPI's or MCP's)."""
    node = read(node)
    many = node.get("type") == "array"
    item = read(node["items"]) if many else node
    if many and ("role" in item.get("properties", {})):
        kind, many = "messages", False
    elif item.get("enum"):
        kind = "string"
    elif item.get("type") == "string" and (
        item.get("pattern") == DATETIME_PATTERN or item.get("format") == "date-time"
    ):
        kind = "datetime"
    else:
        kind = item.get("type", "object")
    lengths = ("minItems", "maxItems") if node.get("type") == "array" else ("minimum", "maximum")
    return {
        "type": kind,
        "many": many,
        "enum": set(item.get("enum", ())),
        "minimum": node.get(lengths[0]),
        "maximum": node.get(lengths[1]),
        "default": node.get("default"),
    }


def rest_fields(schema: dict, operation: dict) -> dict:
    """(where, name) → (required, shape) of every parameter and body field of an operation."""
    read = lambda node: resolved(schema, node)  # noqa: E731
    fields = {
        (parameter["in"], parameter["name"]): (parameter.get("required", False), shape(read, parameter["schema"]))
        for parameter in operation.get("parameters", ())
    }
    if "requestBody" in operation:
        body = read(operation["requestBody"]["content"]["application/json"]["schema"])
        for name, node in body["properties"].items():
            fields["body", name] = (name in body.get("required", ()), shape(read, node))
    return fields


def compared(where: str, arg: Arg, required: bool, found: dict, *, default) -> list[str]:
    """How an argument as a side states it differs from the table's row."""
    problems = []
    if required != arg.required:
        problems.append(f"{where}: {arg.name} is {'required' if required else 'optional'} there")
    if found["type"] != arg.type or found["many"] != arg.many:
        problems.append(f"{where}: {arg.name} is {found['type']}{'[]' if found['many'] else ''} there")
    if found["enum"] != set(arg.enum):
        problems.append(f"{where}: {arg.name} takes {sorted(found['enum'])} there, {sorted(arg.enum)} here")
    if found["default"] != default:
        problems.append(f"{where}: {arg.name} defaults to {found['default']!r} there, {default!r} here")
    return problems


def selector_problems(tool: Tool, schema: dict) -> list[str]:
    """A path that names a memory type exists for the types the table lists, and for no other."""
    name = tool.selector.name
    template = re.escape(API + tool.path).replace(re.escape(f"{{{name}}}"), "([a-z_]+)")
    found = {
        match.group(1)
        for path, methods in schema["paths"].items()
        if (match := re.fullmatch(template, path)) and tool.method.lower() in methods
    }
    if found != set(tool.selector.enum):
        return [f"{tool.method} {tool.path} exists for {sorted(found)}, the table lists {sorted(tool.selector.enum)}"]
    return []


def rest_problems(tool: Tool, schema: dict) -> list[str]:
    problems = selector_problems(tool, schema) if tool.selector else []
    problems += [
        f"{arg.name} is in the path, so required" for arg in tool.args if arg.where == "path" and not arg.required
    ]
    for endpoint in tool.endpoints():
        where = f"{endpoint.method} {endpoint.path}"
        operation = schema["paths"].get(API + endpoint.path, {}).get(endpoint.method.lower())
        if operation is None:
            problems.append(f"{where} is not in the OpenAPI schema")
            continue
        if operation["operationId"] != endpoint.operation_id:
            problems.append(f"{where} is operation {operation['operationId']}, not {endpoint.operation_id}")
        response = operation["responses"].get(str(tool.status), {}).get("content", {}).get("application/json")
        answered = response["schema"]["$ref"].rsplit("/", 1)[1] if response else None
        if str(tool.status) not in operation["responses"] or answered != endpoint.result:
            problems.append(f"{where} answers {answered} with {sorted(operation['responses'])}")
        fields = rest_fields(schema, operation)
        table = {
            (arg.where, arg.wire_name): arg
            for arg in tool.args
            if applies(arg, endpoint.selected) and arg.name not in endpoint.selected
        }
        for key in sorted(set(fields) - set(table)):
            problems.append(f"{where}: REST's {key[0]} field {key[1]} is not in the table")
        for key in sorted(set(table) - set(fields)):
            problems.append(f"{where}: the table's {key[0]} argument {key[1]} is not a REST field")
        for key in sorted(set(table) & set(fields)):
            arg, (required, found) = table[key], fields[key]
            problems += compared(where, arg, required, found, default=arg.default)
            if found["minimum"] is not None and (arg.minimum is None or arg.minimum < found["minimum"]):
                problems.append(f"{where}: {arg.name} is at least {found['minimum']} there")
            if arg.maximum is not None and found["maximum"] is not None and arg.maximum > found["maximum"]:
                problems.append(f"{where}: {arg.name} is at most {found['maximum']} there")
    return problems


def test_the_table_is_the_rest_api(schema):
    assert {tool.name: rest_problems(tool, schema) for tool in TOOLS} == {tool.name: [] for tool in TOOLS}


@pytest.mark.parametrize(("tool", "arg"), ARGUMENTS)
def test_rest_notices_an_argument_the_table_lacks_or_gets_wrong(schema, tool, arg):
    assert rest_problems(without(tool, arg.name), schema)
    assert rest_problems(altered(tool, arg.name, required=not arg.required), schema)


@pytest.mark.parametrize(("tool", "arg"), ENUM_ARGUMENTS)
def test_rest_notices_an_enum_value_one_side_lacks(schema, tool, arg):
    assert rest_problems(altered(tool, arg.name, enum=arg.enum[1:]), schema)
    assert rest_problems(altered(tool, arg.name, enum=(*arg.enum, "extra")), schema)


@pytest.mark.parametrize("tool", BY_TOOL)
def test_rest_notices_a_field_only_one_side_has(schema, tool):
    assert rest_problems(dataclasses.replace(tool, args=(*tool.args, EXTRA)), schema)

    endpoint = tool.endpoints()[0]
    grown = copy.deepcopy(schema)
    operation = grown["paths"][API + endpoint.path][endpoint.method.lower()]
    operation.setdefault("parameters", []).append({"in": "query", "name": "extra", "schema": {"type": "string"}})
    assert "REST's query field extra" in " ".join(rest_problems(tool, grown))


def test_rest_notices_what_search_types_lacked(schema):
    """The drift this table ended: MCP's search could not ask for topic pages."""
    search = TOOLS_BY_NAME["search_memory"]
    types = search.arg("memory_types").enum
    assert "topic" in types
    assert rest_problems(altered(search, "memory_types", enum=tuple(t for t in types if t != "topic")), schema)


# The platform's operations behind /mcp ----------------------------------------------------------------


def sample(arg: Arg, index: int):
    """A value of the argument's type, different for each argument of a tool."""
    if arg.enum:
        value = arg.enum[index % len(arg.enum)]
        return [value] if arg.many else value
    return {
        "string": f"{arg.name}-{index}",
        "datetime": f"2024-05-{index + 1:02d}T10:00:00+00:00",
        "integer": (arg.minimum or 0) + 2 + index,
        "boolean": not arg.default,
        "object": {"tag": f"{arg.name}-{index}"},
        "messages": [{"role": "user", "content": f"turn {index}"}],
    }[arg.type]


def samples(tool: Tool, endpoint, args) -> dict:
    values = {arg.name: sample(arg, index) for index, arg in enumerate(args) if applies(arg, endpoint.selected)}
    return {**values, **endpoint.selected}


def url_of(tool: Tool, endpoint, arguments: dict) -> str:
    path = endpoint.path
    for arg in tool.args:
        if arg.where == "path" and arg.name not in endpoint.selected:
            path = path.replace(f"{{{arg.wire_name}}}", quote(str(arguments[arg.name]), safe=""))
    return API + path


def platform_problems(tool: Tool) -> list[str]:
    problems = []
    for endpoint in tool.endpoints():
        arguments = samples(tool, endpoint, tool.tool_args)
        view = resolve(url_of(tool, endpoint, arguments)).func.view_class
        served, called = operation_of(view, endpoint.method), operation_for(tool, arguments)
        if called is not served:
            problems.append(
                f"{endpoint.method} {endpoint.path} calls {served.__qualname__}, /mcp {called.__qualname__}"
            )
            continue
        try:
            operation_arguments(called, tool, arguments)
        except TypeError as exc:
            problems.append(str(exc))
    return problems


def test_mcp_calls_the_operation_of_each_rest_endpoint():
    assert {tool.name: platform_problems(tool) for tool in TOOLS} == {tool.name: [] for tool in TOOLS}


def test_mcp_notices_an_operation_that_is_not_the_rest_endpoints(monkeypatch):
    from apps.mcp_server import backend

    monkeypatch.setitem(backend.OPERATIONS, "get_memory", backend.OPERATIONS["memory_history"])
    assert platform_problems(TOOLS_BY_NAME["get_memory"])
    with pytest.raises(TypeError, match="takes no profile_id"):
        operation_arguments(backend.OPERATIONS["list_entities"], TOOLS_BY_NAME["get_profile"], {"profile_id": "p"})


# The SDK --------------------------------------------------------------------------------------------


def sdk_problems(tool: Tool, method) -> list[str]:
    """Each named parameter of the SDK method is one of the tool's arguments, required alike, with
    the platform's default or None (not sent); an argument it does not name goes through **kwargs."""
    parameters = dict(inspect.signature(method).parameters)
    open_ended = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())
    named = {name: p for name, p in parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    problems = [
        f"SDK {tool.sdk}: {name} is not in the table" for name in named if name not in {a.name for a in tool.args}
    ]
    for arg in tool.args:
        parameter = named.get(arg.name)
        if parameter is None:
            if not open_ended:
                problems.append(f"SDK {tool.sdk} takes no {arg.name}")
            continue
        if (parameter.default is inspect.Parameter.empty) != arg.required:
            problems.append(f"SDK {tool.sdk}: {arg.name} is {'not ' if arg.required else ''}required there")
        if not arg.required and parameter.default not in (None, arg.default):
            problems.append(f"SDK {tool.sdk}: {arg.name} defaults to {parameter.default!r}")
    return problems


def recording_client() -> tuple[MemoryClient, list]:
    """An SDK client whose requests are recorded and answered with an empty page."""
    sent = []

    def answer(request):
        sent.append(request)
        return httpx.Response(200, json={"count": 0, "results": [], "messages": [], "messages_next_offset": None})

    return MemoryClient(
        "http://platform.test", "mp_test", http_client=httpx.Client(transport=httpx.MockTransport(answer))
    ), sent


def request_problems(tool: Tool, endpoint, call) -> list[str]:
    """What `call(arguments)` (the SDK method) sends for every argument of the table set, against
    where the table says REST takes each one."""
    arguments = samples(tool, endpoint, tool.args)
    client, sent = recording_client()
    with client:
        call(client, arguments)
    if len(sent) != 1:
        return [f"SDK {tool.sdk} made {len(sent)} requests"]
    request = sent[0]
    expected = {"query": {}, "body": {}, "header": {}}
    for arg in tool.args:
        if arg.name in arguments and arg.where != "path":
            value = arguments[arg.name]
            expected[arg.where][arg.wire_name] = str(value) if arg.where != "body" else value
    got = {
        "query": dict(request.url.params),
        "body": json.loads(request.content) if request.content else {},
        "header": {name: request.headers.get(name) for name in expected["header"]},
    }
    problems = []
    if (request.method, request.url.path) != (endpoint.method, url_of(tool, endpoint, arguments)):
        problems.append(f"SDK {tool.sdk} calls {request.method} {request.url.path}")
    for where in expected:
        if got[where] != expected[where]:
            problems.append(f"SDK {tool.sdk} sends {where} {got[where]}, the table says {expected[where]}")
    return problems


def call_sdk(tool: Tool):
    return lambda client, arguments: sdk_method(client, tool)(**arguments)


ENDPOINTS = [
    pytest.param(tool, endpoint, id=f"{tool.name}-{endpoint.path}") for tool in TOOLS for endpoint in tool.endpoints()
]


@pytest.mark.parametrize("client_class", [MemoryClient, AsyncMemoryClient])
def test_the_sdk_methods_take_the_tables_arguments(client_class):
    client = client_class("http://platform.test", "mp_test")
    problems = {tool.name: sdk_problems(tool, sdk_method(client, tool)) for tool in TOOLS}
    assert problems == {tool.name: [] for tool in TOOLS}


@pytest.mark.parametrize(("tool", "endpoint"), ENDPOINTS)
def test_each_sdk_method_sends_each_argument_where_rest_takes_it(tool, endpoint):
    assert request_problems(tool, endpoint, call_sdk(tool)) == []


@pytest.mark.parametrize(("tool", "arg"), ARGUMENTS)
def test_the_sdk_checks_notice_an_argument_on_one_side_only(tool, arg):
    method = sdk_method(MemoryClient("http://platform.test", "mp_test"), tool)
    signature = inspect.signature(method)
    if arg.name in signature.parameters:
        assert sdk_problems(without(tool, arg.name), method)
        assert sdk_problems(altered(tool, arg.name, required=not arg.required), method)

    def dropping(client, arguments):  # an SDK method that forgets the argument
        sdk_method(client, tool)(**{name: value for name, value in arguments.items() if name != arg.name})

    endpoint = next(e for e in tool.endpoints() if applies(arg, e.selected))
    if not arg.required and arg.name not in endpoint.selected:
        assert request_problems(tool, endpoint, dropping)

    def grown(*args, **kwargs): ...  # the SDK method with a parameter the table lacks

    extra = inspect.Parameter("extra", inspect.Parameter.KEYWORD_ONLY, default=None)
    grown.__signature__ = inspect.Signature(
        sorted([*signature.parameters.values(), extra], key=lambda parameter: parameter.kind)
    )
    assert f"SDK {tool.sdk}: extra is not in the table" in sdk_problems(tool, grown)


def test_the_sdk_search_takes_a_time_window():
    """The drift this table ended: the SDK's search had no time_window."""
    search = TOOLS_BY_NAME["search_memory"]
    assert "time_window" in inspect.signature(MemoryClient.search).parameters
    assert request_problems(search, search.endpoints()[0], call_sdk(search)) == []


# The MCP servers -----------------------------------------------------------------------------------


def mcp_problems(tool: Tool, listed_tool) -> list[str]:
    problems = []
    if (listed_tool.title, listed_tool.description) != (tool.title, tool.description):
        problems.append(f"{tool.name}: title or description differs")
    hints = listed_tool.annotations
    effect = (
        "read"
        if hints.read_only_hint
        else "destructive"
        if hints.destructive_hint
        else "edit"
        if hints.idempotent_hint
        else "write"
    )
    if effect != tool.effect:
        problems.append(f"{tool.name} is {effect} there")
    schema = listed_tool.input_schema
    read = lambda node: resolved({"components": {"schemas": schema.get("$defs", {})}}, node)  # noqa: E731
    properties, required = schema.get("properties", {}), set(schema.get("required", ()))
    table = {arg.name: arg for arg in tool.tool_args}
    problems += [f"{tool.name}: MCP's argument {name} is not in the table" for name in properties if name not in table]
    problems += [f"{tool.name}: the table's {name} is not an MCP argument" for name in table if name not in properties]
    for name in sorted(set(table) & set(properties)):
        arg, found = table[name], shape(read, properties[name])
        problems += compared(f"MCP {tool.name}", arg, name in required, found, default=arg.default_for_tool)
        if (found["minimum"], found["maximum"]) != (arg.minimum, arg.maximum):
            problems.append(f"MCP {tool.name}: {name} is within {found['minimum']}..{found['maximum']}")
        if properties[name].get("description") != arg.description:
            problems.append(f"MCP {tool.name}: {name} is described otherwise")
    return problems


def tool_list_problems(listed_tools: dict) -> list[str]:
    return (
        [f"MCP lists {name}, the table does not" for name in listed_tools if name not in TOOLS_BY_NAME]
        + [f"the table has {tool.name}, MCP does not list it" for tool in TOOLS if tool.name not in listed_tools]
        + [
            problem
            for tool in TOOLS
            if tool.name in listed_tools
            for problem in mcp_problems(tool, listed_tools[tool.name])
        ]
    )


@pytest.mark.django_db(transaction=True)
def test_both_mcp_servers_list_the_tables_tools(mcp_server, live_server):
    client = ClientFactory()

    async def scenario(session):
        return {tool.name: tool for tool in (await session.list_tools()).tools}

    over_http = run(http_transport(mcp_server.url, {"Authorization": f"Api-Key {client.raw_key}"}), scenario)
    over_stdio = run(stdio_transport(live_server.url, client.raw_key), scenario)

    assert tool_list_problems(over_http) == []
    assert tool_list_problems(over_stdio) == []


@pytest.mark.parametrize(("tool", "arg"), TOOL_ARGUMENTS)
def test_mcp_notices_an_argument_the_table_lacks_or_gets_wrong(listed, tool, arg):
    assert mcp_problems(without(tool, arg.name), listed[tool.name])
    assert mcp_problems(altered(tool, arg.name, required=not arg.required), listed[tool.name])
    assert mcp_problems(altered(tool, arg.name, description=arg.description + " More."), listed[tool.name])
    if arg.enum:
        assert mcp_problems(altered(tool, arg.name, enum=arg.enum[1:]), listed[tool.name])


@pytest.mark.parametrize("tool", BY_TOOL)
def test_mcp_notices_an_argument_or_a_tool_only_one_side_has(listed, tool):
    assert mcp_problems(dataclasses.replace(tool, args=(*tool.args, EXTRA)), listed[tool.name])

    grown = listed[tool.name].model_copy(deep=True)
    grown.input_schema["properties"]["extra"] = {"type": "string"}
    assert mcp_problems(tool, grown)

    assert tool_list_problems({name: value for name, value in listed.items() if name != tool.name})
    assert tool_list_problems({**listed, f"{tool.name}_too": listed[tool.name]})


# The docs ----------------------------------------------------------------------------------------


def test_the_docs_show_the_table():
    """docs/api.md holds `python -m memory_platform_client.contract`'s output as it is now."""
    assert markdown() in DOCS.read_text()


def test_every_search_hit_has_a_text_field(schema):
    """Issue 53: one text field on every hit, so a typed client (the TypeScript SDK's types, generated from
    this schema) renders any hit, and the MCP search tool shows it whatever the memory type."""
    from apps.search.registry import SOURCES

    union = schema["components"]["schemas"]["SearchResult"]
    members = {
        name: schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
        for name, ref in union["discriminator"]["mapping"].items()
    }

    assert set(members) == set(SOURCES)
    for memory_type, member in members.items():
        assert member["properties"]["text"]["type"] == "string", memory_type
        assert "text" in member["required"], memory_type
