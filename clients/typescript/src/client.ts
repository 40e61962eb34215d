/**
 * `MemoryClient`: the platform's REST API, one method per endpoint, the same methods as the Python
 * SDK's `MemoryClient` in camelCase (a test compares the two lists). Bodies and results are the
 * platform's JSON, typed from its OpenAPI schema (`schema.ts`); every path and method a call uses is
 * checked against that schema by `tsc`.
 */

import { TaskTimeoutError } from "./errors.js";
import {
  type Answer,
  type ApiPath,
  type MethodOf,
  type BodyOf,
  DEFAULT_RETRIES,
  DEFAULT_TIMEOUT_MS,
  type QueryOf,
  type QueryValue,
  type RetryPolicy,
  Transport,
  body,
  sleep,
} from "./http.js";
import type { components } from "./schema.js";

export type Schemas = components["schemas"];
export type ChatMessage = BodyOf<"/api/v1/memory/add", "POST">["messages"][number];
export type DeletableMemoryType = "message" | "episodic" | "semantic" | "procedural";
export type ManagedMemoryType = "episodic" | "semantic";

export const DELETABLE_MEMORY_TYPES: readonly DeletableMemoryType[] = ["message", "episodic", "semantic", "procedural"];
export const MANAGED_MEMORY_TYPES: readonly ManagedMemoryType[] = ["episodic", "semantic"];
export const TERMINAL_TASK_STATUSES: ReadonlySet<string> = new Set(["succeeded", "dead", "cancelled"]);
export const PAGE_SIZE = 100;
export const TRANSCRIPT_PAGE_SIZE = 1000;

export interface MemoryClientOptions {
  /** Per attempt, in milliseconds (default 30 s). */
  timeoutMs?: number;
  /** Changes the retry policy (`{ maxRetries: 0 }` turns retries off). */
  retries?: Partial<RetryPolicy>;
  /** A `fetch` of your own (default the global one). */
  fetch?: typeof fetch;
}

/** Per call: an `AbortSignal` that cancels the call, retries and waits included. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface PageOptions extends CallOptions {
  /** Items asked for per request while walking the pages (default 100). */
  pageSize?: number;
}

type Page<T> = { count: number; next?: string | null; previous?: string | null; results: T[] };
type ListPath =
  | "/api/v1/sessions/"
  | "/api/v1/skills/"
  | "/api/v1/experiences/"
  | "/api/v1/profiles/"
  | "/api/v1/entities/"
  | `/api/v1/memory/${ManagedMemoryType}/`;
/** `tsc` fails here if a list path is not a GET of the schema. */
export type ListPathsAreGets = AssertTrue<ListPath extends ApiPath ? ("GET" extends MethodOf<ListPath> ? true : false) : false>;
type AssertTrue<T extends true> = T;
type Filters<P extends ListPath> = Omit<QueryOf<P, "GET">, "limit" | "offset">;
type ItemOf<P extends ListPath> = Answer<P, "GET">["results"][number];

const fields = (value: object) => value as Record<string, QueryValue>;

async function* pages<T>(
  fetchPage: (limit: number, offset: number) => Promise<Page<T>>,
  start: number,
  pageSize: number,
): AsyncGenerator<T, void, undefined> {
  let offset = start;
  while (true) {
    const page = await fetchPage(pageSize, offset);
    yield* page.results;
    if (!page.next || page.results.length === 0) {
      return;
    }
    offset += page.results.length;
  }
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) {
    all.push(item);
  }
  return all;
}

function checkType<T extends string>(value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new RangeError(`memory_type must be one of ${allowed.join(", ")}`);
  }
  return value as T;
}

/**
 * A list endpoint: `iter(filters)` walks every page lazily (an async iterator), `list(filters)`
 * collects them, `page({ limit, offset, ...filters })` returns one page as the platform sends it.
 */
class Listing<P extends ListPath> {
  constructor(
    protected readonly http: Transport,
    private readonly listPath: P,
  ) {}

