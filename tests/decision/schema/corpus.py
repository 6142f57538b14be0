"""A corpus of tool definitions and JSON Schemas, written for these tests.

Each entry is `(id, definition, good_args)`: a definition in one of the shapes users hand over
(OpenAI chat-completions and responses tools, Anthropic tools, MCP tools, a bare JSON Schema
marked with `openprogram.JsonSchema`), and arguments that fit it. Between them the entries use
every supported keyword (see `test_the_corpus_uses_every_supported_keyword`), the JSON Schema
pydantic emits for nested, recursive and discriminated models (`pydantic_entries()`), and the
loose style of public tool sets: optional parameters left out of `required`, `default` values,
non-standard words (`optional`, `x-...`), unchecked formats and dotted names.
"""
from __future__ import annotations

from typing import Literal


def openai(name, description, parameters):
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters}}


def responses(name, description, parameters):
    return {"type": "function", "name": name, "description": description,
            "parameters": parameters, "strict": False}


def anthropic(name, description, schema):
    return {"name": name, "description": description, "input_schema": schema}


def mcp(name, description, schema):
    return {"name": name, "title": name.replace("_", " ").title(), "description": description,
            "inputSchema": schema, "annotations": {"readOnlyHint": True}}


def obj(properties, required=(), **extra):
    return {"type": "object", "properties": properties, "required": list(required), **extra}


S, INT, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}

