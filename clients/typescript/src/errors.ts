/**
 * Errors thrown by the client. API errors carry the platform's JSON error as it was sent:
 * `{"error": {"status", "code", "message", "details"}}`. The classes mirror the Python SDK's
 * `memory_platform_client.errors` one for one (a test compares the two lists).
 */

/** Base class of every error this package throws. */
export class MemoryPlatformError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The platform could not be reached (after the retries), or the connection broke mid-request. */
export class APIConnectionError extends MemoryPlatformError {}

/** `waitForTask` gave up before the task finished; `task` is its last known state. */
export class TaskTimeoutError extends MemoryPlatformError {
  readonly task: Record<string, unknown>;

  constructor(message: string, task: Record<string, unknown>) {
    super(message);
    this.task = task;
  }
}

/**
 * An error answer. `status`, `code`, `message` (the platform's sentence, also the error's message)
 * and `details` are the body's fields; `body` is the
 * whole JSON body (or null when the answer was not the platform's JSON, e.g. a proxy's HTML page).
 */
export class APIError extends MemoryPlatformError {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  readonly body: unknown;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    details: unknown = null,
    body: unknown = null,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.body = body;
    this.headers = headers;
  }
}

/** 400 or 422: the request was refused as invalid; `details` names the offending fields. */
export class ValidationError extends APIError {}

/** 401: no API key, or a wrong, revoked or disabled one. */
export class AuthenticationError extends APIError {}

/** 403: the key is valid but may not do this (read-only client, foreign scope, no erasure right). */
export class PermissionDeniedError extends APIError {}

/** 404: missing, or another organisation's (the platform does not tell the two apart). */
export class NotFoundError extends APIError {}

/** 409: e.g. adding to a sealed session, or one Idempotency-Key reused for a different body. */
export class ConflictError extends APIError {}

/** 413: the request body is larger than the platform accepts. */
export class PayloadTooLargeError extends APIError {}

/** 429 after the retries were used up. */
export class RateLimitError extends APIError {}

/** 5xx after the retries were used up. */
export class ServerError extends APIError {}

const BY_STATUS: Record<number, typeof APIError> = {
  400: ValidationError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
  429: RateLimitError,
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The error for an error answer, from its status and decoded JSON body (any shape). */
export function errorFromBody(status: number, body: unknown, headers: Record<string, string> = {}): APIError {
  const error = isObject(body) ? body.error : undefined;
  let code = "error";
  let message = `HTTP ${status}`;
  let details: unknown = null;
  if (isObject(error)) {
    code = String(error.code || "error");
    message = String(error.message ?? "");
    details = error.details ?? null;
  } else if (!(typeof body === "object" && body !== null)) {
    body = null;
  }
  const ErrorClass = BY_STATUS[status] ?? (status >= 500 ? ServerError : APIError);
  return new ErrorClass(status, code, message, details, body, headers);
}
