// A reader and writer for the XML subset NCCL's topology files use:
// elements with attributes (quoted with " or '), nesting, self-closing
// tags, comments and <?...?> declarations, the five predefined entities.
// No text content is kept (topology files carry none), no DTD.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace accl {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlNode> children;
  const std::string* attr(const char* key) const;  // null: not given
};

// Parses `text` into *root, a nameless node whose children are the
// top-level elements. False with what is wrong and where (line) in *err.
bool xmlParse(const std::string& text, XmlNode* root, std::string* err);
// `s` as an attribute value's text (quotes, <, >, & escaped).
std::string xmlEscape(const std::string& s);

}  // namespace accl
