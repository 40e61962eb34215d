/**
 * What the tests share: the live platform they run against (named by the environment), unique ids,
 * polling, and `FaultyServer`, a reverse proxy on a real socket told how to misbehave, so retries are
 * tested against real 503s, 429s, dropped and hanging connections.
 *
 * MEMORY_PLATFORM_URL and MEMORY_PLATFORM_API_KEY (a read-write key) are required. Optional, for the
 * tests that need another key of the same organisation (they are skipped without it; the platform's
 * pytest run gives them all and fails on a skip): MEMORY_PLATFORM_READ_ONLY_API_KEY (no write scope),
 * MEMORY_PLATFORM_ERASER_API_KEY (can_erase) with MEMORY_PLATFORM_ERASABLE_CLIENT_ID (a client the
 * tests may erase, keys and all).
 */

import { randomUUID } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { MemoryClient, type MemoryClientOptions } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: the tests run against a live platform (MEMORY_PLATFORM_URL, MEMORY_PLATFORM_API_KEY).`,
    );
  }
  return value;
}

export const URL_ = required("MEMORY_PLATFORM_URL");
export const API_KEY = required("MEMORY_PLATFORM_API_KEY");
export const READ_ONLY_KEY = process.env.MEMORY_PLATFORM_READ_ONLY_API_KEY ?? "";
export const ERASER_KEY = process.env.MEMORY_PLATFORM_ERASER_API_KEY ?? "";
export const ERASABLE_CLIENT_ID = process.env.MEMORY_PLATFORM_ERASABLE_CLIENT_ID ?? "";

/** Retries that do not slow the tests down. */
export const FAST = { maxRetries: 3, backoffMs: 10, maxBackoffMs: 50 };

export function client(options: MemoryClientOptions = {}, key: string = API_KEY, url: string = URL_): MemoryClient {
  return new MemoryClient(url, key, { timeoutMs: 20_000, retries: FAST, ...options });
}

/** An id no other test (and no earlier run against the same platform) uses. */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}

/** Polls `probe` until it returns something other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const value = await probe();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export const TOOL_TURNS = [
  { role: "user", content: "What's the weather in Lisbon?" },
  {
    role: "assistant",
    content: null,
    refusal: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Lisbon"}' } },
    ],
  },
  { role: "tool", tool_call_id: "call_1", name: "get_weather", content: "21°C and sunny" },
  { role: "assistant", content: "It is 21°C and sunny in Lisbon." },
];

/**
 * - "forward": pass the request to the platform and its answer back;
 * - "503": answer 503 with an HTML page, as a load balancer does while the app restarts;
 * - "429": answer 429 with `Retry-After: 1`;
 * - "drop": close the connection without answering;
 * - "hang": never answer (the client's timeout ends the attempt);
 * - "forward-then-503": pass it on, then lose the answer behind a 503 (the work was done).
 */
export type Action = "forward" | "503" | "429" | "drop" | "hang" | "forward-then-503";

export interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
}

const FORWARDED = ["authorization", "x-api-key", "content-type", "accept", "idempotency-key"];

export class FaultyServer {
  plan: Action[] = [];
  readonly seen: Seen[] = [];
  private server: Server | undefined;
  private readonly hanging = new Set<ServerResponse>();

  constructor(private readonly upstream: string = URL_) {}

  get url(): string {
    const address = this.server?.address() as AddressInfo;
    return `http://127.0.0.1:${address.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    return this;
  }

  async stop(): Promise<void> {
    for (const response of this.hanging) {
      response.destroy();
    }
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) {
      chunks.push(chunk as Buffer);
    }
    const body = Buffer.concat(chunks);
    const key = request.headers["idempotency-key"];
    this.seen.push({ method: request.method!, path: request.url!, idempotencyKey: Array.isArray(key) ? key[0] : key });
    const action = this.plan.shift() ?? "forward";
    if (action === "drop") {
      request.socket.destroy();
      return;
    }
    if (action === "hang") {
      this.hanging.add(response);
      return;
    }
    if (action === "429") {
      response.writeHead(429, { "Content-Type": "application/json", "Retry-After": "1" });
      response.end('{"error": {"status": 429, "code": "throttled", "message": "Slow down."}}');
      return;
    }
    if (action === "503" || action === "forward-then-503") {
      if (action === "forward-then-503") {
        await this.forward(request, body);
      }
      response.writeHead(503, { "Content-Type": "text/html" });
      response.end("<html><body>503 Service Unavailable</body></html>");
      return;
    }
    const upstream = await this.forward(request, body);
    response.writeHead(upstream.status, { "Content-Type": upstream.headers.get("Content-Type") ?? "text/plain" });
    response.end(Buffer.from(await upstream.arrayBuffer()));
  }

  private forward(request: IncomingMessage, body: Buffer): Promise<Response> {
    const headers: Record<string, string> = {};
    for (const name of FORWARDED) {
      const value = request.headers[name];
      if (typeof value === "string") {
        headers[name] = value;
      }
    }
    return fetch(this.upstream.replace(/\/+$/, "") + request.url, {
      method: request.method,
      headers,
      body: request.method === "GET" || request.method === "DELETE" ? undefined : new Uint8Array(body),
    });
  }
}
