// Encrypted containers end to end against a real cluster (ros2-engine started
// by `ros2ctl cluster up`): the engine stores only ciphertext (checked by
// fetching the file's object raw, without DFS), a tampered or moved block is
// EIO, a wrong key or no key is refused, and random reads, writes and
// truncates of every size match a reference buffer (docs/dfs.md, "Encrypted
// files").
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "dfs/encrypted_io.h"
#include "dfs/file_crypto.h"
#include "dfs/filesystem_core.h"
#include "ros2/client.h"
#include "ros2/dfs.h"
#include "testing/pattern.h"
#include "testing/test_cluster.h"

namespace ros2::dfs {
namespace {

using ros2::testing::Pattern;
using ros2::testing::TestCluster;

std::vector<std::byte> KeyBytes(uint8_t seed) {
  std::vector<std::byte> k(kMasterKeySize);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::byte>(seed * 31 + i);
  return k;
}

// One cluster per transport; each test gets a fresh encrypted container
// (key id "k1", chunk size 16 KiB: four blocks per chunk) mounted with KeyBytes(1).
class DfsCryptTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { clusters_.Clear(); }

  void SetUp() override {
    std::string error;
    cluster_ = clusters_.Get(GetParam(), &error);
    ASSERT_NE(cluster_, nullptr) << error;
    label_ = fmt::format("e{}", next_container_++);
    auto cont = cluster_->Ctl({"cont", "create", "p", label_, "--chunk-size", "16KiB", "-p", "encryption=aes-256-gcm",
                               "-p", "encryption_key_id=k1"});
    ASSERT_EQ(cont.exit_code, 0) << cont.err;
    client::ClientOptions o;
    o.control = cluster_->control();
    o.secret_file = cluster_->admin_secret_file();
    o.transport = GetParam();
    auto client = client::Client::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto pool = client_->ConnectPool("p");
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(*pool);
    cont_ = OpenContainer(label_);
    ASSERT_NE(cont_, nullptr);
    EXPECT_TRUE(cont_->summary().encryption);
    EXPECT_EQ(cont_->summary().encryption_key_id, "k1");
    fs_ = Mount(*cont_, KeyOptions(1));
    ASSERT_NE(fs_, nullptr);
  }

  void TearDown() override {
    fs_.reset();
    cont_.reset();
    pool_.reset();
    client_.reset();
  }

