"""Shared pieces of the evaluate tests: a routing option set and a rule-based model for it.

The model reads the message out of the prompt ("Message: <text>") and answers by keyword, so
every row's reply depends only on that row — which is what lets the tests check that each row's
trace, pick and result belong to that row even when rows finish out of order."""
import json

from openprogram import ModelCallError

PROMPT = "Route this support message.\nMessage: {message}\nPick one option."


def refund(amount: int, reason: str = "") -> str:
    if amount < 0:
        raise ZeroDivisionError("negative refund")
    return f"refunded {amount}"


OPTIONS = {
    "refund": (refund, "Refund an order"),
    "escalate": ("Hand to a person", {"team": {"type": str, "options": ["billing", "tech"]}}),
    "ignore": ("IGNORED", "Nothing to do"),
}

GOOD = {
    "refund": json.dumps({"call": "refund", "args": {"amount": 5}}),
    "crash": json.dumps({"call": "refund", "args": {"amount": -1}}),
    "escalate": json.dumps({"call": "escalate", "args": {"team": "tech"}}),
    "ignore": '```json\n{"call": "ignore"}\n```',
}


def message_of(prompt: str) -> str:
    return prompt.split("Message: ", 1)[1].split("\n", 1)[0]


def rule(prompt: str) -> str:
    """Keyword routing. "garbage" never gets a usable reply; "typo" gets an unknown option
    first and a good pick on the re-ask; "outage" makes the model call fail."""
    msg = message_of(prompt)
    reask = prompt.startswith("Your previous reply could not be used")
    if "outage" in msg:
        raise ModelCallError("the model service is down", kind="model_error")
    if "garbage" in msg:
        return "I am not sure what to do here."
    if "typo" in msg:
        return GOOD["ignore"] if reask else json.dumps({"call": "ignroe"})
    for word in ("crash", "refund", "escalate"):
        if word in msg:
            return GOOD[word]
    return GOOD["ignore"]
