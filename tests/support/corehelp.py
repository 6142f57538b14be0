"""Replies written as a model would write them, for the decision-core tests."""
import json


def pick(name, args=None, *, key="call", fence=True):
    """A model reply that picks `name` (in a ```json fence, as the finish instruction asks)."""
    obj = {key: name}
    if args is not None:
        obj["args"] = args
    text = json.dumps(obj)
    return f"```json\n{text}\n```" if fence else text
