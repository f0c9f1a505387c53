#include "verify/junit_report.h"

#include <sstream>

#include "common/utf8_text.h"

namespace iris {

namespace {

// XML text and attribute values: the five special characters escaped, and what XML 1.0 does not
// allow (control characters, bytes that are not UTF-8, U+FFFE and U+FFFF) written as the text
// \xHH, so any tensor name, path or message yields well-formed XML that still shows its bytes.
std::string xml_escape(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char b) {
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
      hex(c);
      ++i;
      continue;
    }
    if (n == 3 && c == 0xEF && static_cast<unsigned char>(s[i + 1]) == 0xBF && static_cast<unsigned char>(s[i + 2]) >= 0xBE) {
      for (size_t k = 0; k < 3; ++k) hex(static_cast<unsigned char>(s[i + k]));  // U+FFFE, U+FFFF
      i += 3;
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

struct Case {
  std::string classname, name;
  bool ok;
  std::string detail;
  std::string warning = {};  // a passing case's warning, shown as its system-out
};

std::string document(const std::string& suite, const std::vector<Case>& cases) {
  size_t failures = 0;
  for (const auto& c : cases) failures += !c.ok;
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"iris verify\" tests=\"" << cases.size() << "\" failures=\"" << failures << "\" errors=\"0\">\n";
  x << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << cases.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"0\">\n";
  for (const auto& c : cases) {
    x << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\"" << xml_escape(c.name) << "\"";
    if (c.ok && !c.warning.empty()) {
      x << ">\n      <system-out>WARNING: " << xml_escape(c.warning) << "</system-out>\n    </testcase>\n";
    } else if (c.ok) {
      x << "/>\n";
    } else {
      x << ">\n      <failure message=\"" << xml_escape(c.detail) << "\">" << xml_escape(c.detail) << "</failure>\n    </testcase>\n";
    }
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace

std::string junit_xml(const VerifyReport& r) {
  std::vector<Case> cases;
  for (const auto& t : r.tensors)
    for (const auto& c : t.checks) cases.push_back({"tensor " + t.name, c.check, c.ok, c.detail, c.warning});
  for (const auto& f : r.files) cases.push_back({"embedded file " + f.check, "checksum", f.ok, f.detail});
  for (const auto& c : r.archive) cases.push_back({"archive", c.check, c.ok, c.detail});
  return document(r.path + " (device " + r.device + ")", cases);
}

std::string junit_xml_open_failure(const std::string& path, const Status& status) {
  return document(path, {{"archive", "open", false, status.message()}});
}

}  // namespace iris
