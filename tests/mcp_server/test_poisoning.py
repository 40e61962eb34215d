"""The skill-poisoning attack of issue 26 (bench/privacy/poisoning.py) through the deployed MCP
endpoint: no other user is served the attacker's strings by `retrieve_skills` or `search_memory`."""

import pytest
from django.test import override_settings

from bench.privacy.poisoning import BYSTANDER, HONEST_USERS, TASK, attack_sessions, learn, poisoned
from tests.mcp_server.mcp_client import http_transport, run

pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(LLM_PROVIDER="rules")
def test_the_attack_serves_no_poisoned_string_to_another_user_over_mcp(mcp_server, client_a):
    learn(client_a, attack_sessions())

    async def scenario(session):
        served = {}
        for user_id in [*HONEST_USERS, BYSTANDER, None]:
            user = {"user_id": user_id} if user_id else {}
            served[user_id] = {
                "skills": (
                    await session.call_tool("retrieve_skills", {"task": TASK, "k": 10, **user})
                ).structured_content,
                "search": (
                    await session.call_tool(
                        "search_memory", {"user_id": user_id or "nobody", "query": TASK, "memory_types": ["procedural"]}
                    )
                ).structured_content,
            }
        return served

    served = run(http_transport(mcp_server.url, {"Authorization": f"Api-Key {client_a.raw_key}"}), scenario)

    for user_id, payload in served.items():
        assert payload["skills"]["skills"], user_id  # the workflow the honest users taught is served…
        assert poisoned(payload) == [], user_id  # …without the attacker's text
