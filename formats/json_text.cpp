#include "formats/json_text.h"

#include "common/utf8_text.h"

namespace iris {

namespace {

nlohmann::json escaped(const nlohmann::json& j) {
  if (j.is_string()) return escape_invalid_utf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(escaped(v));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[escape_invalid_utf8(it.key())] = escaped(it.value());
    return out;
  }
  return j;
}

}  // namespace

std::string dump_json(const nlohmann::json& j, int indent) {
  // The common case costs one dump; only a document that holds invalid bytes is copied.
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error& e) {
    if (e.id != 316) throw;
  }
  return escaped(j).dump(indent);
}

}  // namespace iris