  page(query: QueryOf<P, "GET"> = {} as QueryOf<P, "GET">, options: CallOptions = {}): Promise<Answer<P, "GET">> {
    return this.http.request("GET", this.listPath, { query: fields(query), ...options });
  }

  iter(filters: Filters<P> & { offset?: number } = {} as Filters<P>, options: PageOptions = {}) {
    const { offset = 0, ...rest } = filters as Filters<P> & { offset?: number };
    const fetchPage = (limit: number, at: number) =>
      this.page({ ...rest, limit, offset: at } as unknown as QueryOf<P, "GET">, options) as Promise<Page<ItemOf<P>>>;
    return pages(fetchPage, offset, options.pageSize ?? PAGE_SIZE);
  }

  list(filters: Filters<P> & { offset?: number } = {} as Filters<P>, options: PageOptions = {}): Promise<ItemOf<P>[]> {
    return collect(this.iter(filters, options));
  }
}

/** Where a session lives: `scope` only when the same id exists in several scopes the key reads. */
export interface SessionOwner extends CallOptions {
  scope?: string;
}

export interface TranscriptOptions extends SessionOwner {
  /** Turns to return from `offset`; without it, every turn (fetched `pageSize` at a time). */
  limit?: number;
  offset?: number;
  pageSize?: number;
}

/** `GET sessions/` filters: user_id, session_tag, status, start, end. */
export class Sessions extends Listing<"/api/v1/sessions/"> {
  constructor(http: Transport) {
    super(http, "/api/v1/sessions/");
  }

  /** The session with its transcript in `messages`: every turn, or `limit` turns from `offset`. */
  async get(
    sessionId: string,
    userId: string,
    { scope, limit, offset = 0, pageSize = TRANSCRIPT_PAGE_SIZE, signal }: TranscriptOptions = {},
  ): Promise<Answer<"/api/v1/sessions/{session_id}/", "GET">> {
    const read = (size: number, from: number) =>
      this.http.call("GET", "/api/v1/sessions/{session_id}/", {
        path: { session_id: sessionId },
        query: { user_id: userId, scope, limit: size, offset: from },
        signal,
      });
    if (limit !== undefined) {
      return read(limit, offset);
    }
    const session = await read(pageSize, offset);
    while (session.messages_next_offset !== null && session.messages_next_offset !== undefined) {
      const page = await read(pageSize, session.messages_next_offset);
      session.messages.push(...page.messages);
      session.messages_next_offset = page.messages_next_offset;
    }
    return session;
  }

  seal(sessionId: string, userId: string, { scope, signal }: SessionOwner = {}) {
    return this.http.call("POST", "/api/v1/sessions/{session_id}/seal", {
      path: { session_id: sessionId },
      query: { user_id: userId, scope },
      signal,
    });
  }

  setOutcome(sessionId: string, userId: string, outcome: Schemas["OutcomeEnum"], { scope, signal }: SessionOwner = {}) {
    return this.http.call("PATCH", "/api/v1/sessions/{session_id}/", {
      path: { session_id: sessionId },
      query: { user_id: userId, scope },
      json: { outcome },
      signal,
    });
  }

  /**
   * Moves a session to `task` or `conversation` routing, until anything has been learned from it
   * (afterwards the platform answers 409 naming what).
   */
  retag(sessionId: string, userId: string, sessionTag: Schemas["SessionTagEnum"], { scope, signal }: SessionOwner = {}) {
    return this.http.call("PATCH", "/api/v1/sessions/{session_id}/", {
      path: { session_id: sessionId },
      query: { user_id: userId, scope },
      json: { session_tag: sessionTag },
      signal,
    });
  }

  distill(sessionId: string, userId: string, { scope, signal }: SessionOwner = {}) {
    return this.http.call("POST", "/api/v1/sessions/{session_id}/distill", {
      path: { session_id: sessionId },
      query: { user_id: userId, scope },
      signal,
    });
  }

  /**
   * Deletes the session's turns and what was learned only from them, in the background →
   * `{session_id, user_id, scope, task_id, status}` (`waitForTask(task_id)` to wait).
   */
  delete(sessionId: string, userId: string, { scope, signal }: SessionOwner = {}) {
    return this.http.call("DELETE", "/api/v1/sessions/{session_id}/", {
      path: { session_id: sessionId },
      query: { user_id: userId, scope },
      signal,
    });
  }
}

