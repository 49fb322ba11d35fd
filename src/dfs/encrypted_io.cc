// Encrypted file data (see encrypted_io.h; the format in docs/dfs.md,
// "Encrypted files"), the key check at mount, and key files.
#include "dfs/encrypted_io.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "dfs/filesystem_core.h"

namespace ros2::dfs {
namespace {

constexpr uint64_t kB = kCryptBlockSize;
constexpr uint64_t kR = kBlockRecordSize;

// Key check record: u8 version (1), u8 cipher (1 = AES-256-GCM), u16 block
// size, u32 reserved, 16 bytes of KeyCheckValue. Little-endian.
constexpr size_t kKeyCheckRecordSize = 24;

std::vector<std::byte> EncodeKeyCheck(const std::array<uint8_t, kKeyCheckSize>& kcv) {
  std::vector<std::byte> out(kKeyCheckRecordSize);
  out[0] = std::byte{1};
  out[1] = std::byte{1};
  out[2] = static_cast<std::byte>(kCryptBlockSize & 0xff);
  out[3] = static_cast<std::byte>(kCryptBlockSize >> 8);
  std::memcpy(out.data() + 8, kcv.data(), kcv.size());
  return out;
}

// The blocks of one chunk a request touches: records [first, first + count).
struct ChunkBlocks {
  uint64_t chunk = 0;
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t slot = 0;       // index of its first record in the request's staging buffer
  uint64_t array_end = 0;  // reads: the akey's array end in that chunk (records)
};

std::vector<ChunkBlocks> SplitIntoBlocks(uint64_t first_block, uint64_t last_block, uint64_t blocks_per_chunk) {
  std::vector<ChunkBlocks> out;
  uint64_t g = first_block;
  while (g <= last_block) {
    ChunkBlocks c;
    c.chunk = g / blocks_per_chunk;
    c.first = g % blocks_per_chunk;
    c.count = std::min(last_block - g + 1, blocks_per_chunk - c.first);
    c.slot = g - first_block;
    out.push_back(c);
    g += c.count;
  }
  return out;
}

Status CheckChunkSize(const Entry& file) {
  if (file.chunk_size % kB != 0) {
    return Status::InvalidArgument(fmt::format(
        "dfs: '{}' has chunk size {}, not a multiple of the {}-byte encryption block", file.name, file.chunk_size, kB));
  }
  return Status::Ok();
}

void Drain(client::EventQueue& eq, const bool& done) {
  std::array<client::Event, 1> ignored;
  while (!done || eq.in_flight() > 0) (void)eq.Wait(ignored, eq.in_flight(), std::chrono::seconds(5));
}

using SizeCallback = std::function<void(const Result<uint64_t>&)>;

// The file's size through `eq`: the array tail of the encrypted akey, then the
// last record's plaintext length (authenticated).
Status SubmitEncryptedSize(const client::Object& obj, client::EventQueue& eq, const FileCipher& cipher,
                           const std::string& name, uint64_t chunk_size, SizeCallback done) {
  return obj.SubmitQueryArrayTail(
      eq, kEncryptedDataAkey,
      [obj, &eq, cipher, name, chunk_size, done](const Result<std::optional<client::ArrayTail>>& tail) {
        if (!tail.ok()) return done(tail.status());
        if (!tail->has_value()) return done(uint64_t{0});
        auto index = ChunkIndex((*tail)->dkey);
        if (!index.ok()) return done(index.status());
        const uint64_t end = (*tail)->end, base = *index * chunk_size;
        if (end == 0) return done(base);
        auto record = std::make_shared<std::vector<std::byte>>(kR);
        client::FetchArgs f;
        f.dkey = (*tail)->dkey;
        f.akey = kEncryptedDataAkey;
        f.kind = client::ValueType::kArray;
        f.index = end - 1;
        f.count = 1;
        f.record_size = kR;
        f.buffer = *record;
        const uint64_t block = base / kB + end - 1;
        Status st =
            obj.SubmitFetch(eq, f, [obj, cipher, name, record, base, end, block, done](const client::IoResult& r) {
              if (!r.status.ok()) return done(r.status);
              std::array<std::byte, kCryptBlockSize> plain;
              auto len = cipher.Open(obj.id(), block, *record, plain, name);
              if (!len.ok()) return done(len.status());
              done(base + (end - 1) * kB + *len);
            });
        if (!st.ok()) done(st);
      });
}

// One encrypted request in flight.
struct CryptRequest {
  client::Object obj;
  client::EventQueue* eq = nullptr;
  FileCipher cipher;
  std::string name;
  uint64_t chunk_size = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t first_block = 0;
  std::vector<ChunkBlocks> chunks;
  std::vector<std::byte> staging;  // one record per block of the request
  std::span<std::byte> out;        // reads
  std::span<const std::byte> in;   // writes
  std::vector<uint64_t> partial;   // writes: blocks read, modified and rewritten
  size_t remaining = 0;
  Status status;
  client::IoCallback callback;

