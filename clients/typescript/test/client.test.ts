/**
 * `MemoryClient` against the live platform: every method, the typed errors, paging, task waiting and
 * idempotent replay. Each test works on users and sessions of its own, so the files run in parallel
 * and again against the same platform.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  AuthenticationError,
  ConflictError,
  MemoryClient,
  NotFoundError,
  PermissionDeniedError,
  TaskTimeoutError,
  ValidationError,
} from "../src/index.js";
import { ERASABLE_CLIENT_ID, ERASER_KEY, READ_ONLY_KEY, TOOL_TURNS, URL_, client, eventually, unique } from "./helpers.js";

const sdk = client();

test("add takes OpenAI messages with tool calls, and search finds them", async () => {
  const user = unique("alice");
  const session = unique("chat");
  const added = await sdk.add({ user_id: user, session_id: session, messages: TOOL_TURNS, occurred_at: new Date("2025-01-02T10:00:00Z") });

  assert.deepEqual([added.messages_stored, added.first_seq, added.last_seq], [4, 1, 4]);
  const stored = await sdk.sessions.get(session, user);
  assert.deepEqual((stored.messages[1]!.tool_calls as { function: unknown }[])[0]!.function, {
    name: "get_weather",
    arguments: '{"city": "Lisbon"}',
  });
  assert.deepEqual([stored.messages[2]!.role, stored.messages[2]!.name], ["tool", "get_weather"]);
  assert.equal(stored.messages[0]!.occurred_at.slice(0, 10), "2025-01-02");

  const me = await sdk.me();
  assert.ok(me.write_scope, "MEMORY_PLATFORM_API_KEY must be a read-write key");

  const found = await sdk.search({ user_id: user, query: "sunny Lisbon", memory_types: ["message"], limit: 2 });
  assert.equal(found.count, 2);
  assert.ok(found.results.every((hit) => hit.memory_type === "message" && [2, 3, 4].includes(hit.seq)));
  const everyone = await sdk.searchAllUsers({ query: "sunny", memory_types: ["message"], session_id: session });
  assert.deepEqual(new Set(everyone.results.map((hit) => ("user_id" in hit ? hit.user_id : null))), new Set([user]));
});

test("search takes a time window", async () => {
  const question = "Where did I go hiking in May 2023?";
  const window = (await sdk.search({ user_id: unique("alice"), query: question, time_window: "boost" })).time_window!;
  const everyone = await sdk.searchAllUsers({ query: question, time_window: "off" });

  assert.deepEqual([window.start, window.end, window.mode], ["2023-05-01", "2023-05-31", "boost"]);
  assert.equal(everyone.time_window, null);
});

test("sessions: pages, transcripts, outcome, tag, seal, distill", async () => {
  const user = unique("alice");
  for (const number of [0, 1, 2, 3, 4]) {
    await sdk.add({ user_id: user, session_id: `chat-${number}`, messages: [{ role: "user", content: `turn ${number}` }] });
  }
  await sdk.add({ user_id: user, session_id: "job-1", messages: TOOL_TURNS, session_tag: "task" });

  const walked: string[] = [];
  for await (const session of sdk.sessions.iter({ user_id: user, session_tag: "conversation" }, { pageSize: 2 })) {
    walked.push(session.session_id);
  }
  assert.deepEqual(walked, ["chat-4", "chat-3", "chat-2", "chat-1", "chat-0"]);
  assert.equal((await sdk.sessions.list({ user_id: user, session_tag: "task" })).length, 1);
  const page = await sdk.sessions.page({ user_id: user, limit: 1, offset: 1 });
  assert.equal(page.count, 6);
  assert.equal((await sdk.sessions.list({ user_id: user })).length, 6);
  assert.deepEqual(page.results.map((s) => s.session_id), ["chat-4"]);

  const part = await sdk.sessions.get("job-1", user, { limit: 2, offset: 1 });
  assert.deepEqual(part.messages.map((m) => m.seq), [2, 3]);
  assert.equal(part.messages_next_offset, 3);
  const whole = await sdk.sessions.get("job-1", user, { pageSize: 3 });
  assert.deepEqual(whole.messages.map((m) => m.seq), [1, 2, 3, 4]);
  assert.equal(whole.messages_next_offset, null);

  assert.equal((await sdk.sessions.setOutcome("job-1", user, "success")).outcome, "success");
  const sealed = await sdk.sessions.seal("job-1", user);
  assert.equal(sealed.session.status, "sealed");
  assert.ok(sealed.task_ids.length > 0);
  // Sealing queued the distillation (the worker runs it); asking again names when it ran.
  const types = [];
  for (const id of sealed.task_ids) {
    types.push((await sdk.waitForTask(id, { pollIntervalMs: 100 })).task_type);
  }
  assert.ok(types.includes("distill_session"));
  const again = await sdk.sessions.distill("job-1", user).catch((caught: unknown) => caught);
  assert.ok(again instanceof ConflictError);
  assert.match(again.message, /^Session 'job-1' was already distilled at /);

  // An open task session has taught nothing yet: it may still move to conversation routing.
  await sdk.add({ user_id: user, session_id: "job-2", messages: [{ role: "user", content: "hello" }], session_tag: "task" });
  assert.equal((await sdk.sessions.retag("job-2", user, "conversation")).session_tag, "conversation");
});

test("the agent API: context and managed memories", async () => {
  const user = unique("alice");
  await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "My sister Ana lives in Lisbon." }] });
  const fact = await sdk.memories.create("semantic", user, { name: "Ana", summary: "Ana lives in Lisbon.", reason: "stated" });
  for (const day of [1, 2, 3]) {
    await sdk.memories.create("episodic", user, {
      summary: `Alice called Ana, call ${day}.`,
      occurred_at: `2023-05-0${day}T10:00:00Z`,
      actor: "Alice",
    });
  }
  const context = await sdk.context({ user_id: user, messages: [{ role: "user", content: "Where does Ana live?" }], max_tokens: 200 });
  assert.ok(context.tokens <= 200);
  assert.ok(context.items.some((item) => item.id === fact.id));
  const byQuery = await sdk.context({ user_id: user, query: "Ana", max_tokens: 100, memory_types: ["semantic"] });
  assert.equal(byQuery.items[0]!.memory_type, "semantic");

  assert.equal((await sdk.memories.page("episodic", user, { limit: 2 })).count, 3);
  const walked = [];
  for await (const memory of sdk.memories.iter("episodic", user, {}, { pageSize: 2 })) {
    walked.push(memory);
  }
  assert.equal(walked.length, 3);
  const early = await sdk.memories.list("episodic", user, { end: "2023-05-01T23:00:00Z" });
  assert.deepEqual(early.map((m) => m.summary), ["Alice called Ana, call 1."]);
  assert.equal((await sdk.memories.get("semantic", fact.id)).summary, "Ana lives in Lisbon.");
  const updated = await sdk.memories.update("semantic", fact.id, { summary: "Ana lives in Porto.", reason: "moved" });
  assert.equal(updated.summary, "Ana lives in Porto.");
  const history = await sdk.memories.history("semantic", fact.id);
  assert.deepEqual(history.changes.map((change) => change.operation), ["add", "update"]);
  assert.equal(await sdk.memories.delete("semantic", fact.id), undefined);
  await assert.rejects(sdk.memories.get("semantic", fact.id), NotFoundError);
  await assert.rejects(sdk.memories.get("procedural" as "semantic", fact.id), RangeError);

  const consolidation = await sdk.memories.consolidate(user, { dryRun: true });
  assert.equal(consolidation.dry_run, true);
  const finished = await sdk.waitForTask(consolidation.task_id, { timeoutMs: 60_000, pollIntervalMs: 100 });
  assert.equal(finished.status, "succeeded");
});

test("deleteMemory deletes a turn, a fact and an event; a session is deleted in the background", async () => {
  const user = unique("alice");
  await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "hello" }] });
  const turn = (await sdk.sessions.get("chat-1", user)).messages[0]!;
  const fact = await sdk.memories.create("semantic", user, { name: "sister", summary: "lives in Lisbon" });
  const event = await sdk.memories.create("episodic", user, { summary: "Flew to Lisbon", occurred_at: "2024-01-01T00:00:00Z" });

  assert.equal(await sdk.deleteMemory("message", turn.id), undefined);
  assert.equal(await sdk.deleteMemory("semantic", fact.id), undefined);
  assert.equal(await sdk.deleteMemory("episodic", event.id), undefined);
  assert.deepEqual((await sdk.sessions.get("chat-1", user)).messages, []);
  await assert.rejects(sdk.memories.get("episodic", event.id), NotFoundError);
  await assert.rejects(sdk.deleteMemory("experience" as "message", turn.id), RangeError);

  const deletion = await sdk.sessions.delete("chat-1", user);
  assert.equal((await sdk.waitForTask(deletion.task_id, { pollIntervalMs: 100 })).status, "succeeded");
  await assert.rejects(sdk.sessions.get("chat-1", user), NotFoundError);
});

test("a task session becomes a skill through the real pipeline: retrieve, apply, feedback, delete", async () => {
  const user = unique("alice");
  const session = unique("job");
  const tool = `lookup_${session.replaceAll("-", "_")}`;
  const turns = [
    { role: "user", content: `Please look up the booking ${session} for the customer and confirm it.` },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: tool, arguments: '{"ref": "x"}' } }] },
    { role: "tool", tool_call_id: "c1", name: tool, content: "Error: no booking x" },
    { role: "assistant", content: null, tool_calls: [{ id: "c2", type: "function", function: { name: tool, arguments: `{"ref": "${session}"}` } }] },
    { role: "tool", tool_call_id: "c2", name: tool, content: "booking confirmed" },
    { role: "assistant", content: "Your booking is confirmed." },
  ];
  await sdk.add({ user_id: user, session_id: session, messages: turns, session_tag: "task", seal: true, outcome: "success" });

  const skill = await eventually("the workflow skill", async () => {
    const skills = await sdk.skills.list({ user_id: user, q: tool.replaceAll("_", "-") });
    return skills.find((candidate) => (candidate.action_signature as string[]).includes(tool));
  });
  const experiences = await sdk.experiences.list({ user_id: user, session_id: session });
  assert.ok(experiences.some((experience) => experience.experience_type === "worth_avoiding"));
  assert.ok(experiences.some((experience) => experience.experience_type === "worth_learning"));
  const pages = [];
  for await (const found of sdk.skills.iter({ user_id: user }, { pageSize: 1 })) {
    pages.push(found.id);
  }
  assert.ok(pages.includes(skill.id));
  assert.ok((await sdk.skills.page({ user_id: user, limit: 1 })).count >= 1);
  const read = await sdk.skills.get(skill.id);
  assert.equal(read.name, skill.name);
  assert.ok(read.versions.length >= 1);

  const task = unique("job");
  await sdk.add({ user_id: user, session_id: task, messages: [{ role: "user", content: "look up a booking" }], session_tag: "task" });
  const retrieved = await sdk.retrieveSkills({ task: `look up the booking ${session}`, k: 3, user_id: user, session_id: task });
  assert.ok(retrieved.skills.some((found) => found.id === skill.id));
  assert.ok(retrieved.skills[0]!.score > 0);
  const applied = await sdk.applySkill(skill.id, { user_id: user, session_id: task });
  assert.equal(applied.skill_id, skill.id);
  const feedback = await sdk.skillFeedback(skill.id, { user_id: user, session_id: task, verdict: "helped", reason: "it worked" });
  assert.deepEqual([feedback.skill_id, feedback.verdict], [skill.id, "helped"]);

  const lesson = experiences.find((experience) => experience.experience_type === "worth_avoiding")!;
  assert.equal(await sdk.experiences.delete(lesson.id), undefined);
  assert.equal(await sdk.skills.delete(skill.id), undefined);
  await assert.rejects(sdk.skills.get(skill.id), NotFoundError);
  await assert.rejects(sdk.deleteMemory("procedural", skill.id), NotFoundError);
});

test("profiles and entities: lists, and unknown ids are 404", async () => {
  const user = unique("alice");
  const missing = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d";

  assert.deepEqual(await sdk.profiles.list({ user_id: user }), []);
  assert.equal((await sdk.profiles.page({ user_id: user })).count, 0);
  assert.deepEqual(await sdk.entities.list({ user_id: user }), []);
  for await (const _ of sdk.entities.iter({ user_id: user })) {
    assert.fail("no entity expected");
  }
  await assert.rejects(sdk.profiles.get(missing), NotFoundError);
  await assert.rejects(sdk.profiles.findings(missing), NotFoundError);
  await assert.rejects(sdk.profiles.delete(missing), NotFoundError);
  await assert.rejects(sdk.entities.delete(missing), NotFoundError);
  await assert.rejects(sdk.experiences.delete(missing), NotFoundError);
});

test("waitForTask gives up with TaskTimeoutError carrying the task", async () => {
  const user = unique("alice");
  // A conversation's extraction waits EXTRACTION_DEBOUNCE_SECONDS for more turns: still queued now.
  const added = await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "hello there" }] });
  const extraction = await eventually("the extraction task", async () => {
    for (const id of added.task_ids) {
      const task = await sdk.task(id);
      if (task.task_type === "extract_memories" && task.status === "queued") return id;
    }
    return undefined;
  }, 1_000);
  const error = await sdk.waitForTask(extraction, { timeoutMs: 100, pollIntervalMs: 20 }).then(
    () => assert.fail("a queued task finished"),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof TaskTimeoutError);
  assert.equal(error.task.status, "queued");
});

describe("errors carry the platform's error", () => {
  test("401 AuthenticationError", async () => {
    const stranger = new MemoryClient(URL_, "mp_abcdefgh_wrong");
    const error = await stranger.me().catch((caught: unknown) => caught);
    assert.ok(error instanceof AuthenticationError);
    assert.deepEqual([error.status, error.code, error.message], [401, "authentication_failed", "Invalid or revoked API key."]);
  });

  test("403 PermissionDeniedError: erasure without can_erase", async (t) => {
    if ((await sdk.me()).can_erase) {
      t.skip("MEMORY_PLATFORM_API_KEY can erase");
      return;
    }
    const error = await sdk.eraseUser(unique("alice")).catch((caught: unknown) => caught);
    assert.ok(error instanceof PermissionDeniedError);
    assert.equal(error.message, "This client may not erase: erasure needs the client's can_erase permission.");
  });

  test("403 PermissionDeniedError: a read-only key writes", { skip: !READ_ONLY_KEY && "no MEMORY_PLATFORM_READ_ONLY_API_KEY" }, async () => {
    const reader = client({}, READ_ONLY_KEY);
    assert.equal((await reader.me()).write_scope, null);
    const error = await reader
      .add({ user_id: unique("alice"), session_id: "chat-1", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof PermissionDeniedError);
    assert.deepEqual([error.status, error.message], [403, "This client is read-only (it has no write scope)."]);
  });

  test("404 NotFoundError, 409 ConflictError, 400 ValidationError", async () => {
    const user = unique("alice");
    const missing = await sdk.sessions.get("nope", user).catch((caught: unknown) => caught);
    assert.ok(missing instanceof NotFoundError);
    assert.deepEqual(missing.body, { error: { status: 404, code: "not_found", message: "Not found." } });

    await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "hi" }], seal: true });
    const conflict = await sdk
      .add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "again" }] })
      .catch((caught: unknown) => caught);
    assert.ok(conflict instanceof ConflictError);
    assert.deepEqual([conflict.status, conflict.code], [409, "conflict"]);

    const invalid = await sdk
      .add({ user_id: user, session_id: "not valid!", messages: [{ role: "robot" as "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    assert.ok(invalid instanceof ValidationError);
    assert.deepEqual([invalid.status, invalid.code], [400, "invalid"]);
    assert.deepEqual(Object.keys(invalid.details as object), ["session_id"]);
    assert.match(invalid.message, /session_id: Use 1-64 letters/);
    await assert.rejects(sdk.skills.get(""), TypeError);
  });
});

test("idempotent replay: one Idempotency-Key stores a batch once", async () => {
  const user = unique("alice");
  const turns = [{ role: "user", content: "only once" }];
  const first = await sdk.add({ user_id: user, session_id: "chat-1", messages: turns }, { idempotencyKey: `${user}-batch` });
  const again = await sdk.add({ user_id: user, session_id: "chat-1", messages: turns }, { idempotencyKey: `${user}-batch` });

  assert.deepEqual(again, first);
  assert.equal((await sdk.sessions.get("chat-1", user)).messages.length, 1);
  await assert.rejects(
    sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "else" }] }, { idempotencyKey: `${user}-batch` }),
    ConflictError,
  );
});

describe("erasure", { skip: !(ERASER_KEY && ERASABLE_CLIENT_ID) && "no MEMORY_PLATFORM_ERASER_API_KEY and MEMORY_PLATFORM_ERASABLE_CLIENT_ID" }, () => {
  test("eraseUser, erasure, waitForTask; eraseClient", async () => {
    const eraser = client({}, ERASER_KEY);
    const user = unique("alice");
    await sdk.add({ user_id: user, session_id: "chat-1", messages: [{ role: "user", content: "hello" }] });

    const accepted = await eraser.eraseUser(user);
    assert.ok(["queued", "running", "succeeded"].includes((await eraser.erasure(accepted.erasure_id)).status));
    assert.equal((await eraser.waitForTask(accepted.task_id!, { pollIntervalMs: 100 })).status, "succeeded");
    assert.equal((await eraser.erasure(accepted.erasure_id)).status, "succeeded");
    await assert.rejects(sdk.sessions.get("chat-1", user), NotFoundError);

    const byClient = await eraser.eraseClient(ERASABLE_CLIENT_ID);
    assert.equal((await eraser.erasure(byClient.erasure_id!)).id, byClient.erasure_id);
    await assert.rejects(eraser.eraseClient("5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"), NotFoundError);
  });
});
