"""MkDocs hook: the markers in the reference pages become what the code says, at build time.
reference/cli.md gets the CLI reference generated from the typer app (callgate.cli.reference);
reference/api.md gets a mkdocstrings block for every public name of `callgate` (its
`__all__`), under the stage module that defines it."""

from __future__ import annotations

from typing import Any

CLI_MARKER = "<!-- callgate: the generated CLI reference -->"
API_MARKER = "<!-- callgate: the generated API reference -->"


def api_reference() -> str:
    import callgate

    where: dict[str, str] = callgate._WHERE
    blocks = [f"::: {where[name]}.{name}" for name in sorted(where, key=lambda n: (where[n], n))]
    return "\n\n".join(blocks)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    markers = {"reference/cli.md": CLI_MARKER, "reference/api.md": API_MARKER}
    marker = markers.get(page.file.src_uri)
    if marker is None:
        return markdown
    if marker not in markdown:
        raise ValueError(f"{page.file.src_uri}: the marker {marker!r} is missing")
    if marker == CLI_MARKER:
        from callgate.cli.reference import cli_reference

        return markdown.replace(marker, cli_reference())
    return markdown.replace(marker, api_reference())
