#include "vos/keys.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace ros2::vos::keys {

void AppendU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (56 - 8 * i)) & 0xff);
  out->append(b, sizeof(b));
}

uint64_t ReadU64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

namespace {

// Writes `key` escaped (as AppendEscaped) at `p`; returns the end.
char* WriteEscaped(char* p, std::string_view key) {
  for (char c : key) {
    *p++ = c;
    if (c == '\0') *p++ = '\xff';
  }
  *p++ = '\0';
  *p++ = '\x01';
  return p;
}

char* WriteU64(char* p, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) *p++ = static_cast<char>((v >> shift) & 0xff);
  return p;
}

size_t EscapedSize(std::string_view key) {
  return key.size() + static_cast<size_t>(std::count(key.begin(), key.end(), '\0')) + 2;
}

}  // namespace

void AppendEscaped(std::string* out, std::string_view key) {
  const size_t at = out->size();
  out->resize(at + EscapedSize(key));
  WriteEscaped(out->data() + at, key);
}

bool ConsumeEscaped(std::string_view* in, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < in->size()) {
    char c = (*in)[i];
    if (c != '\0') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= in->size()) return false;
    char next = (*in)[i + 1];
    if (next == '\x01') {
      in->remove_prefix(i + 2);
      return true;
    }
    if (next != '\xff') return false;
    out->push_back('\0');
    i += 2;
  }
  return false;
}

std::string ObjectScope(const ObjectId& oid) {
  std::string s;
  s.reserve(16);
  AppendU64(&s, oid.hi);
  AppendU64(&s, oid.lo);
  return s;
}

size_t DkeyScopeSize(std::string_view dkey) {
  return 16 + EscapedSize(dkey);
}

std::string DkeyScope(const ObjectId& oid, std::string_view dkey) {
  std::string s(DkeyScopeSize(dkey), '\0');
  WriteEscaped(WriteU64(WriteU64(s.data(), oid.hi), oid.lo), dkey);
  return s;
}

std::string AkeyScope(const ObjectId& oid, std::string_view dkey, std::string_view akey) {
  std::string s;
  AssignAkeyScope(oid, dkey, akey, &s);
  return s;
}

void AssignAkeyScope(const ObjectId& oid, std::string_view dkey, std::string_view akey, std::string* out) {
  // Sized once and written in place: the scope is built for every fetch and
  // update, and a chunk's dkey (a big-endian index) is mostly NUL bytes.
  out->resize(DkeyScopeSize(dkey) + EscapedSize(akey));
  WriteEscaped(WriteEscaped(WriteU64(WriteU64(out->data(), oid.hi), oid.lo), dkey), akey);
}

std::string TreeKey(std::string_view scope) {
  std::string k;
  k.reserve(scope.size() + 1);
  k.push_back(kTree);
  k.append(scope);
  return k;
}

std::string HeaderKey(std::string_view akey_scope) {
  std::string k = TreeKey(akey_scope);
  k.push_back(kHeaderKind);
  return k;
}

std::string SingleKey(std::string_view akey_scope, Epoch epoch) {
  std::string k = TreeKey(akey_scope);
  k.push_back(kSingleKind);
  AppendU64(&k, ~epoch);
  return k;
}

uint8_t ExtentSizeClass(uint64_t count) {
  return static_cast<uint8_t>(std::min<int>(std::bit_width(count - 1), kMaxSizeClass));
}

uint64_t ExtentClassBound(uint8_t size_class) {
  return size_class >= kMaxSizeClass ? ~uint64_t{0} : uint64_t{1} << size_class;
}

std::string ExtentClassPrefix(std::string_view akey_scope, uint8_t size_class) {
  std::string k = TreeKey(akey_scope);
  k.push_back(kExtentKind);
  k.push_back(static_cast<char>(size_class));
  return k;
}

std::string ExtentKey(std::string_view akey_scope, uint8_t size_class, uint64_t index, Epoch epoch) {
  std::string k = ExtentClassPrefix(akey_scope, size_class);
  AppendU64(&k, index);
  AppendU64(&k, ~epoch);
  return k;
}

std::string PunchKey(std::string_view scope, Epoch epoch) {
  std::string k(1, kPunch);
  k.append(scope);
  AppendU64(&k, epoch);
  return k;
}

std::string CheckKey(uint64_t group) {
  std::string k(1, kCheck);
  AppendU64(&k, group);
  return k;
}

std::string DecidedKey(const ObjectId& oid, std::string_view dkey, std::string_view akey) {
  std::string k(1, kDecided);
  k.append(AkeyScope(oid, dkey, akey));
  return k;
}

std::string AllocKey(uint64_t offset) {
  std::string k(1, kAlloc);
  AppendU64(&k, offset);
  return k;
}

std::string SnapshotKey(Epoch epoch) {
  std::string k(1, kSnapshot);
  AppendU64(&k, epoch);
  return k;
}

std::string MetaKey(std::string_view name) {
  std::string k(1, kMeta);
  k.append(name);
  return k;
}

std::string PrefixSuccessor(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<uint8_t>(s.back()) == 0xff) s.pop_back();
  if (!s.empty()) s.back() = static_cast<char>(static_cast<uint8_t>(s.back()) + 1);
  return s;
}

Result<ParsedTreeKey> ParseTreeKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("vos: malformed tree key ({} bytes): {}", key.size(), why));
  };
  if (key.size() < 17 || key[0] != kTree) return bad("too short or wrong prefix");
  ParsedTreeKey p;
  std::string_view in = key.substr(1);
  p.oid.hi = ReadU64(in);
  p.oid.lo = ReadU64(in.substr(8));
  in.remove_prefix(16);
  if (!ConsumeEscaped(&in, &p.dkey)) return bad("bad dkey");
  p.dkey_scope_len = key.size() - 1 - in.size();
  if (!ConsumeEscaped(&in, &p.akey)) return bad("bad akey");
  p.akey_scope_len = key.size() - 1 - in.size();
  if (in.empty()) return bad("no record kind");
  p.kind = in[0];
  in.remove_prefix(1);
  switch (p.kind) {
    case kHeaderKind:
      if (!in.empty()) return bad("trailing bytes after header");
      break;
    case kSingleKind:
      if (in.size() != 8) return bad("single-value key length");
      p.epoch = ~ReadU64(in);
      break;
    case kExtentKind:
      if (in.size() != 17 || static_cast<uint8_t>(in[0]) > kMaxSizeClass) return bad("extent key length or size class");
      p.size_class = static_cast<uint8_t>(in[0]);
      p.index = ReadU64(in.substr(1));
      p.epoch = ~ReadU64(in.substr(9));
      break;
    default: return bad("unknown record kind");
  }
  return p;
}

}  // namespace ros2::vos::keys
