"""Deterministic re-runs for agent frameworks: stable ids for LLM calls and tool calls.

A re-run after a crash is safe when it makes the same calls: each generation of a batch is keyed
by its place in the batch (``steps``), so the proxy replays the recorded generation and the model
hands back the same tool calls, whose own ids key the tools' effects. ``openai_agents`` and
``langchain`` wire this into the OpenAI Agents SDK and LangChain/LangGraph; each imports its
framework when it is imported itself, so idemproxy depends on neither.
"""
