// DFS end to end against a real single-node cluster (ros2-engine started by
// `ros2ctl cluster up` in a temporary directory): files, their data and
// attributes, byte-exact over tcp and over shared memory, direct and through
// ros2-agent. The namespace (directories, names, links) is dfs_namespace_test.cc.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "dfs/dfs_test_fixture.h"

namespace ros2::dfs {
namespace {

// The data path runs over both transports; the other tests (whose RPCs are
// small) over shared memory only, to keep the test time down (each test is
// its own process with its own cluster under ctest).
class DfsTest : public DfsFixture {};
class DfsDataTest : public DfsFixture {};

TEST_P(DfsTest, MountFormatsOnceAndRemountSeesTheSameTree) {
  ASSERT_NE(fs_, nullptr);
  Entry root = fs_->Root();
  EXPECT_TRUE(root.is_dir());
  auto attr = fs_->Stat(root);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->ino, 1u);
  EXPECT_TRUE(S_ISDIR(attr->mode));
  EXPECT_EQ(fs_->chunk_size(), kDefaultChunkSize);
  CreateFile(root, "kept", "hello");
  auto again = MountOrDie({.create = false});
  ASSERT_NE(again, nullptr);
  auto f = again->LookupPath("/kept");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(ReadAll(*f), "hello");
}

TEST_P(DfsTest, CreateWriteReadStatUnlink) {
  Entry root = fs_->Root();
  auto dir = fs_->Mkdir(root, "d", 0750);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  Entry f = CreateFile(*dir, "f", "0123456789");
  EXPECT_EQ(ReadAll(f), "0123456789");
  auto attr = fs_->Stat(f);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, 10u);
  EXPECT_TRUE(S_ISREG(attr->mode));
  EXPECT_EQ(attr->mode & 07777, 0644u);
  auto looked = fs_->LookupPath("/d/f");
  ASSERT_TRUE(looked.ok()) << looked.status().ToString();
  EXPECT_EQ(looked->oid, f.oid);
  ASSERT_TRUE(fs_->Unlink(*dir, "f").ok());
  EXPECT_EQ(Errno(fs_->Lookup(*dir, "f").status()), ENOENT);
}

TEST_P(DfsTest, OpenFlagsAndErrors) {
  Entry root = fs_->Root();
  EXPECT_EQ(Errno(fs_->Open(root, "missing", O_RDONLY).status()), ENOENT);
  Entry f = CreateFile(root, "f", "abc");
  EXPECT_EQ(Errno(fs_->Open(root, "f", O_CREAT | O_EXCL | O_RDWR).status()), EEXIST);
  auto again = fs_->Open(root, "f", O_CREAT | O_RDWR);  // plain O_CREAT opens the existing file
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->oid, f.oid);
  EXPECT_EQ(ReadAll(*again), "abc");
  auto trunc = fs_->Open(root, "f", O_RDWR | O_TRUNC);
  ASSERT_TRUE(trunc.ok()) << trunc.status().ToString();
  EXPECT_EQ(ReadAll(*trunc), "");
  EXPECT_EQ(fs_->Stat(*trunc)->size, 0u);

  auto dir = fs_->Mkdir(root, "d");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(Errno(fs_->Open(root, "d", O_CREAT | O_RDWR).status()), EISDIR);
  EXPECT_EQ(Errno(fs_->Open(root, "d", O_WRONLY).status()), EISDIR);
  EXPECT_TRUE(fs_->Open(root, "d", O_RDONLY).ok());
  EXPECT_EQ(Errno(fs_->Open(f, "x", O_CREAT | O_RDWR).status()), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Lookup(f, "x").status()), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Open(root, std::string(kMaxNameLength + 1, 'n'), O_CREAT | O_RDWR).status()), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Mkdir(root, std::string(kMaxNameLength + 1, 'n')).status()), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Open(root, "", O_CREAT | O_RDWR).status()), EINVAL);
  EXPECT_EQ(Errno(fs_->Open(root, "a/b", O_CREAT | O_RDWR).status()), EINVAL);
  EXPECT_EQ(Errno(fs_->Mkdir(root, "d").status()), EEXIST);
  EXPECT_EQ(Errno(fs_->Mkdir(root, "f").status()), EEXIST);
  std::vector<std::byte> buf(4);
  EXPECT_EQ(Errno(fs_->Read(*dir, 0, buf).status()), EISDIR);
  EXPECT_EQ(Errno(fs_->Write(*dir, 0, buf).status()), EISDIR);
  EXPECT_EQ(Errno(fs_->LookupPath("relative").status()), EINVAL);
  EXPECT_EQ(Errno(fs_->LookupPath("/f/x").status()), ENOTDIR);
  EXPECT_EQ(Errno(fs_->LookupPath("/nothing/x").status()), ENOENT);
  EXPECT_EQ(Errno(fs_->LookupPath("/" + std::string(kMaxPathLength, 'p')).status()), ENAMETOOLONG);
}

