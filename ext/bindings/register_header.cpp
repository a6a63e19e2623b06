// Bindings of the header grammar's PCRE2 matcher (ext/core/header_match.hpp) and recipe reader
// (ext/core/header_recipe.hpp): a batch of lines in, per line the spans or the finished recipe
// worker/digest/header_rows.py reads, or None where the line is for Python's `re`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "header_match.hpp"
#include "header_recipe.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace ribbon {

namespace {

PyObject* span(int64_t a, int64_t b) {
  PyObject* t = PyTuple_New(2);
  if (t == nullptr) throw py::error_already_set();
  PyTuple_SET_ITEM(t, 0, PyLong_FromLongLong(a));
  PyTuple_SET_ITEM(t, 1, PyLong_FromLongLong(b));
  return t;
}

// One line's reading: per group list of `firsts` the (start, end) of its first group that matched text, else
// None; then per group of `starts` its start (-1: unset). None where the line is not ASCII or PCRE2 stopped
// short. Built with the C API: after the match itself, this is most of a call's cost.
py::object read_one(HeaderMatcher& matcher, PyObject* line, const std::vector<std::vector<int>>& firsts,
                    const std::vector<int>& starts, std::vector<int64_t>& spans) {
  if (!PyUnicode_Check(line)) throw py::type_error("HeaderMatcher.read: every line must be a str");
  if (!PyUnicode_IS_ASCII(line)) return py::none();
  const std::string_view subject(static_cast<const char*>(PyUnicode_DATA(line)),
                                 static_cast<size_t>(PyUnicode_GET_LENGTH(line)));
  if (matcher.match(subject, spans) != 1) return py::none();
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(firsts.size() + starts.size()));
  if (out == nullptr) throw py::error_already_set();
  auto result = py::reinterpret_steal<py::object>(out);
  Py_ssize_t at = 0;
  for (const auto& groups : firsts) {
    PyObject* item = nullptr;
    for (const int g : groups) {
      const int64_t a = spans[2 * static_cast<size_t>(g)], b = spans[2 * static_cast<size_t>(g) + 1];
      if (a >= 0 && b > a) {
        item = span(a, b);
        break;
      }
    }
    if (item == nullptr) {
      item = Py_None;
      Py_INCREF(item);
    }
    PyTuple_SET_ITEM(out, at++, item);
  }
  for (const int g : starts) PyTuple_SET_ITEM(out, at++, PyLong_FromLongLong(spans[2 * static_cast<size_t>(g)]));
  return result;
}

void check(const HeaderMatcher& matcher, const std::vector<int>& groups) {
  for (const int g : groups) {
    if (g < 0 || static_cast<uint32_t>(g) > matcher.groups()) {
      throw std::invalid_argument("HeaderMatcher.read: no group " + std::to_string(g));
    }
  }
}

PyObject* steal_check(PyObject* o) {
  if (o == nullptr) throw py::error_already_set();
  return o;
}

// header_rows.recipe's tuple, built by the core for ASCII keys: the recipe reader, the level table (a Python
// callable: token -> level or None), and the objects every recipe shares.
class Recipes {
 public:
  Recipes(const py::dict& patterns, const std::vector<std::vector<int>>& firsts, const std::vector<int>& starts,
          py::object level_of)
      : reader_(patterns_of(patterns), groups_of(firsts, starts)), level_of_(std::move(level_of)),
        none_(py::reinterpret_steal<py::object>(span(0, 0))), empty_(py::str("")) {
    const char* names[] = {"", "rfc5424", "rfc3164", "access", "timestamped", "level_first"};
    for (size_t i = 0; i < shapes_.size(); ++i) {
      shapes_[i] = py::reinterpret_steal<py::object>(steal_check(PyUnicode_InternFromString(names[i])));
    }
  }

