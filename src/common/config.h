// Configuration helpers on top of yaml-cpp.
//
// Components define plain structs for their settings and fill them from a
// YAML::Node with these helpers, so every config error names the file, the key
// and what was wrong ("engine.yaml: targets[1].class: expected 'nvme' or 'ram',
// got 'ssd'"). Sizes accept suffixes (4096, 4k, 4KiB, 1M, 1MiB, 2G, 2GiB: all
// powers of two); durations accept ms, s, m. Free functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace ros2 {

// Loads and parses a YAML file; the error names the path and the parse position.
Result<YAML::Node> LoadYamlFile(const std::string& path);
// Parses YAML text (embedded defaults, tests); `origin` names it in errors.
Result<YAML::Node> ParseYaml(std::string_view text, std::string_view origin);

// "4KiB" -> 4096. Bytes without a suffix. InvalidArgument names the text.
Result<uint64_t> ParseSize(std::string_view text);
// "250ms" -> 250 ms, "3s", "2m"; a bare number is milliseconds.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
// 4096 -> "4 KiB", 1572864 -> "1.5 MiB".
std::string FormatSize(uint64_t bytes);

// Typed lookups of an optional key in a map node: absent keys keep *out as it
// is (the default); present keys of the wrong type are an error naming
// `where.key`.
Status ReadString(const YAML::Node& node, std::string_view where, const char* key, std::string* out);
Status ReadBool(const YAML::Node& node, std::string_view where, const char* key, bool* out);
Status ReadUint(const YAML::Node& node, std::string_view where, const char* key, uint64_t* out);
Status ReadSize(const YAML::Node& node, std::string_view where, const char* key, uint64_t* out);
Status ReadDuration(const YAML::Node& node, std::string_view where, const char* key, std::chrono::milliseconds* out);
// A map node whose keys are all in `known`; InvalidArgument naming
// `where.key` for the first other one (a typo in a config file is an error).
Status CheckKnownKeys(const YAML::Node& node, std::string_view where, std::initializer_list<const char*> known);
// A duration that may also be given in microseconds ("50us"), besides the
// forms of ParseDuration.
Status ReadMicros(const YAML::Node& node, std::string_view where, const char* key, std::chrono::microseconds* out);

}  // namespace ros2
