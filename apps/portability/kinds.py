"""Every kind of row an archive holds: its file, its model, and how its references are rewritten on import.
The order of KINDS is the import order (parents before children)."""

from collections.abc import Callable
from dataclasses import dataclass, field

from apps.conversations.models import Checkpoint, CheckpointWrite, IngestRequest, Message, Session
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Edge, Entity, LintFinding, Mention, Profile, ProfileRevision, ProfileSource, TopicState
from apps.providers.models import LLMUsage
from apps.skills.models import Skill, SkillExperience, SkillFeedback, SkillUse, SkillVersion, SkillWithheld
from apps.tenancy.models import Client, ClientAPIKey, EndUser

# What the importer does with a row whose parent is neither in the archive nor already imported.
REFUSE = "refuse"  # the archive is refused: the row cannot exist without it
SKIP = "skip"  # the row is left out: it links the archive to something outside it (e.g. another user's skill)
NULL = "null"  # the reference is cleared, as deleting the parent would


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: kinds key dicts
class Kind:
    name: str
    model: type
    # Foreign keys (attnames) to the model of the parent and what a missing parent means.
    parents: dict[str, tuple[type, str]] = field(default_factory=dict)
    # Columns a row shares with the parent a foreign key names (its owner, its scope); a difference is refused.
    same_as_parent: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # UUID columns and UUID arrays holding ids of other rows (not foreign keys).
    id_columns: tuple[str, ...] = ()
    id_arrays: tuple[str, ...] = ()
    # Arrays of EndUser ids (matched like end_user_id; ids of users outside the archive are dropped).
    end_user_arrays: tuple[str, ...] = ()
    # Rewrites ids inside a row's JSON values: fn(values, remap).
    remap_json: Callable | None = None
    # Columns emptied on import (ids of rows that are never imported, such as pipeline tasks).
    cleared: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("organization",)
    # Records only: in a person's archive because erasure covers them, never imported.
    importable: bool = True

    @property
    def file(self) -> str:
        return f"{self.name}.jsonl"

    @property
    def columns(self) -> list[str]:
        return [
            f.attname
            for f in self.model._meta.concrete_fields
            if f.name not in self.exclude and not getattr(f, "generated", False)
        ]

    @property
    def keeps_ids(self) -> bool:
        """Rows with a serial id get a new one (unique keys dedupe them)."""
        return self.model._meta.pk.get_internal_type() == "UUIDField"


def _remap_change(values, remap):
    for column in ("previous_value", "new_value"):
        value = values.get(column)
        if isinstance(value, dict) and isinstance(value.get("source_message_ids"), list):
            values[column] = {**value, "source_message_ids": [remap(item) for item in value["source_message_ids"]]}


def _remap_items_in(column: str) -> Callable:
    def remap_json(values, remap):
        if isinstance(values[column], list):
            values[column] = [
                {**item, **{key: remap(item[key]) for key in ("item_id", "session_id") if item.get(key)}}
                if isinstance(item, dict)
                else item
                for item in values[column]
            ]

    return remap_json


USER = (EndUser, REFUSE)
WRITER = (Client, REFUSE)
# The organisation, and the date spans normalize_dates derives from the text (run it after an import).
WITHOUT_DERIVED = ("organization", "date_span")

