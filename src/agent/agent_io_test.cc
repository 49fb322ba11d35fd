// Offload mode: namespace operations and data through the agent's rings,
// concurrent callers, large I/O, encrypted containers (agent_test_support.h).
#include "agent/agent_test_support.h"

namespace ros2::agent::test {
namespace {

// Many reads in flight through the batch API (completions in any order),
// then one reaped without waiting.
void BatchReads(HostSession& h, uint32_t mi, const dfs::Entry& file, const std::vector<std::byte>& expect) {
  // Many reads in flight through the batch API, completions in any order.
  std::vector<IoRequest> reqs;
  auto batch = h.Allocate(32 * 4096);
  ASSERT_TRUE(batch.ok());
  for (uint64_t i = 0; i < 32; ++i) {
    IoRequest q;
    q.kind = RingOp::kRead;
    q.mount = mi;
    q.file = &file;
    q.offset = i * 13'001;
    q.buffer = std::span<std::byte>(batch->data + i * 4096, 4096);
    q.user_data = 1000 + i;
    reqs.push_back(q);
  }
  ASSERT_TRUE(h.Submit(reqs).ok());
  std::vector<IoCompletion> done(32);
  size_t got = 0;
  while (got < 32) {
    auto n = h.Reap(std::span<IoCompletion>(done).subspan(got), 1, std::chrono::seconds(30));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got += *n;
  }
  std::set<uint64_t> seen;
  for (const auto& c : done) {
    ASSERT_TRUE(c.status.ok()) << c.status.ToString();
    uint64_t i = c.user_data - 1000;
    seen.insert(i);
    EXPECT_EQ(c.size, 4096u);
    EXPECT_TRUE(std::memcmp(batch->data + i * 4096, expect.data() + i * 13'001, 4096) == 0) << i;
  }
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_EQ(h.batch_in_flight(), 0u);
  // Reaping without waiting (timeout 0) still collects what has come.
  ASSERT_TRUE(h.Submit(std::span<const IoRequest>(reqs.data(), 1)).ok());
  size_t reaped = 0;
  for (auto until = Clock::now() + std::chrono::seconds(10); reaped == 0 && Clock::now() < until;) {
    auto n = h.Reap(std::span<IoCompletion>(done).first(1), 1, std::chrono::milliseconds(0));
    if (n.ok()) reaped = *n;
  }
  EXPECT_EQ(reaped, 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status.ToString();
  h.Free(*batch);
}

TEST_P(AgentTest, NamespaceAndDataRoundTrip) {
  auto s = Connect();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  EXPECT_EQ(h.tenant(), "admin");
  dfs::MountOptions mo;
  mo.chunk_size = 64 * 1024;  // small chunks: the I/O below crosses many
  auto m = h.Mount("p", "adminc", mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const uint32_t mi = m->index;
  const dfs::Entry root = m->root;
  EXPECT_TRUE(root.is_dir());

  const std::string dname = fmt::format("d-{}", GetParam());
  auto dir = h.Mkdir(mi, root, dname, 0750);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(h.Mkdir(mi, root, dname).status().code(), Status::Code::kAlreadyExists);
  bool created = false;
  auto f = h.Open(mi, *dir, "data.bin", O_CREAT | O_RDWR, 0640, &created);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(f->chunk_size, 64u * 1024);

  // Odd offsets and sizes across chunk boundaries: from an ordinary buffer
  // (copied through the arena) and from an arena buffer (zero-copy).
  const auto a = Pattern(200'001, 1);
  auto w1 = h.Write(mi, *f, 12'345, a);
  ASSERT_TRUE(w1.ok()) << w1.status().ToString();
  EXPECT_EQ(*w1, a.size());
  auto abuf = h.Allocate(131'071);
  ASSERT_TRUE(abuf.ok());
  const auto b = Pattern(131'071, 2);
  std::memcpy(abuf->data, b.data(), b.size());
  auto w2 = h.Write(mi, *f, 300'007, std::span<const std::byte>(abuf->data, b.size()));
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();

  std::vector<std::byte> expect(300'007 + b.size());
  std::memcpy(expect.data() + 12'345, a.data(), a.size());
  std::memcpy(expect.data() + 300'007, b.data(), b.size());
  auto st = h.Stat(mi, *f);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, expect.size());
  EXPECT_TRUE(S_ISREG(st->mode));

  std::vector<std::byte> back(expect.size() + 1000);
  auto r1 = h.Read(mi, *f, 0, back);  // past the end: short
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_EQ(*r1, expect.size());
  EXPECT_TRUE(std::memcmp(back.data(), expect.data(), expect.size()) == 0);
  auto rb = h.Allocate(99'999);
  ASSERT_TRUE(rb.ok());
  auto r2 = h.Read(mi, *f, 65'535, std::span<std::byte>(rb->data, 99'999));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(*r2, 99'999u);
  EXPECT_TRUE(std::memcmp(rb->data, expect.data() + 65'535, 99'999) == 0);

  BatchReads(h, mi, *f, expect);
  // The agent had several of them in flight at once.
  size_t max_in_flight = 0;
  bool shared_segment = false;
  const nlohmann::json status = AgentStatus();
  for (const auto& sess : status["sessions"]) {
    if (sess["id"].get<uint64_t>() == h.id()) {
      max_in_flight = sess["max_in_flight"].get<size_t>();
      shared_segment = sess["shared_segment"].get<bool>();
    }
  }
  EXPECT_GE(max_in_flight, 16u) << status.dump();  // a batch is in flight before any of it completes
  // The region is a shared segment: the engine moves bulk to and from the arena itself.
  EXPECT_TRUE(shared_segment) << status.dump();

  // Names: rename, readdir, lookup, symlink, setattr, truncate, unlink, rmdir.
  ASSERT_TRUE(h.Rename(mi, *dir, "data.bin", *dir, "moved.bin").ok());
  EXPECT_EQ(h.Lookup(mi, *dir, "data.bin").status().code(), Status::Code::kNotFound);
  auto moved = h.LookupWithAttr(mi, *dir, "moved.bin");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->second.size, expect.size());
  auto link = h.Symlink(mi, *dir, "ln", "moved.bin");
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  auto target = h.Readlink(mi, *link);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(*target, "moved.bin");
  ASSERT_TRUE(h.Mkdir(mi, *dir, "sub").ok());
  std::set<std::string> names;
  dfs::DirAnchor anchor;
  while (!anchor.eof) {
    auto page = h.Readdir(mi, *dir, anchor, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& d : *page) names.insert(d.name);
  }
  EXPECT_EQ(names, (std::set<std::string>{"moved.bin", "ln", "sub"}));
  auto by_path = h.LookupPath(mi, "/" + dname + "/sub");
  ASSERT_TRUE(by_path.ok()) << by_path.status().ToString();
  EXPECT_TRUE(by_path->is_dir());
  dfs::SetAttrArgs sa;
  sa.mask = dfs::kSetMode;
  sa.mode = 0600;
  auto attr = h.SetAttr(mi, moved->first, sa);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->mode & 07777, 0600u);
  ASSERT_TRUE(h.Truncate(mi, moved->first, 10).ok());
  EXPECT_EQ(h.Stat(mi, moved->first)->size, 10u);
  EXPECT_TRUE(h.Sync(mi, moved->first).ok());
  auto sfs = h.Statfs(mi);
  ASSERT_TRUE(sfs.ok()) << sfs.status().ToString();
  EXPECT_GT(sfs->blocks, 0u);
  EXPECT_EQ(h.Rmdir(mi, *dir, "moved.bin").code(), Status::Code::kNotDirectory);
  Status not_empty = h.Rmdir(mi, root, dname);
  EXPECT_EQ(not_empty.code(), Status::Code::kNotEmpty) << not_empty.ToString();
  EXPECT_NE(not_empty.message().find(dname), std::string::npos) << not_empty.ToString();  // the agent's message
  ASSERT_TRUE(h.Unlink(mi, *dir, "moved.bin").ok());
  ASSERT_TRUE(h.Unlink(mi, *dir, "ln").ok());
  ASSERT_TRUE(h.Rmdir(mi, *dir, "sub").ok());
  ASSERT_TRUE(h.Rmdir(mi, root, dname).ok());
  EXPECT_EQ(h.Lookup(mi, root, dname).status().code(), Status::Code::kNotFound);
  // Mount options travel: files of a second mount get its object class.
  dfs::MountOptions s1;
  s1.file_class = ObjectClass::kS1;
  auto m2 = h.Mount("p", "adminc", s1);
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  EXPECT_NE(m2->index, mi);
  auto f1 = h.Open(m2->index, m2->root, fmt::format("s1-{}", GetParam()), O_CREAT | O_RDWR);
  ASSERT_TRUE(f1.ok()) << f1.status().ToString();
  EXPECT_EQ(f1->oid.object_class(), ObjectClass::kS1);
  EXPECT_TRUE(h.Unlink(m2->index, m2->root, f1->name).ok());
  EXPECT_TRUE(h.Unmount(m2->index).ok());
  h.Free(*abuf);
  h.Free(*rb);
  EXPECT_TRUE(h.Unmount(mi).ok());
  EXPECT_EQ(h.Stat(mi, root).status().code(), Status::Code::kInvalidArgument);  // the mount is gone
}

// One session used by several threads at once (one polls, the others are
// handed their completions), and I/O larger than one entry may span (the
// library splits it).
TEST_P(AgentTest, ConcurrentCallersAndLargeIo) {
  auto s = Connect(uint64_t{40} << 20);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  dfs::MountOptions mo;
  mo.chunk_size = 4096;
  auto m = h.Mount("p", "adminc", mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string dname = fmt::format("conc-{}", GetParam());
  auto dir = h.Mkdir(m->index, m->root, dname);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  // 17 MiB at 4 KiB chunks: more than kMaxChunksPerIo chunks in one call.
  const uint64_t big_size = (kMaxChunksPerIo + 256) * 4096 + 123;
  auto big = h.Allocate(big_size);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const auto pattern = Pattern(big_size, 77);
  std::memcpy(big->data, pattern.data(), big_size);
  auto f = h.Open(m->index, *dir, "big", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto w = h.Write(m->index, *f, 5, std::span<const std::byte>(big->data, big_size));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(*w, big_size);
  std::memset(big->data, 0, big_size);
  auto r = h.Read(m->index, *f, 5, std::span<std::byte>(big->data, big_size));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, big_size);
  EXPECT_TRUE(std::memcmp(big->data, pattern.data(), big_size) == 0);
  h.Free(*big);

  std::atomic<int> failures{0};
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto file = h.Open(m->index, *dir, fmt::format("t{}", t), O_CREAT | O_RDWR);
      if (!file.ok()) {
        errors[t] = file.status().ToString();
        ++failures;
        return;
      }
      for (int i = 0; i < 25; ++i) {
        const auto data = Pattern(10'000 + i, t * 100 + i);
        const uint64_t off = static_cast<uint64_t>(i) * 777;
        auto put = h.Write(m->index, *file, off, data);
        std::vector<std::byte> back(data.size());
        auto got = h.Read(m->index, *file, off, back);
        if (!put.ok() || !got.ok() || back != data) {
          errors[t] = fmt::format("iteration {}: {} / {}", i, put.status().ToString(), got.status().ToString());
          ++failures;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << errors[0] << errors[1] << errors[2] << errors[3];
}

// Inline encryption at the agent: it mounts an encrypted container with the
// key it holds (the host sends none), the engine stores the shared block
// format, a direct-mode client with the key reads the same plaintext and one
// without it is refused; a container the agent holds no key for is refused
// with the reason.
TEST_P(AgentTest, EncryptedContainerWithTheAgentsKey) {
  auto s = Connect();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  auto m = h.Mount("p", "secretc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string name = "enc-" + GetParam();
  auto f = h.Open(m->index, m->root, name, O_CREAT | O_RDWR, 0600);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto data = Pattern(3 * 4096 + 123, 7);
  ASSERT_TRUE(h.Write(m->index, *f, 1000, data).ok());
  const auto patch = Pattern(10, 8);
  ASSERT_TRUE(h.Write(m->index, *f, 5000, patch).ok());  // inside a block: read-modify-write at the agent
  std::vector<std::byte> want(1000 + data.size());
  std::copy(data.begin(), data.end(), want.begin() + 1000);
  std::copy(patch.begin(), patch.end(), want.begin() + 5000);
  std::vector<std::byte> got(want.size() + 10);
  auto n = h.Read(m->index, *f, 0, got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, want.size());
  got.resize(*n);
  EXPECT_EQ(got, want);

  // Direct mode, beside the agent.
  client::ClientOptions o;
  o.control = setup_->cluster->control();
  o.secret_file = setup_->cluster->admin_secret_file();
  o.transport = GetParam();
  auto direct = client::Client::Connect(o);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  auto pool = (*direct)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("secretc");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  EXPECT_EQ(dfs::Filesystem::Mount(**cont, {}).status().code(), Status::Code::kPermissionDenied);
  dfs::MountOptions keyed;
  keyed.encryption_key_file = setup_->cluster->dir() + "/admin.key";
  auto fs = dfs::Filesystem::Mount(**cont, keyed);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto df = (*fs)->Lookup((*fs)->Root(), name);
  ASSERT_TRUE(df.ok()) << df.status().ToString();
  std::vector<std::byte> back(want.size());
  auto dn = (*fs)->Read(*df, 0, back);
  ASSERT_TRUE(dn.ok()) << dn.status().ToString();
  EXPECT_EQ(back, want);
  // What the engine stores for the file is not the plaintext.
  auto raw = (*cont)->OpenObject(df->oid);
  ASSERT_TRUE(raw.ok());
  auto dkeys = raw->ListDkeys();
  ASSERT_TRUE(dkeys.ok()) << dkeys.status().ToString();
  ASSERT_FALSE(dkeys->empty());
  for (const std::string& dkey : *dkeys) {
    auto akeys = raw->ListAkeys(dkey);
    ASSERT_TRUE(akeys.ok()) << akeys.status().ToString();
    for (const std::string& akey : *akeys) {
      client::FetchArgs fa;
      fa.dkey = dkey;
      fa.akey = akey;
      fa.kind = ValueType::kArray;
      fa.record_size = dfs::kBlockRecordSize;  // the encrypted-file records (dfs/file_crypto.h)
      fa.count = 16;
      std::vector<std::byte> stored(fa.count * fa.record_size);
      fa.buffer = stored;
      auto fetched = raw->Fetch(fa);
      ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
      EXPECT_EQ(std::search(stored.begin(), stored.end(), data.begin(), data.begin() + 64), stored.end())
          << "plaintext found under dkey " << dkey.size() << " bytes, akey " << akey;
    }
  }

  // A container the agent holds no key for.
  auto none = h.Mount("p", "secret2");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kPermissionDenied) << none.status().ToString();
  EXPECT_NE(none.status().message().find("key"), std::string::npos) << none.status().ToString();
}

}  // namespace
}  // namespace ros2::agent::test
