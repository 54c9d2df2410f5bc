// The Jinja engine's parts one at a time: whitespace control, loops, scoping, expressions, filters,
// methods, tojson, and errors that name the line and column. Expected strings are what jinja2 3.1
// renders with trim_blocks and lstrip_blocks (as transformers sets them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/chat/jinja.h"

namespace orion::jinja {
namespace {

std::string render(const std::string& src, const std::string& vars_json = "{}") {
  Template t(src, "t.jinja");
  return t.render(Value::from_json(nlohmann::ordered_json::parse(vars_json)).as_dict());
}

// The error text of rendering src (or "" when it renders).
std::string error_of(const std::string& src, const std::string& vars_json = "{}") {
  try {
    render(src, vars_json);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    return e.what();
  }
  return "";
}

TEST(Jinja, TextAndPrint) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "Ada"})"), "Hello Ada!");
  EXPECT_EQ(render("{{ x }}|{{ n }}|{{ t }}|{{ f }}|{{ u }}|", R"({"x": null, "n": 3, "t": true, "f": 1.0})"),
            "None|3|True|1.0||");
  EXPECT_EQ(render("{# a comment #}x"), "x");
  EXPECT_EQ(render("a\n"), "a");  // one trailing newline dropped, as keep_trailing_newline=False
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it.
  EXPECT_EQ(render("{% if true %}\n    x\n{% endif %}\ny"), "    x\ny");
  EXPECT_EQ(render("    {% if true %}x{% endif %}"), "x");
  // Not for print tags: {{ }} keeps the indentation and the newline after it.
  EXPECT_EQ(render("  {{ 'x' }}\ny"), "  x\ny");
  // + turns lstrip_blocks off for the tag; +%} turns trim_blocks off.
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
  // lstrip only when the tag starts its line.
  EXPECT_EQ(render("a  {% if true %}x{% endif %}"), "a  x");
  EXPECT_EQ(render("{% if true %}\n  {% if true %}\n    y\n  {% endif %}\n{% endif %}"), "    y\n");
  EXPECT_EQ(render("{#- c -#}  \n  x"), "x");
}

TEST(Jinja, ForLoops) {
  const std::string xs = R"({"xs": ["a", "b", "c"]})";
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ x }}{{ loop.length }}{% if loop.first %}F{% endif %}"
                   "{% if loop.last %}L{% endif %};{% endfor %}",
                   xs),
            "01a3F;12b3;23c3L;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.revindex0 }}{% endfor %}", xs), "210");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in xs if x != 'b' %}{{ x }}{{ loop.length }}{% endfor %}", xs), "a2c2");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}{{ x }}{% endfor %}", xs), "a");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d": {"z": 1, "a": 2}})"), "z=1,a=2,");
  EXPECT_EQ(render("{% for x in xs[::-1] %}{{ x }}{% endfor %}", xs), "cba");
}

TEST(Jinja, SetScopingAndNamespace) {
  // A set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% if true %}{% set y = 'in if' %}{% endif %}{{ y }}"), "in if");
  EXPECT_EQ(render("{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]"), "[block 2]");
  EXPECT_EQ(render("a{% generation %}b{% endgeneration %}c"), "abc");  // transformers' assistant-mask tag
  EXPECT_EQ(render("{% macro greet(who, p='!') %}hi {{ who }}{{ p }}{% endmacro %}{{ greet('a') }} {{ greet('b', p='?') }}"),
            "hi a! hi b?");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}"), "3 3.5 2 1024 7 9");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }}"), "a1None abab [1, 2]");
  EXPECT_EQ(render("{{ 1 < 2 and 'x' or 'y' }} {{ not 0 }} {{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 1 == 1.0 }}"),
            "x True True False True");
  EXPECT_EQ(render("{{ 'yes' if n > 1 else 'no' }}{{ 'x' if false }}", R"({"n": 2})"), "yes");
  EXPECT_EQ(render("{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} {{ xs[-1] }} {{ xs[1:] }}",
                   R"({"m": {"role": "user", "content": "hi"}, "xs": [1, 2, 3]})"),
            "user hi False 3 [2, 3]");
  EXPECT_EQ(render("{{ 'héllo'[1:3] }} {{ 'héllo'|length }} {{ {'a': [1, 'x']} }}"), "él 5 {'a': [1, 'x']}");
  EXPECT_EQ(render("{{ x is none }} {{ x is not none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ u is defined }}",
                   R"({"x": null, "s": "", "d": {}, "l": []})"),
            "True False True True True False");
}

