"""Framework adapters built on `MemoryClient`/`AsyncMemoryClient`, each behind an extra:
`langgraph_store.PlatformStore` (LangGraph's `BaseStore`, extra `langgraph`),
`openai_agents.PlatformSession` (the OpenAI Agents SDK's `Session`, extra `openai-agents`) and
`langchain_history.PlatformChatMessageHistory` (LangChain's `BaseChatMessageHistory`, extra
`langchain`). Import the module you need; this package imports no framework."""
