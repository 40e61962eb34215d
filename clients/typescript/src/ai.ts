/**
 * `@memory-platform/client/ai`, for the Vercel AI SDK (`ai`): `memoryMiddleware` (middleware.ts: the user's
 * context and skills in every model call, each exchange saved), and the tools defined here.
 *
 * Tools: `memoryTools(client, { userId })` returns `add_memory`,
 * `search_memory`, `get_context` and `retrieve_skills`, each one call of a `MemoryClient` method. Their
 * names, descriptions and arguments are the platform's MCP tools' (`contract.ts`, generated from the
 * tool table), with zod input schemas. The end user is the application's to say, never the model's:
 * `user_id` (and `session_id`, when given) are fixed when the tools are made.
 *
 * What the zod schemas do not state, the platform still checks and answers as a tool error: the
 * datetime format, the session id's pattern, and a chat message's rule that it needs content (or
 * tool calls); a model is offered `role`, `content` and `name` for each turn.
 */

import { type Tool, type ToolExecutionOptions, tool } from "ai";
import { z } from "zod";

import type { MemoryClient } from "./client.js";
import { type ArgRow, TOOLS, type ToolRow } from "./contract.js";

export const MEMORY_TOOL_NAMES = ["add_memory", "search_memory", "get_context", "retrieve_skills"] as const;
export type MemoryToolName = (typeof MEMORY_TOOL_NAMES)[number];

export interface MemoryToolsOptions {
  /** Your application's id of the person the memory is about. */
  userId: string;
  /** The current session: fixed for `add_memory`, `get_context` and `retrieve_skills` when given, else the model names it. */
  sessionId?: string;
}

const ROLES = ["system", "developer", "user", "assistant", "tool", "function"] as const;

const chatMessage = z.object({
  role: z.enum(ROLES).describe("'function' is stored as 'tool' and 'developer' as 'system'."),
  content: z.string().describe("The text of the turn."),
  name: z.string().optional().describe("The speaker's name, or the tool's name on a tool result."),
});

function scalar(arg: ArgRow): z.ZodType {
  if (arg.enum.length > 0) {
    return z.enum(arg.enum as [string, ...string[]]);
  }
  switch (arg.type) {
    case "integer": {
      let number = z.number().int();
      if (arg.minimum !== null && !arg.many) number = number.min(arg.minimum);
      if (arg.maximum !== null && !arg.many) number = number.max(arg.maximum);
      return number;
    }
    case "boolean":
      return z.boolean();
    case "object":
      return z.record(z.string(), z.unknown());
    case "messages":
      return chatMessage;
    default:
      return z.string();
  }
}

/** The zod schema of one argument of the table: type, enum, bounds, description, default. */
export function argumentSchema(arg: ArgRow): z.ZodType {
  let schema = scalar(arg);
  if (arg.many || arg.type === "messages") {
    let list = z.array(schema);
    if (arg.minimum !== null) list = list.min(arg.minimum);
    if (arg.maximum !== null) list = list.max(arg.maximum);
    schema = list;
  }
  schema = schema.describe(arg.description);
  const fallback = arg.tool_default ?? arg.default;
  if (arg.required) {
    return schema;
  }
  return fallback === null || fallback === undefined ? schema.optional() : schema.default(fallback);
}

/** The input schema of a tool: the table's tool arguments without those the application fixed. */
export function inputSchema(row: ToolRow, fixed: ReadonlySet<string>) {
  const shape: Record<string, z.ZodType> = {};
  for (const arg of row.args) {
    if (arg.tool && !fixed.has(arg.name)) {
      shape[arg.name] = argumentSchema(arg);
    }
  }
  return z.object(shape);
}

type Input = Record<string, unknown>;
type Run = (client: MemoryClient, input: Input, signal: AbortSignal | undefined) => Promise<unknown>;

const RUN: Record<MemoryToolName, Run> = {
  add_memory: (client, input, signal) =>
    client.add(input as unknown as Parameters<MemoryClient["add"]>[0], { signal }),
  search_memory: (client, input, signal) =>
    client.search(input as unknown as Parameters<MemoryClient["search"]>[0], { signal }),
  get_context: (client, input, signal) =>
    client.context(input as unknown as Parameters<MemoryClient["context"]>[0], { signal }),
  retrieve_skills: (client, input, signal) =>
    client.retrieveSkills(input as unknown as Parameters<MemoryClient["retrieveSkills"]>[0], { signal }),
};

function row(name: MemoryToolName): ToolRow {
  const found = TOOLS.find((candidate) => candidate.name === name);
  if (!found) {
    throw new Error(`the tool table has no ${name}`);
  }
  return found;
}

/**
 * The memory tools for `generateText` / `streamText` / agents: `{ add_memory, search_memory,
 * get_context, retrieve_skills }`. Each returns the platform's JSON answer; an error answer is thrown
 * (the AI SDK hands it to the model as the tool's error, e.g. "This client is read-only …").
 */
export function memoryTools(client: MemoryClient, options: MemoryToolsOptions): Record<MemoryToolName, Tool<Input, unknown>> {
  if (!options.userId) {
    throw new TypeError("userId is required: the tools act for one end user");
  }
  const fixedValues: Input = { user_id: options.userId };
  if (options.sessionId) {
    fixedValues.session_id = options.sessionId;
  }
  const tools = {} as Record<MemoryToolName, Tool<Input, unknown>>;
  for (const name of MEMORY_TOOL_NAMES) {
    const table = row(name);
    const fixed = new Set(Object.keys(fixedValues).filter((key) => table.args.some((arg) => arg.name === key)));
    const bound = Object.fromEntries([...fixed].map((key) => [key, fixedValues[key]]));
    tools[name] = tool<Input, unknown>({
      title: table.title,
      description: table.description,
      inputSchema: inputSchema(table, fixed) as unknown as z.ZodType<Input>,
      execute: (input: Input, { abortSignal }: ToolExecutionOptions) =>
        RUN[name](client, { ...input, ...bound }, abortSignal),
    });
  }
  return tools;
}

export {
  MEMORY_HEADER,
  type ContextMemoryType,
  type MemoryMiddleware,
  type MemoryMiddlewareOptions,
  type Outcome,
  type RetrievedSkill,
  type RunRecord,
  type SavedTurn,
  type Stage,
  memoryBlock,
  memoryMiddleware,
} from "./middleware.js";
