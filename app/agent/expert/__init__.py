"""The expert subagent: isolated web research that brings back quotes with their URLs
(`app.agent.expert.agent`). Nothing is imported here: a service without a search backend
loads none of it (the page extraction alone is slow to import and holds memory)."""