/** `GET skills/` filters: status, entry_type, scope, user_id, q. */
export class Skills extends Listing<"/api/v1/skills/"> {
  constructor(http: Transport) {
    super(http, "/api/v1/skills/");
  }

  /** The skill with its `versions`. */
  get(skillId: string, options: CallOptions = {}) {
    return this.http.call("GET", "/api/v1/skills/{skill_id}/", { path: { skill_id: skillId }, ...options });
  }

  delete(skillId: string, options: CallOptions = {}) {
    return this.http.call("DELETE", "/api/v1/skills/{skill_id}/", { path: { skill_id: skillId }, ...options });
  }
}

/** `GET experiences/` filters: status, experience_type, scope, user_id, session_id, q. */
export class Experiences extends Listing<"/api/v1/experiences/"> {
  constructor(http: Transport) {
    super(http, "/api/v1/experiences/");
  }

  /** Skills evolved from it alone go too; others lose its text and return to review. */
  delete(experienceId: string, options: CallOptions = {}) {
    return this.http.call("DELETE", "/api/v1/experiences/{experience_id}/", {
      path: { experience_id: experienceId },
      ...options,
    });
  }
}

/** `GET profiles/` (compiled person pages) filters: user_id and the others the API documents. */
export class Profiles extends Listing<"/api/v1/profiles/"> {
  constructor(http: Transport) {
    super(http, "/api/v1/profiles/");
  }

  /** The page with its revisions and sources. */
  get(profileId: string, options: CallOptions = {}) {
    return this.http.call("GET", "/api/v1/profiles/{profile_id}/", { path: { profile_id: profileId }, ...options });
  }

  /** What lint found about the page: `{profile_id, findings: [{kind, severity, status, detail, …}]}`. */
  findings(profileId: string, options: CallOptions = {}) {
    return this.http.call("GET", "/api/v1/profiles/{profile_id}/findings", {
      path: { profile_id: profileId },
      ...options,
    });
  }

  delete(profileId: string, options: CallOptions = {}) {
    return this.http.call("DELETE", "/api/v1/profiles/{profile_id}/", { path: { profile_id: profileId }, ...options });
  }
}

/** `GET entities/` (people, places, things and their co-occurrence edges) filters: user_id, kind. */
export class Entities extends Listing<"/api/v1/entities/"> {
  constructor(http: Transport) {
    super(http, "/api/v1/entities/");
  }

  /** The entity with its mentions, edges and page. */
  delete(entityId: string, options: CallOptions = {}) {
    return this.http.call("DELETE", "/api/v1/entities/{entity_id}/", { path: { entity_id: entityId }, ...options });
  }
}

type MemoryListPath = `/api/v1/memory/${ManagedMemoryType}/`;
type MemoryItemPath = `/api/v1/memory/${ManagedMemoryType}/{item_id}`;
type MemoryQuery = Omit<QueryOf<MemoryListPath, "GET">, "user_id">;
type MemoryFilters = Omit<MemoryQuery, "limit" | "offset"> & { offset?: number };
type MemoryItem = ItemOf<MemoryListPath>;
type MemoryCreate = Omit<BodyOf<"/api/v1/memory/semantic/", "POST">, "user_id"> | Omit<BodyOf<"/api/v1/memory/episodic/", "POST">, "user_id">;

/**
 * Episodic and semantic memories, managed: `list`/`iter`/`page` one user's (filters: subject, start,
 * end, q), `get`, `create` (stored as given, no model involved), `update` (recorded in the history
 * with this client as actor), `delete`, `history`.
 */
export class Memories {
  constructor(private readonly http: Transport) {}

