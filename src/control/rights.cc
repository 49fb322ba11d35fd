#include "control/rights.h"

#include <fmt/format.h>

namespace ros2::control {

std::string RightsToString(Rights rights) {
  static constexpr char kLetters[] = "rwcda";
  std::string out(5, '-');
  for (int bit = 0; bit < 5; ++bit) {
    if ((rights & (1u << bit)) != 0) out[static_cast<size_t>(bit)] = kLetters[bit];
  }
  return out;
}

Result<Rights> ParseRights(std::string_view text) {
  if (text == "all") return kAllRights;
  if (text == "none" || text.empty()) return Rights{0};
  auto word_bit = [](std::string_view w) -> int {
    if (w == "read" || w == "r") return kRightRead;
    if (w == "write" || w == "w") return kRightWrite;
    if (w == "create" || w == "c") return kRightCreate;
    if (w == "delete" || w == "d") return kRightDelete;
    if (w == "admin" || w == "a") return kRightAdmin;
    return -1;
  };
  Rights out = 0;
  if (text.find(',') != std::string_view::npos || word_bit(text) > 0) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(',', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view w = text.substr(start, end - start);
      int bit = word_bit(w);
      if (bit < 0) return Status::InvalidArgument(fmt::format("rights '{}': unknown right '{}'", text, w));
      out |= static_cast<Rights>(bit);
      start = end + 1;
    }
    return out;
  }
  for (char c : text) {
    int bit = word_bit(std::string_view(&c, 1));
    if (bit < 0) {
      return Status::InvalidArgument(
          fmt::format("rights '{}': unknown right letter '{}' (expected r, w, c, d, a)", text, c));
    }
    out |= static_cast<Rights>(bit);
  }
  return out;
}

Status ValidateRights(uint32_t rights, std::string_view what) {
  if ((rights & ~uint32_t{kAllRights}) != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: rights 0x{:x} have unknown bits 0x{:x}", what, rights, rights & ~uint32_t{kAllRights}));
  }
  return Status::Ok();
}

}  // namespace ros2::control