  CryptRequest(client::Object o, const FileCipher& c) : obj(std::move(o)), cipher(c) {}

  std::span<std::byte> Slot(uint64_t block) { return {staging.data() + (block - first_block) * kR, kR}; }

  void Finish(const client::IoResult& r) {
    client::IoCallback cb = std::move(callback);
    callback = nullptr;
    cb(r);
  }
  void FinishWith(Status st) {
    client::IoResult r;
    r.status = std::move(st);
    Finish(r);
  }
  void Note(const Status& st) {
    if (!st.ok() && status.ok()) status = st;
  }
};

// --- reads ---

void FinishRead(const std::shared_ptr<CryptRequest>& s) {
  if (!s->status.ok()) return s->FinishWith(s->status);
  const uint64_t bpc = s->chunk_size / kB, req_end = s->offset + s->length;
  uint64_t data_end = 0;
  std::array<std::byte, kCryptBlockSize> plain;
  for (const ChunkBlocks& c : s->chunks) {
    for (uint64_t k = 0; k < c.count; ++k) {
      const uint64_t block = c.chunk * bpc + c.first + k;
      auto len = s->cipher.Open(s->obj.id(), block, s->Slot(block), plain, s->name);
      if (!len.ok()) return s->FinishWith(len.status());
      const uint64_t lo = std::max(block * kB, s->offset), hi = std::min((block + 1) * kB, req_end);
      std::memcpy(s->out.data() + (lo - s->offset), plain.data() + (lo - block * kB), hi - lo);
      if (c.array_end == c.first + k + 1) data_end = std::max(data_end, block * kB + *len);  // the chunk's last record
    }
    const uint64_t base = c.chunk * s->chunk_size;
    if (c.array_end > c.first + c.count) {
      data_end = std::max(data_end, base + c.array_end * kB);  // data past the request in this chunk
    } else if (c.array_end > 0 && c.array_end <= c.first) {
      data_end = std::max(data_end, base + (c.array_end - 1) * kB + 1);  // ends before the request: a lower bound
    }
  }
  if (data_end >= req_end) {
    client::IoResult r;
    r.size = s->length;
    return s->Finish(r);
  }
  // The data seen ends before the request does: the file's size decides.
  Status st = SubmitEncryptedSize(s->obj, *s->eq, s->cipher, s->name, s->chunk_size, [s](const Result<uint64_t>& size) {
    if (!size.ok()) return s->FinishWith(size.status());
    client::IoResult r;
    r.size = *size > s->offset ? std::min(s->length, *size - s->offset) : 0;
    s->Finish(r);
  });
  if (!st.ok()) s->FinishWith(st);
}

// --- writes ---

// Seals every block of the request into its slot (merging the partly covered
// ones with their old contents, already fetched into their slots) and
// submits one update per chunk. From a submission (`from_submit`), a failure
// before anything was queued drops the callback and is returned; otherwise
// every outcome goes to the callback.
Status SealAndStore(const std::shared_ptr<CryptRequest>& s, bool from_submit) {
  auto fail = [&](const Status& st) {
    if (from_submit) {
      s->callback = nullptr;
      return st;
    }
    s->FinishWith(st);
    return Status::Ok();
  };
  if (!s->status.ok()) return fail(s->status);
  const uint64_t req_end = s->offset + s->length;
  std::array<std::byte, kCryptBlockSize> plain;
  const uint64_t last_block = (req_end - 1) / kB;
  for (uint64_t block = s->first_block; block <= last_block; ++block) {
    const uint64_t start = block * kB, lo = std::max(start, s->offset), hi = std::min(start + kB, req_end);
    const auto src = s->in.subspan(lo - s->offset, hi - lo);
    if (hi - lo == kB) {
      Status st = s->cipher.Seal(s->obj.id(), block, src, s->Slot(block));
      if (!st.ok()) return fail(st);
      continue;
    }
    auto old_len = s->cipher.Open(s->obj.id(), block, s->Slot(block), plain, s->name);
    if (!old_len.ok()) return fail(old_len.status());
    std::memcpy(plain.data() + (lo - start), src.data(), src.size());
    const uint64_t len = std::max<uint64_t>(*old_len, hi - start);
    Status st = s->cipher.Seal(s->obj.id(), block, std::span<const std::byte>(plain.data(), len), s->Slot(block));
    if (!st.ok()) return fail(st);
  }
  s->remaining = s->chunks.size() + 1;
  for (const ChunkBlocks& c : s->chunks) {
    client::UpdateArgs u;
    u.dkey = ChunkDkey(c.chunk);
    u.akey = kEncryptedDataAkey;
    u.kind = client::ValueType::kArray;
    u.index = c.first;
    u.record_size = kR;
    u.data = std::span<const std::byte>(s->staging.data() + c.slot * kR, c.count * kR);
    Status st = s->obj.SubmitUpdate(*s->eq, u, [s](const client::IoResult& r) {
      s->Note(r.status);
      if (--s->remaining == 0) {
        if (!s->status.ok()) return s->FinishWith(s->status);
        client::IoResult out;
        out.size = s->length;
        s->Finish(out);
      }
    });
    if (!st.ok()) {
      s->Note(st);
      s->remaining -= s->chunks.size() - (&c - s->chunks.data());
      break;
    }
  }
  if (s->remaining == 1 && !s->status.ok()) return fail(s->status);  // nothing was queued
  if (--s->remaining == 0) {
    if (!s->status.ok()) {
      s->FinishWith(s->status);
      return Status::Ok();
    }
    client::IoResult out;
    out.size = s->length;
    s->Finish(out);
  }
  return Status::Ok();
}

std::shared_ptr<CryptRequest> NewRequest(const FilesystemCore& core, client::EventQueue& eq, const Entry& file,
                                         client::Object obj, uint64_t offset, uint64_t length,
                                         client::IoCallback callback) {
  auto s = std::make_shared<CryptRequest>(std::move(obj), *core.cipher());
  s->eq = &eq;
  s->name = file.name;
  s->chunk_size = file.chunk_size;
  s->offset = offset;
  s->length = length;
  s->first_block = offset / kB;
  s->chunks = SplitIntoBlocks(s->first_block, (offset + length - 1) / kB, file.chunk_size / kB);
  s->staging.resize((s->chunks.back().slot + s->chunks.back().count) * kR);
  s->callback = std::move(callback);
  return s;
}

}  // namespace

Result<std::optional<FileCipher>> SetUpEncryption(client::Container& container, const MountOptions& options,
                                                  const client::Object& superblock, std::string_view what) {
  const client::ContainerSummary& cs = container.summary();
  const bool key_given = !options.encryption_key.empty() || !options.encryption_key_file.empty();
  if (!cs.encryption) {
    if (key_given) {
      return Status::InvalidArgument(
          fmt::format("{}: an encryption key was given but the container is not encrypted", what));
    }
    return std::optional<FileCipher>();
  }
  const std::string key_name = cs.encryption_key_id.empty() ? "(no key id recorded)" : "'" + cs.encryption_key_id + "'";
  if (!key_given) {
    return Status::PermissionDenied(
        fmt::format("{}: the container is encrypted (aes-256-gcm, key id {}) and no key was given "
                    "(MountOptions::encryption_key or encryption_key_file)",
                    what, key_name));
  }
  if (!options.encryption_key_id.empty() && options.encryption_key_id != cs.encryption_key_id) {
    return Status::PermissionDenied(
        fmt::format("{}: key id '{}' was given, the container's key is {}", what, options.encryption_key_id, key_name));
  }
  MasterKey key{};
  if (!options.encryption_key.empty()) {
    auto parsed = ParseMasterKey(options.encryption_key, "MountOptions::encryption_key");
    if (!parsed.ok()) return parsed.status().WithContext(what);
    key = *parsed;
  } else {
    auto bytes = ReadKeyFile(options.encryption_key_file);
    if (!bytes.ok()) return bytes.status().WithContext(what);
    std::memcpy(key.data(), bytes->data(), key.size());
  }
  // The first keyed mount records the key's check value (before it formats);
  // every mount compares.
  const auto expected = EncodeKeyCheck(KeyCheckValue(key, cs.uuid));
  const std::string context = fmt::format("{}: key check", what);
  auto recorded = superblock.Get(kSuperblockDkey, kKeyCheckAkey, kKeyCheckRecordSize);
  if (!recorded.ok()) return recorded.status().WithContext(context);
  if (recorded->empty()) {
    auto sb = superblock.Get(kSuperblockDkey, kEntryAkey, 128);
    if (!sb.ok()) return sb.status().WithContext(context);
    if (!sb->empty()) {
      // A file system without a key check was formatted without encryption
      // (encryption=on was only a flag before encrypted files existed).
      return Status::NotSupported(
          fmt::format("{}: its file system was formatted without encryption (no key check record), so its file data is "
                      "plaintext; copy it into a new encrypted container",
                      what));
    }
    client::UpdateArgs args;
    args.dkey = kSuperblockDkey;
    args.akey = kKeyCheckAkey;
    args.data = expected;
    args.condition = client::Condition::kAbsent;
    Status st = superblock.Update(args);
    if (st.ok()) return std::optional<FileCipher>(FileCipher::Create(key, cs.uuid));
    if (st.code() != Status::Code::kAlreadyExists) return st.WithContext(context);
    recorded = superblock.Get(kSuperblockDkey, kKeyCheckAkey, kKeyCheckRecordSize);  // a concurrent first mount's
    if (!recorded.ok()) return recorded.status().WithContext(context);
  }
  if (recorded->size() != kKeyCheckRecordSize || (*recorded)[0] != std::byte{1} || (*recorded)[1] != std::byte{1} ||
      !std::equal(recorded->begin() + 2, recorded->begin() + 4, expected.begin() + 2)) {
    return Status::Corruption(
        fmt::format("{}: the key check record ({} bytes) is not one this build reads", what, recorded->size()));
  }
  if (!std::equal(recorded->begin(), recorded->end(), expected.begin())) {
    return Status::PermissionDenied(fmt::format(
        "{}: wrong key for the container (key id {}): its check value differs from the one recorded", what, key_name));
  }
  return std::optional<FileCipher>(FileCipher::Create(key, cs.uuid));
}

Result<uint64_t> EncryptedFileSize(const FilesystemCore& core, const ObjectId& file, uint64_t chunk_size) {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(file));
  ROS2_ASSIGN_OR_RETURN(auto tail, obj.QueryArrayTail(kEncryptedDataAkey));
  if (!tail) return uint64_t{0};
  ROS2_ASSIGN_OR_RETURN(uint64_t index, ChunkIndex(tail->dkey));
  const uint64_t base = index * chunk_size;
  if (tail->end == 0) return base;
  std::vector<std::byte> record(kR);
  client::FetchArgs f;
  f.dkey = tail->dkey;
  f.akey = kEncryptedDataAkey;
  f.kind = client::ValueType::kArray;
  f.index = tail->end - 1;
  f.count = 1;
  f.record_size = kR;
  f.buffer = record;
  ROS2_ASSIGN_OR_RETURN(client::IoResult r, obj.Fetch(f));
  (void)r;
  std::array<std::byte, kCryptBlockSize> plain;
  ROS2_ASSIGN_OR_RETURN(uint32_t len,
                        core.cipher()->Open(file, base / kB + tail->end - 1, record, plain, file.ToString()));
  return base + (tail->end - 1) * kB + len;
}

