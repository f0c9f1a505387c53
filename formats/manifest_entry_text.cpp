#include "formats/manifest_entry_text.h"

#include <charconv>

namespace iris {

using nlohmann::json;

// Printable ASCII other than '"' and '\' stands for itself; anything else goes through
// nlohmann's escaping (ensure_ascii off), and its refusal of text that is not UTF-8.
void append_json_string(std::string& out, std::string_view s) {
  bool plain = true;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    plain &= c >= 0x20 && c <= 0x7E && c != '"' && c != '\\';
  }
  if (!plain) {
    out += json(std::string(s)).dump();
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

void append_json_uint(std::string& out, uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void append_json_uints(std::string& out, std::span<const uint64_t> values, int depth) {
  append_json_list(out, values, depth, [&](uint64_t v, int) { append_json_uint(out, v); });
}

void JsonMembers::key(std::string_view k) {
  element();
  append_json_string(out_, k);
  out_ += ": ";
}

void JsonMembers::element() {
  out_ += first_ ? "\n" : ",\n";
  first_ = false;
  out_.append(size_t(depth_ + 1), ' ');
}

void JsonMembers::close(char bracket) {
  out_ += '\n';
  out_.append(size_t(depth_), ' ');
  out_ += bracket;
}

namespace {

// A key known to be plain ASCII (the manifest's own): written as it is, without the check.
void plain_key(std::string& out, JsonMembers& m, std::string_view k) {
  m.element();
  out += '"';
  out += k;
  out += "\": ";
}

// hash_hex(): 16 lowercase hex digits, quoted.
void append_hash(std::string& out, uint64_t h) {
  static const char kHex[] = "0123456789abcdef";
  char buf[18];
  buf[0] = buf[17] = '"';
  for (int i = 16; i >= 1; --i, h >>= 4) buf[i] = kHex[h & 15];
  out.append(buf, sizeof buf);
}

// tensor_desc_to_json()'s "layout": its kind, and a tiled layout's tiles and padded matrix.
void append_layout(std::string& out, const TensorDesc& d, int depth) {
  JsonMembers m(out, depth, '{');
  plain_key(out, m, "kind");
  append_json_string(out, layout_kind_name(d.layout.kind));
  if (d.layout.kind == LayoutKind::kTiled) {
    if (auto g = matrix_geometry(d); g.is_ok()) {
      plain_key(out, m, "padded_k");
      append_json_uint(out, g->padded_k);
      plain_key(out, m, "padded_n");
      append_json_uint(out, g->padded_n);
    }
    plain_key(out, m, "tile_k");
    append_json_uint(out, d.layout.tile_k);
    plain_key(out, m, "tile_n");
    append_json_uint(out, d.layout.tile_n);
  }
  m.close('}');
}

void append_component(std::string& out, const StoredComponent& c, int depth) {
  JsonMembers m(out, depth, '{');
  plain_key(out, m, "bytes");
  append_json_uint(out, c.spec.bytes);
  plain_key(out, m, "dtype");
  append_json_string(out, dtype_archive_name(c.spec.dtype));
  plain_key(out, m, "offset");
  append_json_uint(out, c.offset);
  plain_key(out, m, "role");
  append_json_string(out, role_name(c.spec.role));
  plain_key(out, m, "shape");
  append_json_uints(out, c.spec.shape, m.inner());
  plain_key(out, m, "xxh3");
  append_hash(out, c.xxh3);
  m.close('}');
}

}  // namespace

void append_json_text(std::string& out, const json& j, int depth) {
  switch (j.type()) {
    case json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      JsonMembers m(out, depth, '{');
      for (auto it = j.begin(); it != j.end(); ++it) {
        m.key(it.key());
        append_json_text(out, it.value(), m.inner());
      }
      m.close('}');
      return;
    }
    case json::value_t::array:
      append_json_list(out, j, depth, [&](const json& v, int inner) { append_json_text(out, v, inner); });
      return;
    case json::value_t::string:
      append_json_string(out, j.get_ref<const std::string&>());
      return;
    case json::value_t::number_unsigned:
      append_json_uint(out, j.get<uint64_t>());
      return;
    default:  // null, booleans, signed and floating-point numbers: one token, as nlohmann writes it
      out += j.dump();
      return;
  }
}

void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const std::function<void(std::string&, int)>& source_text, int depth) {
  // archive_tensor_to_json()'s keys, in the order nlohmann's sorted objects write them.
  JsonMembers m(out, depth, '{');
  plain_key(out, m, "components");
  append_json_list(out, components, m.inner(), [&](const StoredComponent& c, int inner) { append_component(out, c, inner); });
  plain_key(out, m, "dtype");
  append_json_string(out, dtype_archive_name(desc.dtype));
  plain_key(out, m, "format");
  append_json_string(out, storage_name(desc));
  plain_key(out, m, "layout");
  append_layout(out, desc, m.inner());
  plain_key(out, m, "name");
  append_json_string(out, desc.name);
  if (is_quantized(desc.format)) {
    plain_key(out, m, "params");
    append_json_text(out, desc.params, m.inner());
  }
  plain_key(out, m, "shape");
  append_json_uints(out, desc.shape, m.inner());
  plain_key(out, m, "source");
  source_text(out, m.inner());
  m.close('}');
}

void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const json& source, int depth) {
  append_tensor_entry_text(out, desc, components, [&source](std::string& o, int d) { append_json_text(o, source, d); }, depth);
}

}  // namespace iris
