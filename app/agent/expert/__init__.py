"""The expert subagent: isolated web research that brings back quotes with their URLs."""

from app.agent.expert.agent import ASK_EXPERT, Expert, ask_expert_tool, build_expert_model

__all__ = ["ASK_EXPERT", "Expert", "ask_expert_tool", "build_expert_model"]
