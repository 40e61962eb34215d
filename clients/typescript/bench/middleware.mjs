// What `memoryMiddleware` adds to one model call: `generateText` through `wrapLanguageModel` with the
// AI SDK's test double as the model (it answers at once), with and without the middleware, each call a
// new request (nothing cached). Also the context and the skills calls alone, one after the other, to
// show what answering them at once saves. Prints one JSON object.
//
//   MEMORY_PLATFORM_URL=… MEMORY_PLATFORM_API_KEY=… node bench/middleware.mjs USER QUERIES.json [ROUNDS]
//
// Run by `python -m bench ai_middleware`, which seeds the user and starts the platform (bench/README.md).

import { readFileSync } from "node:fs";

import { generateText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { memoryMiddleware } from "../dist/src/ai.js";
import { MemoryClient } from "../dist/src/index.js";

const [userId, queriesFile, roundsArg] = process.argv.slice(2);
const queries = JSON.parse(readFileSync(queriesFile, "utf8"));
const rounds = Number(roundsArg ?? queries.length);
const memory = new MemoryClient(process.env.MEMORY_PLATFORM_URL, process.env.MEMORY_PLATFORM_API_KEY);
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const model = new MockLanguageModelV3({
  doGenerate: async () => ({ content: [{ type: "text", text: "ok" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }),
});

function percentiles(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (share) => sorted[Math.max(0, Math.ceil(share * sorted.length) - 1)]; // nearest rank, as bench/common.py
  return { p50: +at(0.5).toFixed(2), p95: +at(0.95).toFixed(2), max: +sorted.at(-1).toFixed(2), n: sorted.length };
}

async function timed(work) {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

const measured = { bare: [], wrapped: [], me: [], context: [], skills: [] };
const blocks = [];
let skillsServed = 0;
// Three warm-up rounds, not counted: connections opened, the platform's code paths loaded.
for (let round = -3; round < rounds; round++) {
  const query = queries[(round + queries.length) % queries.length];
  const middleware = memoryMiddleware(memory, { userId, sessionId: `bench-${round + 3}`, save: false, onError: (error) => { throw error; } });
  const withMemory = wrapLanguageModel({ model, middleware });
  const ms = {
    bare: await timed(() => generateText({ model, prompt: query })),
    wrapped: await timed(() => generateText({ model: withMemory, prompt: query })),
    // The floor of any call (HTTP, the key, the rate limit), then each of the middleware's two calls alone.
    me: await timed(() => memory.me()),
    context: await timed(() => memory.context({ user_id: userId, query, max_tokens: 1000 })),
    skills: await timed(async () => {
      skillsServed += (await memory.retrieveSkills({ task: query, k: 3, user_id: userId })).skills.length;
    }),
  };
  if (round >= 0) {
    const system = model.doGenerateCalls.at(-1).prompt.find((message) => message.role === "system");
    blocks.push(system ? system.content.length : 0);
    for (const [name, value] of Object.entries(ms)) measured[name].push(value);
  }
}
console.log(
  JSON.stringify({
    rounds,
    bare_ms: percentiles(measured.bare),
    with_middleware_ms: percentiles(measured.wrapped),
    overhead_ms: percentiles(measured.wrapped.map((ms, index) => ms - measured.bare[index])),
    me_ms: percentiles(measured.me),
    context_alone_ms: percentiles(measured.context),
    skills_alone_ms: percentiles(measured.skills),
    skills_served_per_call: +(skillsServed / (rounds + 3)).toFixed(2),
    memory_block_chars_p50: percentiles(blocks).p50,
  }),
);
