"""Writes src/contract.ts: the agent tools' table (the Python SDK's memory_platform_client.contract),
as data the TypeScript SDK builds its Vercel AI SDK tools from.

    .venv/bin/python clients/typescript/scripts/generate_contract.py > clients/typescript/src/contract.ts

tests/clients/test_typescript.py regenerates it and fails on drift."""

import json

from memory_platform_client.contract import TOOLS

HEADER = """\
/**
 * The agent tools' table, generated from the Python SDK's memory_platform_client.contract by
 * scripts/generate_contract.py. Do not edit: regenerate it (the platform's tests compare).
 */

export interface ArgRow {
  name: string;
  type: "string" | "datetime" | "integer" | "boolean" | "object" | "messages";
  description: string;
  required: boolean;
  where: "path" | "query" | "body" | "header";
  enum: readonly string[];
  many: boolean;
  minimum: number | null;
  maximum: number | null;
  default: unknown;
  tool_default: unknown;
  tool: boolean;
}

export interface ToolRow {
  name: string;
  title: string;
  description: string;
  effect: "read" | "write" | "edit" | "destructive";
  method: string;
  path: string;
  sdk: string;
  args: readonly ArgRow[];
}

"""

ARG_FIELDS = (
    "name",
    "type",
    "description",
    "required",
    "where",
    "enum",
    "many",
    "minimum",
    "maximum",
    "default",
    "tool_default",
    "tool",
)


def rows() -> list[dict]:
    return [
        {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "effect": tool.effect,
            "method": tool.method,
            "path": tool.path,
            "sdk": tool.sdk,
            "args": [{field: getattr(arg, field) for field in ARG_FIELDS} for arg in tool.args],
        }
        for tool in TOOLS
    ]


def source() -> str:
    return HEADER + f"export const TOOLS: readonly ToolRow[] = {json.dumps(rows(), indent=2, ensure_ascii=False)};\n"


if __name__ == "__main__":
    print(source(), end="")
