"""What a browser would submit: the values of a rendered form's fields."""

from __future__ import annotations

from html.parser import HTMLParser


class _Form(HTMLParser):
    def __init__(self, action: str | None) -> None:
        super().__init__()
        self.action, self.inside, self.values = action, False, {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = self.action is None or a.get("action", "") == self.action
        if tag == "option" and self.inside and self._select:
            # a browser sends the selected option, or the first one when none is
            if "selected" in a or self._select not in self.values:
                self.values[self._select] = a.get("value", "")
            return
        if not self.inside or not a.get("name"):
            return
        name = a["name"]
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.values[name] = a.get("value", "on")
            elif kind not in ("submit", "button", "file"):
                self.values[name] = a.get("value", "")
        elif tag == "textarea":
            self._textarea, self.values[name] = name, ""
        elif tag == "select":
            self._select = name
            self.values.pop(name, None)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            # a textarea's content starts after one leading newline, as browsers read it
            self.values[self._textarea] += data.removeprefix("\n") if not self.values[
                self._textarea] else data


def form_values(html: str, action: str | None = None) -> dict[str, str]:
    """The name -> value pairs of the form posting to ``action`` (any form if None), as a
    browser would send them unchanged (checked boxes only; a select's selected option, or
    its first)."""
    parser = _Form(action)
    parser.feed(html)
    return parser.values
