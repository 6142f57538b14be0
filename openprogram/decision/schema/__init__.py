"""The schema model, the first stage of reading an option set: every way of declaring a parameter
or a structure becomes one JSON-Schema-based `Field` (`fields`), checked by one validator
(`validator.compile_schema`), read for the menu by one reader (`reader`: type names, `$ref`,
constraints), with the one Python-to-JSON type table (`type_table`) and the rules for what a
reply's values may be (`reply_values`). The option kinds in `decision.options` build on it.
"""
