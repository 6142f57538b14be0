"""How `LlamaCppRuntime` lays a decision's conversation out for the model: the layouts it offers
(`LAYOUTS`), the menu moved out of the request into a leading system message (`menu_first`, the
prefix every decision of an evaluation shares and the runtime reads once), and the core's messages
as chat-template messages, text only. Apart from runtime.py because this is what the prompt says,
not how it is generated.
"""
from __future__ import annotations

from ...runtime.runtime import ModelCallError, blocks_text, to_blocks

#: How a decision's conversation is laid out for the model (`layout=`).
LAYOUTS = {
    "menu_first": "the menu in a system message first, the request last (the shared prefix "
                  "is read once per evaluation)",
    "as_sent": "as the decision sent it: the request, then the menu, in one user message",
}


def _menu_first(chat: list[dict], menu: str) -> tuple[str, list[dict]] | None:
    """A decision's chat with its menu (the text the decision says it put into the prompt,
    `menu=`) taken out of its one user message: (the menu and what follows it, the chat with the
    request alone); None when the chat is not of that shape (then it goes as sent)."""
    users = [i for i, m in enumerate(chat) if m["role"] == "user"]
    if len(users) != 1 or any(m["role"] == "system" for m in chat):
        return None
    i = users[0]
    text = chat[i]["content"]
    at = text.rfind("\n\n" + menu) if menu else -1
    if at < 0:
        return None
    rest = [*chat[:i], {"role": "user", "content": text[:at]}, *chat[i + 1:]]
    return text[at + 2:], rest


def _chat_message(m: dict) -> dict:
    """One message of the core's conversation as a chat-template message (text only)."""
    role = m.get("role")
    if role in ("user", "system"):
        blocks = to_blocks(m.get("content", ""))
        other = [b.get("type") for b in blocks if b.get("type") != "text"]
        if other:
            raise ModelCallError(f"a content block of type {other[0]!r} cannot be sent to "
                                 f"a llama.cpp text model; send text blocks",
                                 kind="model_error")
        return {"role": role, "content": blocks_text(blocks)}
    if role == "assistant":
        return {"role": "assistant", "content": m.get("content") or ""}
    raise ModelCallError(f"a message with role {role!r} cannot be sent to LlamaCppRuntime (it "
                         f"makes no native tool calls); the roles are user, assistant and "
                         f"system", kind="model_error")