TEST_P(DfsDataTest, SparseMultiChunkFilesReadBackByteExact) {
  MountOptions small;
  small.chunk_size = 4096;
  auto fs = MountOrDie(small);
  ASSERT_NE(fs, nullptr);
  auto f = fs->Open(fs->Root(), "sparse", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->chunk_size, 4096u);
  // 10 KiB at 3000 (three chunks, unaligned) and 100 bytes at 50,000 (a hole between).
  auto a = Pattern(10 * 1024, 1), b = Pattern(100, 2);
  ASSERT_EQ(*fs->Write(*f, 3000, a), a.size());
  ASSERT_EQ(*fs->Write(*f, 50000, b), b.size());
  auto attr = fs->Stat(*f);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size, 50100u);
  EXPECT_EQ(attr->blksize, 4096u);
  std::vector<std::byte> all(60000, std::byte{0x55});
  auto n = fs->Read(*f, 0, all);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, 50100u);  // short at the end of the file
  for (size_t i = 0; i < 3000; ++i) ASSERT_EQ(all[i], std::byte{0}) << i;
  EXPECT_EQ(std::memcmp(all.data() + 3000, a.data(), a.size()), 0);
  for (size_t i = 3000 + a.size(); i < 50000; ++i) ASSERT_EQ(all[i], std::byte{0}) << i;
  EXPECT_EQ(std::memcmp(all.data() + 50000, b.data(), b.size()), 0);
  // Reads inside the file are full; at and past the end they are short / empty.
  std::vector<std::byte> mid(8000);
  EXPECT_EQ(*fs->Read(*f, 20000, mid), 8000u);
  EXPECT_EQ(*fs->Read(*f, 50050, mid), 50u);
  EXPECT_EQ(*fs->Read(*f, 50100, mid), 0u);
  EXPECT_EQ(*fs->Read(*f, 1 << 30, mid), 0u);
}

TEST_P(DfsTest, TruncateShrinksAndGrows) {
  MountOptions small;
  small.chunk_size = 4096;
  auto fs = MountOrDie(small);
  ASSERT_NE(fs, nullptr);
  auto f = fs->Open(fs->Root(), "t", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok());
  auto data = Pattern(20000, 3);
  ASSERT_TRUE(fs->Write(*f, 0, data).ok());
  ASSERT_TRUE(fs->Truncate(*f, 9000).ok());  // into the middle of chunk 2
  EXPECT_EQ(fs->Stat(*f)->size, 9000u);
  std::vector<std::byte> buf(30000);
  ASSERT_EQ(*fs->Read(*f, 0, buf), 9000u);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 9000), 0);
  ASSERT_TRUE(fs->Truncate(*f, 8192).ok());  // a chunk boundary
  EXPECT_EQ(fs->Stat(*f)->size, 8192u);
  ASSERT_TRUE(fs->Truncate(*f, 25000).ok());  // grow: the new part reads as zeros
  EXPECT_EQ(fs->Stat(*f)->size, 25000u);
  std::fill(buf.begin(), buf.end(), std::byte{0x77});
  ASSERT_EQ(*fs->Read(*f, 0, buf), 25000u);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 8192), 0);
  for (size_t i = 8192; i < 25000; ++i) ASSERT_EQ(buf[i], std::byte{0}) << i;
  // Shrink into the hole just made: the size is exact although no data ends there.
  ASSERT_TRUE(fs->Truncate(*f, 12000).ok());
  EXPECT_EQ(fs->Stat(*f)->size, 12000u);
  ASSERT_TRUE(fs->Truncate(*f, 0).ok());
  EXPECT_EQ(fs->Stat(*f)->size, 0u);
  SetAttrArgs sa;
  sa.mask = kSetSize;
  sa.size = 5;
  auto attr = fs->SetAttr(*f, sa);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size, 5u);
  auto dir = fs->Mkdir(fs->Root(), "dd");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(Errno(fs->Truncate(*dir, 0)), EISDIR);
}

