// libFuzzer target: the object-RPC decoders (src/object/obj_rpc.h), which
// every engine target runs on every request payload before anything else.
// The first input byte picks the message (request or reply of each opcode),
// the rest is the payload. Properties checked on every input:
//  - decoding never crashes, reads out of bounds, leaks or allocates more than
//    the input can describe (ASan, UBSan, -rss_limit_mb);
//  - an accepted message respects the protocol limits the engine relies on
//    (key sizes, anchor size, list entries, checksum shape, I/O sizes);
//  - an accepted message re-encodes to exactly the input bytes (one set of
//    rules on both sides: no two encodings of one message, nothing ignored).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "object/obj_rpc.h"

using namespace ros2;
using namespace ros2::obj;

namespace {

void Check(bool ok) {
  if (!ok) abort();
}

void CheckKey(const std::string& k) {
  Check(k.size() <= kMaxKeySize);
}

void CheckHeader(const RequestHeader& h) {
  Check((h.flags & kFlagIfAbsent) == 0 || (h.flags & kFlagIfPresent) == 0);
}

void CheckChecksums(const Checksums& c) {
  Check(c.values.size() <= kMaxChecksums);
  if (c.type == ChecksumType::kNone) Check(c.values.empty());
}

void Same(const std::vector<uint8_t>& encoded, std::span<const uint8_t> input) {
  Check(encoded.size() == input.size());
  Check(input.empty() || std::memcmp(encoded.data(), input.data(), input.size()) == 0);
}

// Decodes with `decode`; when accepted, runs `check` and the re-encoding check.
template <typename Decode, typename CheckFn>
void Run(std::span<const uint8_t> input, Decode decode, CheckFn check) {
  auto m = decode(input);
  if (!m.ok()) return;
  check(*m);
  Same(Encode(*m), input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 13;
  std::span<const uint8_t> input(data + 1, size - 1);
  switch (selector) {
    case 0: Run(input, DecodePingRequest, [](const PingRequest&) {}); break;
    case 1: Run(input, DecodePingReply, [](const PingReply&) {}); break;
    case 2:
      Run(input, DecodeUpdateRequest, [](const UpdateRequest& m) {
        CheckHeader(m.header);
        CheckKey(m.dkey);
        CheckKey(m.akey);
        Check(!m.dkey.empty() && !m.akey.empty());
        Check(m.length <= kMaxIoSize);
        Check(m.record_size > 0);
        Check(ValidateChecksums(m.csum, m.length, "update").ok());
        CheckChecksums(m.csum);
      });
      break;
    case 3: Run(input, DecodeUpdateReply, [](const UpdateReply&) {}); break;
    case 4:
      Run(input, DecodeFetchRequest, [](const FetchRequest& m) {
        CheckHeader(m.header);
        CheckKey(m.dkey);
        CheckKey(m.akey);
        if (m.type == ValueType::kArray) {
          Check(m.record_size > 0);
          Check(m.count <= kMaxIoSize / m.record_size);  // count * record_size cannot overflow
        }
      });
      break;
    case 5: Run(input, DecodeFetchReply, [](const FetchReply& m) { CheckChecksums(m.csum); }); break;
    case 6:
      Run(input, DecodePunchRequest, [](const PunchRequest& m) {
        CheckHeader(m.header);
        CheckKey(m.dkey);
        CheckKey(m.akey);
        if (m.scope == PunchScope::kObject) Check(m.dkey.empty() && m.akey.empty());
        if (m.scope != PunchScope::kObject) Check(!m.dkey.empty());
        if (m.scope == PunchScope::kAkey) Check(!m.akey.empty());
      });
      break;
    case 7: Run(input, DecodePunchReply, [](const PunchReply&) {}); break;
    case 8:
      Run(input, DecodeListRequest, [](const ListRequest& m) {
        CheckHeader(m.header);
        CheckKey(m.dkey);
        CheckKey(m.akey);
        Check(m.anchor.position.size() <= kMaxAnchorSize);
        Check(m.max_entries >= 1 && m.max_entries <= kMaxListEntries);
      });
      break;
    case 9:
      Run(input, DecodeListReply, [](const ListReply& m) {
        Check(m.anchor.position.size() <= kMaxAnchorSize);
        for (const auto& k : m.keys) CheckKey(k);
      });
      break;
    case 10:
      Run(input, DecodeQueryRequest, [](const QueryRequest& m) {
        CheckHeader(m.header);
        CheckKey(m.dkey);
        CheckKey(m.akey);
      });
      break;
    case 11: Run(input, DecodeQueryReply, [](const QueryReply& m) { CheckKey(m.max_dkey); }); break;
    case 12:
      Run(input, DecodeStaleMapReply, [](const StaleMapReply& m) { Check(m.engine_version > m.request_version); });
      break;
  }
  return 0;
}
