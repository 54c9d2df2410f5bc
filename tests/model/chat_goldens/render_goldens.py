#!/usr/bin/python3
"""Renders the chat templates in tests/testdata/chat/templates/ the way transformers'
apply_chat_template does, for several conversations each, into tests/testdata/chat/goldens.json —
the expected output that tests/model/test_chat_template.cpp compares Orion's rendering with, byte
for byte.

Run with the Debian interpreter (python3-jinja2): /usr/bin/python3 tests/model/chat_goldens/render_goldens.py
[OUT.json] (default: the committed goldens.json).

What transformers does (transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
tojson = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False),
raise_exception raising a TemplateError, strftime_now(fmt) = datetime.now().strftime(fmt) — fixed
here to 2024-09-26 so the goldens do not change with the day. It renders with messages, tools
(None when not given), add_generation_prompt, the special tokens (bos_token, eos_token) and any
extra keyword arguments (enable_thinking).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "testdata", "chat"))
FIXED_NOW = datetime.datetime(2024, 9, 26, 14, 30, 0)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


U = lambda c: {"role": "user", "content": c}
A = lambda c: {"role": "assistant", "content": c}
S = lambda c: {"role": "system", "content": c}

CONVERSATIONS = {
    "user": [U("Hello!")],
    "system_user": [S("You are a terse assistant."), U("What is 2+2?")],
    "multi_turn": [S("Be brief."), U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")],
    "multi_turn_no_system": [U("Hi"), A("Hello there."), U("Name a colour."), A("Blue."), U("Another?")],
    "unicode": [U("Привет, 世界! naïve café — “quotes” 🙂"), A("Здравствуйте! 你好 🎉"), U("Ещё раз\ttab\nnewline")],
    "whitespace": [S("  padded system \n"), U("\n  leading and trailing spaces  \n")],
    "ends_with_assistant": [U("Say hi"), A("hi")],
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city — current conditions",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"},
                           "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
            "required": ["city"],
        },
    },
}
TOOL_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}

# Extra cases for one template: (name, messages, extra variables).
EXTRA = {
    "qwen3.jinja": [
        ("thinking_history", [U("2+2?"), A("<think>\nadd them\n</think>\n\n4"), U("and 3+3?")], {}),
        ("thinking_last", [U("2+2?"), A("<think>\nadd them\n</think>\n\n4")], {}),
        ("reasoning_field", [U("q"), {"role": "assistant", "content": "a", "reasoning_content": "why"}, U("r")], {}),
        ("no_thinking", [U("Hello!")], {"enable_thinking": False}),
        ("tools", [S("sys"), U("Weather in Zürich?"),
                   {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                   {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "sunny"}],
         {"tools": [WEATHER_TOOL]}),
        ("tool_call_string_args", [U("w?"), {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"function": {"name": "f", "arguments": "{\"x\": 1}"}}]}], {"tools": [WEATHER_TOOL]}),
    ],
    "qwen2.5-instruct.jinja": [
        ("tools", [U("Weather in Zürich?"), {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                   {"role": "tool", "content": "21 °C"}], {"tools": [WEATHER_TOOL]}),
        ("tools_with_system", [S("Be precise."), U("Weather?")], {"tools": [WEATHER_TOOL]}),
    ],
    "llama-3.2-instruct.jinja": [
        ("tools_in_user_message", [S("sys"), U("Weather in Zürich?")], {"tools": [WEATHER_TOOL]}),
        ("tools_in_system", [U("Weather?")], {"tools": [WEATHER_TOOL], "tools_in_user_message": False}),
        ("tool_call_and_result", [U("Weather?"), {"role": "assistant", "tool_calls": [TOOL_CALL]},
                                  {"role": "tool", "content": {"temp": 21, "sky": "clear"}}], {}),
        ("date_string", [U("What day is it?")], {"date_string": "01 Jan 2025"}),
    ],
}

TEMPLATES = {  # file → its special tokens (None: the model's tokenizer_config.json has none)
    "qwen2.5-instruct.jinja": {"bos_token": None, "eos_token": "<|im_end|>"},
    "qwen3.jinja": {"bos_token": None, "eos_token": "<|im_end|>"},
    "smollm2-instruct.jinja": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama-3.2-instruct.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "mistral-7b-instruct-v0.1.jinja": {"bos_token": "<s>", "eos_token": "</s>"},
}


# Small templates exercising one engine feature each, rendered by the same environment.
SNIPPETS = [
    ("{% for i in [1,2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}", {}),
    ("{% set x = 5 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% for a in [1,2] %}{% for b in [3] %}{{ loop.index }}{{ a }}{% endfor %}{{ loop.index }}{% endfor %}", {}),
    ("{{ messages[0]['content'] | trim }}|{{ 'a' + 'b' | upper }}", {"messages": [{"content": "  x  "}]}),
    ("{{ 1 if none else 2 }} {{ [] or 'e' }} {{ 'x' and 0 }}", {}),
    ("{{ 3.0 / 2 }} {{ 10 // 4.0 }} {{ 7 % -3 }} {{ -7 // 2 }}", {}),
    ("{{ (1, 2) }} {{ (1,) }} {{ {'a': 1}.items() | list }} {{ (1, 2) == [1, 2] }} {{ (1, 2) | tojson }}", {}),
    ("{{ '%s' }} {{ 'a\\tb' }} {{ \"q'\" }} {{ 'it\\'s' }}", {}),
    ("{% if x is defined and x %}y{% else %}n{% endif %}", {"x": 0}),
    ("{{ xs | length > 1 }}", {"xs": [1, 2]}),
    ("{{ 'abc'[::-1] }} {{ [1,2,3][1:] }} {{ [1,2,3][:-1] }} {{ 'héllo'[-2:] }} {{ [1,2,3,4,5][::2] }}", {}),
    ("{{ d | tojson(indent=2) }}", {"d": {"a": [], "b": {"c": [1, {"d": None}]}}}),
    ("{{ 1e3 }} {{ 0.000001 }} {{ 1/3 }} {{ 2**0.5 }} {{ -0.0 }} {{ 1e100 }}", {}),
    ("  {%- if true %}\n  a\n  {%- endif %}\n  b", {}),
    ("{% for m in ms %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}", {"ms": [{"role": "a"}, {"role": "b"}]}),
    ("{{ '  a  '.strip() ~ '|' ~ 'a,b,,c'.split(',') | string }}", {}),
    ("{{ none | string }} {{ true | tojson }} {{ 'é' | tojson }} {{ '\x01\u2028' | tojson }}", {}),
    ("{% set a = [1, 2] %}{{ a + [3] }} {{ a * 2 }} {{ 'b' in ['a', 'b'] }}", {}),
    ("{{ m.get('x', 'dflt') }} {{ m.x | default('dd') }} {{ m.y is none }}", {"m": {"y": None}}),
    ("{% for k in d %}{{ k }}{% endfor %} {{ d | length }}", {"d": {"z": 1, "a": 2}}),
    ("{% for x in xs %}\n  {% if loop.first %}\n    first\n  {% endif %}\n  {{ x }}\n{% endfor %}\n", {"xs": [1, 2]}),
    ("{# c #}\n{% set y = 1 -%}\n   {{ y }}  {#- c -#}  \n x {%+ if true %}+{% endif +%}\nend", {}),
    ("{{ '\u00a0 nbsp \u3000'.strip() }}|{{ ' a\u2003b '.split() }}|{{ 'ab\n'.rstrip() }}", {}),
    ("{{ 'Hello World'.lower() }} {{ 'x y'.title() }} {{ 'ab'.upper() }} {{ 'a-b-c'.replace('-', '+', 1) }}", {}),
    ("{{ [3, 1] | first }}{{ [3, 1] | last }} {{ 'a b' | capitalize }} {{ range(3) | list }} {{ [1, 2] | join('-') }}", {}),
]


def main():
    env = environment()
    cases = []
    for file, tokens in TEMPLATES.items():
        with open(os.path.join(DATA, "templates", file), encoding="utf-8") as f:
            template = env.from_string(f.read())
        runs = [(name, msgs, {}) for name, msgs in CONVERSATIONS.items()] + EXTRA.get(file, [])
        for name, messages, extra in runs:
            for gen in (True, False):
                variables = {"messages": messages, "add_generation_prompt": gen}
                variables.update({k: v for k, v in tokens.items() if v is not None})
                variables.setdefault("tools", None)
                variables.update(extra)
                case = {"template": file, "name": f"{name}_{'gen' if gen else 'nogen'}", "variables": variables}
                try:
                    case["output"] = template.render(**variables)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
    snippets = []
    for source, variables in SNIPPETS:
        snippets.append({"source": source, "variables": variables, "output": env.from_string(source).render(**variables)})
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(DATA, "goldens.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "now": FIXED_NOW.isoformat(), "cases": cases, "snippets": snippets}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    print(f"{len(cases)} cases ({sum('error' in c for c in cases)} raise), {len(snippets)} snippets → {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