Status SubmitEncryptedRead(const FilesystemCore& core, client::EventQueue& eq, const Entry& file, uint64_t offset,
                           std::span<std::byte> buffer, client::IoCallback callback) {
  ROS2_RETURN_IF_ERROR(CheckChunkSize(file));
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(file.oid));
  ROS2_RETURN_IF_ERROR(obj.ConnectShards());  // the size query may follow from a callback
  auto s = NewRequest(core, eq, file, std::move(obj), offset, buffer.size(), std::move(callback));
  s->out = buffer;
  s->remaining = s->chunks.size() + 1;
  for (ChunkBlocks& c : s->chunks) {
    client::FetchArgs f;
    f.dkey = ChunkDkey(c.chunk);
    f.akey = kEncryptedDataAkey;
    f.kind = client::ValueType::kArray;
    f.index = c.first;
    f.count = c.count;
    f.record_size = kR;
    f.buffer = std::span<std::byte>(s->staging.data() + c.slot * kR, c.count * kR);
    f.want_array_end = true;
    ChunkBlocks* cp = &c;
    Status st = s->obj.SubmitFetch(eq, f, [s, cp](const client::IoResult& r) {
      s->Note(r.status);
      if (r.status.ok()) cp->array_end = r.array_end;
      if (--s->remaining == 0) FinishRead(s);
    });
    if (!st.ok()) {
      s->Note(st);
      s->remaining -= s->chunks.size() - (&c - s->chunks.data());
      break;
    }
  }
  if (s->remaining == 1 && !s->status.ok()) {
    s->callback = nullptr;  // nothing was queued: the error is returned instead
    return s->status;
  }
  if (--s->remaining == 0) FinishRead(s);
  return Status::Ok();
}