  std::unique_ptr<client::Container> OpenContainer(const std::string& label) {
    auto c = pool_->OpenContainer(label);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static MountOptions KeyOptions(uint8_t seed) {
    MountOptions m;
    m.encryption_key = KeyBytes(seed);
    return m;
  }
  static std::unique_ptr<Filesystem> Mount(client::Container& c, const MountOptions& m) {
    auto fs = Filesystem::Mount(c, m);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    return fs.ok() ? std::move(*fs) : nullptr;
  }
  Entry Create(std::string_view name) {
    auto f = fs_->Open(fs_->Root(), name, O_CREAT | O_RDWR, 0644);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : Entry{};
  }
  // Records [index, index + count) of chunk `chunk` of `file`, raw.
  std::vector<std::byte> RawRecords(const Entry& file, uint64_t chunk, uint64_t index, uint64_t count) {
    auto obj = cont_->OpenObject(file.oid);
    EXPECT_TRUE(obj.ok());
    std::vector<std::byte> raw(count * kBlockRecordSize);
    client::FetchArgs f;
    f.dkey = ChunkDkey(chunk);
    f.akey = kEncryptedDataAkey;
    f.kind = ValueType::kArray;
    f.index = index;
    f.count = count;
    f.record_size = kBlockRecordSize;
    f.buffer = raw;
    auto r = obj->Fetch(f);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return raw;
  }
  void PutRawRecords(const Entry& file, uint64_t chunk, uint64_t index, std::span<const std::byte> records) {
    auto obj = cont_->OpenObject(file.oid);
    ASSERT_TRUE(obj.ok());
    client::UpdateArgs u;
    u.dkey = ChunkDkey(chunk);
    u.akey = kEncryptedDataAkey;
    u.kind = ValueType::kArray;
    u.index = index;
    u.record_size = kBlockRecordSize;
    u.data = records;
    ASSERT_TRUE(obj->Update(u).ok());
  }

  static inline ros2::testing::SharedClusters clusters_;
  static inline int next_container_ = 0;
  TestCluster* cluster_ = nullptr;
  std::string label_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Pool> pool_;
  std::unique_ptr<client::Container> cont_;
  std::unique_ptr<Filesystem> fs_;
};

TEST_P(DfsCryptTest, TheEngineStoresOnlyCiphertext) {
  Entry f = Create("secret");
  // Three blocks of a recognisable text, one partial.
  std::string text;
  while (text.size() < 3 * kCryptBlockSize - 100) text += "PLAINTEXT-MARKER-0123456789 ";
  auto plain = std::as_bytes(std::span(text));
  ASSERT_EQ(*fs_->Write(f, 0, plain), plain.size());
  // The chunk dkey holds the encrypted records and nothing else (no plaintext akey).
  auto obj = cont_->OpenObject(f.oid);
  ASSERT_TRUE(obj.ok());
  auto akeys = obj->ListAkeys(ChunkDkey(0));
  ASSERT_TRUE(akeys.ok()) << akeys.status().ToString();
  EXPECT_EQ(*akeys, std::vector<std::string>{std::string(kEncryptedDataAkey)});
  auto raw = RawRecords(f, 0, 0, 3);
  const std::string_view raw_text(reinterpret_cast<const char*>(raw.data()), raw.size());
  EXPECT_EQ(raw_text.find("PLAINTEXT"), std::string_view::npos);
  EXPECT_EQ(raw_text.find("MARKER"), std::string_view::npos);
  for (int b = 0; b < 3; ++b) {
    EXPECT_NE(std::memcmp(raw.data() + b * kBlockRecordSize + kBlockHeaderSize, plain.data() + b * kCryptBlockSize,
                          b < 2 ? kCryptBlockSize : plain.size() - 2 * kCryptBlockSize),
              0);
  }
  // The same bytes read back through DFS, and the size is the plaintext's.
  std::vector<std::byte> back(plain.size() + 50);
  ASSERT_EQ(*fs_->Read(f, 0, back), plain.size());
  EXPECT_EQ(std::memcmp(back.data(), plain.data(), plain.size()), 0);
  EXPECT_EQ(fs_->Stat(f)->size, plain.size());
  // Rewriting the same bytes stores other ciphertext (a fresh nonce per write).
  ASSERT_EQ(*fs_->Write(f, 0, plain.first(kCryptBlockSize)), kCryptBlockSize);
  auto again = RawRecords(f, 0, 0, 1);
  EXPECT_NE(std::memcmp(again.data(), raw.data(), kBlockRecordSize), 0);
  // A remount with the key reads it too.
  fs_.reset();
  fs_ = Mount(*cont_, KeyOptions(1));
  ASSERT_NE(fs_, nullptr);
  auto g = fs_->LookupPath("/secret");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(*fs_->Read(*g, 0, back), plain.size());
  EXPECT_EQ(std::memcmp(back.data(), plain.data(), plain.size()), 0);
}

TEST_P(DfsCryptTest, TamperedOrMovedBlocksAreEio) {
  Entry f = Create("victim");
  auto data = Pattern(6 * kCryptBlockSize, 5);  // chunk 0 (blocks 0-3), chunk 1 (blocks 4-5)
  ASSERT_EQ(*fs_->Write(f, 0, data), data.size());
  // Flip a few stored ciphertext bytes of block 1.
  auto rec = RawRecords(f, 0, 1, 1);
  for (size_t i = 100; i < 104; ++i) rec[i] ^= std::byte{0x5a};
  PutRawRecords(f, 0, 1, rec);
  std::vector<std::byte> buf(kCryptBlockSize);
  auto r = fs_->Read(f, kCryptBlockSize + 10, std::span(buf).first(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Errno(r.status()), EIO);
  EXPECT_NE(r.status().message().find("block 1"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("victim"), std::string::npos) << r.status().ToString();
  // The untouched blocks still read; a partial write into the bad block is refused too (its RMW).
  ASSERT_EQ(*fs_->Read(f, 0, buf), buf.size());
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), buf.size()), 0);
  EXPECT_EQ(Errno(fs_->Write(f, kCryptBlockSize + 5, std::span(buf).first(3)).status()), EIO);
  // A whole-block overwrite replaces it (no read needed) and heals it.
  ASSERT_TRUE(fs_->Write(f, kCryptBlockSize, std::span(data).subspan(kCryptBlockSize, kCryptBlockSize)).ok());
  ASSERT_EQ(*fs_->Read(f, kCryptBlockSize, buf), buf.size());
  // A valid record copied to another index (block 0 over block 2) and to
  // another chunk (block 0 over block 4) fails to authenticate.
  auto block0 = RawRecords(f, 0, 0, 1);
  PutRawRecords(f, 0, 2, block0);
  PutRawRecords(f, 1, 0, block0);
  EXPECT_EQ(Errno(fs_->Read(f, 2 * kCryptBlockSize, buf).status()), EIO);
  EXPECT_EQ(Errno(fs_->Read(f, 4 * kCryptBlockSize, buf).status()), EIO);
  // Into another file at the same index: fails too.
  Entry other = Create("other");
  ASSERT_TRUE(fs_->Write(other, 0, std::span(data).first(kCryptBlockSize)).ok());
  PutRawRecords(other, 0, 0, RawRecords(f, 0, 3, 1));
  EXPECT_EQ(Errno(fs_->Read(other, 0, buf).status()), EIO);
  // A stored record whose header was zeroed over data is damage, not a hole.
  auto rec5 = RawRecords(f, 1, 1, 1);
  std::memset(rec5.data(), 0, kBlockHeaderSize);
  PutRawRecords(f, 1, 1, rec5);
  EXPECT_EQ(Errno(fs_->Read(f, 5 * kCryptBlockSize, buf).status()), EIO);
  EXPECT_EQ(Errno(fs_->Stat(f).status()), EIO);  // the size comes from that last record
}

TEST_P(DfsCryptTest, NoKeyOrAWrongKeyIsRefused) {
  Entry f = Create("f");
  ASSERT_TRUE(fs_->Write(f, 0, Pattern(5000, 1)).ok());
  // No key: PermissionDenied naming the container and the key id.
  auto none = Filesystem::Mount(*cont_, MountOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(Errno(none.status()), EACCES);
  EXPECT_NE(none.status().message().find(label_), std::string::npos) << none.status().ToString();
  EXPECT_NE(none.status().message().find("'k1'"), std::string::npos) << none.status().ToString();
  EXPECT_NE(none.status().message().find("no key"), std::string::npos) << none.status().ToString();
  // Another key: its check value differs from the recorded one.
  auto wrong = Filesystem::Mount(*cont_, KeyOptions(2));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(Errno(wrong.status()), EACCES);
  EXPECT_NE(wrong.status().message().find("wrong key"), std::string::npos) << wrong.status().ToString();
  // The right key under another id.
  MountOptions named = KeyOptions(1);
  named.encryption_key_id = "k2";
  auto misnamed = Filesystem::Mount(*cont_, named);
  ASSERT_FALSE(misnamed.ok());
  EXPECT_EQ(Errno(misnamed.status()), EACCES);
  named.encryption_key_id = "k1";
  EXPECT_TRUE(Filesystem::Mount(*cont_, named).ok());
  // A key that is not 32 bytes.
  MountOptions short_key;
  short_key.encryption_key = std::vector<std::byte>(16);
  EXPECT_EQ(Errno(Filesystem::Mount(*cont_, short_key).status()), EINVAL);
  // A key for a plain container is a mistake, refused.
  ASSERT_EQ(cluster_->Ctl({"cont", "create", "p", label_ + "plain"}).exit_code, 0);
  auto plain = OpenContainer(label_ + "plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->summary().encryption);
  EXPECT_EQ(Errno(Filesystem::Mount(*plain, KeyOptions(1)).status()), EINVAL);
  // Data written under the right key is unreadable under another key even
  // when the check is bypassed (the cipher alone).
  auto rec = RawRecords(f, 0, 0, 1);
  MasterKey other{};
  std::memcpy(other.data(), KeyBytes(2).data(), other.size());
  std::vector<std::byte> plain_out(kCryptBlockSize);
  auto opened = FileCipher::Create(other, cont_->summary().uuid).Open(f.oid, 0, rec, plain_out, "f");
  EXPECT_EQ(opened.status().code(), Status::Code::kCorruption);
}

// A file system formatted before encrypted files existed (encryption=on was a
// flag only) has no key check record: refused, its data is plaintext.
TEST_P(DfsCryptTest, AFileSystemFormattedWithoutEncryptionIsRefused) {
  auto sb = cont_->OpenObject(SuperblockObjectId(cont_->summary()));
  ASSERT_TRUE(sb.ok());
  ASSERT_TRUE(sb->PunchAkey(kSuperblockDkey, kKeyCheckAkey).ok());
  auto old = Filesystem::Mount(*cont_, KeyOptions(1));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), Status::Code::kNotSupported) << old.status().ToString();
  EXPECT_NE(old.status().message().find("formatted without encryption"), std::string::npos);
}

TEST_P(DfsCryptTest, KeyFilesFromCreateKeyFile) {
  const std::string dir = cluster_->scratch();
  ::mkdir(dir.c_str(), 0700);
  const std::string path = dir + "/" + label_ + ".key";
  ASSERT_TRUE(CreateKeyFile(path).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 65);
  EXPECT_EQ(CreateKeyFile(path).code(), Status::Code::kAlreadyExists);
  auto key = ReadKeyFile(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->size(), kMasterKeySize);
  // A fresh encrypted container keyed by the file: mount by path, then by bytes.
  const std::string label = label_ + "f";
  ASSERT_EQ(cluster_->Ctl({"cont", "create", "p", label, "-p", "encryption=aes-256-gcm"}).exit_code, 0);
  auto cont = OpenContainer(label);
  ASSERT_NE(cont, nullptr);
  MountOptions by_file;
  by_file.encryption_key_file = path;
  auto fs = Mount(*cont, by_file);
  ASSERT_NE(fs, nullptr);
  auto f = fs->Open(fs->Root(), "x", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(fs->Write(*f, 7, Pattern(10, 1)).ok());
  MountOptions by_bytes;
  by_bytes.encryption_key = *key;
  EXPECT_TRUE(Filesystem::Mount(*cont, by_bytes).ok());
  EXPECT_EQ(Errno(Filesystem::Mount(*cont, KeyOptions(1)).status()), EACCES);
  // A key file others may read is refused.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto open_file = ReadKeyFile(path);
  ASSERT_FALSE(open_file.ok());
  EXPECT_EQ(Errno(open_file.status()), EACCES);
}

// Random writes, reads and truncates of 1 byte to several blocks at random
// offsets (crossing blocks and 16 KiB chunks, leaving holes) against a
// reference buffer; sizes from Stat and short reads at the end must agree.
TEST_P(DfsCryptTest, RandomIoMatchesAReferenceBuffer) {
  Entry f = Create("random");
  std::vector<std::byte> ref;  // the file's bytes; ref.size() is its size
  std::mt19937_64 rng(20261126);
  auto pick_length = [&rng]() -> uint64_t {
    switch (rng() % 6) {
      case 0: return 1 + rng() % 16;
      case 1: return 1 + rng() % 600;
      case 2: return kCryptBlockSize;
      case 3: return kCryptBlockSize - 1 + rng() % 3;
      case 4: return 1 + rng() % (3 * kCryptBlockSize);
      default: return 1 + rng() % (40 * 1024);
    }
  };
  constexpr uint64_t kSpan = 160 * 1024;
  for (int op = 0; op < 400; ++op) {
    const uint64_t kind = rng() % 10;
    if (kind < 5) {  // write
      const uint64_t len = pick_length();
      const uint64_t off = (rng() % 4 == 0) ? (rng() % 40) * kCryptBlockSize : rng() % kSpan;
      auto data = Pattern(len, static_cast<uint64_t>(op));
      auto n = fs_->Write(f, off, data);
      ASSERT_TRUE(n.ok()) << "op " << op << ": " << n.status().ToString();
      ASSERT_EQ(*n, len);
      if (ref.size() < off + len) ref.resize(off + len);
      std::memcpy(ref.data() + off, data.data(), len);
    } else if (kind < 9) {  // read (sometimes across or past the end)
      const uint64_t len = pick_length();
      const uint64_t off = rng() % (kSpan + 8192);
      std::vector<std::byte> buf(len, std::byte{0xee});
      auto n = fs_->Read(f, off, buf);
      ASSERT_TRUE(n.ok()) << "op " << op << ": " << n.status().ToString();
      const uint64_t want = off >= ref.size() ? 0 : std::min<uint64_t>(len, ref.size() - off);
      ASSERT_EQ(*n, want) << "op " << op << " read " << len << " at " << off << " size " << ref.size();
      ASSERT_EQ(std::memcmp(buf.data(), ref.data() + std::min<uint64_t>(off, ref.size()), want), 0)
          << "op " << op << " read " << len << " at " << off;
    } else {  // truncate: shrink (often mid-block) or grow
      const uint64_t size = rng() % 3 == 0 ? rng() % (kSpan + 20000) : rng() % std::max<uint64_t>(ref.size(), 1);
      ASSERT_TRUE(fs_->Truncate(f, size).ok()) << "op " << op << " truncate to " << size;
      ref.resize(size);
    }
    if (op % 25 == 0) {
      auto attr = fs_->Stat(f);
      ASSERT_TRUE(attr.ok()) << attr.status().ToString();
      ASSERT_EQ(attr->size, ref.size()) << "op " << op;
    }
  }
  // The whole file at the end, through one read.
  std::vector<std::byte> all(ref.size() + 3 * kCryptBlockSize);
  ASSERT_EQ(*fs_->Read(f, 0, all), ref.size());
  EXPECT_EQ(std::memcmp(all.data(), ref.data(), ref.size()), 0);
  EXPECT_EQ(fs_->Stat(f)->size, ref.size());
}

// The asynchronous calls: many requests in flight, a short read at the end.
TEST_P(DfsCryptTest, AsyncRequestsInFlight) {
  Entry f = Create("async");
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  constexpr int kRequests = 32;
  constexpr uint64_t kLen = 3000;  // unaligned: every request is a read-modify-write
  auto data = Pattern(kRequests * kLen, 9);
  int done = 0;
  for (int i = 0; i < kRequests; ++i) {
    // Requests touch distinct blocks (writers of one block must serialise).
    const uint64_t off = static_cast<uint64_t>(i) * 2 * kCryptBlockSize + 500;
    ASSERT_TRUE(fs_->SubmitWrite(**eq, f, off, std::span(data).subspan(i * kLen, kLen),
                                 [&](const client::IoResult& r) {
                                   EXPECT_TRUE(r.status.ok()) << r.status.ToString();
                                   EXPECT_EQ(r.size, kLen);
                                   ++done;
                                 })
                    .ok());
  }
  std::array<client::Event, 8> ev;
  while (done < kRequests) (void)(*eq)->Wait(ev, 1, std::chrono::seconds(5));
  std::vector<std::vector<std::byte>> bufs(kRequests, std::vector<std::byte>(kLen + 100));
  std::vector<uint64_t> sizes(kRequests, 0);
  done = 0;
  for (int i = 0; i < kRequests; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * 2 * kCryptBlockSize + 500;
    ASSERT_TRUE(fs_->SubmitRead(**eq, f, off, bufs[i],
                                [&, i](const client::IoResult& r) {
                                  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
                                  sizes[i] = r.size;
                                  ++done;
                                })
                    .ok());
  }
  while (done < kRequests) (void)(*eq)->Wait(ev, 1, std::chrono::seconds(5));
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(sizes[i], i + 1 < kRequests ? kLen + 100 : kLen) << i;  // the last one is short
    EXPECT_EQ(std::memcmp(bufs[i].data(), data.data() + i * kLen, kLen), 0) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, DfsCryptTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::dfs
