/**
 * What every call shares: the retry policy, query and body encoding, and `Transport`, which sends
 * one request with retries and turns error answers into the typed errors. The policy is the Python
 * SDK's (`memory_platform_client._http.Retries`), in milliseconds.
 */

import { APIConnectionError, errorFromBody } from "./errors.js";
import type { paths } from "./schema.js";
import { VERSION } from "./version.js";

export const API_PREFIX = "/api/v1/";
export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Retries after a connection error, a 429 (waiting what `Retry-After` says, at most
 * `maxRetryAfterMs`) or a 5xx (exponential backoff with jitter, capped at `maxBackoffMs`); never after
 * another 4xx. Every call is safe to repeat: reads and deletes are idempotent, and each `add`
 * carries an `Idempotency-Key` the platform replays.
 */
export interface RetryPolicy {
  maxRetries: number;
  backoffMs: number;
  maxBackoffMs: number;
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRIES: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 3,
  backoffMs: 500,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 60_000,
});

/** The wait before retry `attempt + 1` after a connection error, or null when the retries are used up. */
export function delayAfterError(policy: RetryPolicy, attempt: number): number | null {
  if (attempt >= policy.maxRetries) {
    return null;
  }
  return Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** attempt) * (0.5 + Math.random() * 0.5);
}

/** The wait before retrying an error answer, or null when it is not retried. */
export function delayAfterResponse(policy: RetryPolicy, response: Response, attempt: number): number | null {
  const status = response.status;
  if (attempt >= policy.maxRetries || !(status === 429 || status >= 500)) {
    return null;
  }
  const retryAfter = parseRetryAfter(response.headers.get("Retry-After"));
  if (retryAfter !== null) {
    return Math.min(retryAfter, policy.maxRetryAfterMs);
  }
  return delayAfterError(policy, attempt);
}

/** Milliseconds from a `Retry-After` header: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | null {
  const text = value?.trim();
  if (!text) {
    return null;
  }
  if (/^\d+$/.test(text)) {
    return Number(text) * 1000;
  }
  const when = Date.parse(text);
  if (Number.isNaN(when)) {
    return null;
  }
  return Math.max(0, when - now);
}

/** `http://host:8000`, `http://host:8000/` and `http://host:8000/api/v1` all mean the same API. */
export function apiBaseUrl(baseUrl: string): string {
  let base = baseUrl.replace(/\/+$/, "");
  const prefix = API_PREFIX.replace(/\/+$/, "");
  if (base.endsWith(prefix)) {
    base = base.slice(0, -prefix.length);
  }
  return base + API_PREFIX;
}

export type QueryValue = string | number | boolean | Date | Record<string, unknown> | readonly unknown[] | null | undefined;

/** Query values as the platform reads them: null/undefined left out, booleans as true/false, lists repeated. */
export function queryString(params: Record<string, QueryValue> | undefined): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params ?? {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item === null || item === undefined) {
        continue;
      }
      search.append(key, encodeValue(item));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

function encodeValue(value: unknown): string {
  if (value instanceof Date) {
    return value.toISOString();
  }
  if (typeof value === "object") {
    return JSON.stringify(value);
  }
  return String(value);
}

/** A JSON body without the fields left unset (null or undefined), as the Python SDK sends it. */
export function body(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null && value !== undefined));
}

/** One path segment: user ids may hold any character, '/' included. */
export function segment(value: string | number): string {
  const text = String(value);
  if (!text) {
    throw new TypeError("an id must not be empty");
  }
  return encodeURIComponent(text);
}

// Paths and methods of the OpenAPI schema, so every call the client makes is checked by `tsc` ---------

export type Verb = "GET" | "POST" | "PATCH" | "DELETE";
export type ApiPath = keyof paths;
type Operation<P extends ApiPath, M extends Verb> = NonNullable<paths[P][Lowercase<M>]>;
/** The methods the schema has for a path. */
export type MethodOf<P extends ApiPath> = {
  [M in Verb]: [NonNullable<paths[P][Lowercase<M>]>] extends [never] ? never : M;
}[Verb];
type Success<R> = R extends { 200: infer A }
  ? A
  : R extends { 201: infer A }
    ? A
    : R extends { 202: infer A }
      ? A
      : R extends { 204: unknown }
        ? { content?: never }
        : never;
type JsonOf<A> = A extends { content: { "application/json": infer J } } ? J : undefined;
/** The decoded success answer of an operation, as the schema states it (`undefined` for a 204). */
export type Answer<P extends ApiPath, M extends Verb> = Operation<P, M> extends { responses: infer R }
  ? JsonOf<Success<R>>
  : never;
/** The query parameters an operation takes. */
export type QueryOf<P extends ApiPath, M extends Verb> = Operation<P, M> extends {
  parameters: { query?: infer Q };
}
  ? NonNullable<Q>
  : never;