Status SubmitEncryptedWrite(const FilesystemCore& core, client::EventQueue& eq, const Entry& file, uint64_t offset,
                            std::span<const std::byte> data, client::IoCallback callback) {
  ROS2_RETURN_IF_ERROR(CheckChunkSize(file));
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(file.oid));
  auto s = NewRequest(core, eq, file, std::move(obj), offset, data.size(), std::move(callback));
  s->in = data;
  const uint64_t end = offset + data.size(), last_block = (end - 1) / kB;
  if (offset % kB != 0 || (last_block == s->first_block && end % kB != 0)) s->partial.push_back(s->first_block);
  if (last_block != s->first_block && end % kB != 0) s->partial.push_back(last_block);
  if (s->partial.empty()) return SealAndStore(s, true);  // whole blocks only: no read needed
  // Read-modify-write: fetch the partly covered blocks into their slots; the
  // seal and the updates follow from the last fetch's callback.
  ROS2_RETURN_IF_ERROR(s->obj.ConnectShards());
  const uint64_t bpc = file.chunk_size / kB;
  s->remaining = s->partial.size() + 1;
  for (uint64_t block : s->partial) {
    client::FetchArgs f;
    f.dkey = ChunkDkey(block / bpc);
    f.akey = kEncryptedDataAkey;
    f.kind = client::ValueType::kArray;
    f.index = block % bpc;
    f.count = 1;
    f.record_size = kR;
    f.buffer = s->Slot(block);
    Status st = s->obj.SubmitFetch(eq, f, [s](const client::IoResult& r) {
      s->Note(r.status);
      if (--s->remaining == 0) (void)SealAndStore(s, false);
    });
    if (!st.ok()) {
      s->Note(st);
      s->remaining -= s->partial.size() - (&block - s->partial.data());
      break;
    }
  }
  if (s->remaining == 1 && !s->status.ok()) {
    s->callback = nullptr;
    return s->status;
  }
  if (--s->remaining == 0) (void)SealAndStore(s, false);
  return Status::Ok();
}

