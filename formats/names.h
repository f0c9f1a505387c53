// What may name a tensor or an embedded file in an archive (FORMAT.md section 3). One rule
// for every reader and writer: the C API hands names out as C strings, so a NUL would make
// two names read as one; names are UTF-8 text; an embedded file's name is a plain file name,
// since `export -o DIR/` writes it into DIR.
#pragma once

#include <string>
#include <string_view>

namespace iris {

// `name` for a message: control characters and bytes that are not UTF-8 as \xNN, so that a
// rejected name prints whole (a NUL would end a C string) and keeps a terminal sane.
std::string escaped_name(std::string_view name);

// Why `name` cannot name a tensor, or nullptr when it can.
const char* tensor_name_problem(std::string_view name);

// Why `name` cannot name an embedded file, or nullptr: also empty, ".", ".." or a path.
const char* file_name_problem(std::string_view name);

}  // namespace iris