CORPUS = [
    # -- OpenAI chat-completions shape ---------------------------------------------------------
    ("weather", openai("get_weather", "Current weather for a city.", obj({
        "city": {"type": "string", "description": "City name", "minLength": 2},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
    }, ["city"])), {"city": "Bern", "unit": "celsius"}),
    ("search_web", openai("search_web", "Search the web.", obj({
        "query": {"type": "string", "maxLength": 200},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        "safe": {"type": "boolean"},
    }, ["query"])), {"query": "json schema", "max_results": 5, "safe": True}),
    ("send_email", openai("send_email", "Send an email.", obj({
        "to": {"type": "string", "format": "email"},
        "subject": {"type": "string", "minLength": 1, "maxLength": 120},
        "body": {"type": "string"},
        "cc": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 5},
    }, ["to", "subject", "body"])), {"to": "ann@example.com", "subject": "Hi", "body": "Hello",
                                     "cc": ["bo@example.com"]}),
    ("create_event", openai("create_event", "Put an event in the calendar.", obj({
        "title": S,
        "date": {"type": "string", "format": "date"},
        "start": {"type": "string", "format": "time"},
        "duration_minutes": {"type": "integer", "multipleOf": 15, "minimum": 15},
    }, ["title", "date"])), {"title": "Standup", "date": "2024-03-01", "start": "09:00:00Z",
                             "duration_minutes": 30}),
    ("set_thermostat", openai("set_thermostat", "Set the temperature.", obj({
        "celsius": {"type": "number", "minimum": 5, "maximum": 30, "multipleOf": 0.5},
        "room": {"type": "string", "enum": ["kitchen", "living", "bedroom"]},
    }, ["celsius", "room"])), {"celsius": 21.5, "room": "kitchen"}),
    ("open_url", openai("open_url", "Open a web page.", obj({
        "url": {"type": "string", "format": "uri"},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 60},
    }, ["url"])), {"url": "https://example.com/a", "timeout_s": 2.5}),
    ("lookup_order", openai("lookup_order", "Find an order by id.", obj({
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
    }, ["order_id"])), {"order_id": "ORD-123456"}),
    ("get_user", openai("get_user", "A user by id.", obj({
        "user_id": {"type": "string", "format": "uuid"},
        "fields": {"type": "array", "items": {"enum": ["name", "email", "plan"]},
                   "uniqueItems": True, "minItems": 1},
    }, ["user_id"])), {"user_id": "123e4567-e89b-12d3-a456-426614174000",
                       "fields": ["name", "plan"]}),
    ("math.factorial", openai("math.factorial", "n! for a small n.", obj({
        "n": {"type": "integer", "minimum": 0, "maximum": 20},
    }, ["n"])), {"n": 5}),
    ("translate", openai("translate", "Translate a text.", obj({
        "text": {"type": "string", "minLength": 1},
        "target": {"type": "string", "pattern": "^[a-z]{2}$", "description": "ISO 639-1 code"},
        "formal": {"type": ["boolean", "null"]},
    }, ["text", "target"])), {"text": "Hallo", "target": "en", "formal": None}),
    ("resize_image", openai("resize_image", "Resize an image.", obj({
        "width": {"type": "integer", "minimum": 1, "maximum": 8192},
        "height": {"type": "integer", "minimum": 1, "maximum": 8192},
        "keep_aspect": {"type": "boolean", "default": True},
        "format": {"type": "string", "enum": ["png", "jpeg", "webp"]},
    }, ["width", "height"])), {"width": 640, "height": 480, "format": "png"}),
    ("rate_review", openai("rate_review", "Rate a review.", obj({
        "stars": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        "helpful": B,
        "tags": {"type": "array", "items": S, "maxItems": 3},
    }, ["stars"])), {"stars": 4, "helpful": False, "tags": ["fast"]}),
    ("geo_point", openai("geo_point", "Mark a point.", obj({
        "point": {"type": "array", "prefixItems": [
            {"type": "number", "minimum": -90, "maximum": 90},
            {"type": "number", "minimum": -180, "maximum": 180}],
            "minItems": 2, "maxItems": 2},
        "label": S,
    }, ["point"])), {"point": [46.9, 7.4], "label": "Bern"}),
    ("run_sql", openai("run_sql", "Run a read-only query.", obj({
        "sql": {"type": "string", "pattern": "^(?i:select)\\b", "maxLength": 2000},
        "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 1000},
    }, ["sql"], additionalProperties=False)), {"sql": "SELECT 1", "limit": 10}),
    ("const_mode", openai("archive", "Archive the current thread.", obj({
        "mode": {"const": "archive"},
        "reason": {"type": "string", "maxLength": 80},
    }, ["mode"])), {"mode": "archive", "reason": "done"}),
    ("no_params", openai("refresh", "Refresh the view.", obj({})), {}),
    ("nested_address", openai("ship", "Ship a parcel.", obj({
        "address": obj({
            "street": {"type": "string", "minLength": 3},
            "zip": {"type": "string", "pattern": "^[0-9]{4,5}$"},
            "country": {"type": "string", "enum": ["CH", "DE", "FR"]},
        }, ["street", "zip", "country"]),
        "weight_kg": {"type": "number", "exclusiveMinimum": 0, "maximum": 30},
    }, ["address", "weight_kg"])), {"address": {"street": "Main 1", "zip": "3000",
                                               "country": "CH"}, "weight_kg": 2.5}),
    ("line_items", openai("checkout", "Check out a cart.", obj({
        "items": {"type": "array", "minItems": 1, "items": obj({
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 99},
        }, ["sku", "qty"])},
        "coupon": {"type": ["string", "null"], "maxLength": 12},
    }, ["items"])), {"items": [{"sku": "ABC-1", "qty": 2}], "coupon": None}),

    # -- OpenAI responses shape -----------------------------------------------------------------
    ("r_summarize", responses("summarize", "Summarize a document.", obj({
        "doc_id": {"type": "string", "minLength": 8, "maxLength": 8},
        "style": {"type": "string", "enum": ["bullets", "prose"]},
        "max_words": {"type": "integer", "minimum": 10, "maximum": 500},
    }, ["doc_id", "style", "max_words"], additionalProperties=False)),
     {"doc_id": "DOC00001", "style": "bullets", "max_words": 100}),
    ("r_classify", responses("classify", "Classify a ticket.", obj({
        "label": {"type": "string", "enum": ["bug", "feature", "question"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    }, ["label", "confidence"])), {"label": "bug", "confidence": 0.9}),
    ("r_schedule", responses("schedule.meeting", "Schedule a meeting.", obj({
        "when": {"type": "string", "format": "date-time"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"},
                      "minItems": 2, "uniqueItems": True},
    }, ["when", "attendees"])), {"when": "2024-03-01T10:00:00Z",
                                 "attendees": ["a@x.org", "b@x.org"]}),
    ("r_transfer", responses("transfer", "Transfer money.", obj({
        "amount": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "to_account": {"type": "string", "minLength": 5},
    }, ["amount", "currency", "to_account"])), {"amount": 12.5, "currency": "CHF",
                                                "to_account": "CH93-0000"}),
    ("r_feedback", responses("feedback", "Leave feedback.", obj({
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "comment": {"type": ["string", "null"]},
    }, ["score", "comment"])), {"score": 7, "comment": None}),
    ("r_tags", responses("set_tags", "Tag an item.", obj({
        "tags": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 20},
                 "maxProperties": 4},
    }, ["tags"])), {"tags": {"color": "red"}}),
    ("r_matrix", responses("matrix", "A small matrix.", obj({
        "rows": {"type": "array", "maxItems": 3, "items": {
            "type": "array", "minItems": 2, "maxItems": 2, "items": INT}},
    }, ["rows"])), {"rows": [[1, 2], [3, 4]]}),
    ("r_pick_color", responses("pick_color", "Pick a color.", obj({
        "color": {"enum": ["red", "green", 3, None]},
    }, ["color"])), {"color": "green"}),

    # -- Anthropic shape ------------------------------------------------------------------------
    ("a_weather", anthropic("get_weather", "Get the current weather in a given location", obj({
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                 "description": "The unit of temperature"},
    }, ["location"])), {"location": "San Francisco, CA", "unit": "fahrenheit"}),
    ("a_stock", anthropic("get_stock_price", "Latest price of a ticker.", obj({
        "ticker": {"type": "string", "pattern": "^[A-Z]{1,5}$"},
    }, ["ticker"])), {"ticker": "AAPL"}),
    ("a_calc", anthropic("calculator", "Evaluate an arithmetic expression.", obj({
        "expression": {"type": "string", "minLength": 1, "maxLength": 100},
        "precision": {"type": "integer", "minimum": 0, "maximum": 10, "default": 2},
    }, ["expression"])), {"expression": "2+2"}),
    ("a_record", anthropic("record_summary", "Record a structured summary.", obj({
        "key_colors": {"type": "array", "items": obj({
            "r": {"type": "number", "minimum": 0, "maximum": 1},
            "g": {"type": "number", "minimum": 0, "maximum": 1},
            "b": {"type": "number", "minimum": 0, "maximum": 1},
            "name": {"type": "string", "description": "snake_case name"},
        }, ["r", "g", "b", "name"])},
        "description": S,
        "estimated_year": {"type": "integer", "minimum": 1800, "maximum": 2100},
    }, ["key_colors", "description"])),
     {"key_colors": [{"r": 0.1, "g": 0.2, "b": 0.3, "name": "navy"}], "description": "dark"}),
    ("a_entities", anthropic("print_entities", "Print extracted entities.", obj({
        "entities": {"type": "array", "items": obj({
            "name": S,
            "type": {"type": "string", "enum": ["PERSON", "ORG", "LOC"]},
            "context": S,
        }, ["name", "type", "context"])},
    }, ["entities"])), {"entities": [{"name": "Ada", "type": "PERSON", "context": "x"}]}),
    ("a_sentiment", anthropic("print_sentiment_scores", "Sentiment scores.", obj({
        "positive_score": {"type": "number", "minimum": 0, "maximum": 1},
        "negative_score": {"type": "number", "minimum": 0, "maximum": 1},
        "neutral_score": {"type": "number", "minimum": 0, "maximum": 1},
    }, ["positive_score", "negative_score", "neutral_score"])),
     {"positive_score": 0.7, "negative_score": 0.1, "neutral_score": 0.2}),
    ("a_union", anthropic("lookup", "Look up by id or name.", obj({
        "key": {"anyOf": [{"type": "integer", "minimum": 1},
                          {"type": "string", "minLength": 3}]},
    }, ["key"])), {"key": "abc"}),
    ("a_timeline", anthropic("timeline", "Events in order.", obj({
        "events": {"type": "array", "maxItems": 10, "items": obj({
            "at": {"type": "string", "format": "date"},
            "what": {"type": "string", "maxLength": 50},
        }, ["at", "what"])},
    }, ["events"])), {"events": [{"at": "2020-01-01", "what": "start"}]}),
    ("a_nullable_openapi", anthropic("set_note", "Set or clear a note.", obj({
        "note": {"type": "string", "nullable": True, "maxLength": 30},
    }, ["note"])), {"note": None}),

    # -- MCP shape ------------------------------------------------------------------------------
    ("m_read_file", mcp("read_file", "Read a file from the workspace.", obj({
        "path": {"type": "string", "minLength": 1},
        "encoding": {"type": "string", "enum": ["utf-8", "latin-1"], "default": "utf-8"},
    }, ["path"])), {"path": "README.md"}),
    ("m_list_dir", mcp("list_directory", "List a directory.", obj({
        "path": S,
        "recursive": {"type": "boolean", "default": False},
        "max_depth": {"type": "integer", "minimum": 1, "maximum": 5},
    }, ["path"])), {"path": "/", "recursive": True, "max_depth": 2}),
    ("m_git_commit", mcp("git_commit", "Record changes.", obj({
        "repo_path": S,
        "message": {"type": "string", "minLength": 3, "maxLength": 72},
        "files": {"type": "array", "items": S, "minItems": 1, "uniqueItems": True},
    }, ["repo_path", "message"])), {"repo_path": ".", "message": "fix", "files": ["a.py"]}),
    ("m_fetch", mcp("fetch", "Fetch a URL.", obj({
        "url": {"type": "string", "format": "uri", "description": "URL to fetch"},
        "max_length": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000000,
                       "default": 5000},
        "raw": {"type": "boolean", "default": False},
    }, ["url"])), {"url": "https://example.com"}),
    ("m_memory", mcp("create_entities", "Create entities in the knowledge graph.", obj({
        "entities": {"type": "array", "items": obj({
            "name": S, "entityType": S,
            "observations": {"type": "array", "items": S},
        }, ["name", "entityType", "observations"])},
    }, ["entities"])), {"entities": [{"name": "Ada", "entityType": "person",
                                      "observations": ["wrote notes"]}]}),
    ("m_time", mcp("convert_time", "Convert a time between zones.", obj({
        "source_timezone": S,
        "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "target_timezone": S,
    }, ["source_timezone", "time", "target_timezone"])),
     {"source_timezone": "Europe/Zurich", "time": "14:30", "target_timezone": "UTC"}),
    ("m_sequential", mcp("sequentialthinking", "Think step by step.", obj({
        "thought": S,
        "nextThoughtNeeded": B,
        "thoughtNumber": {"type": "integer", "minimum": 1},
        "totalThoughts": {"type": "integer", "minimum": 1},
    }, ["thought", "nextThoughtNeeded", "thoughtNumber", "totalThoughts"])),
     {"thought": "first", "nextThoughtNeeded": True, "thoughtNumber": 1, "totalThoughts": 3}),
    ("m_edit", mcp("edit_file", "Edit a file by replacements.", obj({
        "path": S,
        "edits": {"type": "array", "items": obj({"oldText": S, "newText": S},
                                                ["oldText", "newText"],
                                                additionalProperties=False)},
        "dryRun": {"type": "boolean", "default": False},
    }, ["path", "edits"], additionalProperties=False, **{"$schema":
                                                         "http://json-schema.org/draft-07/schema#"})),
     {"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("m_props_bounds", mcp("set_env", "Set environment variables.", obj({
        "vars": {"type": "object", "additionalProperties": S, "minProperties": 1,
                 "maxProperties": 3},
    }, ["vars"])), {"vars": {"A": "1"}}),
    ("m_dotted", mcp("files.search", "Search files by glob.", obj({
        "glob": {"type": "string", "minLength": 1}}, ["glob"])), {"glob": "*.py"}),

    # -- loose public-tool-set style: optional words, x- vendor keys, unchecked formats -------
    ("loose_optional", openai("add_task", "Add a task.", obj({
        "title": {"type": "string", "optional": False},
        "due": {"type": "string", "format": "date", "optional": True},
        "priority": {"type": "integer", "minimum": 1, "maximum": 3, "x-ui-widget": "slider"},
    }, ["title"], **{"x-category": "productivity"})), {"title": "Write tests", "priority": 2}),
    ("loose_hostname", anthropic("ping", "Ping a host.", obj({
        "host": {"type": "string", "format": "hostname"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 4,
                  "examples": [1, 4]},
    }, ["host"])), {"host": "example.com", "count": 3}),
    ("loose_ipv4", mcp("block_ip", "Block an address.", obj({
        "ip": {"type": "string", "format": "ipv4", "x-deprecated-alias": "address"},
        "minutes": {"type": "integer", "minimum": 1, "$comment": "at most a day",
                    "maximum": 1440},
    }, ["ip"])), {"ip": "10.0.0.1", "minutes": 5}),
    ("loose_titles", openai("convert_units", "Convert a quantity.", {
        "type": "object", "title": "ConvertUnits",
        "properties": {
            "value": {"type": "number", "title": "Value", "description": "the quantity"},
            "from": {"type": "string", "title": "From", "enum": ["m", "ft", "in"]},
            "to": {"type": "string", "title": "To", "enum": ["m", "ft", "in"]},
        }, "required": ["value", "from", "to"]}), {"value": 3, "from": "m", "to": "ft"}),
    ("loose_no_required", openai("list_repos", "List repositories.", {
        "type": "object", "properties": {
            "org": {"type": "string"},
            "page": {"type": "integer", "minimum": 1, "default": 1},
            "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30},
        }}), {"org": "acme"}),
    ("loose_deprecated", anthropic("old_search", "Search (old).", obj({
        "q": {"type": "string", "deprecated": True, "readOnly": False},
        "lang": {"type": "string", "default": "en", "x-order": 2},
    }, ["q"])), {"q": "x"}),

    # -- plain JSON Schema, marked --------------------------------------------------------------
    ("js_refs", obj({
        "billing": {"$ref": "#/$defs/Address"},
        "shipping": {"$ref": "#/$defs/Address"},
    }, ["billing"], **{"$defs": {"Address": obj({
        "city": {"type": "string", "minLength": 1},
        "zip": {"type": "string", "pattern": "^[0-9]{4}$"},
    }, ["city", "zip"])}}), {"billing": {"city": "Bern", "zip": "3000"}}),
    ("js_definitions", obj({
        "owner": {"$ref": "#/definitions/Person"},
    }, ["owner"], definitions={"Person": obj({
        "name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
        ["name"])}), {"owner": {"name": "Ada", "age": 36}}),
    ("js_recursive", obj({
        "tree": {"$ref": "#/$defs/Node"},
    }, ["tree"], **{"$defs": {"Node": obj({
        "label": {"type": "string", "maxLength": 10},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 3},
    }, ["label"])}}), {"tree": {"label": "root", "children": [{"label": "a"}]}}),
    ("js_allof", obj({
        "item": {"allOf": [
            obj({"id": {"type": "integer", "minimum": 1}}, ["id"]),
            obj({"name": {"type": "string", "minLength": 2}}, ["name"]),
        ]},
    }, ["item"]), {"item": {"id": 3, "name": "Bo"}}),
    ("js_oneof", obj({
        "shape": {"oneOf": [
            obj({"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
                ["kind", "r"]),
            obj({"kind": {"const": "square"}, "side": {"type": "number", "minimum": 0}},
                ["kind", "side"]),
        ]},
    }, ["shape"]), {"shape": {"kind": "circle", "r": 2}}),
    ("js_type_list", obj({
        "value": {"type": ["string", "integer"]},
        "maybe": {"type": ["number", "null"], "minimum": 0},
    }, ["value"]), {"value": 3, "maybe": 1.5}),
    ("js_bool_schemas", obj({
        "anything": True,
        "free": {"type": "object"},
        "list_any": {"type": "array"},
    }, ["anything"]), {"anything": {"x": [1, "y"]}, "free": {"k": 1}, "list_any": [1, "a"]}),
    ("js_additional_schema", obj({
        "name": S,
    }, ["name"], additionalProperties={"type": "integer", "minimum": 0}),
     {"name": "n", "count": 3}),
    ("js_enum_mixed", obj({
        "level": {"enum": [0, "low", "high", True]},
    }, ["level"]), {"level": "low"}),
    ("js_examples_default", obj({
        "greeting": {"type": "string", "default": "hi", "examples": ["hello", "hey"],
                     "maxLength": 10},
        "times": {"type": "integer", "default": 1, "minimum": 1, "maximum": 3},
    }), {"greeting": "hello", "times": 2}),
    ("js_ref_siblings", obj({
        "code": {"$ref": "#/$defs/Code", "description": "a country code"},
    }, ["code"], **{"$defs": {"Code": {"type": "string", "pattern": "^[A-Z]{2}$"}}}),
     {"code": "CH"}),
    ("js_prefix_rest", obj({
        "row": {"type": "array", "prefixItems": [S, INT], "items": B, "maxItems": 4},
    }, ["row"]), {"row": ["a", 1, True]}),
    ("js_deep", obj({
        "a": obj({"b": obj({"c": obj({"d": {"type": "integer", "multipleOf": 3}}, ["d"])},
                           ["c"])}, ["b"]),
    }, ["a"]), {"a": {"b": {"c": {"d": 9}}}}),
    ("js_nullable_object", obj({
        "meta": {"anyOf": [obj({"k": S}, ["k"]), {"type": "null"}]},
    }, ["meta"]), {"meta": {"k": "v"}}),
]


