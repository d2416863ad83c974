// The XML subset of topology files (topo/xml.h).
#include "topo/xml.h"

#include <cctype>
#include <cstring>

namespace accl {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 1 << 16;
constexpr size_t kMaxAttrs = 64;  // an element's (a topology file's have fewer than 16)

struct Reader {
  const std::string& s;
  size_t at = 0;
  size_t nodes = 0;
  std::string* err;

  bool fail(const std::string& what) {
    int line = 1;
    for (size_t i = 0; i < at && i < s.size(); ++i) line += s[i] == '\n';
    *err = "line " + std::to_string(line) + ": " + what;
    return false;
  }
  bool starts(const char* p) const { return s.compare(at, strlen(p), p) == 0; }
  void blanks() {
    while (at < s.size() && isspace(static_cast<unsigned char>(s[at]))) ++at;
  }
  static bool nameChar(char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }
  bool name(std::string* out) {
    const size_t from = at;
    while (at < s.size() && nameChar(s[at])) ++at;
    if (at == from) return fail("a name was expected");
    *out = s.substr(from, at - from);
    return true;
  }
  // Skips what is not an element: blanks, text, comments, declarations.
  bool skipOthers() {
    for (;;) {
      while (at < s.size() && s[at] != '<') ++at;  // text (none is kept)
      if (starts("<!--")) {
        const size_t end = s.find("-->", at + 4);
        if (end == std::string::npos) return fail("a comment that never ends");
        at = end + 3;
      } else if (starts("<?")) {
        const size_t end = s.find("?>", at + 2);
        if (end == std::string::npos) return fail("a declaration that never ends");
        at = end + 2;
      } else if (starts("<!")) {
        return fail("a DTD or CDATA section (not supported)");
      } else {
        return true;
      }
    }
  }
  bool value(std::string* out) {
    if (at >= s.size() || (s[at] != '"' && s[at] != '\'')) return fail("an attribute's value must be quoted");
    const char q = s[at++];
    out->clear();
    while (at < s.size() && s[at] != q) {
      if (s[at] == '<') return fail("'<' in an attribute's value");
      if (s[at] != '&') {
        out->push_back(s[at++]);
        continue;
      }
      static const std::pair<const char*, char> kEntities[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool known = false;
      for (const auto& [text, c] : kEntities)
        if (starts(text)) {
          out->push_back(c);
          at += strlen(text);
          known = true;
          break;
        }
      if (!known) return fail("an unknown entity in an attribute's value");
    }
    if (at >= s.size()) return fail("an attribute's value that never ends");
    ++at;
    return true;
  }
  // An element at `at` (its '<'), into *node.
  bool element(XmlNode* node, int depth) {
    if (depth > kMaxDepth) return fail("elements nested too deep");
    if (++nodes > kMaxNodes) return fail("too many elements");
    ++at;
    if (!name(&node->name)) return false;
    for (;;) {
      blanks();
      if (at >= s.size()) return fail("<" + node->name + "> never ends");
      if (starts("/>")) {
        at += 2;
        return true;
      }
      if (s[at] == '>') {
        ++at;
        break;
      }
      std::string key, val;
      if (!name(&key)) return false;
      blanks();
      if (at >= s.size() || s[at] != '=') return fail("'=' was expected after attribute " + key);
      ++at;
      blanks();
      if (!value(&val)) return false;
      if (node->attr(key.c_str())) return fail("attribute " + key + " given twice");
      if (node->attrs.size() == kMaxAttrs) return fail("<" + node->name + "> has too many attributes");
      node->attrs.emplace_back(key, val);
    }
    for (;;) {  // children, then the closing tag
      if (!skipOthers()) return false;
      if (at >= s.size()) return fail("<" + node->name + "> is never closed");
      if (starts("</")) {
        at += 2;
        std::string closing;
        if (!name(&closing)) return false;
        blanks();
        if (closing != node->name || at >= s.size() || s[at] != '>')
          return fail("</" + closing + "> closes <" + node->name + ">");
        ++at;
        return true;
      }
      node->children.emplace_back();
      if (!element(&node->children.back(), depth + 1)) return false;
    }
  }
};

}  // namespace

const std::string* XmlNode::attr(const char* key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

bool xmlParse(const std::string& text, XmlNode* root, std::string* err) {
  *root = XmlNode{};
  Reader r{text, 0, 0, err};
  for (;;) {
    if (!r.skipOthers()) return false;
    if (r.at >= text.size()) return true;
    if (r.starts("</")) return r.fail("a closing tag with nothing open");
    root->children.emplace_back();
    if (!r.element(&root->children.back(), 1)) return false;
  }
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace accl
