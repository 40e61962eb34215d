"""Review-abuse scenarios (issue 39), through the operations the REST views call: end users whose task
sessions retrieve skills (`skills/retrieve` with the session id) and are sealed with an outcome
(`memory/add`), each followed by the review step the distill handler runs after a sealed task session.
tests/skills/test_review.py and `python -m bench privacy` (bench/privacy/review_abuse.py) run them.
"""

from dataclasses import dataclass, field

from apps.conversations.models import Session
from apps.conversations.operations import add_memory
from apps.skills.models import Skill
from apps.skills.operations import apply_skill, retrieve_skills
from apps.skills.services.review import skills_review_effectiveness
from apps.skills.services.skills import skill_create

# Every skill of a world matches this task; each also has a trigger word of its own.
TASK = "change a flight reservation to another day"
TURNS = [{"role": "user", "content": "Change my flight to Friday."}, {"role": "assistant", "content": "Done."}]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett"]


def make_skills(*, organization, scope: str, count: int) -> list[Skill]:
    """`count` active skills shared across the scope, all about TASK, each found alone by its word."""
    skills = []
    for word in WORDS[:count]:
        skills.append(
            skill_create(
                organization=organization,
                scope=scope,
                fields={
                    "name": f"change-flight-{word}",
                    "description": f"Change a flight reservation to another day ({word} desk).",
                    "instructions": f"Look up the reservation, offer the {word} fares, confirm the change.",
                    "triggers": [f"{word}zz"],
                },
                actor="admin:curator",
                reason="written by a person",
                status=Skill.Status.ACTIVE,
            )
        )
    return skills


def trigger(skill: Skill) -> str:
    return skill.triggers[0]


def task_session(
    client, *, user_id: str, session_id: str, outcome: str, task: str | None = TASK, k: int = 1, applied=()
) -> dict:
    """One task session: retrieve with its id (none when `task` is None), mark those of the `applied`
    skills it returned as followed, add and seal it with `outcome`, then review. Returns the
    retrieval's answer."""
    answer = {}
    if task is not None:
        answer = retrieve_skills(
            client=client, data={"task": task, "k": k, "user_id": user_id, "session_id": session_id}
        )
    returned = {hit["id"] for hit in answer.get("skills", [])}
    for skill in (skill for skill in applied if str(skill.pk) in returned):
        apply_skill(client=client, skill_id=str(skill.pk), data={"user_id": user_id, "session_id": session_id})
    add_memory(
        client=client,
        data={
            "user_id": user_id,
            "session_id": session_id,
            "messages": TURNS,
            "session_tag": "task",
            "seal": True,
            "outcome": outcome,
        },
    )
    session = Session.objects.select_related("organization").get(
        organization=client.organization, scope=client.write_scope, end_user__user_id=user_id, session_id=session_id
    )
    skills_review_effectiveness(session=session)
    return answer


@dataclass
class World:
    """A scope whose skills have a record: `honest` users each succeeded once with each skill, and
    `baseline` users worked without skills (all but one succeeded)."""

    client: object
    skills: list[Skill]
    sessions: int = 0
    log: list = field(default_factory=list)

    def session(self, *, user_id: str, outcome: str, **options) -> dict:
        self.sessions += 1
        return task_session(
            self.client, user_id=user_id, session_id=f"task-{self.sessions}", outcome=outcome, **options
        )

    def statuses(self) -> dict:
        return dict(Skill.objects.filter(pk__in=[skill.pk for skill in self.skills]).values_list("name", "status"))

    def sent_to_review(self) -> list[str]:
        return sorted(name for name, status in self.statuses().items() if status == Skill.Status.PENDING_REVIEW)


def build_world(client, *, skills: int = 1, honest: int = 10, baseline: int = 10) -> World:
    world = World(
        client=client, skills=make_skills(organization=client.organization, scope=client.write_scope, count=skills)
    )
    for number in range(baseline):
        world.session(user_id=f"baseline-{number}", outcome="failure" if number == 0 else "success", task=None)
    for skill in world.skills:
        for number in range(honest):
            world.session(user_id=f"honest-{skill.name}-{number}", outcome="success", task=trigger(skill))
    return world