def pydantic_entries():
    """Entries whose schema pydantic writes (`model_json_schema()`): nested, recursive and
    discriminated models, as a user's existing code would hand them over."""
    from pydantic import BaseModel, Field

    class Address(BaseModel):
        street: str = Field(min_length=3)
        zip: str = Field(pattern=r"^[0-9]{4}$")

    class Customer(BaseModel):
        """A customer."""
        name: str = Field(max_length=40)
        age: int = Field(ge=18, le=120)
        address: Address
        tags: list[str] = Field(default_factory=list, max_length=3)

    class Category(BaseModel):
        name: str = Field(min_length=1)
        sub: list[Category] = Field(default_factory=list)

    class Cat(BaseModel):
        pet_type: Literal["cat"]
        meows: int = Field(ge=0)

    class Dog(BaseModel):
        pet_type: Literal["dog"]
        barks: float = Field(ge=0)

    class Owner(BaseModel):
        pet: Cat | Dog = Field(discriminator="pet_type")
        nickname: str | None = None

    class Money(BaseModel):
        amount: float = Field(gt=0, multiple_of=0.5)
        currency: Literal["CHF", "EUR"] = "CHF"

    return [
        ("p_nested", Customer.model_json_schema(),
         {"name": "Ada", "age": 36, "address": {"street": "Main 1", "zip": "3000"},
          "tags": ["vip"]}),
        ("p_recursive", Category.model_json_schema(),
         {"name": "root", "sub": [{"name": "leaf", "sub": []}]}),
        ("p_discriminated", Owner.model_json_schema(),
         {"pet": {"pet_type": "dog", "barks": 2.0}, "nickname": None}),
        ("p_money", Money.model_json_schema(), {"amount": 2.5, "currency": "EUR"}),
    ]


def all_entries():
    return CORPUS + pydantic_entries()