  // Per key its recipe or None. The level table is Python, which may let another thread in mid-read: a read
  // begun while another is under way (its match data, its recipe in progress) leaves every key to the caller.
  py::list read(const py::list& keys) {
    py::list out(keys.size());
    Py_ssize_t i = 0;
    if (busy_) {
      for (Py_ssize_t k = 0; k < static_cast<Py_ssize_t>(keys.size()); ++k) PyList_SET_ITEM(out.ptr(), k, py::none().release().ptr());
      return out;
    }
    busy_ = true;
    struct Done {
      bool& busy;
      ~Done() { busy = false; }
    } done{busy_};
    for (const py::handle key : keys) PyList_SET_ITEM(out.ptr(), i++, one(key.ptr()).release().ptr());
    return out;
  }

 private:
  static RecipePatterns patterns_of(const py::dict& p) {
    const auto get = [&p](const char* name) {
      if (!p.contains(name)) throw std::invalid_argument(std::string("HeaderRecipes: no pattern ") + name);
      return p[name].cast<std::string>();
    };
    return {get("header"), get("trailer"), get("status_access"), get("status"), get("request"), get("continuation")};
  }

  static RecipeGroups groups_of(const std::vector<std::vector<int>>& firsts, const std::vector<int>& starts) {
    RecipeGroups g;
    if (firsts.size() != g.firsts.size() || starts.size() != 2) {
      throw std::invalid_argument("HeaderRecipes: 10 group lists (header_rows._FIRSTS) and 2 starts (_STARTS)");
    }
    for (size_t k = 0; k < g.firsts.size(); ++k) g.firsts[k] = firsts[k];
    g.msg = starts[0];
    g.fields = starts[1];
    return g;
  }

