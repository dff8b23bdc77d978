"""The optional LLM: one client for any OpenAI-compatible chat-completions endpoint, shared by
the stages that may use one (clustering's problem statements, names and borderline merges;
drafting's titles and summaries). Below every stage: it knows the configuration, no stage."""

from ._client import ChatClient, LLMError, UnusableAnswer

__all__ = ["ChatClient", "LLMError", "UnusableAnswer"]
