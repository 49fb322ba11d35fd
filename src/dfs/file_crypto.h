// The encrypted-file block format of DFS (docs/dfs.md, "Encrypted files"):
// AES-256-GCM over fixed 4 KiB plaintext blocks, each stored as one record of
// kBlockRecordSize bytes (a 32-byte header with the nonce and tag, then the
// ciphertext) in the array akey kEncryptedDataAkey of the file's chunk dkey.
//
// FileCipher holds the container's data key, derived from the tenant's or
// container's 32-byte master key and the container's UUID, so every
// container has its own GCM key even when a tenant uses one key file for
// all. Seal encrypts one block under a fresh random 96-bit nonce; Open
// authenticates and decrypts one, binding it to the file's object id and the
// block's index (the additional authenticated data), so a block moved to
// another index, file or container fails. Open tells an all-zero record (a
// block never written: a hole) apart from a damaged one, which is Corruption
// (EIO) naming the block.
//
// The same code serves a direct-mode mount and the offload agent, so both
// read and write one format. Thread-safe: a FileCipher is immutable after
// Create; Seal and Open use a cipher context per call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ros2/types.h"

namespace ros2::dfs {

inline constexpr size_t kMasterKeySize = 32;
inline constexpr uint32_t kCryptBlockSize = 4096;  // plaintext bytes per block
inline constexpr uint32_t kBlockHeaderSize = 32;   // version, length, nonce, tag
inline constexpr uint32_t kBlockRecordSize = kCryptBlockSize + kBlockHeaderSize;
inline constexpr uint32_t kKeyCheckSize = 16;  // bytes of a key check value
inline constexpr uint8_t kBlockFormatVersion = 1;
// A file chunk's encrypted blocks: an array of kBlockRecordSize-byte records,
// record i = block i of the chunk.
inline constexpr std::string_view kEncryptedDataAkey = "c";

using MasterKey = std::array<uint8_t, kMasterKeySize>;

// A key given as 32 raw bytes, or a key file's contents: 64 hex digits
// (surrounding white space allowed) or exactly 32 raw bytes.
// InvalidArgument naming `what` otherwise.
Result<MasterKey> ParseMasterKey(std::span<const std::byte> bytes, std::string_view what);
// The first 16 bytes of HMAC-SHA256(master, "ros2.dfs.keycheck.v1" || uuid):
// what a container records to recognise its key without storing it.
std::array<uint8_t, kKeyCheckSize> KeyCheckValue(const MasterKey& master, std::string_view container_uuid);

class FileCipher {
 public:
  // The data key is HMAC-SHA256(master, "ros2.dfs.datakey.v1" || uuid).
  static FileCipher Create(const MasterKey& master, std::string_view container_uuid);
  FileCipher(const FileCipher&) = default;
  FileCipher& operator=(const FileCipher&) = default;
  ~FileCipher();  // wipes the key

  // Encrypts `plain` (1 .. kCryptBlockSize bytes: the block's bytes from its
  // start up to its last written byte) as block `block` (the file-wide block
  // index: offset / kCryptBlockSize) of file `oid` into `record`
  // (kBlockRecordSize bytes; the unused tail is zeroed), under a fresh random
  // nonce. Internal when the random source or the cipher fails.
  Status Seal(const ObjectId& oid, uint64_t block, std::span<const std::byte> plain, std::span<std::byte> record) const;

  // Authenticates and decrypts `record` (kBlockRecordSize bytes) of block
  // `block` of file `oid` into `plain` (kCryptBlockSize bytes; bytes past the
  // block's length are zeroed). Returns the block's plaintext length: 0 for
  // an all-zero record (never written). Corruption (EIO) naming `file_name`
  // and the block when the header is malformed or the tag does not verify
  // (tampered data, a block from another place, or another key).
  Result<uint32_t> Open(const ObjectId& oid, uint64_t block, std::span<const std::byte> record,
                        std::span<std::byte> plain, std::string_view file_name) const;

 private:
  explicit FileCipher(const std::array<uint8_t, 32>& key) : key_(key) {}
  std::array<uint8_t, 32> key_;
};

}  // namespace ros2::dfs