  #listPath(memoryType: ManagedMemoryType): MemoryListPath {
    return `/api/v1/memory/${checkType(memoryType, MANAGED_MEMORY_TYPES)}/`;
  }

  #itemPath(memoryType: ManagedMemoryType): MemoryItemPath {
    return `/api/v1/memory/${checkType(memoryType, MANAGED_MEMORY_TYPES)}/{item_id}`;
  }

  async page(memoryType: ManagedMemoryType, userId: string, query: MemoryQuery = {}, options: CallOptions = {}) {
    return this.http.call("GET", this.#listPath(memoryType), {
      query: fields({ ...query, user_id: userId }),
      ...options,
    });
  }

  iter(
    memoryType: ManagedMemoryType,
    userId: string,
    filters: MemoryFilters = {},
    options: PageOptions = {},
  ): AsyncGenerator<MemoryItem, void, undefined> {
    const { offset = 0, ...rest } = filters;
    const fetchPage = (limit: number, at: number) =>
      this.page(memoryType, userId, { ...rest, limit, offset: at }, options) as Promise<Page<MemoryItem>>;
    return pages(fetchPage, offset, options.pageSize ?? PAGE_SIZE);
  }

  list(
    memoryType: ManagedMemoryType,
    userId: string,
    filters: MemoryFilters = {},
    options: PageOptions = {},
  ): Promise<MemoryItem[]> {
    return collect(this.iter(memoryType, userId, filters, options));
  }

  async get(memoryType: ManagedMemoryType, memoryId: string, options: CallOptions = {}) {
    return this.http.call("GET", this.#itemPath(memoryType), { path: { item_id: memoryId }, ...options });
  }

  /**
   * semantic: name, summary[, details, source, reason]; episodic: summary, occurred_at[, details,
   * time_granularity, actor, event_type, reason].
   */
  async create(memoryType: ManagedMemoryType, userId: string, values: MemoryCreate, options: CallOptions = {}) {
    return this.http.call("POST", this.#listPath(memoryType), {
      json: body({ ...values, user_id: userId }),
      ...options,
    });
  }

  /**
   * semantic: name, summary, details; episodic: summary, details, occurred_at, time_granularity;
   * and a `reason` for the history.
   */
  async update(memoryType: ManagedMemoryType, memoryId: string, values: BodyOf<MemoryItemPath, "PATCH">, options: CallOptions = {}) {
    return this.http.call("PATCH", this.#itemPath(memoryType), {
      path: { item_id: memoryId },
      json: body(values as Record<string, unknown>),
      ...options,
    });
  }

  async delete(memoryType: ManagedMemoryType, memoryId: string, options: CallOptions = {}) {
    return this.http.call("DELETE", this.#itemPath(memoryType), { path: { item_id: memoryId }, ...options });
  }

  /** `{id, memory_type, changes: [{operation, actor, reason, previous_value, new_value, created_at}]}`. */
  async history(memoryType: ManagedMemoryType, memoryId: string, options: CallOptions = {}) {
    const path: `${MemoryItemPath}/history` = `${this.#itemPath(memoryType)}/history`;
    return this.http.call("GET", path, { path: { item_id: memoryId }, ...options });
  }

  /**
   * Merges duplicate memories and resolves contradicting ones for `userId` (undefined: every user of
   * the key's write scope), in the background → `{user_id, scope, dry_run, task_id, status}`;
   * `(await waitForTask(task_id)).result` lists what was merged, retired and flagged.
   */
  consolidate(userId?: string | null, { dryRun = false, signal }: { dryRun?: boolean } & CallOptions = {}) {
    return this.http.call("POST", "/api/v1/memory/consolidate", {
      json: body({ user_id: userId, dry_run: dryRun }),
      signal,
    });
  }
}

export type AddParams = Omit<BodyOf<"/api/v1/memory/add", "POST">, "messages" | "occurred_at"> & {
  messages: Iterable<ChatMessage | Record<string, unknown>>;
  occurred_at?: string | Date;
};
export type SearchParams = Omit<BodyOf<"/api/v1/memory/search", "POST">, "start" | "end"> & {
  start?: string | Date;
  end?: string | Date;
};
export type SearchAllUsersParams = Omit<SearchParams, "user_id">;
export type ContextParams = Omit<BodyOf<"/api/v1/memory/context", "POST">, "messages"> & {
  messages?: Iterable<ChatMessage | Record<string, unknown>>;
};
export type RetrieveSkillsParams = BodyOf<"/api/v1/skills/retrieve", "POST">;
export type SkillFeedbackParams = BodyOf<"/api/v1/skills/{skill_id}/feedback", "POST">;

