/**
 * The Vercel AI SDK tools against the live platform: each tool's `execute`, the input schemas a model
 * is offered, and a whole `generateText` loop whose model is the AI SDK's own test double
 * (`MockLanguageModelV3` from `ai/test`): it asks for the tools, the real platform answers.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { asSchema, generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { MEMORY_TOOL_NAMES, memoryTools } from "../src/ai.js";
import { PermissionDeniedError } from "../src/index.js";
import { READ_ONLY_KEY, client, unique } from "./helpers.js";

const sdk = client();
const call = { toolCallId: "call-1", messages: [] };
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

test("each tool's execute calls the platform for the user the application named", async () => {
  const user = unique("alice");
  const tools = memoryTools(sdk, { userId: user, sessionId: "chat-1" });
  assert.deepEqual(Object.keys(tools), [...MEMORY_TOOL_NAMES]);

  const added = (await tools.add_memory.execute!(
    { messages: [{ role: "user", content: "My sister Ana lives in Lisbon." }] },
    call,
  )) as { user_id: string; session_id: string; messages_stored: number };
  assert.deepEqual([added.user_id, added.session_id, added.messages_stored], [user, "chat-1", 1]);

  const found = (await tools.search_memory.execute!({ query: "Ana Lisbon", memory_types: ["message"] }, call)) as {
    results: { content: string }[];
  };
  assert.deepEqual(found.results.map((hit) => hit.content), ["My sister Ana lives in Lisbon."]);

  const context = (await tools.get_context.execute!({ query: "Where does Ana live?", max_tokens: 200 }, call)) as {
    text: string;
  };
  assert.match(context.text, /Lisbon/);

  const skills = (await tools.retrieve_skills.execute!({ task: "book a flight" }, call)) as { skills: unknown[] };
  assert.ok(Array.isArray(skills.skills));
});

test("the model is offered the table's arguments, without the user (and session) the application fixed", () => {
  const withSession = memoryTools(sdk, { userId: "alice", sessionId: "chat-1" });
  const withoutSession = memoryTools(sdk, { userId: "alice" });

  const add = asSchema(withSession.add_memory.inputSchema).jsonSchema as {
    properties: Record<string, unknown>;
    required: string[];
  };
  assert.deepEqual(add.required, ["messages"]);
  assert.ok(!("user_id" in add.properties) && !("session_id" in add.properties));
  assert.ok(!("filter_tags" in add.properties), "the application's bookkeeping is not the model's");
  const open = asSchema(withoutSession.add_memory.inputSchema).jsonSchema as { required: string[] };
  assert.deepEqual(open.required, ["session_id", "messages"]);
  assert.throws(() => memoryTools(sdk, { userId: "" }), TypeError);
});

test("generateText runs the tools the model asks for against the platform", async () => {
  const user = unique("alice");
  await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "I am allergic to peanuts." }] });
  const model = new MockLanguageModelV3({
    doGenerate: [
      {
        content: [
          { type: "tool-call", toolCallId: "c1", toolName: "search_memory", input: '{"query": "allergic peanuts"}' },
          {
            type: "tool-call",
            toolCallId: "c2",
            toolName: "add_memory",
            input: JSON.stringify({ session_id: "chat-2", messages: [{ role: "user", content: "Dinner at 8." }] }),
          },
        ],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      },
      {
        content: [{ type: "text", text: "You are allergic to peanuts." }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      },
    ],
  });

  const result = await generateText({
    model,
    tools: memoryTools(sdk, { userId: user }),
    prompt: "What am I allergic to?",
    stopWhen: stepCountIs(3),
  });

  assert.equal(result.text, "You are allergic to peanuts.");
  const outputs = Object.fromEntries(result.steps[0]!.toolResults.map((part) => [part.toolName, part.output]));
  const search = outputs.search_memory as { results: { content: string; user_id: string }[] };
  assert.deepEqual(search.results.map((hit) => [hit.content, hit.user_id]), [["I am allergic to peanuts.", user]]);
  assert.equal((outputs.add_memory as { session_id: string }).session_id, "chat-2");
  assert.equal((await sdk.sessions.get("chat-2", user)).messages[0]!.content, "Dinner at 8.");
  // The second model call saw the platform's answers as the tool results.
  const seen = JSON.stringify(model.doGenerateCalls[1]!.prompt);
  assert.match(seen, /I am allergic to peanuts\./);
});

test("an error answer reaches the model as the tool's error", { skip: !READ_ONLY_KEY && "no MEMORY_PLATFORM_READ_ONLY_API_KEY" }, async () => {
  const reader = memoryTools(client({}, READ_ONLY_KEY), { userId: unique("alice"), sessionId: "chat-1" });
  await assert.rejects(
    reader.add_memory.execute!({ messages: [{ role: "user", content: "hi" }] }, call) as Promise<unknown>,
    PermissionDeniedError,
  );

  const model = new MockLanguageModelV3({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "c1", toolName: "add_memory", input: '{"messages": [{"role": "user", "content": "hi"}]}' }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      },
      { content: [{ type: "text", text: "I could not store that." }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
  const result = await generateText({ model, tools: reader, prompt: "Remember: hi", stopWhen: stepCountIs(3) });

  const errors = result.steps[0]!.content.filter((part) => part.type === "tool-error");
  assert.equal(errors.length, 1);
  assert.match(JSON.stringify(model.doGenerateCalls[1]!.prompt), /This client is read-only/);
});