// Short reads decided by the chunk fetches' array ends (docs/dfs.md): a read
// is full when the data reaches its end, short at the end of the file, and
// holes read as zeros, also while another client (its own connection and
// mount) extends, truncates and rewrites the file between this client's reads
// of chunks the engine has already served (and cached) to it.
TEST_P(DfsTest, ShortReadsFollowAnotherClientsExtendAndTruncate) {
  client::ClientOptions o;
  o.control = cluster_->control();
  o.secret_file = cluster_->admin_secret_file();
  o.transport = GetParam();
  if (Offload()) {
    o.agent_socket = cluster_->agent_socket();
    o.transport = "auto";
  }
  auto other_client = client::Client::Connect(o);
  ASSERT_TRUE(other_client.ok()) << other_client.status().ToString();
  auto other_pool = (*other_client)->ConnectPool("p");
  ASSERT_TRUE(other_pool.ok()) << other_pool.status().ToString();
  auto other_cont = (*other_pool)->OpenContainer(label_);
  ASSERT_TRUE(other_cont.ok()) << other_cont.status().ToString();
  MountOptions small;
  small.chunk_size = 4096;
  auto fs = MountOrDie(small);
  auto other = Filesystem::Mount(**other_cont, small);
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto f = fs->Open(fs->Root(), "shared", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto g = (*other)->Lookup((*other)->Root(), "shared");
  ASSERT_TRUE(g.ok()) << g.status().ToString();

  std::vector<std::byte> buf(16384);
  // Reads `len` bytes at `off` through `on` into buf (poisoned first); the count.
  auto read = [&](Filesystem& on, const Entry& e, uint64_t off, size_t len) -> uint64_t {
    std::fill(buf.begin(), buf.end(), std::byte{0xee});
    auto n = on.Read(e, off, std::span<std::byte>(buf).first(len));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : ~uint64_t{0};
  };
  auto zeros = [&](size_t from, size_t to) {
    return std::all_of(buf.begin() + static_cast<ptrdiff_t>(from), buf.begin() + static_cast<ptrdiff_t>(to),
                       [](std::byte b) { return b == std::byte{0}; });
  };

  // 10,000 bytes over chunks 0-2 from this client.
  const auto a = Pattern(10000, 7);
  ASSERT_EQ(*fs->Write(*f, 0, a), a.size());
  EXPECT_EQ(read(*fs, *f, 4000, 4096), 4096u);  // inside the file, across a chunk boundary
  EXPECT_EQ(std::memcmp(buf.data(), a.data() + 4000, 4096), 0);
  EXPECT_EQ(read(**other, *g, 9000, 4096), 1000u);  // across the end: short
  EXPECT_EQ(std::memcmp(buf.data(), a.data() + 9000, 1000), 0);
  EXPECT_EQ(read(**other, *g, 10000, 100), 0u);  // at the end
  EXPECT_EQ(read(*fs, *f, 12288, 100), 0u);      // past it, in a chunk never written

  // The other client extends the file past a hole: chunk 2 ends at 10000 then a
  // hole to 20000, where 300 bytes follow in chunk 4.
  const auto b = Pattern(300, 8);
  ASSERT_EQ(*(*other)->Write(*g, 20000, b), b.size());
  EXPECT_EQ(read(*fs, *f, 9000, 4096), 4096u);  // was short for it; now data then hole
  EXPECT_EQ(std::memcmp(buf.data(), a.data() + 9000, 1000), 0);
  EXPECT_TRUE(zeros(1000, 4096));
  EXPECT_EQ(read(*fs, *f, 13000, 2000), 2000u);  // all hole (chunk 3, never written), inside the file
  EXPECT_TRUE(zeros(0, 2000));
  EXPECT_EQ(read(*fs, *f, 16384, 3000), 3000u);  // the hole at the head of chunk 4, before its data
  EXPECT_TRUE(zeros(0, 3000));
  EXPECT_EQ(read(*fs, *f, 19000, 4096), 1300u);  // hole, then the data, then the end
  EXPECT_TRUE(zeros(0, 1000));
  EXPECT_EQ(std::memcmp(buf.data() + 1000, b.data(), 300), 0);

  // The other client truncates into chunk 1: chunks this client read (the
  // engine cached their extents) now end early or are gone.
  ASSERT_TRUE((*other)->Truncate(*g, 5000).ok());
  EXPECT_EQ(read(*fs, *f, 4000, 4096), 1000u);
  EXPECT_EQ(std::memcmp(buf.data(), a.data() + 4000, 1000), 0);
  EXPECT_EQ(read(*fs, *f, 9000, 4096), 0u);
  EXPECT_EQ(read(*fs, *f, 19000, 4096), 0u);
  EXPECT_EQ(fs->Stat(*f)->size, 5000u);

  // Truncated to nothing and rewritten shorter; then grown by truncate (a hole to the end).
  ASSERT_TRUE((*other)->Truncate(*g, 0).ok());
  EXPECT_EQ(read(*fs, *f, 0, 100), 0u);
  ASSERT_EQ(*(*other)->Write(*g, 0, std::span<const std::byte>(b).first(10)), 10u);
  EXPECT_EQ(read(*fs, *f, 0, 100), 10u);
  EXPECT_EQ(std::memcmp(buf.data(), b.data(), 10), 0);
  ASSERT_TRUE((*other)->Truncate(*g, 9000).ok());
  EXPECT_EQ(read(*fs, *f, 0, 16384), 9000u);
  EXPECT_EQ(std::memcmp(buf.data(), b.data(), 10), 0);
  EXPECT_TRUE(zeros(10, 9000));
  EXPECT_EQ(read(*fs, *f, 8000, 4096), 1000u);
  EXPECT_TRUE(zeros(0, 1000));
}

TEST_P(DfsTest, SetAttrChmodChownUtimens) {
  Entry root = fs_->Root();
  Entry f = CreateFile(root, "f", "data");
  SetAttrArgs sa;
  sa.mask = kSetMode | kSetUid | kSetGid | kSetAtime | kSetMtime;
  sa.mode = 0600;
  sa.uid = 1234;
  sa.gid = 99;
  sa.atime = {1000, 5};
  sa.mtime = {2000, 6};
  auto attr = fs_->SetAttr(f, sa);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  auto st = fs_->Stat(f);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->mode, S_IFREG | 0600u);
  EXPECT_EQ(st->uid, 1234u);
  EXPECT_EQ(st->gid, 99u);
  EXPECT_EQ(st->atime.tv_sec, 1000);
  EXPECT_EQ(st->atime.tv_nsec, 5);
  EXPECT_EQ(st->mtime.tv_sec, 2000);
  EXPECT_EQ(st->size, 4u);
  EXPECT_GT(st->ctime.tv_sec, 2000);
  sa.mask = kSetMtimeNow;
  auto now = fs_->SetAttr(f, sa);
  ASSERT_TRUE(now.ok());
  EXPECT_GT(now->mtime.tv_sec, 2000);
  sa.mask = kSetAtime;
  sa.atime = {1, 2'000'000'000};
  EXPECT_EQ(Errno(fs_->SetAttr(f, sa).status()), EINVAL);
  // chmod of the root lives in the superblock.
  sa.mask = kSetMode;
  sa.mode = 0711;
  auto root_attr = fs_->SetAttr(root, sa);
  ASSERT_TRUE(root_attr.ok()) << root_attr.status().ToString();
  EXPECT_EQ(fs_->Stat(root)->mode, S_IFDIR | 0711u);
  // Sync stamps a file's mtime.
  sa.mask = kSetMtime;
  sa.mtime = {3000, 0};
  ASSERT_TRUE(fs_->SetAttr(f, sa).ok());
  ASSERT_TRUE(fs_->Sync(f).ok());
  EXPECT_GT(fs_->Stat(f)->mtime.tv_sec, 3000);
}

TEST_P(DfsTest, PermissionBitsForAnotherUid) {
  Entry root = fs_->Root();
  SetAttrArgs open_root;
  open_root.mask = kSetMode;
  open_root.mode = 0777;
  ASSERT_TRUE(fs_->SetAttr(root, open_root).ok());
  CreateFile(root, "private", "secret");
  SetAttrArgs sa;
  sa.mask = kSetMode;
  sa.mode = 0600;
  ASSERT_TRUE(fs_->SetAttr(*fs_->Lookup(root, "private"), sa).ok());
  auto locked = fs_->Mkdir(root, "locked", 0755);
  ASSERT_TRUE(locked.ok());

  MountOptions user;
  user.uid = 1000;
  user.gid = 1000;
  auto ufs = MountOrDie(user);
  ASSERT_NE(ufs, nullptr);
  Entry uroot = ufs->Root();
  if (Offload()) {
    // Through the agent the owner is the uid the kernel names for this
    // process, never one the host asks for: the uid/gid of the options
    // are ignored, so nothing is refused to this (root) process.
    auto mine = ufs->Open(uroot, "mine", O_CREAT | O_RDWR, 0600);
    ASSERT_TRUE(mine.ok()) << mine.status().ToString();
    auto attr = ufs->Stat(*mine);
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(attr->uid, ::getuid());
    EXPECT_EQ(attr->gid, ::getgid());
    EXPECT_TRUE(ufs->Open(uroot, "private", O_RDONLY).ok());
    return;
  }
  EXPECT_EQ(Errno(ufs->Open(uroot, "private", O_RDONLY).status()), EACCES);
  EXPECT_EQ(Errno(ufs->Open(uroot, "private", O_WRONLY).status()), EACCES);
  auto ulocked = ufs->Lookup(uroot, "locked");
  ASSERT_TRUE(ulocked.ok());
  EXPECT_EQ(Errno(ufs->Open(*ulocked, "mine", O_CREAT | O_RDWR).status()), EACCES);
  EXPECT_EQ(Errno(ufs->Mkdir(*ulocked, "sub").status()), EACCES);
  EXPECT_EQ(Errno(ufs->SetAttr(*ufs->Lookup(uroot, "private"), sa).status()), EACCES);  // not the owner
  // What the user creates is the user's.
  auto mine = ufs->Open(uroot, "mine", O_CREAT | O_RDWR, 0600);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  auto attr = ufs->Stat(*mine);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->uid, 1000u);
  EXPECT_EQ(attr->gid, 1000u);
  EXPECT_TRUE(ufs->Write(*mine, 0, Bytes("ok")).ok());
}

