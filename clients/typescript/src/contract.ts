/**
 * The agent tools' table, generated from the Python SDK's memory_platform_client.contract by
 * scripts/generate_contract.py. Do not edit: regenerate it (the platform's tests compare).
 */

export interface ArgRow {
  name: string;
  type: "string" | "datetime" | "integer" | "boolean" | "object" | "messages";
  description: string;
  required: boolean;
  where: "path" | "query" | "body" | "header";
  enum: readonly string[];
  many: boolean;
  minimum: number | null;
  maximum: number | null;
  default: unknown;
  tool_default: unknown;
  tool: boolean;
}

export interface ToolRow {
  name: string;
  title: string;
  description: string;
  effect: "read" | "write" | "edit" | "destructive";
  method: string;
  path: string;
  sdk: string;
  args: readonly ArgRow[];
}

export const TOOLS: readonly ToolRow[] = [
  {
    "name": "add_memory",
    "title": "Add to memory",
    "description": "Store turns of a conversation or task session in long-term memory. Later turns of the same session_id are appended; the platform extracts facts and events, or skills, in the background.",
    "effect": "write",
    "method": "POST",
    "path": "memory/add",
    "sdk": "add",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "The conversation or task id: 1-64 letters, digits, '_' or '-'.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "messages",
        "type": "messages",
        "description": "The turns to store, oldest first.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_tag",
        "type": "string",
        "description": "'conversation' (with a person; default) or 'task' (tool work, distilled into skills).",
        "required": false,
        "where": "body",
        "enum": [
          "conversation",
          "task"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "seal",
        "type": "boolean",
        "description": "Close the session after these turns.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": false,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "outcome",
        "type": "string",
        "description": "How a task session ended.",
        "required": false,
        "where": "body",
        "enum": [
          "success",
          "failure",
          "unknown"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "occurred_at",
        "type": "datetime",
        "description": "When the turns happened, for those that carry no date (ISO 8601).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "filter_tags",
        "type": "object",
        "description": "Tags of the session (a flat JSON object).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": false
      },
      {
        "name": "idempotency_key",
        "type": "string",
        "description": "Makes a retried add store its turns once (the SDK sends a fresh one per call).",
        "required": false,
        "where": "header",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": false
      }
    ]
  },
  {
    "name": "search_memory",
    "title": "Search memory",
    "description": "Search one user's memories (facts, events, transcript turns, skills, lessons, profiles, topic pages) by meaning and keywords.",
    "effect": "read",
    "method": "POST",
    "path": "memory/search",
    "sdk": "search",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "query",
        "type": "string",
        "description": "What to look for; empty lists the most recent items.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": "",
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_types",
        "type": "string",
        "description": "Default: every type. message = transcript turns, episodic = dated events, semantic = facts, procedural = skills, experience = distilled lessons, profile = compiled pages about people, topic = compiled pages about topics.",
        "required": false,
        "where": "body",
        "enum": [
          "message",
          "episodic",
          "semantic",
          "procedural",
          "experience",
          "profile",
          "topic"
        ],
        "many": true,
        "minimum": 1,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "search_method",
        "type": "string",
        "description": "Default: the best for each type.",
        "required": false,
        "where": "body",
        "enum": [
          "bm25",
          "embedding",
          "hybrid",
          "fuzzy"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "limit",
        "type": "integer",
        "description": "How many results.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 100,
        "default": 10,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "Only this session's items.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_tag",
        "type": "string",
        "description": "Only items of conversation or of task sessions.",
        "required": false,
        "where": "body",
        "enum": [
          "conversation",
          "task"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "start",
        "type": "datetime",
        "description": "Only items from this time (ISO 8601).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "end",
        "type": "datetime",
        "description": "Only items until this time (ISO 8601).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "time_window",
        "type": "string",
        "description": "What a time named in the query ('last May') does: filter to those days, boost them, or off. Default: the platform's SEARCH_TIME_WINDOW.",
        "required": false,
        "where": "body",
        "enum": [
          "filter",
          "boost",
          "off"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "filter_tags",
        "type": "object",
        "description": "Tags of the session (a flat JSON object).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": false
      }
    ]
  },
  {
    "name": "retrieve_skills",
    "title": "Retrieve skills",
    "description": "The learned procedures (skills) most relevant to a task, with their instructions: call it before acting.",
    "effect": "read",
    "method": "POST",
    "path": "skills/retrieve",
    "sdk": "retrieve_skills",
    "args": [
      {
        "name": "task",
        "type": "string",
        "description": "The task at hand, in a sentence or two.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "k",
        "type": "integer",
        "description": "How many skills.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 50,
        "default": 5,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "The end user the agent acts for: also the skills this user taught. Without it, only the skills shared by the whole scope.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "The task session the skills serve (with user_id): its outcome, once sealed, counts for or against each skill returned.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "apply_skill",
    "title": "Mark a skill applied",
    "description": "Report that you followed a skill that retrieve_skills returned for this task session: the session's outcome then counts for the skill as applied, not only as retrieved (also when it was not among the top few results, which count anyway). Marking it again changes nothing.",
    "effect": "edit",
    "method": "POST",
    "path": "skills/{skill_id}/uses",
    "sdk": "apply_skill",
    "args": [
      {
        "name": "skill_id",
        "type": "string",
        "description": "The skill's id, as retrieve_skills shows it.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "The task session that retrieved the skill (the session_id given to retrieve_skills).",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "skill_feedback",
    "title": "Give feedback on a skill",
    "description": "Say whether a skill helped, hurt or was irrelevant to a task session, and why. The session must be one of this user's sessions you can read (add it first). Each call records one verdict, with you as its actor; the skill's effectiveness shows it.",
    "effect": "write",
    "method": "POST",
    "path": "skills/{skill_id}/feedback",
    "sdk": "skill_feedback",
    "args": [
      {
        "name": "skill_id",
        "type": "string",
        "description": "The skill's id, as retrieve_skills shows it.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "The task session that retrieved the skill (the session_id given to retrieve_skills).",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "verdict",
        "type": "string",
        "description": "What the skill did for this task.",
        "required": true,
        "where": "body",
        "enum": [
          "helped",
          "hurt",
          "irrelevant"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "reason",
        "type": "string",
        "description": "Why, in a sentence (at most 2000 characters).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": "",
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "list_sessions",
    "title": "List sessions",
    "description": "Stored sessions, most recent first, one page at a time.",
    "effect": "read",
    "method": "GET",
    "path": "sessions/",
    "sdk": "sessions.page",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Only this user's sessions.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_tag",
        "type": "string",
        "description": "Only conversation or only task sessions.",
        "required": false,
        "where": "query",
        "enum": [
          "conversation",
          "task"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "status",
        "type": "string",
        "description": "Only open or only sealed sessions.",
        "required": false,
        "where": "query",
        "enum": [
          "open",
          "sealed"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "start",
        "type": "datetime",
        "description": "Only sessions active since this time (ISO 8601).",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "end",
        "type": "datetime",
        "description": "Only sessions active until this time (ISO 8601).",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "limit",
        "type": "integer",
        "description": "Items per page.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 100,
        "default": null,
        "tool_default": 20,
        "tool": true
      },
      {
        "name": "offset",
        "type": "integer",
        "description": "Items to skip.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 0,
        "maximum": null,
        "default": null,
        "tool_default": 0,
        "tool": true
      }
    ]
  },
  {
    "name": "get_session",
    "title": "Read a session",
    "description": "One session with its transcript (turns in order, with ids).",
    "effect": "read",
    "method": "GET",
    "path": "sessions/{session_id}/",
    "sdk": "sessions.get",
    "args": [
      {
        "name": "session_id",
        "type": "string",
        "description": "The conversation or task id: 1-64 letters, digits, '_' or '-'.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "limit",
        "type": "integer",
        "description": "Turns to return.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 1000,
        "default": 200,
        "tool_default": 100,
        "tool": true
      },
      {
        "name": "offset",
        "type": "integer",
        "description": "Turns to skip from the start.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 0,
        "maximum": null,
        "default": 0,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "scope",
        "type": "string",
        "description": "Only when the same session id exists in several scopes you read.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "delete_memory",
    "title": "Delete a memory",
    "description": "Delete one stored item for good: a transcript turn, an episodic or semantic memory, or a skill.",
    "effect": "destructive",
    "method": "DELETE",
    "path": "memory/{memory_type}/{item_id}",
    "sdk": "delete_memory",
    "args": [
      {
        "name": "memory_type",
        "type": "string",
        "description": "message = a transcript turn, episodic = an event, semantic = a fact, procedural = a skill.",
        "required": true,
        "where": "path",
        "enum": [
          "message",
          "episodic",
          "semantic",
          "procedural"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_id",
        "type": "string",
        "description": "The item's id, as search_memory or get_session show it.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "erase_user",
    "title": "Erase a user",
    "description": "Erase everything stored about one person in the organisation (right to erasure). Irreversible; it runs in the background. Needs a key with the can_erase permission.",
    "effect": "destructive",
    "method": "DELETE",
    "path": "users/{user_id}/memories",
    "sdk": "erase_user",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "get_context",
    "title": "Get context",
    "description": "What long-term memory knows that bears on the latest message, as a block ready for the prompt (who the user is, relevant facts, dated events, earlier turns, skills for a task), within a token budget. Each line is marked [n]; the structured result gives each item's id and type to cite.",
    "effect": "read",
    "method": "POST",
    "path": "memory/context",
    "sdk": "context",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "messages",
        "type": "messages",
        "description": "The latest turns, oldest first; the context is for the last one with text.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "query",
        "type": "string",
        "description": "Instead of messages: what the context is for; empty: the most recent items.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "session_id",
        "type": "string",
        "description": "The current session; a task session adds its top skills.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "scope",
        "type": "string",
        "description": "The session's scope: only when the same session id exists in several scopes you read.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "max_tokens",
        "type": "integer",
        "description": "Token budget of the block (estimated).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": 64,
        "maximum": null,
        "default": 1500,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_types",
        "type": "string",
        "description": "Use only these types (default all).",
        "required": false,
        "where": "body",
        "enum": [
          "profile",
          "semantic",
          "episodic",
          "message",
          "procedural"
        ],
        "many": true,
        "minimum": 1,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "list_memories",
    "title": "List memories",
    "description": "One user's learned facts (semantic) or dated events (episodic), newest first, one page at a time.",
    "effect": "read",
    "method": "GET",
    "path": "memory/{memory_type}/",
    "sdk": "memories.page",
    "args": [
      {
        "name": "memory_type",
        "type": "string",
        "description": "semantic = facts, episodic = dated events.",
        "required": true,
        "where": "path",
        "enum": [
          "episodic",
          "semantic"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "subject",
        "type": "string",
        "description": "A fact's subject or an event's actor.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "start",
        "type": "datetime",
        "description": "From this time (ISO 8601).",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "end",
        "type": "datetime",
        "description": "Until this time (ISO 8601).",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "q",
        "type": "string",
        "description": "Text the memory contains.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "limit",
        "type": "integer",
        "description": "Items per page.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 100,
        "default": null,
        "tool_default": 20,
        "tool": true
      },
      {
        "name": "offset",
        "type": "integer",
        "description": "Items to skip.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 0,
        "maximum": null,
        "default": null,
        "tool_default": 0,
        "tool": true
      }
    ]
  },
  {
    "name": "get_memory",
    "title": "Read a memory",
    "description": "One episodic or semantic memory with every field.",
    "effect": "read",
    "method": "GET",
    "path": "memory/{memory_type}/{item_id}",
    "sdk": "memories.get",
    "args": [
      {
        "name": "memory_type",
        "type": "string",
        "description": "semantic = facts, episodic = dated events.",
        "required": true,
        "where": "path",
        "enum": [
          "episodic",
          "semantic"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_id",
        "type": "string",
        "description": "The memory's id.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "update_memory",
    "title": "Correct a memory",
    "description": "Correct a learned fact or event. The change is kept in the memory's history, and what was derived from it (profile pages, entity links) is updated.",
    "effect": "edit",
    "method": "PATCH",
    "path": "memory/{memory_type}/{item_id}",
    "sdk": "memories.update",
    "args": [
      {
        "name": "memory_type",
        "type": "string",
        "description": "semantic = facts, episodic = dated events.",
        "required": true,
        "where": "path",
        "enum": [
          "episodic",
          "semantic"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_id",
        "type": "string",
        "description": "The memory's id.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "name",
        "type": "string",
        "description": "semantic: the subject.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "summary",
        "type": "string",
        "description": "The statement itself.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "details",
        "type": "string",
        "description": "More about it.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "occurred_at",
        "type": "datetime",
        "description": "episodic: when it happened (ISO 8601).",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "time_granularity",
        "type": "string",
        "description": "episodic: how precise occurred_at is.",
        "required": false,
        "where": "body",
        "enum": [
          "exact",
          "day",
          "week",
          "month",
          "year"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "reason",
        "type": "string",
        "description": "Why, for the memory's history.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "memory_history",
    "title": "Memory history",
    "description": "Every change of a memory: who made it, when, and its value before and after.",
    "effect": "read",
    "method": "GET",
    "path": "memory/{memory_type}/{item_id}/history",
    "sdk": "memories.history",
    "args": [
      {
        "name": "memory_type",
        "type": "string",
        "description": "semantic = facts, episodic = dated events.",
        "required": true,
        "where": "path",
        "enum": [
          "episodic",
          "semantic"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "memory_id",
        "type": "string",
        "description": "The memory's id.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "get_profile",
    "title": "Read a profile",
    "description": "The compiled page about one person in a user's memory, with its sources and revisions.",
    "effect": "read",
    "method": "GET",
    "path": "profiles/{profile_id}/",
    "sdk": "profiles.get",
    "args": [
      {
        "name": "profile_id",
        "type": "string",
        "description": "The profile's id, as get_context or search_memory show it.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "list_entities",
    "title": "List entities",
    "description": "The people, places and organisations one user's memory names, most mentioned first, with who appears with whom.",
    "effect": "read",
    "method": "GET",
    "path": "entities/",
    "sdk": "entities.page",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "kind",
        "type": "string",
        "description": "Only this kind.",
        "required": false,
        "where": "query",
        "enum": [
          "person",
          "place",
          "organization"
        ],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "limit",
        "type": "integer",
        "description": "Items per page.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 1,
        "maximum": 100,
        "default": null,
        "tool_default": 20,
        "tool": true
      },
      {
        "name": "offset",
        "type": "integer",
        "description": "Items to skip.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": 0,
        "maximum": null,
        "default": null,
        "tool_default": 0,
        "tool": true
      }
    ]
  },
  {
    "name": "delete_session",
    "title": "Delete a session",
    "description": "Delete a whole session for good: its turns and everything learned only from it (facts, events, lessons; skills and profile pages built on them are updated). Irreversible; it runs in the background.",
    "effect": "destructive",
    "method": "DELETE",
    "path": "sessions/{session_id}/",
    "sdk": "sessions.delete",
    "args": [
      {
        "name": "session_id",
        "type": "string",
        "description": "The conversation or task id: 1-64 letters, digits, '_' or '-'.",
        "required": true,
        "where": "path",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "user_id",
        "type": "string",
        "description": "Your application's id of the person (end user) the memory is about.",
        "required": true,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "scope",
        "type": "string",
        "description": "Only when the same session id exists in several scopes you read.",
        "required": false,
        "where": "query",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      }
    ]
  },
  {
    "name": "consolidate_memories",
    "title": "Consolidate memories",
    "description": "Merge duplicate and paraphrased facts and events into one, and resolve contradicting facts (the outdated one is retired; without a model they are flagged for review). Merged and retired memories are hidden from search but kept with their history. Runs in the background: the task's result lists what changed; try dry_run first.",
    "effect": "destructive",
    "method": "POST",
    "path": "memory/consolidate",
    "sdk": "memories.consolidate",
    "args": [
      {
        "name": "user_id",
        "type": "string",
        "description": "The person whose memories to consolidate; omit for every user of your scope.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": null,
        "tool_default": null,
        "tool": true
      },
      {
        "name": "dry_run",
        "type": "boolean",
        "description": "Only report what would change.",
        "required": false,
        "where": "body",
        "enum": [],
        "many": false,
        "minimum": null,
        "maximum": null,
        "default": false,
        "tool_default": null,
        "tool": true
      }
    ]
  }
];
