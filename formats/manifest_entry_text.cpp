#include "formats/manifest_entry_text.h"

#include <charconv>

#include "common/hashing.h"

namespace iris {

using nlohmann::json;

namespace {

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// A string as nlohmann writes it (ensure_ascii off): printable ASCII other than '"' and '\'
// stands for itself; anything else goes through nlohmann's escaping (and its refusal of text
// that is not UTF-8).
void append_string(std::string& out, std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') {
      out += json(std::string(s)).dump();
      return;
    }
  }
  out += '"';
  out += s;
  out += '"';
}

// dump(1)'s layout of an object's members or an array's elements, `depth` levels deep: each
// on a line of its own, indented one level more, the closing bracket back at `depth`.
class Members {
 public:
  Members(std::string& out, int depth, char open) : out_(out), depth_(depth) { out_ += open; }
  // Starts the next member (a key, then the caller writes its value) or element.
  void key(std::string_view k) {
    element();
    append_string(out_, k);
    out_ += ": ";
  }
  void element() {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_.append(size_t(depth_ + 1), ' ');
  }
  void close(char bracket) {
    out_ += '\n';
    out_.append(size_t(depth_), ' ');
    out_ += bracket;
  }
  int inner() const { return depth_ + 1; }

 private:
  std::string& out_;
  int depth_;
  bool first_ = true;
};

void append_shape(std::string& out, const std::vector<uint64_t>& shape, int depth) {
  if (shape.empty()) {
    out += "[]";
    return;
  }
  Members m(out, depth, '[');
  for (uint64_t d : shape) {
    m.element();
    append_uint(out, d);
  }
  m.close(']');
}

// tensor_desc_to_json()'s "layout": its kind, and a tiled layout's tiles and padded matrix.
void append_layout(std::string& out, const TensorDesc& d, int depth) {
  Members m(out, depth, '{');
  m.key("kind");
  append_string(out, layout_kind_name(d.layout.kind));
  if (d.layout.kind == LayoutKind::kTiled) {
    if (auto g = matrix_geometry(d); g.is_ok()) {
      m.key("padded_k");
      append_uint(out, g->padded_k);
      m.key("padded_n");
      append_uint(out, g->padded_n);
    }
    m.key("tile_k");
    append_uint(out, d.layout.tile_k);
    m.key("tile_n");
    append_uint(out, d.layout.tile_n);
  }
  m.close('}');
}

void append_component(std::string& out, const StoredComponent& c, int depth) {
  Members m(out, depth, '{');
  m.key("bytes");
  append_uint(out, c.spec.bytes);
  m.key("dtype");
  append_string(out, dtype_archive_name(c.spec.dtype));
  m.key("offset");
  append_uint(out, c.offset);
  m.key("role");
  append_string(out, role_name(c.spec.role));
  m.key("shape");
  append_shape(out, c.spec.shape, m.inner());
  m.key("xxh3");
  append_string(out, hash_hex(c.xxh3));
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
      Members m(out, depth, '{');
      for (auto it = j.begin(); it != j.end(); ++it) {
        m.key(it.key());
        append_json_text(out, it.value(), m.inner());
      }
      m.close('}');
      return;
    }
    case json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      Members m(out, depth, '[');
      for (const auto& v : j) {
        m.element();
        append_json_text(out, v, m.inner());
      }
      m.close(']');
      return;
    }
    case json::value_t::string:
      append_string(out, j.get_ref<const std::string&>());
      return;
    case json::value_t::number_unsigned:
      append_uint(out, j.get<uint64_t>());
      return;
    default:  // null, booleans, signed and floating-point numbers: one token, as nlohmann writes it
      out += j.dump();
      return;
  }
}

void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const json& source, int depth) {
  // archive_tensor_to_json()'s keys, in the order nlohmann's sorted objects write them.
  Members m(out, depth, '{');
  m.key("components");
  if (components.empty()) {
    out += "[]";
  } else {
    Members list(out, m.inner(), '[');
    for (const auto& c : components) {
      list.element();
      append_component(out, c, list.inner());
    }
    list.close(']');
  }
  m.key("dtype");
  append_string(out, dtype_archive_name(desc.dtype));
  m.key("format");
  append_string(out, storage_name(desc));
  m.key("layout");
  append_layout(out, desc, m.inner());
  m.key("name");
  append_string(out, desc.name);
  if (is_quantized(desc.format)) {
    m.key("params");
    append_json_text(out, desc.params, m.inner());
  }
  m.key("shape");
  append_shape(out, desc.shape, m.inner());
  m.key("source");
  append_json_text(out, source, m.inner());
  m.close('}');
}

}  // namespace iris
