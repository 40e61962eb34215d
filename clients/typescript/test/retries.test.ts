/**
 * Retries through `FaultyServer`, a real proxy in front of the live platform: 503s and 429s answered,
 * connections dropped or left hanging, an add whose answer was lost; and what is never retried.
 */

import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";

import { APIConnectionError, ServerError, ValidationError, parseRetryAfter } from "../src/index.js";
import { API_KEY, FaultyServer, client, unique } from "./helpers.js";

const proxy = new FaultyServer();
let viaProxy: ReturnType<typeof client>;

before(async () => {
  await proxy.start();
  viaProxy = client({}, API_KEY, proxy.url);
});
after(() => proxy.stop());
beforeEach(() => {
  proxy.plan = [];
  proxy.seen.length = 0;
});

test("a 503 is retried", async () => {
  proxy.plan = ["503", "503"];

  assert.equal((await viaProxy.search({ user_id: unique("alice"), query: "anything" })).count, 0);
  assert.deepEqual(proxy.seen.map((seen) => seen.method), ["POST", "POST", "POST"]);
});

test("an add whose answer was lost is stored once: the retry carries the same Idempotency-Key", async () => {
  const user = unique("alice");
  proxy.plan = ["forward-then-503"];

  const added = await viaProxy.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "stored once" }] });

  assert.equal(added.messages_stored, 1);
  const keys = proxy.seen.map((seen) => seen.idempotencyKey);
  assert.equal(keys.length, 2);
  assert.equal(keys[0], keys[1]);
  assert.match(keys[0]!, /^sdk-[0-9a-f]{32}$/);
  assert.equal((await viaProxy.sessions.get("chat-1", user)).messages.length, 1);

  await viaProxy.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "another call" }] });
  assert.notEqual(proxy.seen.at(-1)!.idempotencyKey, keys[0], "each call has a key of its own");
});

test("a dropped connection is retried", async () => {
  proxy.plan = ["drop"];

  assert.ok((await viaProxy.me()).name);
  assert.equal(proxy.seen.length, 2);
});

test("an attempt that hangs ends at the timeout and is retried", async () => {
  proxy.plan = ["hang"];
  const patient = client({ timeoutMs: 300 }, API_KEY, proxy.url);

  assert.ok((await patient.me()).name);
  assert.equal(proxy.seen.length, 2);
});

test("a 429 waits for Retry-After", async () => {
  proxy.plan = ["429"];

  const started = performance.now();
  assert.ok((await viaProxy.me()).name);
  assert.ok(performance.now() - started >= 1000);
  assert.equal(proxy.seen.length, 2);
});

test("client errors are not retried, and retries end", async () => {
  await assert.rejects(
    viaProxy.add({ user_id: unique("alice"), session_id: "not valid!", messages: [{ role: "user", content: "hi" }] }),
    ValidationError,
  );
  assert.equal(proxy.seen.length, 1);

  proxy.plan = ["503", "503", "503", "503", "503"];
  const error = await viaProxy.me().catch((caught: unknown) => caught);
  assert.ok(error instanceof ServerError);
  assert.deepEqual([error.status, error.body, error.code], [503, null, "error"]);
  assert.equal(proxy.seen.length, 1 + 4, "the first try and three retries");

  proxy.seen.length = 0;
  proxy.plan = ["503"];
  const once = client({ retries: { maxRetries: 0 } }, API_KEY, proxy.url);
  await assert.rejects(once.me(), ServerError);
  assert.equal(proxy.seen.length, 1);
});

test("an unreachable platform is an APIConnectionError after the retries", async () => {
  const closed = new FaultyServer();
  await closed.start();
  const url = closed.url;
  await closed.stop();

  const error = await client({}, API_KEY, url).me().catch((caught: unknown) => caught);
  assert.ok(error instanceof APIConnectionError);
  assert.match(error.message, /^GET \/api\/v1\/me failed: TypeError: fetch failed \(.*ECONNREFUSED/);
});

test("the caller's abort is not retried", async () => {
  proxy.plan = ["hang"];
  const controller = new AbortController();
  const pending = viaProxy.me({ signal: controller.signal });
  setTimeout(() => controller.abort(), 100);

  await assert.rejects(pending, { name: "AbortError" });
  assert.equal(proxy.seen.length, 1);
});

test("Retry-After: delta-seconds or an HTTP date", () => {
  const now = Date.parse("Sat, 05 Dec 2026 08:00:00 GMT");
  assert.equal(parseRetryAfter("7"), 7000);
  assert.equal(parseRetryAfter("Sat, 05 Dec 2026 08:00:30 GMT", now), 30_000);
  assert.equal(parseRetryAfter("Sat, 05 Dec 2026 07:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("soon"), null);
  assert.equal(parseRetryAfter(null), null);
});