Status TruncateEncrypted(const FilesystemCore& core, const EntryRecord& rec, uint64_t size) {
  const std::string what = fmt::format("dfs truncate of {} to {}", rec.oid.ToString(), size);
  const uint64_t cs = rec.chunk_size;
  if (cs % kB != 0) {
    return Status::InvalidArgument(fmt::format("{}: chunk size {} is not a multiple of {}", what, cs, kB));
  }
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(rec.oid));
  ROS2_ASSIGN_OR_RETURN(uint64_t current, EncryptedFileSize(core, rec.oid, cs));
  if (size == current) return Status::Ok();
  if (size < current) {
    if (size == 0) return obj.PunchObject().WithContext(what);
    const uint64_t first_dead = (size + cs - 1) / cs;  // first chunk wholly past the end
    ROS2_ASSIGN_OR_RETURN(auto dkeys, obj.ListDkeys());
    for (const auto& dkey : dkeys) {
      auto index = ChunkIndex(dkey);
      if (!index.ok()) continue;
      if (*index >= first_dead) ROS2_RETURN_IF_ERROR(obj.PunchDkey(dkey).WithContext(what));
    }
    if (size % cs != 0) {
      // Chunk `chunk` keeps records [0, keep); the last of them is cut to `cut` bytes when cut > 0.
      const uint64_t chunk = size / cs, in_chunk = size % cs, cut = in_chunk % kB;
      const uint64_t keep = in_chunk / kB + (cut != 0 ? 1 : 0);
      std::vector<std::byte> kept(keep * kR);
      client::FetchArgs f;
      f.dkey = ChunkDkey(chunk);
      f.akey = kEncryptedDataAkey;
      f.kind = client::ValueType::kArray;
      f.count = keep;
      f.record_size = kR;
      f.buffer = kept;
      f.want_array_end = true;
      ROS2_ASSIGN_OR_RETURN(client::IoResult r, obj.Fetch(f));
      bool rewrite = r.array_end > keep;
      if (cut != 0) {
        const uint64_t block = chunk * (cs / kB) + keep - 1;
        std::span<std::byte> last(kept.data() + (keep - 1) * kR, kR);
        std::array<std::byte, kCryptBlockSize> plain;
        ROS2_ASSIGN_OR_RETURN(uint32_t len, core.cipher()->Open(rec.oid, block, last, plain, rec.oid.ToString()));
        if (len > cut) {  // the block's kept prefix, under a fresh nonce
          ROS2_RETURN_IF_ERROR(
              core.cipher()->Seal(rec.oid, block, std::span<const std::byte>(plain.data(), cut), last));
          rewrite = true;
        }
      }
      if (rewrite) {
        // Rewrite up to the last record that is not a hole (an all-zero record).
        uint64_t count = keep;
        while (count > 0 && std::all_of(kept.begin() + (count - 1) * kR, kept.begin() + count * kR,
                                        [](std::byte b) { return b == std::byte{0}; })) {
          --count;
        }
        ROS2_RETURN_IF_ERROR(obj.PunchDkey(f.dkey).WithContext(what));
        if (count > 0) {
          client::UpdateArgs u;
          u.dkey = f.dkey;
          u.akey = kEncryptedDataAkey;
          u.kind = client::ValueType::kArray;
          u.record_size = kR;
          u.data = std::span<const std::byte>(kept.data(), count * kR);
          ROS2_RETURN_IF_ERROR(obj.Update(u).WithContext(what));
        }
      }
    }
    ROS2_ASSIGN_OR_RETURN(current, EncryptedFileSize(core, rec.oid, cs));
    if (current >= size) return Status::Ok();
  }
  // Grow: one zero byte at size - 1 (its block read, merged and resealed); the rest reads as holes.
  Entry file;
  file.oid = rec.oid;
  file.name = rec.oid.ToString();
  file.mode = rec.mode;
  file.chunk_size = cs;
  ROS2_ASSIGN_OR_RETURN(auto eq, core.container().CreateEventQueue());
  const std::byte zero{0};
  bool done = false;
  client::IoResult result;
  ROS2_RETURN_IF_ERROR(SubmitEncryptedWrite(core, *eq, file, size - 1, std::span<const std::byte>(&zero, 1),
                                            [&](const client::IoResult& r) {
                                              result = r;
                                              done = true;
                                            }));
  Drain(*eq, done);
  return result.status.WithContext(what);
}