TEST_P(DfsDataTest, AsyncReadsAndWritesWithManyInFlight) {
  MountOptions small;
  small.chunk_size = 64 * 1024;
  auto fs = MountOrDie(small);
  ASSERT_NE(fs, nullptr);
  auto f = fs->Open(fs->Root(), "async", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok());
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  constexpr int kRequests = 64;
  static constexpr size_t kSize = 100 * 1000;  // not chunk aligned: two or three chunks each
  auto data = Pattern(kRequests * kSize, 9);
  int callbacks = 0;
  for (int i = 0; i < kRequests; ++i) {
    std::span<const std::byte> part(data.data() + i * kSize, kSize);
    ASSERT_TRUE(fs->SubmitWrite(**eq, *f, i * kSize, part, [&callbacks](const client::IoResult& r) {
                    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
                    EXPECT_EQ(r.size, kSize);
                    ++callbacks;
                  }).ok());
  }
  std::array<client::Event, 1> none;
  while (callbacks < kRequests) ASSERT_TRUE((*eq)->Wait(none, 1, std::chrono::seconds(30)).ok() || callbacks > 0);
  EXPECT_EQ(callbacks, kRequests);
  // Read back, plus one request across the end of the file (short) and one past it.
  std::vector<std::byte> back(data.size() + kSize);
  callbacks = 0;
  uint64_t short_size = ~uint64_t{0}, past_size = ~uint64_t{0};
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(fs->SubmitRead(**eq, *f, i * kSize, std::span<std::byte>(back.data() + i * kSize, kSize),
                               [&callbacks](const client::IoResult& r) {
                                 EXPECT_TRUE(r.status.ok()) << r.status.ToString();
                                 EXPECT_EQ(r.size, kSize);
                                 ++callbacks;
                               })
                    .ok());
  }
  std::vector<std::byte> tail(kSize), past(kSize);
  ASSERT_TRUE(fs->SubmitRead(**eq, *f, data.size() - 10, tail, [&](const client::IoResult& r) {
                  EXPECT_TRUE(r.status.ok());
                  short_size = r.size;
                  ++callbacks;
                }).ok());
  ASSERT_TRUE(fs->SubmitRead(**eq, *f, data.size() + 5, past, [&](const client::IoResult& r) {
                  EXPECT_TRUE(r.status.ok());
                  past_size = r.size;
                  ++callbacks;
                }).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (callbacks < kRequests + 2 && std::chrono::steady_clock::now() < deadline) {
    (void)(*eq)->Wait(none, 1, std::chrono::milliseconds(100));
  }
  ASSERT_EQ(callbacks, kRequests + 2);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  EXPECT_EQ(short_size, 10u);
  EXPECT_EQ(past_size, 0u);
  EXPECT_EQ(std::memcmp(tail.data(), data.data() + data.size() - 10, 10), 0);
}

