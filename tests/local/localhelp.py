"""What the local-model tests share: one option set with a function, a value and a schema
option, customer requests to decide on, and a token counter."""
from __future__ import annotations


def book_hotel(city: str, nights: int) -> str:
    """Book a hotel room in a city for a number of nights."""
    return f"booked {nights} night(s) in {city}"


#: One option of each kind: a function (it runs), a value (it is returned), a schema (filled).
OPTIONS = {
    "book_hotel": book_hotel,
    "done": ("DONE", "pick when the customer needs nothing more"),
    "escalate": ("Hand the request to a person.", {
        "reason": str, "urgency": {"type": str, "options": ["low", "high"]}}),
}

REQUESTS = [
    "Customer: I need a room in Lisbon for three nights.",
    "Customer: Thanks, that is all I needed!",
    "Customer: Your site charged me twice and I am furious. I want a manager.",
    "Customer: Book me two nights in Oslo, please.",
]


def prompt(request: str) -> str:
    return f"{request}\nPick the one next step that helps this customer."


class Tokens:
    """A logits processor that changes nothing and counts the tokens llama.cpp samples (one
    call per token): how a test bounds a generation by its work, not by a clock."""

    def __init__(self):
        self.sampled = 0

    def __call__(self, input_ids, scores):
        self.sampled += 1
        return scores
