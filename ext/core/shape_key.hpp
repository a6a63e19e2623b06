#pragma once
// The key a log line's header parse is kept under (worker/digest/header_rows.py): the line with its numbers
// and long hexadecimal ids written in a few fixed forms, byte for byte the same length.
#include <string>
#include <string_view>

namespace ribbon {

// `text` (UTF-8, any number of lines) with every ASCII digit written '0' and every hex id written in one form
// per length and count of leading digits: its leading digits '0', every other hex character 'a', and its last
// character '0' where no digit leads (the id still holds a digit). A hex id is a run of [0-9a-f] holding a
// digit and a letter, at least 8 long, or a uuid (8-4-4-4-12 runs of [0-9a-f] joined by '-', a letter among
// them), with no word byte ([0-9A-Za-z_] or a byte of a non-ASCII character) on either side. Only ASCII bytes
// are rewritten, each by an ASCII byte: the key has the line's length in bytes and in characters.
std::string shape_key(std::string_view text);

}  // namespace ribbon
