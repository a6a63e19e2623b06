// The recipe reader (ext/core/header_recipe.hpp) on a toy grammar: fields (`-` none), the message's pieces (a
// leading column of several words kept, the trailer taken off), the body, the shape, the multiline rule and the
// status. The whole of it against Python's recipe on the real grammar: tests/digest/test_header_recipe.py.
#include <string>

#include "check.hpp"
#include "header_recipe.hpp"

using ribbon::HeaderShape;
using ribbon::Recipe;
using ribbon::RecipeReader;

namespace {

// groups: 1 pre, 2 ts, 3 host, 4 prog, 5 level token, 6 fields, 7 msg
RecipeReader toy() {
  ribbon::RecipePatterns p;
  p.header = "(?:(\\w+ \\w+) \\| )?(?:(\\d\\d:\\d\\d) )?(?:(h\\w+|-) )?(?:(p\\w+): )?(?:([A-Z]{4,5}) )?(\\[k \\w+\\] )?(.*)";
  p.trailer = "[ \\t]+\\((?:[a-z]+\\.){2,}[A-Z]\\w*\\)\\z";
  p.status_access = "\"[^\"]*\" (\\d{3})";
  p.status_request = "[A-Z]+ /\\S* (\\d{3})";
  p.request = "GET /";
  p.continuation = "[ \\t]+\\S";
  ribbon::RecipeGroups g;
  g.firsts = {{{2}, {3}, {4}, {}, {5}, {}, {}, {}, {}, {1}}};
  g.msg = 7;
  g.fields = 6;
  return RecipeReader(p, g);
}

}  // namespace

TEST(header_recipe_fields_pieces_and_shape) {
  RecipeReader r = toy();
  Recipe out;
  CHECK(r.read("10:00 hostA progB: WARN disk full", out) == 1);
  CHECK(out.matched && out.shape == HeaderShape::rfc3164 && out.ts.a == 0 && out.ts.b == 5);
  CHECK(out.host.a == 6 && out.prog.a == 12 && out.tok.a == 19 && out.tok.b == 23);
  CHECK(out.pieces.size() == 1 && out.pieces[0].a == 24 && out.pieces[0].b == -1);
  CHECK(out.has == ribbon::kHasHost && !out.has_body && !out.continues);
  CHECK(r.read("10:00 - x", out) == 1);                       // host `-`: none
  CHECK(out.host.b == 0 && out.shape == HeaderShape::timestamped && out.has == 0);
}

TEST(header_recipe_leading_column_trailer_and_body) {
  RecipeReader r = toy();
  Recipe out;
  CHECK(r.read("a b | 10:00 [k v] msg here (org.acme.Y)", out) == 1);
  CHECK(out.pieces.size() == 2 && out.pieces[0].a == 0 && out.pieces[0].b == 3);
  CHECK(out.pieces[1].a == 18 && out.pieces[1].b == 26);      // up to the trailer
  CHECK(out.has_body && out.body.size() == 2 && out.body[1].a == 12 && out.body[1].b == -1);
  CHECK(out.has == (ribbon::kHasPieces | ribbon::kHasBody));
  CHECK(r.read("10:00 WARN   ", out) == 1);                  // nothing after the header: the line is its message
  CHECK(out.pieces.size() == 1 && out.pieces[0].a == 0 && out.pieces[0].b == -1 && out.has == 0);
}

TEST(header_recipe_no_header_continuation_and_status) {
  RecipeReader r = toy();
  Recipe out;
  CHECK(r.read("  at x", out) == 1);
  CHECK(!out.matched && out.shape == HeaderShape::none && out.continues && out.pieces[0].a == 0);
  CHECK(r.read("10:00 GET /a 404 x", out) == 1 && r.read_status("10:00 GET /a 404 x", out) == 1);
  CHECK(out.status == 13 && (out.has & ribbon::kHasStatus) != 0);
  CHECK(r.read("WARN GET /a 404", out) == 1 && r.read_status("WARN GET /a 404", out) == 1);
  CHECK(out.status == -1);                                    // no time: no status read
}
