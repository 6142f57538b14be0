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


# ---------------------------------------------------------------------------------------------
# A tool set as public ones are written: four functions, three to six described parameters each
# (what the speed work of issue 25 is measured on: benchmarks/bench_local.py and the tests)
# ---------------------------------------------------------------------------------------------
from typing import Annotated, Literal  # noqa: E402


def search_flights(
        origin: Annotated[str, "IATA code or city the traveller leaves from"],
        destination: Annotated[str, "IATA code or city the traveller flies to"],
        date: Annotated[str, "day of departure, YYYY-MM-DD"],
        passengers: Annotated[int, "how many people travel"] = 1,
        cabin: Annotated[Literal["economy", "premium", "business"], "cabin class"] = "economy",
) -> str:
    """Search scheduled flights between two places on one day."""
    return f"flights {origin}->{destination} on {date} for {passengers} in {cabin}"


def book_room(
        city: Annotated[str, "the city of the hotel"],
        check_in: Annotated[str, "arrival day, YYYY-MM-DD"],
        nights: Annotated[int, "number of nights"],
        guests: Annotated[int, "number of guests"] = 1,
        breakfast: Annotated[bool, "whether breakfast is included"] = False,
        notes: Annotated[str, "special requests for the hotel"] = "",
) -> str:
    """Book a hotel room for a stay."""
    return f"room in {city} from {check_in}, {nights} night(s)"


def cancel_booking(
        booking_id: Annotated[str, "the booking reference, e.g. AB12CD"],
        reason: Annotated[Literal["changed_plans", "illness", "price", "other"],
                          "why the customer cancels"],
        refund: Annotated[bool, "whether the customer asks for a refund"] = True,
) -> str:
    """Cancel an existing booking, with or without a refund."""
    return f"cancelled {booking_id}"


def open_ticket(
        summary: Annotated[str, "one line saying what went wrong"],
        category: Annotated[Literal["billing", "booking", "website", "other"], "the area"],
        priority: Annotated[Literal["low", "normal", "urgent"], "how fast a person must act"],
        email: Annotated[str, "where the customer wants the answer"] = "",
) -> str:
    """Open a support ticket for a person on the team to handle."""
    return f"ticket [{priority}] {summary}"


TOOLS = {f.__name__: f for f in (search_flights, book_room, cancel_booking, open_ticket)}

#: Twenty customer messages (rows of an evaluation) and the tool a person would pick.
TOOL_REQUESTS = [
    ("Find me a flight from Paris to Rome on 2026-05-02.", "search_flights"),
    ("I need a hotel in Berlin from 2026-03-10 for three nights, two of us.", "book_room"),
    ("Please cancel booking QX81ZT, I am ill.", "cancel_booking"),
    ("Your website charged my card twice! Fix it now.", "open_ticket"),
    ("Any flights from LHR to JFK on 2026-07-14 for 2 people in business?", "search_flights"),
    ("Book a room in Lisbon, arriving 2026-04-01, 2 nights, with breakfast.", "book_room"),
    ("Cancel AB12CD, my plans changed. I want my money back.", "cancel_booking"),
    ("The booking page shows an error every time I log in.", "open_ticket"),
    ("I want to fly Madrid to Oslo on 2026-06-20.", "search_flights"),
    ("Reserve a hotel room in Tokyo from 2026-09-03, 5 nights, quiet room please.", "book_room"),
    ("Please cancel reservation ZZ9PLR, it got too expensive.", "cancel_booking"),
    ("I was billed for a stay I never made. Urgent.", "open_ticket"),
    ("Flights from Boston to Chicago on 2026-02-11, economy, just me.", "search_flights"),
    ("We need a room in Vienna on 2026-12-20 for 4 nights, three guests.", "book_room"),
    ("Cancel my booking KL55MN, no refund needed.", "cancel_booking"),
    ("Nobody answered my email about a wrong invoice; write to me at a@b.org.", "open_ticket"),
    ("Is there a flight from Dublin to Prague on 2026-08-08?", "search_flights"),
    ("Hotel in Oslo please, check in 2026-01-15, one night.", "book_room"),
    ("I have to cancel HT42QW because of illness.", "cancel_booking"),
    ("The app crashed while I was paying and now I do not know if I booked.", "open_ticket"),
]


def tool_prompt(request: str) -> str:
    return f"Customer: {request}\nPick the one tool call that serves this customer."


def grammar_rules(gbnf: str) -> int:
    """The rules llama.cpp's grammar parser makes of a GBNF text: one per named rule, one per
    parenthesised group and one per repetition (`*`, `+`, `?`, `{m,n}`), which it turns into
    rules of their own. Literals and character classes are skipped."""
    rules, i, n = 0, 0, len(gbnf)
    for line in gbnf.splitlines():
        if "::=" in line and not line.lstrip().startswith("#"):
            rules += 1
    while i < n:
        c = gbnf[i]
        if c in "\"[":
            close = '"' if c == '"' else "]"
            i += 1
            while i < n and gbnf[i] != close:
                i += 2 if gbnf[i] == "\\" else 1
        elif c == "#":
            while i < n and gbnf[i] != "\n":
                i += 1
        elif c in "(*+?{":
            rules += 1
        i += 1
    return rules
