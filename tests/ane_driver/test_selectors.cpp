// The private methods the Apple driver calls exist in the framework as the public class-dump headers
// show it: every method ane_driver.mm declares on the four private classes, and every @selector it
// names, is in tests/testdata/ane/private_selectors.txt (which cites its source). A typo in a
// selector would otherwise only show on a Mac, as "the framework lacks …". Runs everywhere.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "support.h"

namespace orion {
namespace {

struct Method {
  std::string cls;
  char kind;  // '+' class method, '-' instance method
  std::string selector;
  bool operator<(const Method& o) const { return std::tie(cls, kind, selector) < std::tie(o.cls, o.kind, o.selector); }
};

std::set<Method> shipped_list() {
  std::ifstream in(test::data_path("ane/private_selectors.txt"));
  std::set<Method> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Method m;
    f >> m.cls >> m.kind >> m.selector;
    out.insert(m);
  }
  return out;
}

// The selector of one Objective-C method declaration: "+ (id)a:(T)x b:(U)y" → "a:b:", "- (id)c" → "c".
std::string selector_of(const std::string& declaration) {
  static const std::regex keyword(R"((\w+)\s*:\s*\()"), bare(R"(^[+-]\s*\([^)]*\)\s*(\w+)\s*$)");
  std::string out;
  for (std::sregex_iterator it(declaration.begin(), declaration.end(), keyword), end; it != end; ++it)
    out += (*it)[1].str() + ":";
  std::smatch m;
  if (out.empty() && std::regex_match(declaration, m, bare)) out = m[1].str();
  return out;
}

// The methods declared in the driver's @interface blocks, by class.
std::vector<Method> declared_methods(const std::string& source) {
  std::vector<Method> out;
  static const std::regex block(R"(@interface\s+(_ANE\w+)\s*:\s*NSObject([\s\S]*?)@end)");
  for (std::sregex_iterator it(source.begin(), source.end(), block), end; it != end; ++it) {
    std::stringstream body((*it)[2].str());
    std::string text, line;
    while (std::getline(body, line)) text += line + " ";
    std::stringstream decls(text);
    for (std::string d; std::getline(decls, d, ';');) {
      d = std::regex_replace(d, std::regex(R"(^\s+|\s+$)"), "");
      d = std::regex_replace(d, std::regex(R"(\s+)"), " ");
      if (d.empty() || (d[0] != '+' && d[0] != '-')) continue;
      out.push_back({(*it)[1].str(), d[0], selector_of(d)});
    }
  }
  return out;
}

std::string driver_source() {
  std::ifstream in(ORION_ANE_DRIVER_SOURCE);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AneDriverSelectors, ParsesDeclarations) {
  EXPECT_EQ(selector_of("+ (id)modelWithMILText:(NSData*)milText weights:(NSDictionary*)w optionsPlist:(NSData*)p"),
            "modelWithMILText:weights:optionsPlist:");
  EXPECT_EQ(selector_of("- (NSString*)hexStringIdentifier"), "hexStringIdentifier");
  const auto m = declared_methods("@interface _ANEX : NSObject\n+ (id)a:(int)x\n   b:(id)y;\n- (id)c;\n@end");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].selector, "a:b:");
  EXPECT_EQ(m[0].kind, '+');
  EXPECT_EQ(m[1].selector, "c");
}

TEST(AneDriverSelectors, EveryMethodTheDriverDeclaresIsInThePublicHeaders) {
  const std::set<Method> shipped = shipped_list();
  ASSERT_GT(shipped.size(), 20u);
  const std::string source = driver_source();
  ASSERT_FALSE(source.empty()) << ORION_ANE_DRIVER_SOURCE;
  const std::vector<Method> declared = declared_methods(source);
  std::set<std::string> classes;
  for (const Method& m : declared) {
    classes.insert(m.cls);
    EXPECT_TRUE(shipped.count(m)) << m.kind << "[" << m.cls << " " << m.selector
                                  << "] is not in the public headers (tests/testdata/ane/private_selectors.txt)";
  }
  EXPECT_EQ(classes, (std::set<std::string>{"_ANEIOSurfaceObject", "_ANEInMemoryModel", "_ANEInMemoryModelDescriptor",
                                            "_ANERequest"}));
  EXPECT_GE(declared.size(), 9u);
}

TEST(AneDriverSelectors, EverySelectorTheDriverChecksForIsDeclaredAndPublic) {
  const std::set<Method> shipped = shipped_list();
  const std::string source = driver_source();
  std::set<std::string> declared, listed;
  for (const Method& m : declared_methods(source)) declared.insert(m.selector);
  for (const Method& m : shipped) listed.insert(m.selector);
  static const std::regex named(R"(@selector\(([\w:\s]+)\))");
  int seen = 0;
  for (std::sregex_iterator it(source.begin(), source.end(), named), end; it != end; ++it, ++seen) {
    const std::string sel = std::regex_replace((*it)[1].str(), std::regex(R"(\s+)"), "");
    EXPECT_TRUE(declared.count(sel)) << "@selector(" << sel << ") is not declared in the driver's @interface blocks";
    EXPECT_TRUE(listed.count(sel)) << "@selector(" << sel << ") is not in the public headers";
  }
  EXPECT_EQ(seen, 9);  // the nine methods classes() checks before the driver is used
}

}  // namespace
}  // namespace orion
