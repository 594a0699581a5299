"""Stored texts: a code and arguments rendered in the reader's language."""

import pytest
from django.template import Context, Template
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from core import texts

# "Simplified Chinese" is in the catalogue already (the language menu).
texts.register("test.language", _("Simplified Chinese"))
texts.register("test.greeting", "hello %(name)s")
texts.register("test.outer", "%(inner)s, then %(n)d more")


def test_a_message_renders_in_the_active_language():
    stored = texts.message("test.language")
    assert texts.render(stored, language="en") == "Simplified Chinese"
    assert texts.render(stored, language="zh-hans") == "简体中文"
    with translation.override("zh-hans"):
        assert texts.render(stored) == "简体中文"


def test_arguments_and_nested_texts_render_in_the_same_language():
    stored = texts.message("test.outer", inner=texts.message("test.language"), n=3)
    assert texts.english(stored) == "Simplified Chinese, then 3 more"
    assert texts.render(stored, language="zh-hans") == "简体中文, then 3 more"


def test_a_list_joins_its_parts_with_the_languages_separator():
    parts = [texts.message("test.greeting", name="a"), "", texts.message("test.greeting",
                                                                         name="b")]
    assert texts.english(parts) == "hello a; hello b"
    assert texts.render(parts, language="zh-hans") == "hello a；hello b"


def test_plain_strings_and_empty_values_pass_through():
    assert texts.render("FailedScheduling: 0/4 nodes") == "FailedScheduling: 0/4 nodes"
    assert texts.render(None) == "" and texts.render("") == ""


def test_an_unknown_code_or_bad_arguments_never_break_a_page():
    assert texts.render({"code": "gone.away", "args": {"n": 2}}) == "gone.away (n=2)"
    assert "hello" in texts.render({"code": "test.greeting", "args": {"other": 1}})
    with pytest.raises(KeyError):
        texts.message("never.registered")


def test_the_template_filter_renders_in_the_active_language():
    tpl = Template("{% load portal_texts %}{{ v|render_text }}")
    with translation.override("zh-hans"):
        assert tpl.render(Context({"v": texts.message("test.language")})) == "简体中文"
