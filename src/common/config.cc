#include "common/config.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ros2 {

Result<YAML::Node> LoadYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, fmt::format("config: open {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseYaml(ss.str(), path);
}

Result<YAML::Node> ParseYaml(std::string_view text, std::string_view origin) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: YAML error at line {}, column {}: {}", origin, e.mark.line + 1,
                                               e.mark.column + 1, e.msg));
  }
}

Result<uint64_t> ParseSize(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || ptr == t.data()) {
    return Status::InvalidArgument(fmt::format("'{}' is not a size (expected e.g. 4096, 4k, 1MiB, 2G)", text));
  }
  std::string suffix(ptr, t.data() + t.size());
  for (auto& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  int shift = 0;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") shift = 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") shift = 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") shift = 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") shift = 40;
  else return Status::InvalidArgument(fmt::format("'{}' has an unknown size suffix '{}'", text, suffix));
  if (shift > 0 && value > (~uint64_t{0} >> shift)) {
    return Status::InvalidArgument(fmt::format("size '{}' overflows 64 bits", text));
  }
  return value << shift;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) {
    return Status::InvalidArgument(fmt::format("'{}' is not a duration (expected e.g. 250ms, 3s, 2m)", text));
  }
  std::string_view suffix(ptr, text.data() + text.size() - ptr);
  if (suffix.empty() || suffix == "ms") return std::chrono::milliseconds(value);
  if (suffix == "s") return std::chrono::milliseconds(value * 1000);
  if (suffix == "m" || suffix == "min") return std::chrono::milliseconds(value * 60000);
  return Status::InvalidArgument(fmt::format("'{}' has an unknown duration suffix '{}'", text, suffix));
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  if (v == static_cast<double>(static_cast<uint64_t>(v))) return fmt::format("{} {}", static_cast<uint64_t>(v), kUnits[unit]);
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

namespace {

template <typename T>
Status ReadScalar(const YAML::Node& node, std::string_view where, const char* key, T* out, std::string_view type) {
  if (!node || !node.IsMap()) return Status::Ok();
  YAML::Node v = node[key];
  if (!v) return Status::Ok();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(fmt::format("{}.{}: expected {}, got '{}'", where, key, type, v.Scalar()));
  }
  return Status::Ok();
}

}  // namespace

Status ReadString(const YAML::Node& node, std::string_view where, const char* key, std::string* out) {
  return ReadScalar(node, where, key, out, "a string");
}
Status ReadBool(const YAML::Node& node, std::string_view where, const char* key, bool* out) {
  return ReadScalar(node, where, key, out, "true or false");
}
Status ReadUint(const YAML::Node& node, std::string_view where, const char* key, uint64_t* out) {
  if (node && node.IsMap() && node[key] && node[key].IsScalar() && !node[key].Scalar().empty() &&
      node[key].Scalar()[0] == '-') {
    return Status::InvalidArgument(fmt::format("{}.{}: expected a non-negative integer, got '{}'", where, key,
                                               node[key].Scalar()));
  }
  return ReadScalar(node, where, key, out, "a non-negative integer");
}
Status ReadSize(const YAML::Node& node, std::string_view where, const char* key, uint64_t* out) {
  if (!node || !node.IsMap() || !node[key]) return Status::Ok();
  auto r = ParseSize(node[key].Scalar());
  if (!r.ok()) return r.status().WithContext(fmt::format("{}.{}", where, key));
  *out = *r;
  return Status::Ok();
}
Status ReadDuration(const YAML::Node& node, std::string_view where, const char* key, std::chrono::milliseconds* out) {
  if (!node || !node.IsMap() || !node[key]) return Status::Ok();
  auto r = ParseDuration(node[key].Scalar());
  if (!r.ok()) return r.status().WithContext(fmt::format("{}.{}", where, key));
  *out = *r;
  return Status::Ok();
}

Status CheckKnownKeys(const YAML::Node& node, std::string_view where, std::initializer_list<const char*> known) {
  if (!node.IsMap()) return Status::InvalidArgument(fmt::format("{}: expected a map", where));
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) return Status::InvalidArgument(fmt::format("{}.{}: unknown setting", where, key));
  }
  return Status::Ok();
}

Status ReadMicros(const YAML::Node& node, std::string_view where, const char* key, std::chrono::microseconds* out) {
  if (!node || !node.IsMap() || !node[key]) return Status::Ok();
  const std::string text = node[key].Scalar();
  if (text.size() > 2 && text.ends_with("us")) {
    try {
      *out = std::chrono::microseconds(std::stoull(text.substr(0, text.size() - 2)));
    } catch (const std::exception&) {
      return Status::InvalidArgument(fmt::format("{}.{}: '{}' is not a duration", where, key, text));
    }
    return Status::Ok();
  }
  std::chrono::milliseconds ms{0};
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, key, &ms));
  *out = std::chrono::duration_cast<std::chrono::microseconds>(ms);
  return Status::Ok();
}

}  // namespace ros2