/** The JSON body an operation takes. */
export type BodyOf<P extends ApiPath, M extends Verb> = Operation<P, M> extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** One call: path placeholders, query, JSON body, extra headers, the caller's abort signal. */
export interface CallRequest {
  /** Values for the `{name}` placeholders of the path. */
  path?: Record<string, string | number>;
  query?: Record<string, QueryValue>;
  json?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface TransportOptions {
  apiKey: string;
  timeoutMs: number;
  retries: RetryPolicy;
  fetch: typeof fetch;
}

function headersOf(response: Response): Record<string, string> {
  return Object.fromEntries(response.headers.entries());
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts (works wherever fetch does). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Sends requests to one platform with one key: each call retried as `RetryPolicy` says. */
export class Transport {
  readonly baseUrl: string;
  readonly retries: RetryPolicy;
  private readonly options: TransportOptions;
  private readonly headers: Record<string, string>;

  constructor(baseUrl: string, options: TransportOptions) {
    if (!options.apiKey) {
      throw new TypeError("apiKey is required (a key printed by `make run` or `create_client`)");
    }
    this.baseUrl = apiBaseUrl(baseUrl);
    this.retries = options.retries;
    this.options = options;
    this.headers = {
      Authorization: `Api-Key ${options.apiKey}`,
      "User-Agent": `memory-platform-client-ts/${VERSION}`,
      Accept: "application/json",
    };
  }

  /** The URL of a schema path with its placeholders filled in. */
  url(path: string, request: CallRequest): string {
    const filled = path.replace(/\{(\w+)\}/g, (_match, name: string) => {
      const value = request.path?.[name];
      if (value === undefined) {
        throw new TypeError(`${path} needs a value for {${name}}`);
      }
      return segment(value);
    });
    return this.baseUrl + filled.slice(API_PREFIX.length) + queryString(request.query);
  }

  /** One operation of the schema: `P` and `M` must name one, or `tsc` refuses the call. */
  async call<P extends ApiPath, M extends MethodOf<P>>(method: M, path: P, request: CallRequest = {}): Promise<Answer<P, M>> {
    return (await this.send(method, this.url(path, request), request)) as Answer<P, M>;
  }

  /** A call whose path the caller computes: `P` is still a path of the schema. */
  request<T>(method: Verb, path: ApiPath, request: CallRequest = {}): Promise<T> {
    return this.send(method, this.url(path, request), request) as Promise<T>;
  }

  private async send(method: string, url: string, request: CallRequest): Promise<unknown> {
    const headers: Record<string, string> = { ...this.headers, ...request.headers };
    let payload: string | undefined;
    if (request.json !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(request.json);
    }
    for (let attempt = 0; ; attempt += 1) {
      let answer: { response: Response; text: string } | undefined;
      let failure: unknown;
      try {
        const response = await this.options.fetch(url, {
          method,
          headers,
          body: payload,
          signal: this.attemptSignal(request.signal),
        });
        answer = { response, text: await response.text() };
      } catch (error) {
        if (!isTransportFailure(error, request.signal)) {
          throw error;
        }
        failure = error;
      }
      let delay: number | null;
      if (answer === undefined) {
        delay = delayAfterError(this.retries, attempt);
        if (delay === null) {
          throw new APIConnectionError(`${method} ${new URL(url).pathname} failed: ${describe(failure)}`, {
            cause: failure,
          });
        }
      } else {
        const { response, text } = answer;
        if (response.ok) {
          return response.status === 204 || !text ? undefined : JSON.parse(text);
        }
        delay = delayAfterResponse(this.retries, response, attempt);
        if (delay === null) {
          throw errorFromBody(response.status, parseOrNull(text), headersOf(response));
        }
      }
      await sleep(delay, request.signal);
    }
  }

  private attemptSignal(caller: AbortSignal | undefined): AbortSignal {
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    return caller ? AbortSignal.any([caller, timeout]) : timeout;
  }
}

function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * A failure of the connection, not of the caller: fetch's network errors, a timeout of one attempt,
 * or an answer cut off mid-body. The caller's own abort and our typed errors pass through.
 */
function isTransportFailure(error: unknown, caller: AbortSignal | undefined): boolean {
  if (caller?.aborted) {
    return false;
  }
  // fetch rejects with a TypeError ("fetch failed", the socket error as its cause); a body cut off
  // mid-read rejects likewise, or with the socket's error; an attempt's timeout with a TimeoutError.
  return error instanceof Error && (error instanceof TypeError || error.name === "TimeoutError" || "code" in error);
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
    return `${error.name}: ${error.message}${cause}`;
  }
  return String(error);
}