  // A (start, end) pair, end -1 written None: one tuple per pair, shared by every recipe that holds it (the
  // spans of a log's keys repeat: fewer objects made, kept and traversed by the collector). Tuples of ints are
  // immutable: a shared one reads as a new one would.
  PyObject* pair(int64_t a, int64_t b) {
    if (a < 0 || a >= kPairLimit || b < -1 || b >= kPairLimit) return make_pair(a, b);
    const auto key = (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b + 1);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) {
      if (pairs_.size() >= kPairsMax) pairs_.clear();
      it = pairs_.emplace(key, py::reinterpret_steal<py::object>(make_pair(a, b))).first;
    }
    return py::object(it->second).release().ptr();
  }

  static PyObject* make_pair(int64_t a, int64_t b) {
    if (b >= 0) return span(a, b);
    PyObject* p = steal_check(PyTuple_New(2));
    PyTuple_SET_ITEM(p, 0, PyLong_FromLongLong(a));
    PyTuple_SET_ITEM(p, 1, py::none().release().ptr());
    if (PyTuple_GET_ITEM(p, 0) == nullptr) {
      Py_DECREF(p);
      throw py::error_already_set();
    }
    return p;
  }

  PyObject* span_of(const Span& s) {
    if (s.b == 0) return py::object(none_).release().ptr();
    return pair(s.a, s.b);
  }

  PyObject* pieces(const std::vector<Piece>& list) {
    if (list.size() == 1 && list[0].b < 0 && list[0].a >= 0 && list[0].a < kPairLimit) {   // ((at, None),): shared
      auto it = messages_.find(list[0].a);
      if (it == messages_.end()) {
        if (messages_.size() >= kPairsMax) messages_.clear();
        it = messages_.emplace(list[0].a, py::reinterpret_steal<py::object>(tuple_of(list))).first;
      }
      return py::object(it->second).release().ptr();
    }
    return tuple_of(list);
  }

  PyObject* tuple_of(const std::vector<Piece>& list) {
    PyObject* t = steal_check(PyTuple_New(static_cast<Py_ssize_t>(list.size())));
    auto owned = py::reinterpret_steal<py::object>(t);
    for (size_t i = 0; i < list.size(); ++i) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), pair(list[i].a, list[i].b));
    return owned.release().ptr();
  }

  // The stamp's text with its digits written 0 (header_rows: _ZERO_TEXT): one str per text, shared.
  PyObject* mask(std::string_view key, const Span& ts) {
    if (ts.b == 0) return py::object(empty_).release().ptr();
    text_.assign(key.substr(static_cast<size_t>(ts.a), static_cast<size_t>(ts.b - ts.a)));
    for (char& c : text_) {
      if (c >= '1' && c <= '9') c = '0';
    }
    auto it = masks_.find(text_);
    if (it == masks_.end()) {
      if (masks_.size() >= kPairsMax) masks_.clear();
      PyObject* s = steal_check(PyUnicode_New(static_cast<Py_ssize_t>(text_.size()), 127));
      std::copy(text_.begin(), text_.end(), reinterpret_cast<char*>(PyUnicode_1BYTE_DATA(s)));
      it = masks_.emplace(text_, py::reinterpret_steal<py::object>(s)).first;
    }
    return py::object(it->second).release().ptr();
  }

  // The level of the key's token, by the level table (level_of_, a pure function of the token's text), kept per
  // token text.
  py::object level_of(PyObject* line, std::string_view key) {
    text_.assign(key.substr(static_cast<size_t>(r_.tok.a), static_cast<size_t>(r_.tok.b - r_.tok.a)));
    auto it = levels_.find(text_);
    if (it == levels_.end()) {
      auto token = py::reinterpret_steal<py::object>(steal_check(PyUnicode_Substring(line, r_.tok.a, r_.tok.b)));
      auto level = py::reinterpret_steal<py::object>(steal_check(PyObject_CallOneArg(level_of_.ptr(), token.ptr())));
      if (levels_.size() >= kPairsMax) levels_.clear();
      it = levels_.emplace(text_, std::move(level)).first;
    }
    return it->second;
  }

  py::object one(PyObject* line) {
    if (!PyUnicode_Check(line)) throw py::type_error("HeaderRecipes.read: every key must be a str");
    if (!PyUnicode_IS_ASCII(line)) return py::none();
    const std::string_view key(static_cast<const char*>(PyUnicode_DATA(line)),
                               static_cast<size_t>(PyUnicode_GET_LENGTH(line)));
    if (reader_.read(key, r_) != 1) return py::none();
    py::object level = py::none();
    if (r_.tok.b != 0) level = level_of(line, key);
    if (level.is_none() && reader_.read_status(key, r_) != 1) return py::none();
    PyObject* t = steal_check(PyTuple_New(15));
    auto owned = py::reinterpret_steal<py::object>(t);
    PyTuple_SET_ITEM(t, 0, span_of(r_.ts));
    PyTuple_SET_ITEM(t, 1, span_of(r_.host));
    PyTuple_SET_ITEM(t, 2, span_of(r_.prog));
    PyTuple_SET_ITEM(t, 3, span_of(r_.pid));
    PyTuple_SET_ITEM(t, 4, span_of(r_.tok));
    PyTuple_SET_ITEM(t, 5, level.release().ptr());
    PyTuple_SET_ITEM(t, 6, span_of(r_.pri));
    PyTuple_SET_ITEM(t, 7, pieces(r_.pieces));
    PyTuple_SET_ITEM(t, 8, py::bool_(r_.matched).release().ptr());
    PyTuple_SET_ITEM(t, 9, py::object(shapes_[static_cast<size_t>(r_.shape)]).release().ptr());
    PyTuple_SET_ITEM(t, 10, py::bool_(r_.continues).release().ptr());
    PyTuple_SET_ITEM(t, 11, steal_check(PyLong_FromLongLong(r_.status)));
    PyTuple_SET_ITEM(t, 12, r_.has_body ? pieces(r_.body) : py::none().release().ptr());
    PyTuple_SET_ITEM(t, 13, steal_check(PyLong_FromLong(r_.has)));
    PyTuple_SET_ITEM(t, 14, mask(key, r_.ts));
    return owned;
  }

  static constexpr int64_t kPairLimit = int64_t{1} << 30;
  static constexpr size_t kPairsMax = 1u << 14;     // entries a map keeps (cleared when full)
  RecipeReader reader_;
  std::unordered_map<uint64_t, py::object> pairs_;          // (a, b) -> the tuple
  std::unordered_map<int64_t, py::object> messages_;        // at -> ((at, None),)
  std::unordered_map<std::string, py::object> masks_;       // a stamp's mask -> the str
  std::unordered_map<std::string, py::object> levels_;      // a level token -> its level (str or None)
  std::string text_;
  bool busy_ = false;
  py::object level_of_, none_, empty_;
  std::array<py::object, 6> shapes_;
  Recipe r_;
};

}  // namespace

