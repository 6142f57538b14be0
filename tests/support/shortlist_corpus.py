"""A menu of 600 tool definitions in the style of public tool sets (MCP servers for GitHub,
Slack, Jira, Drive, Stripe, ...: `service_verb_object` names, one-sentence descriptions, JSON
Schema parameters), and requests labelled with the tool they ask for, for measuring a
shortlist (tests/decision/options/test_core_shortlist.py, benchmarks/bench_shortlist.py).

The requests are written the way users write them, not the way tools are named: verbs by their
synonyms ("remove" for delete, "look up" for get), objects by their short names ("PR"), and a
quarter of them without naming the service at all, where several services hold the same kind of
object and a lexical ranker can only guess. Deterministic (a fixed seed)."""
from __future__ import annotations

import random

SERVICES = {
    # service: (display names used in requests, objects)
    "github": (["GitHub", "our GitHub repo"],
               ["issue", "pull_request", "branch", "release", "commit", "repository"]),
    "gitlab": (["GitLab", "the GitLab project"],
               ["issue", "merge_request", "pipeline", "branch", "tag"]),
    "slack": (["Slack", "the Slack workspace"],
              ["message", "channel", "reminder", "user_group", "emoji"]),
    "jira": (["Jira", "the Jira board"], ["issue", "sprint", "epic", "comment", "board"]),
    "linear": (["Linear", "our Linear workspace"], ["issue", "project", "cycle", "label"]),
    "notion": (["Notion", "the Notion workspace"], ["page", "database", "block", "comment"]),
    "google_drive": (["Google Drive", "my Drive"],
                     ["file", "folder", "permission", "shared_drive"]),
    "gmail": (["Gmail", "my inbox"], ["email", "draft", "label", "filter"]),
    "google_calendar": (["Google Calendar", "my calendar"], ["event", "calendar", "attendee"]),
    "dropbox": (["Dropbox", "the Dropbox account"], ["file", "folder", "shared_link"]),
    "stripe": (["Stripe", "our Stripe account"],
               ["customer", "invoice", "subscription", "refund", "payment_intent"]),
    "salesforce": (["Salesforce", "the CRM"], ["lead", "opportunity", "account", "contact"]),
    "hubspot": (["HubSpot", "HubSpot CRM"], ["contact", "deal", "company", "ticket"]),
    "zendesk": (["Zendesk", "the support desk"], ["ticket", "macro", "organization"]),
    "trello": (["Trello", "the Trello board"], ["card", "list", "board", "checklist"]),
    "asana": (["Asana", "our Asana"], ["task", "project", "section"]),
    "confluence": (["Confluence", "the wiki"], ["page", "space", "attachment"]),
    "postgres": (["Postgres", "the database"], ["table", "row", "index", "schema"]),
    "s3": (["S3", "the S3 bucket"], ["object", "bucket", "presigned_url"]),
    "twilio": (["Twilio", "our Twilio number"], ["sms", "call", "phone_number"]),
    "spotify": (["Spotify", "my Spotify"], ["playlist", "track", "album"]),
    "datadog": (["Datadog", "monitoring"], ["monitor", "dashboard", "incident"]),
    "kubernetes": (["Kubernetes", "the cluster"], ["pod", "deployment", "service", "namespace"]),
    "shopify": (["Shopify", "the store"], ["product", "order", "customer", "discount"]),
}

ACTIONS = {
    # verb: (description template, request phrasings)
    "create": ("Create a new {o} in {s}.", ["create a new {o}", "open a new {o}", "make a {o}",
                                              "add a {o}", "set up a {o}"]),
    "get": ("Get one {o} from {s} by its ID, with all its fields.",
            ["look up the {o}", "show me the details of the {o}", "fetch the {o}",
             "pull up {o}"]),
    "list": ("List the {o}s in {s}, newest first, with paging.",
             ["show me all the {o}s", "what {o}s are there", "enumerate every {o}",
              "give me a list of {o}s"]),
    "update": ("Update the fields of an existing {o} in {s}.",
               ["change the {o}", "edit the {o}", "modify the {o}", "rename the {o}"]),
    "delete": ("Delete a {o} from {s}. This cannot be undone.",
               ["remove the {o}", "get rid of the {o}", "erase the {o}", "delete that {o}"]),
    "search": ("Search {s} {o}s by a free-text query.",
               ["find {o}s mentioning", "look for any {o} about", "search for {o}s matching"]),
}

# how people name objects in requests
OBJECT_WORDS = {"pull_request": ["PR", "pull request"], "merge_request": ["MR", "merge request"],
                "payment_intent": ["payment", "charge"], "presigned_url": ["download link",
                "presigned URL"], "sms": ["text message", "SMS"], "user_group": ["user group"],
                "shared_link": ["share link"], "shared_drive": ["shared drive", "team drive"],
                "phone_number": ["phone number"], "email": ["email", "mail"]}

TOPICS = ["the login crash", "Q3 planning", "the billing bug", "onboarding", "the outage on "
          "Friday", "release 2.4", "customer Acme", "the design review", "dark mode",
          "the flaky test"]


def _words(o: str) -> str:
    return o.replace("_", " ")


def tools() -> list[dict]:
    """The menu: MCP tool definitions (name, description, inputSchema)."""
    out = []
    for s, (shown, objects) in SERVICES.items():
        display = shown[0]
        for o in objects:
            for verb, (desc, _) in ACTIONS.items():
                props = {}
                if verb in ("get", "update", "delete"):
                    props[f"{o}_id"] = {"type": "string", "description": f"The {_words(o)}'s ID."}
                if verb in ("create", "update"):
                    props["name"] = {"type": "string",
                                     "description": f"Title or name of the {_words(o)}."}
                    props["body"] = {"type": "string", "description": "Text content."}
                if verb == "search":
                    props["query"] = {"type": "string", "description": "Words to look for."}
                if verb in ("list", "search"):
                    props["limit"] = {"type": "integer", "minimum": 1, "maximum": 100,
                                      "description": "How many to return."}
                out.append({"name": f"{s}_{verb}_{o}",
                            "description": desc.format(o=_words(o), s=display),
                            "inputSchema": {"type": "object", "properties": props,
                                            "required": [k for k in props if k != "limit"]}})
    return out


def requests(n: int = 240, seed: int = 38) -> list[tuple[str, str]]:
    """`n` (request, expected tool name) rows, a quarter without the service's name."""
    rng = random.Random(seed)
    menu = tools()
    rows = []
    for i in range(n):
        t = rng.choice(menu)
        s, rest = next((k, t["name"][len(k) + 1:]) for k in SERVICES
                       if t["name"].startswith(k + "_"))
        verb, o = rest.split("_", 1)
        obj = rng.choice(OBJECT_WORDS.get(o, [_words(o)]))
        phrase = rng.choice(ACTIONS[verb][1]).format(o=obj)
        topic = rng.choice(TOPICS)
        where = "" if i % 4 == 3 else f" in {rng.choice(SERVICES[s][0])}"
        rows.append((f"Please {phrase} for {topic}{where}.", t["name"]))
    return rows