END_USERS = Kind("end_users", EndUser)
CLIENTS = Kind("clients", Client)
SESSIONS = Kind("sessions", Session, parents={"end_user_id": USER, "client_id": WRITER})
MESSAGES = Kind(
    "messages",
    Message,
    parents={"end_user_id": USER, "session_id": (Session, REFUSE), "created_by_id": WRITER},
    same_as_parent={"session_id": ("end_user_id", "scope")},
    exclude=WITHOUT_DERIVED,
)
# A LangGraph thread's saved state (PlatformCheckpointer): the person's, as the turns copied from it are.
CHECKPOINTS = Kind("checkpoints", Checkpoint, parents={"end_user_id": USER, "client_id": WRITER})
CHECKPOINT_WRITES = Kind("checkpoint_writes", CheckpointWrite, parents={"end_user_id": USER, "client_id": WRITER})
EXPERIENCES = Kind(
    "experiences",
    SkillExperience,
    parents={"end_user_id": USER, "session_id": (Session, NULL), "created_by_id": WRITER},
    same_as_parent={"session_id": ("end_user_id", "scope")},
    id_arrays=("source_message_ids",),
)
SKILLS = Kind("skills", Skill, parents={"end_user_id": USER}, end_user_arrays=("supporters",))
SKILL_VERSIONS = Kind("skill_versions", SkillVersion, parents={"skill_id": (Skill, REFUSE)})
SKILL_LINEAGE = Kind(
    "skill_lineage",
    SkillVersion.experiences.through,
    exclude=(),
    parents={"skillversion_id": (SkillVersion, SKIP), "skillexperience_id": (SkillExperience, SKIP)},
)
# A skill's evidence: it goes where its skill goes (a use of a skill outside the archive is left out).
SKILL_USES = Kind(
    "skill_uses",
    SkillUse,
    parents={"skill_id": (Skill, SKIP), "end_user_id": USER, "client_id": (Client, SKIP)},
    same_as_parent={"skill_id": ("scope",)},
)
SKILL_FEEDBACK = Kind(
    "skill_feedback",
    SkillFeedback,
    parents={"skill_id": (Skill, SKIP), "end_user_id": USER, "client_id": (Client, NULL)},
    same_as_parent={"skill_id": ("scope",)},
)
# The users a skill not shared with them ranked first for (the review queue's count): with its skill.
SKILLS_WITHHELD = Kind(
    "skills_withheld",
    SkillWithheld,
    parents={"skill_id": (Skill, SKIP), "end_user_id": USER},
    same_as_parent={"skill_id": ("scope",)},
)


def _memory_kinds(name: str, model, change_model) -> tuple[Kind, Kind]:
    memories = Kind(
        f"{name}_memories",
        model,
        parents={"end_user_id": USER, "created_by_id": (Client, NULL)},
        id_arrays=("source_message_ids",),
        exclude=WITHOUT_DERIVED,
    )
    changes = Kind(
        f"{name}_memory_changes",
        change_model,
        parents={"memory_id": (model, REFUSE)},
        remap_json=_remap_change,
        cleared=("task_id",),
        exclude=(),
    )
    return memories, changes


EPISODIC, EPISODIC_CHANGES = _memory_kinds("episodic", EpisodicMemory, EpisodicMemoryChange)
SEMANTIC, SEMANTIC_CHANGES = _memory_kinds("semantic", SemanticMemory, SemanticMemoryChange)
ENTITIES = Kind("entities", Entity, parents={"end_user_id": USER})
MENTIONS = Kind(
    "mentions", Mention, parents={"entity_id": (Entity, SKIP)}, id_columns=("item_id", "session_id"), exclude=()
)
EDGES = Kind(
    "edges",
    Edge,
    parents={"source_id": (Entity, SKIP), "target_id": (Entity, SKIP)},
    remap_json=_remap_items_in("evidence"),
    exclude=(),
)
PROFILES = Kind(
    "profiles",
    Profile,
    parents={"end_user_id": USER, "entity_id": (Entity, REFUSE)},
    same_as_parent={"entity_id": ("end_user_id", "scope")},
    remap_json=_remap_items_in("source_refs"),
)
PROFILE_SOURCES = Kind(
    "profile_sources", ProfileSource, parents={"profile_id": (Profile, SKIP)}, id_columns=("item_id",), exclude=()
)
PROFILE_REVISIONS = Kind(
    "profile_revisions",
    ProfileRevision,
    parents={"profile_id": (Profile, SKIP)},
    remap_json=_remap_items_in("sources"),
    exclude=(),
)
LINT_FINDINGS = Kind(
    "lint_findings", LintFinding, parents={"profile_id": (Profile, SKIP), "peer_id": (Profile, NULL)}, exclude=()
)
TOPIC_STATES = Kind("topic_states", TopicState, parents={"end_user_id": USER})
# Records of a person's archive (what erasure also removes); never imported into another deployment.
INGEST_REQUESTS = Kind("ingest_requests", IngestRequest, exclude=(), importable=False)
API_KEYS = Kind("api_keys", ClientAPIKey, exclude=("hashed_key",), importable=False)
TASKS = Kind("tasks", MemoryTask, importable=False)
LLM_USAGE = Kind("llm_usage", LLMUsage, importable=False)

# Every kind above, in the order defined: the import order.
KINDS = [value for value in list(globals().values()) if isinstance(value, Kind)]
# Matched by natural key (user id, client name) before the other kinds, which name them.
NATURAL = (END_USERS, CLIENTS)
