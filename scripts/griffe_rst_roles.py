"""A griffe extension for the documentation site (mkdocs.yml loads it): the docstrings of
dlbridge write cross-references as reStructuredText roles (:func:`from_arrow`,
:class:`Plan`), which Markdown would show literally; this turns them into code spans."""

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|attr|mod|data|obj):`~?([^`]+)`")


class RstRolesToCode(griffe.Extension):
    """Rewrites ``:role:`name``` as ```name``` in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
