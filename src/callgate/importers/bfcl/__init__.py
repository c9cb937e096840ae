"""Import the Berkeley Function Calling Leaderboard (BFCL) as callgate suites.

Two halves, both pure functions where possible:

- the importer: BFCL entries (function docs, questions, possible answers) from a data folder or
  the `bfcl-eval` wheel, into a suite directory (tools.json, cases.jsonl, suite.json);
- BFCL's value rules live in `callgate.checks.bfcl_rules` (the checks apply them when a suite's
  `match.values` is "bfcl"); the importer uses them to write answers.

The modules, in the order the data passes through them: `records` (BFCL's files), `tools`
(function docs to tools), `cases` (entries to cases), `writing` (the suite directory), and
`answers` (responses built from the possible answers, for tests and benchmarks).
docs/bfcl.md states every mapping decision.
"""

from callgate.importers.bfcl.answers import (
    answer_arguments,
    answer_lines,
    answer_message,
    first_value,
    message,
    source_text,
)
from callgate.importers.bfcl.cases import (
    MATCH_RULES,
    Converted,
    NeverRight,
    convert_categories,
    convert_category,
    convert_entry,
)
from callgate.importers.bfcl.records import (
    ALL_CATEGORIES,
    CATEGORIES,
    MULTI_TURN_CATEGORIES,
    TESTED_VERSION,
    BfclAnswer,
    BfclEntry,
    BfclFunction,
    CategoryData,
    Kind,
    Language,
    language_of,
    read_category,
)
from callgate.importers.bfcl.tools import (
    FLOAT_HINT,
    GORILLA_TO_OPENAPI,
    LANGUAGE_HINT,
    LANGUAGE_HINTS,
    MAX_NAME,
    OPENAI_NAME,
    Catalogue,
    build_catalogue,
    convert_function,
    openai_name,
    source_types,
)
from callgate.importers.bfcl.writing import (
    SUITE_FILES,
    ImportResult,
    categories_named,
    import_category,
)

__all__ = [
    "ALL_CATEGORIES",
    "CATEGORIES",
    "FLOAT_HINT",
    "GORILLA_TO_OPENAPI",
    "LANGUAGE_HINT",
    "LANGUAGE_HINTS",
    "MATCH_RULES",
    "MAX_NAME",
    "MULTI_TURN_CATEGORIES",
    "OPENAI_NAME",
    "SUITE_FILES", "TESTED_VERSION",
    "BfclAnswer",
    "BfclEntry",
    "BfclFunction",
    "Catalogue",
    "CategoryData",
    "Converted",
    "ImportResult",
    "Kind",
    "Language",
    "NeverRight",
    "answer_arguments",
    "answer_lines",
    "answer_message",
    "build_catalogue",
    "categories_named",
    "convert_categories",
    "convert_category",
    "convert_entry",
    "convert_function",
    "first_value",
    "import_category",
    "language_of",
    "message",
    "openai_name",
    "read_category",
    "source_text",
    "source_types",
]
