"""The report's Jinja2 environment: templates/*.j2 beside this file, compiled once per process and cached.

Jinja2 is imported on first use only (``get_template``), so importing the report package needs nothing but the
standard library (the summary, fleet.json, fleet.csv and gpufleet.prom do not use it; module_utils is also
imported by ansible-test's sanity import test without Jinja2).

Escaping: ``*.html.j2`` templates (the page and its SVG macros) are rendered with autoescape on: every value
printed is HTML-escaped unless it is a ``trusted`` constant of this package (the sort script). ``*.md.j2``
templates have autoescape off and escape every host-provided value with the explicit ``md`` filter
(``md_row`` for a list of cells); ``t`` turns a value into its table text (None as "", numbers trimmed).
"""

import html
import os
import re

from ._common import _text

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

_ENV = None

# Text that needs no Markdown/HTML escaping and no whitespace folding: words of safe characters
# separated by single spaces (most cells: numbers, model names, "gen 5/5").
_MD_PLAIN = re.compile(r"[^&<>\\|`\s]+(?: [^&<>\\|`\s]+)*")
_MD_CACHE = {}  # text -> Markdown: most cells repeat across hosts and GPUs (model, memory, "gen 5/5", ...)
_MD_CACHE_MAX = 100000


class ReportTemplateError(RuntimeError):
    """Jinja2 is not installed: the HTML and Markdown reports cannot be rendered."""


def md(value):
    """``value`` as the text of one Markdown table cell: HTML-escaped (GitHub renders inline HTML), with
    backslash, pipe and backtick escaped and whitespace folded to single spaces."""
    try:
        return _MD_CACHE[value]
    except (KeyError, TypeError):
        pass
    text = _text(value)
    if not _MD_PLAIN.fullmatch(text):
        text = html.escape(text, quote=False)
        text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
        text = " ".join(text.split())
    if isinstance(value, str) and len(_MD_CACHE) < _MD_CACHE_MAX:
        _MD_CACHE[value] = text
    return text


def md_row(cells):
    """A Markdown table row from a list of values, each escaped with ``md``."""
    cache = _MD_CACHE
    return "| " + " | ".join([cache[c] if isinstance(c, str) and c in cache else md(c) for c in cells]) + " |"


def _autoescape(name):
    return name is None or name.endswith(".html.j2")


def environment():
    """The Jinja2 environment (created on first use)."""
    global _ENV
    if _ENV is None:
        try:
            import jinja2
        except ImportError as exc:  # pragma: no cover - Jinja2 comes with ansible-core
            raise ReportTemplateError("the HTML and Markdown reports need Jinja2: %s" % exc) from exc
        env = jinja2.Environment(
            # autoescape on for *.html.j2; *.md.j2 escape with the explicit md filter (Markdown, not HTML)
            loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=_autoescape, trim_blocks=True,  # noqa: S701
            lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined, auto_reload=False,
            cache_size=-1)
        env.filters.update(t=_text, md=md, md_row=md_row)
        _ENV = env
    return _ENV


def get_template(name):
    """A compiled template from templates/ (cached in the environment)."""
    return environment().get_template(name)


def trusted(text):
    """``text`` marked as safe for an HTML template: only for this package's own constants, never host text."""
    from markupsafe import Markup  # comes with Jinja2

    return Markup(text)  # noqa: S704 - our own constants only (the sort script)
