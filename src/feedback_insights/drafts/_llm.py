"""The drafting stage's LLM client: the shared one of :mod:`feedback_insights.llm` (clustering
uses it too, and sits below drafting)."""

from ..llm import ChatClient, LLMError

__all__ = ["ChatClient", "LLMError"]