TEST_P(DfsTest, StatfsReportsThePoolSpace) {
  auto s = fs_->Statfs();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->block_size, 4096u);
  EXPECT_GE(s->blocks * s->block_size, uint64_t{100} << 20);  // the 128 MiB pool
  EXPECT_LE(s->blocks_free, s->blocks);
  EXPECT_EQ(s->name_max, kMaxNameLength);
}

TEST_P(DfsTest, FillingTheStoreIsEnospc) {
  // One-shard files put every chunk on one target, whose 64 MiB store fills.
  MountOptions one_target;
  one_target.file_class = ObjectClass::kS1;
  auto fs = MountOrDie(one_target);
  ASSERT_NE(fs, nullptr);
  auto f = fs->Open(fs->Root(), "big", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok());
  auto chunk = Pattern(kDefaultChunkSize, 4);
  Status st;
  uint64_t written = 0;
  for (int i = 0; i < 200 && st.ok(); ++i) {
    st = fs->Write(*f, written, chunk).status();
    if (st.ok()) written += chunk.size();
  }
  ASSERT_FALSE(st.ok()) << "wrote " << written << " bytes without running out of space";
  EXPECT_EQ(Errno(st), ENOSPC) << st.ToString();
  EXPECT_GT(written, uint64_t{16} << 20);
  // The namespace still answers, and the data written before is intact.
  EXPECT_EQ(fs->Stat(*f)->size, written);
  std::vector<std::byte> back(chunk.size());
  ASSERT_EQ(*fs->Read(*f, 0, back), back.size());
  EXPECT_EQ(back, chunk);
}

INSTANTIATE_TEST_SUITE_P(Shm, DfsTest, ::testing::Values("shm"), [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Offload, DfsTest, ::testing::Values("offload-shm"), [](const auto&) {
  return std::string("offload_shm");
});
INSTANTIATE_TEST_SUITE_P(Transports, DfsDataTest,
                         ::testing::Values("tcp", "shm", "offload-tcp", "offload-shm", "ofi-tcp", "ofi-shm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ros2::dfs