void register_header(py::module_& m) {
  py::class_<HeaderMatcher>(m, "HeaderMatcher",
                            "A pattern compiled by PCRE2 and its JIT, matched anchored on ASCII lines.")
      .def(py::init([](std::string_view pattern, bool anchored, bool multiline) {
             return std::make_unique<HeaderMatcher>(pattern, MatchOptions{anchored, multiline});
           }),
           py::arg("pattern"), py::arg("anchored") = true, py::arg("multiline") = true)
      .def_property_readonly("groups", &HeaderMatcher::groups)
      .def("group_number", &HeaderMatcher::group_number, py::arg("name"))
      .def(
          "read",
          [](HeaderMatcher& self, const py::list& lines, const std::vector<std::vector<int>>& firsts,
             const std::vector<int>& starts) {
            for (const auto& groups : firsts) check(self, groups);
            check(self, starts);
            std::vector<int64_t> spans;
            py::list out(lines.size());
            Py_ssize_t i = 0;
            for (const py::handle line : lines) {
              PyList_SET_ITEM(out.ptr(), i++, read_one(self, line.ptr(), firsts, starts, spans).release().ptr());
            }
            return out;
          },
          py::arg("lines"), py::arg("firsts"), py::arg("starts"),
          "Per line: a tuple of, per group list of `firsts`, the (start, end) of its first group that matched "
          "text, else None, then per group of `starts` its start (-1: unset); None where the line is not ASCII or "
          "the match stopped short (a PCRE2 limit): the caller reads that line with Python's re.")
      .def(
          "spans",
          [](HeaderMatcher& self, std::string_view line, size_t pos) -> py::object {
            std::vector<int64_t> spans;
            const int rc = self.match(line, spans, pos);
            if (rc < 0) throw std::runtime_error("PCRE2 stopped short (error " + std::to_string(rc) + ")");
            if (rc == 0) return py::none();
            py::tuple out(self.groups() + 1);
            for (size_t g = 0; g <= self.groups(); ++g) out[g] = py::make_tuple(spans[2 * g], spans[2 * g + 1]);
            return std::move(out);
          },
          py::arg("line"), py::arg("pos") = 0,
          "One line (bytes of an ASCII str) matched from `pos`: per group its (start, end), (-1, -1) where unset, as "
          "Python's Match.regs; None where it does not match.");
  py::class_<Recipes>(m, "HeaderRecipes",
                      "worker/digest/header_rows.py's recipe() of ASCII keys, read by the core "
                      "(ext/core/header_recipe.hpp).")
      .def(py::init<const py::dict&, const std::vector<std::vector<int>>&, const std::vector<int>&, py::object>(),
           py::arg("patterns"), py::arg("firsts"), py::arg("starts"), py::arg("level_of"))
      .def("read", &Recipes::read, py::arg("keys"),
           "Per key its recipe (header_rows.recipe's tuple), or None where the key is not ASCII or a match stopped "
           "short (a PCRE2 limit): the caller reads that key with the reference.");
}

}  // namespace ribbon
