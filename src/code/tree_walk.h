// Small helpers over tree-sitter's C API shared by the language walkers (python_structure.cpp, brace_structure.cpp):
// owners for parsers and trees, and a depth-first visit of every node through one cursor (no recursion, so a tree
// thousands of levels deep costs no stack). Internal to the core library.
// Contract: the deleters own what tree-sitter allocates (one parser or tree per owner, used by one thread at a
// time); the visits hold no state of their own.
#pragma once

#include <tree_sitter/api.h>

namespace spark {

struct TsParserDeleter {
  void operator()(TSParser* p) const { ts_parser_delete(p); }
};
struct TsTreeDeleter {
  void operator()(TSTree* t) const { ts_tree_delete(t); }
};

// Calls fn(child) for each child of `node` (named and anonymous), in order, through one cursor:
// ts_node_child(i) walks from the first child every time.
template <class Fn>
void for_each_child(TSNode node, Fn&& fn) {
  TSTreeCursor cursor = ts_tree_cursor_new(node);
  if (ts_tree_cursor_goto_first_child(&cursor)) {
    do {
      fn(ts_tree_cursor_current_node(&cursor));
    } while (ts_tree_cursor_goto_next_sibling(&cursor));
  }
  ts_tree_cursor_delete(&cursor);
}

// Calls fn(node) for `root` and every node below it, in document order.
template <class Fn>
void for_each_node(TSNode root, Fn&& fn) {
  TSTreeCursor cursor = ts_tree_cursor_new(root);
  for (;;) {
    fn(ts_tree_cursor_current_node(&cursor));
    if (ts_tree_cursor_goto_first_child(&cursor)) continue;
    bool done = false;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&cursor);
}

}  // namespace spark
