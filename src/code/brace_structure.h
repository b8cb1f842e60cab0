// Java, JavaScript and TypeScript structure of one test file (code_structure.h), from tree-sitter grammars pinned by
// scripts/setup.sh (tree-sitter-java 0.23.5, tree-sitter-javascript 0.23.1, tree-sitter-typescript 0.23.2 with its
// TSX dialect; language ABI 14).
//
// The three share one walker, since their statements look alike: a statement is a simple statement, or the header of
// a compound one (from its first line to the line its body's brace opens on); `else`, `catch`, `finally` and `case`
// are clauses as in Python; a line of closing brackets alone is a "brace" statement of its own.
//   - Java: methods and constructors are functions (annotations are their `decorators`; @BeforeEach, @BeforeAll,
//     @AfterEach, @AfterAll and JUnit 4's @Before/@After/@BeforeClass/@AfterClass mark `setup`), lambdas and the
//     methods of anonymous classes are functions nested in their method; classes nest ("Outer.Inner").
//   - JavaScript/TypeScript: function declarations, methods, and function expressions and arrow functions (named
//     after the variable they are assigned to) are functions. A test framework's calls (Jest, Vitest, Mocha,
//     node:test) are read as such: `describe(title, fn)` is a suite (a ClassInfo named by its title; suites nest
//     "outer > inner"), `test(title, fn)` and `it(title, fn)` (with .only/.skip/.each) are functions named by their
//     title, and beforeEach/afterEach/beforeAll/afterAll/before/after callbacks are `setup` functions.
// Nesting deeper than kMaxNesting (minified code) is not walked further: those lines fall back to a line each.
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "code/code_structure.h"

namespace spark {

inline constexpr int kMaxNesting = 200;

// `language` is Language::java, ::javascript or ::typescript; `tsx` picks TypeScript's TSX dialect (a .tsx file).
CodeStructure analyze_brace(std::string_view source, Language language, bool tsx = false);

}  // namespace spark
