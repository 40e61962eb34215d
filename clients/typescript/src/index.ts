/** TypeScript client for the Memory Platform's REST API. The Vercel AI SDK tools are in `./ai`. */

export {
  type AddParams,
  type CallOptions,
  type ChatMessage,
  type ContextParams,
  DELETABLE_MEMORY_TYPES,
  type DeletableMemoryType,
  Entities,
  Experiences,
  MANAGED_MEMORY_TYPES,
  type ManagedMemoryType,
  Memories,
  MemoryClient,
  type MemoryClientOptions,
  type PageOptions,
  Profiles,
  type RetrieveSkillsParams,
  type Schemas,
  type SearchAllUsersParams,
  type SearchParams,
  Sessions,
  type SkillFeedbackParams,
  Skills,
  toMessages,
} from "./client.js";
export {
  APIConnectionError,
  APIError,
  AuthenticationError,
  ConflictError,
  MemoryPlatformError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TaskTimeoutError,
  ValidationError,
  errorFromBody,
} from "./errors.js";
export { DEFAULT_RETRIES, type RetryPolicy, parseRetryAfter } from "./http.js";
export type { components, operations, paths } from "./schema.js";
export { VERSION } from "./version.js";