/**
 * The messages of one call as plain JSON objects, each with at least `role`. Unset optional fields
 * (`name: null`, `tool_calls: null`) say nothing and are left out; `content: null` is kept.
 */
export function toMessages(messages: Iterable<unknown>): ChatMessage[] {
  if (typeof messages === "string" || messages === null || typeof messages !== "object" || !(Symbol.iterator in messages)) {
    throw new TypeError("messages must be a list of chat messages, not a single value");
  }
  return Array.from(messages, (message, index) => {
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      throw new TypeError(`messages[${index}] is not a chat message`);
    }
    const plain = JSON.parse(JSON.stringify(message)) as Record<string, unknown>;
    return Object.fromEntries(
      Object.entries(plain).filter(([key, value]) => value !== null || key === "content"),
    ) as ChatMessage;
  });
}

/**
 * The platform's REST API. `new MemoryClient("http://127.0.0.1:8000", "mp_…", { timeoutMs: 30_000 })`;
 * pass `retries: { maxRetries, backoffMs, maxBackoffMs, maxRetryAfterMs }` to change the retry policy,
 * or `fetch` of your own.
 */
export class MemoryClient {
  readonly baseUrl: string;
  readonly retries: RetryPolicy;
  readonly sessions: Sessions;
  readonly skills: Skills;
  readonly experiences: Experiences;
  readonly profiles: Profiles;
  readonly entities: Entities;
  readonly memories: Memories;
  readonly #http: Transport;

