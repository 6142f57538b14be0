"""Concrete runtimes. `ScriptedRuntime` is the embedded default; the provider runtimes
(`OpenAIRuntime`, `AnthropicRuntime`) and cassettes import their SDKs only when used."""
from ..agentic_programming.runtime import ModelCallError, ModelResponse, Runtime, ToolCall
from .scripted import ScriptedCall, ScriptedRuntime, ScriptExhausted

__all__ = ["Runtime", "ToolCall", "ModelResponse", "ModelCallError", "ScriptedRuntime",
           "ScriptedCall", "ScriptExhausted"]
