// A GoogleTest parameter name from any text: every character that is not a letter or a digit
// becomes '_' (GoogleTest accepts nothing else in a name).
#pragma once

#include <cctype>
#include <string>

namespace unetback::test {

inline std::string gtest_safe_name(std::string n) {
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

}  // namespace unetback::test