  constructor(baseUrl: string, apiKey: string, options: MemoryClientOptions = {}) {
    this.#http = new Transport(baseUrl, {
      apiKey,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      retries: { ...DEFAULT_RETRIES, ...options.retries },
      fetch: options.fetch ?? globalThis.fetch,
    });
    this.baseUrl = this.#http.baseUrl;
    this.retries = this.#http.retries;
    this.sessions = new Sessions(this.#http);
    this.skills = new Skills(this.#http);
    this.experiences = new Experiences(this.#http);
    this.profiles = new Profiles(this.#http);
    this.entities = new Entities(this.#http);
    this.memories = new Memories(this.#http);
  }

  /** The calling client: its organisation, write scope and read scopes. */
  me(options: CallOptions = {}) {
    return this.#http.call("GET", "/api/v1/me", options);
  }

  /**
   * Stores turns of one session (OpenAI chat messages). Sends `Idempotency-Key` (yours, or a fresh
   * one per call, the same on every retry), so a retried add is stored once.
   */
  async add(params: AddParams, { idempotencyKey, signal }: { idempotencyKey?: string } & CallOptions = {}) {
    const key = idempotencyKey || `sdk-${crypto.randomUUID().replaceAll("-", "")}`;
    return this.#http.call("POST", "/api/v1/memory/add", {
      json: body({ ...params, messages: toMessages(params.messages) }),
      headers: { "Idempotency-Key": key },
      signal,
    });
  }

  /**
   * Searches one user's memories; an empty query lists the most recent items. `time_window`
   * (`filter`, `boost`, `off`) says what a time the query names ("last May") does.
   */
  search(params: SearchParams, options: CallOptions = {}) {
    return this.#http.call("POST", "/api/v1/memory/search", { json: body(params), ...options });
  }

  /** The same search across every user of the organisation (within the key's read scopes). */
  searchAllUsers(params: SearchAllUsersParams = {}, options: CallOptions = {}) {
    const { memory_types: memoryTypes, ...rest } = params;
    return this.#http.call("GET", "/api/v1/memory/search_all_users", {
      query: fields({ ...rest, query: rest.query ?? "", memory_types: memoryTypes?.length ? memoryTypes.join(",") : undefined }),
      ...options,
    });
  }

  /**
   * Prompt-ready context for a user (and session) within `max_tokens` estimated tokens: `text` to
   * put in the prompt, and `items` (each with its id and type) to cite.
   */
  async context(params: ContextParams, options: CallOptions = {}) {
    const messages = params.messages === undefined ? undefined : toMessages(params.messages);
    return this.#http.call("POST", "/api/v1/memory/context", { json: body({ ...params, messages }), ...options });
  }

  /**
   * Act time: the top-k active skills for a task description. With `session_id` (and `user_id`),
   * each skill returned is recorded as used by that task session; its outcome counts for the skill.
   */
  retrieveSkills(params: RetrieveSkillsParams, options: CallOptions = {}) {
    return this.#http.call("POST", "/api/v1/skills/retrieve", { json: body({ ...params, k: params.k ?? 5 }), ...options });
  }

  /** Reports that the agent followed a skill it retrieved in this task session. */
  applySkill(skillId: string, params: { user_id: string; session_id: string }, options: CallOptions = {}) {
    return this.#http.call("POST", "/api/v1/skills/{skill_id}/uses", {
      path: { skill_id: skillId },
      json: body(params),
      ...options,
    });
  }

  /** A verdict on a skill for a task session: `helped`, `hurt` or `irrelevant`, with a reason. */
  skillFeedback(skillId: string, params: SkillFeedbackParams, options: CallOptions = {}) {
    return this.#http.call("POST", "/api/v1/skills/{skill_id}/feedback", {
      path: { skill_id: skillId },
      json: body({ ...params, reason: params.reason ?? "" }),
      ...options,
    });
  }

  /** Deletes one item: `message`, `episodic`, `semantic` or `procedural`. */
  async deleteMemory(memoryType: DeletableMemoryType, memoryId: string, options: CallOptions = {}): Promise<undefined> {
    const path: `/api/v1/memory/${DeletableMemoryType}/{item_id}` = `/api/v1/memory/${checkType(memoryType, DELETABLE_MEMORY_TYPES)}/{item_id}`;
    return this.#http.call("DELETE", path, {
      path: { item_id: memoryId },
      ...options,
    });
  }

  /**
   * Erases everything about one person in the organisation → `{erasure_id, status, task_id}`. Needs a
   * key with the can_erase permission (otherwise `PermissionDeniedError`).
   */
  eraseUser(userId: string, options: CallOptions = {}) {
    return this.#http.call("DELETE", "/api/v1/users/{user_id}/memories", { path: { user_id: userId }, ...options });
  }

  /** Erases what one client of the organisation wrote, and revokes its keys (needs can_erase). */
  eraseClient(clientId: string, options: CallOptions = {}) {
    return this.#http.call("DELETE", "/api/v1/clients/{client_id}/memories", {
      path: { client_id: clientId },
      ...options,
    });
  }

  erasure(erasureId: string, options: CallOptions = {}) {
    return this.#http.call("GET", "/api/v1/erasures/{erasure_id}/", { path: { erasure_id: erasureId }, ...options });
  }

  task(taskId: string, options: CallOptions = {}) {
    return this.#http.call("GET", "/api/v1/tasks/{task_id}/", { path: { task_id: taskId }, ...options });
  }

  /**
   * Polls until the task has `succeeded`, is `dead` or `cancelled`, and returns it; throws
   * `TaskTimeoutError` after `timeoutMs` (default 60 s).
   */
  async waitForTask(
    taskId: string,
    { timeoutMs = 60_000, pollIntervalMs = 500, signal }: { timeoutMs?: number; pollIntervalMs?: number } & CallOptions = {},
  ) {
    const deadline = performance.now() + timeoutMs;
    while (true) {
      const task = await this.task(taskId, { signal });
      if (TERMINAL_TASK_STATUSES.has(task.status)) {
        return task;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new TaskTimeoutError(`task ${taskId} is still ${task.status} after ${timeoutMs}ms`, task);
      }
      await sleep(Math.min(pollIntervalMs, remaining), signal);
    }
  }
}