TEST(Jinja, FiltersAndMethods) {
  EXPECT_EQ(render("[{{ '  a b \n'|trim }}] {{ 'Ab'|upper }}{{ 'Ab'|lower }} {{ [1, 2]|length }} {{ xs|join(', ') }}",
                   R"({"xs": ["a", "b"]})"),
            "[a b] ABab 2 a, b");
  EXPECT_EQ(render("{{ u|default('d') }} {{ ''|default('d', true) }} {{ 3|string ~ 'x' }} {{ 'aXbX'|replace('X', '-') }}"),
            "d d 3x a-b-");
  EXPECT_EQ(render("{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %} {{ xs|first }}{{ xs|last }}",
                   R"({"d": {"a": 1}, "xs": [1, 2]})"),
            "a1 12");
  EXPECT_EQ(render("[{{ ' x '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ '\\n\\nab\\n'.rstrip('\\n') }}|{{ 'a b  c'.split() }}|"
                   "{{ 'a</t>b'.split('</t>')[-1] }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}]"),
            "[x|axx|\n\nab|['a', 'b', 'c']|b|TrueTrue]");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.get('z') }} {{ d.keys()|list }}", R"({"d": {"a": 1}})"),
            "1 0 None ['a']");
  EXPECT_EQ(render("{{ xs|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}",
                   R"({"xs": [{"role": "user", "c": "1"}, {"role": "bot", "c": "2"}, {"role": "user", "c": "3"}]})"),
            "13");
}

TEST(Jinja, ToJsonIsJsonDumpsWithoutAsciiEscapes) {
  const std::string v = R"({"v": {"b": [1, 2.5, true, null], "a": "Zürich \"q\"\n", "e": {}, "f": 1e20}})";
  EXPECT_EQ(render("{{ v|tojson }}", v), R"({"b": [1, 2.5, true, null], "a": "Zürich \"q\"\n", "e": {}, "f": 1e+20})");
  EXPECT_EQ(render("{{ v.b|tojson(indent=2) }}", v), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(render("{{ '<&>'|tojson }}"), "\"<&>\"");  // transformers' tojson does not HTML-escape
  EXPECT_EQ(float_repr(0.1), "0.1");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(123456.0), "123456.0");
  EXPECT_EQ(float_repr(1.5e-5), "1.5e-05");
}

TEST(Jinja, ErrorsNameTheTemplateLineAndColumn) {
  EXPECT_NE(error_of("a\n{{ x | nosuchfilter }}").find("t.jinja: line 2, column 8: no filter named 'nosuchfilter'"),
            std::string::npos)
      << error_of("a\n{{ x | nosuchfilter }}");
  EXPECT_NE(error_of("{% if x is nosuchtest %}{% endif %}").find("no test named 'nosuchtest'"), std::string::npos);
  EXPECT_NE(error_of("{% if true %}x").find("missing {% endif %}"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + }}").find("line 1, column 8: expected an expression"), std::string::npos)
      << error_of("{{ 1 + }}");
  EXPECT_NE(error_of("{% frobnicate %}").find("unknown tag 'frobnicate'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("{{ x").find("missing end of print tag"), std::string::npos);
  const std::string raised = error_of("ok\n  {{ raise_exception('roles must alternate') }}");
  EXPECT_NE(raised.find("t.jinja: line 2, column"), std::string::npos) << raised;
  EXPECT_NE(raised.find("roles must alternate"), std::string::npos) << raised;
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand type(s) for +: 'str' and 'int'"), std::string::npos);
  EXPECT_NE(error_of("{{ u.content.strip() }}").find("undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nofunc() }}").find("'nofunc' is undefined"), std::string::npos);
  // Hostile nesting is an error, not a stack overflow.
  EXPECT_NE(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(100000, '[') + "1" + std::string(100000, ']') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(100000, '-') + "1 }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}").find("nested too deeply"), std::string::npos);
}

TEST(Jinja, TemplatesCannotRunAwayOrOverflow) {
  // A chat template is downloaded text: its work and its numbers are bounded, each an error.
  EXPECT_NE(error_of("{% for a in range(2000) %}{% for b in range(2000) %}{% endfor %}{% endfor %}").find("loop iterations"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(10**12) }}").find("range() too long"), std::string::npos);
  EXPECT_NE(error_of("{{ 'ab' * 10**12 }}").find("repetition too large"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 10**7 }}").find("repetition too large"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 99999999999999999999 }}").find("number literal out of range"), std::string::npos);
  EXPECT_NE(error_of("{{ '\\uZZZZ' }}").find("bad \\u escape"), std::string::npos);
  EXPECT_EQ(render("{{ '\\u00e9\\x41' }} {{ -9 // 4 }} {{ -9 % 4 }} {{ 9 // -4 }} {{ 2 ** 62 }}"), "éA -3 3 -3 4611686018427387904");
}

}  // namespace
}  // namespace orion::jinja