// --- key files ---

Status CreateKeyFile(const std::string& path) {
  std::array<uint8_t, kMasterKeySize> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    return Status::Internal("key create: the random source failed");
  }
  std::string text;
  for (uint8_t b : key) text += fmt::format("{:02x}", b);
  text += '\n';
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("key create: {}", path));
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()) || !synced) {
    ::unlink(path.c_str());
    return Status::FromErrno(n < 0 ? err : EIO, fmt::format("key create: writing {}", path));
  }
  return Status::Ok();
}

Result<std::vector<std::byte>> ReadKeyFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("key file {}", path));
  struct stat st {};
  std::vector<std::byte> bytes(256);
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const ssize_t n = ::read(fd, bytes.data(), bytes.size());
  const int err = errno;
  ::close(fd);
  if (!stat_ok || n < 0) return Status::FromErrno(err, fmt::format("key file {}", path));
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied(fmt::format("key file {}: mode {:o} lets others read it (chmod 600)", path,
                                                static_cast<unsigned>(st.st_mode & 07777)));
  }
  bytes.resize(static_cast<size_t>(n));
  ROS2_ASSIGN_OR_RETURN(MasterKey key, ParseMasterKey(bytes, fmt::format("key file {}", path)));
  std::vector<std::byte> out(key.size());
  std::memcpy(out.data(), key.data(), key.size());
  return out;
}

}  // namespace ros2::dfs
