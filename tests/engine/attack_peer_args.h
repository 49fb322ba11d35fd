// The command line and the output of the hostile client processes of the
// attack tests (transport_attack_peer, raw_ucx_attack_peer): key=value
// arguments after the attack's name, and one "RESULT <name> <code> <text>"
// line per result on stdout (code: the Status code number, 0 for OK and for
// plain values), which attack_arena.h's RunAttacker reads. One process, one
// thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::testing::attack_peer {

inline std::map<std::string, std::string>& Args() {
  static std::map<std::string, std::string> args;
  return args;
}
// Takes argv[first..] as key=value pairs (others are ignored).
inline void ParseArgs(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) Args()[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}
inline std::string Arg(const std::string& key, const std::string& fallback = "") {
  auto it = Args().find(key);
  return it == Args().end() ? fallback : it->second;
}
inline uint64_t HexArg(const std::string& key) {
  return std::stoull(Arg(key, "0"), nullptr, 16);
}
inline uint64_t NumArg(const std::string& key, uint64_t fallback) {
  const std::string v = Arg(key);
  return v.empty() ? fallback : std::stoull(v);
}
// "a,b,c" as its parts ("" gives none).
inline std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < list.size()) {
    const size_t comma = list.find(',', start);
    out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}
inline std::vector<uint8_t> Unhex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}
inline void Report(const std::string& name, const Status& st) {
  std::string text = st.ToString();
  for (char& c : text)
    if (c == '\n') c = ' ';
  std::printf("RESULT %s %d %s\n", name.c_str(), static_cast<int>(st.code()), text.c_str());
  std::fflush(stdout);
}
inline void Value(const std::string& name, const std::string& value) {
  std::printf("RESULT %s 0 %s\n", name.c_str(), value.c_str());
  std::fflush(stdout);
}

}  // namespace ros2::testing::attack_peer
