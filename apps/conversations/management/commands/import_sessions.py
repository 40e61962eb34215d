"""Import an OpenAI-format trajectory file through the same ingest service as the API: each session
is stored whole, in one transaction, and sealed."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.conversations.services.ingest import messages_ingest
from apps.conversations.turns import TurnError
from apps.core.errors import ConflictError
from apps.core.progress import show_progress, wrote_json
from apps.core.validation import InputError, loads
from apps.tenancy.models import Client


def trajectory_sessions(data) -> list[dict]:
    """Accepts tau-bench trajectories ({task_id, trial, reward, traj, info}) or {session_id, messages} items."""
    if isinstance(data, dict):
        data = [data]
    sessions = []
    if not isinstance(data, list):
        raise CommandError("The file must hold a JSON list of sessions (or one session object).")
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise CommandError(f"Item {index} is not a JSON object.")
        messages = item.get("messages") or item.get("traj")
        if not isinstance(messages, list):
            raise CommandError(f"Item {index} has neither 'messages' nor 'traj'.")
        if "traj" in item:
            session_id = f"tau-{item.get('task_id', index)}-{item.get('trial', 0)}"
            user_id = ((item.get("info") or {}).get("task") or {}).get("user_id") or "imported"
            reward = item.get("reward")
            if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
                raise CommandError(f"Item {index} has a reward that is not a number.")
            outcome = "unknown" if reward is None else ("success" if reward >= 1.0 else "failure")
        else:
            session_id = item.get("session_id") or f"import-{index}"
            user_id = item.get("user_id") or "imported"
            outcome = item.get("outcome") or "unknown"
        sessions.append({"session_id": session_id, "user_id": user_id, "outcome": outcome, "messages": messages})
    return sessions


def _problem(exc: Exception) -> str:
    if isinstance(exc, TurnError):
        return str(exc.errors)
    if isinstance(exc, ValidationError):
        return "; ".join(f"{name}: {' '.join(texts)}" for name, texts in exc.message_dict.items())
    return str(exc)


class Command(BaseCommand):
    help = "Ingest a trajectory file (a JSON list of OpenAI-format sessions) as sealed sessions."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--org", required=True)
        parser.add_argument("--client", required=True, help="Name of the writing client.")
        parser.add_argument("--tag", choices=["task", "conversation"], default=None)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, file, **options):
        client = (
            Client.objects.select_related("organization")
            .filter(organization__name=options["org"], name=options["client"])
            .first()
        )
        if client is None:
            raise CommandError(f"No client {options['client']!r} in organisation {options['org']!r}.")
        if not client.write_scope:
            raise CommandError(f"Client {client.name!r} is read-only (no write scope).")
        try:
            with open(file, "rb") as handle:
                sessions = trajectory_sessions(loads(handle.read(), check_values=False))
        except (OSError, InputError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from None

        stored = skipped = 0
        for number, item in enumerate(sessions, start=1):
            try:
                ingested = messages_ingest(
                    client=client,
                    user_id=item["user_id"],
                    session_id=item["session_id"],
                    messages=item["messages"],
                    session_tag=options["tag"],
                    seal=True,
                    outcome=item["outcome"],
                )
            except (TurnError, ConflictError, ValidationError) as exc:
                self.stderr.write(f"skipped {item['session_id']!r}: {_problem(exc)}")
                skipped += 1
                continue
            stored += ingested.messages_stored
            if not options["json"]:
                show_progress("sessions", number, len(sessions))
        if not wrote_json(self, options, {"sessions": len(sessions) - skipped, "skipped": skipped, "messages": stored}):
            self.stdout.write(self.style.SUCCESS(f"Imported {len(sessions) - skipped} sessions, {stored} messages."))
