// The data path of files in an encrypted container (docs/dfs.md, "Encrypted
// files"): the block format of file_crypto.h laid over the file's chunks.
// Chunk c of a file holds, under akey kEncryptedDataAkey, one
// kBlockRecordSize-byte record per 4 KiB plaintext block (record j = bytes
// [j * 4 KiB, (j + 1) * 4 KiB) of the chunk); each update writes whole records,
// so a block's ciphertext, nonce and tag always change together.
//
// Reads fetch the records covering the range (one fetch per chunk, all at
// once), authenticate and decrypt them; writes fetch the at most two blocks
// they cover partly (read-modify-write), then seal every block under a fresh
// nonce and store one update per chunk. A file's size is the end of its last
// record's plaintext: the array tail of the akey plus that record's length.
//
// Free functions over a FilesystemCore whose cipher() is set; called by the
// Filesystem methods after their flag check. Thread rules as data_io.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dfs/file_crypto.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::dfs {

class FilesystemCore;
struct EntryRecord;

// The key check record of an encrypted file system: superblock object, dkey
// kSuperblockDkey, this akey (docs/dfs.md, "Encrypted files").
inline constexpr std::string_view kKeyCheckAkey = "k";

// Mount step: for an encrypted container, the cipher built from the key in
// `options`, after the key was checked against the key id property and the
// key check record (written by the first keyed mount); nullopt for a plain
// container. PermissionDenied without a key or with a wrong one,
// InvalidArgument for a key given to a plain container.
Result<std::optional<FileCipher>> SetUpEncryption(client::Container& container, const MountOptions& options,
                                                  const client::Object& superblock, std::string_view what);

Result<uint64_t> EncryptedFileSize(const FilesystemCore& core, const ObjectId& file, uint64_t chunk_size);

// As Filesystem::SubmitRead / SubmitWrite (arguments already checked, length > 0).
Status SubmitEncryptedRead(const FilesystemCore& core, client::EventQueue& eq, const Entry& file, uint64_t offset,
                           std::span<std::byte> buffer, client::IoCallback callback);
Status SubmitEncryptedWrite(const FilesystemCore& core, client::EventQueue& eq, const Entry& file, uint64_t offset,
                            std::span<const std::byte> data, client::IoCallback callback);

// Truncate's data change: chunks past the end punched, the cut block's kept
// prefix re-encrypted under a fresh nonce, a grow written as one zero byte.
Status TruncateEncrypted(const FilesystemCore& core, const EntryRecord& rec, uint64_t size);

}  // namespace ros2::dfs
