"""The schema model, the first stage of reading an option set: every way of declaring a parameter
or a structure becomes one JSON-Schema-based `Field` (`fields`), checked by one validator
(`validator.compile_schema`), read for the menu by one reader (`reader`: type names, `$ref`,
constraints), with the one Python-to-JSON type table (`type_table`), the rules for what a
reply's values may be (`reply_values`) and what reading a schema and checking a value may cost
(`budget`). The option kinds in `decision.options` build on it.
"""
