#include "control/certificates.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

namespace ros2::control {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

Status Fail(std::string_view what) {
  return Status::Internal(fmt::format("certificates: {} failed (OpenSSL)", what));
}

// Writes `text` to `path` with mode 0600 through a temporary file.
Status WritePrivateFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("certificates: create {}", tmp));
  Status st;
  if (::fchmod(fd, 0600) != 0) {
    st = Status::FromErrno(errno, fmt::format("certificates: chmod 0600 {}", tmp));
  } else if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    st = Status::FromErrno(errno == 0 ? EIO : errno, fmt::format("certificates: write {}", tmp));
  } else if (::fsync(fd) != 0) {
    st = Status::FromErrno(errno, fmt::format("certificates: fsync {}", tmp));
  }
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::FromErrno(errno, fmt::format("certificates: rename {} to {}", tmp, path));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(fmt::format("certificates: cannot read {}", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Fail(fmt::format("extension '{}'", value));
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok ? Status::Ok() : Fail("adding an extension");
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 || ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// A new certificate for `key`, its subject CN and validity set, not signed.
Result<CertPtr> NewCertificate(EVP_PKEY* key, const CertificateOptions& o) {
  CertPtr cert(X509_new());
  if (!cert) return Fail("X509_new");
  X509_set_version(cert.get(), 2);
  // A random 127-bit serial: certificates of one CA never share one.
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Fail("serial number");
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(o.days) * 86400);
  if (X509_set_pubkey(cert.get(), key) != 1) return Fail("X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string cn = o.common_name.empty() ? "ros2" : o.common_name;
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("ROS2 cluster"), -1, -1,
                             0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Fail("writing the key");
  }
  return BioText(bio.get());
}

Result<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return Fail("writing the certificate");
  return BioText(bio.get());
}

std::string PathIn(const std::string& dir, const char* name) {
  return (std::filesystem::path(dir) / name).string();
}

Status MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("certificates: create {}: {}", dir, ec.message()));
  ::chmod(dir.c_str(), 0700);
  return Status::Ok();
}

}  // namespace

Status CreateCertificateAuthority(const std::string& dir, const CertificateOptions& options) {
  ROS2_RETURN_IF_ERROR(MakeDir(dir));
  const std::string key_path = PathIn(dir, kCaKeyFile);
  if (std::filesystem::exists(key_path)) {
    return Status::AlreadyExists(fmt::format("certificates: a CA key already exists at {}", key_path));
  }
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Fail("generating the CA key");
  CertificateOptions o = options;
  if (o.common_name.empty()) o.common_name = "ROS2 cluster CA";
  if (o.days < 1) return Status::InvalidArgument(fmt::format("certificates: {} days of validity", o.days));
  ROS2_ASSIGN_OR_RETURN(CertPtr cert, NewCertificate(key.get(), o));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return Fail("signing the CA certificate");
  ROS2_ASSIGN_OR_RETURN(std::string key_pem, KeyPem(key.get()));
  ROS2_ASSIGN_OR_RETURN(std::string cert_pem, CertPem(cert.get()));
  ROS2_RETURN_IF_ERROR(WritePrivateFile(key_path, key_pem));
  return WritePrivateFile(PathIn(dir, kCaCertFile), cert_pem);
}

Status IssueCertificate(const std::string& ca_dir, const CertificateOptions& options, const std::string& cert_path,
                        const std::string& key_path) {
  if (options.names.empty()) return Status::InvalidArgument("certificates: give at least one host name or address");
  if (options.days < 1) return Status::InvalidArgument(fmt::format("certificates: {} days of validity", options.days));
  ROS2_ASSIGN_OR_RETURN(std::string ca_cert_pem, ReadText(PathIn(ca_dir, kCaCertFile)));
  ROS2_ASSIGN_OR_RETURN(std::string ca_key_pem, ReadText(PathIn(ca_dir, kCaKeyFile)));
  BioPtr cert_bio(BIO_new_mem_buf(ca_cert_pem.data(), static_cast<int>(ca_cert_pem.size())));
  BioPtr key_bio(BIO_new_mem_buf(ca_key_pem.data(), static_cast<int>(ca_key_pem.size())));
  CertPtr ca_cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  KeyPtr ca_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!ca_cert || !ca_key) {
    return Status::InvalidArgument(
        fmt::format("certificates: {} does not hold a readable CA (ca.crt, ca.key)", ca_dir));
  }
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    return Status::InvalidArgument(fmt::format("certificates: ca.key in {} does not match ca.crt", ca_dir));
  }
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Fail("generating a key");
  CertificateOptions o = options;
  if (o.common_name.empty()) o.common_name = o.names.front();
  ROS2_ASSIGN_OR_RETURN(CertPtr cert, NewCertificate(key.get(), o));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  std::string san;
  for (const auto& n : o.names) {
    if (n.empty() || n.find(',') != std::string::npos) {
      return Status::InvalidArgument(fmt::format("certificates: bad host name '{}'", n));
    }
    san += fmt::format("{}{}:{}", san.empty() ? "" : ",", IsIpAddress(n) ? "IP" : "DNS", n);
  }
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  ROS2_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_subject_alt_name, san));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return Fail("signing the certificate");
  ROS2_ASSIGN_OR_RETURN(std::string key_pem, KeyPem(key.get()));
  ROS2_ASSIGN_OR_RETURN(std::string cert_pem, CertPem(cert.get()));
  ROS2_RETURN_IF_ERROR(WritePrivateFile(key_path, key_pem));
  return WritePrivateFile(cert_path, cert_pem);
}

Status EnsureClusterCertificates(const std::string& dir, const std::vector<std::string>& names) {
  if (!std::filesystem::exists(PathIn(dir, kCaKeyFile))) {
    ROS2_RETURN_IF_ERROR(CreateCertificateAuthority(dir, {}));
  }
  if (std::filesystem::exists(PathIn(dir, kEngineCertFile)) && std::filesystem::exists(PathIn(dir, kEngineKeyFile))) {
    return Status::Ok();
  }
  CertificateOptions o;
  o.names = names;
  for (const char* n : {"localhost", "127.0.0.1", "::1"}) {
    if (std::find(o.names.begin(), o.names.end(), n) == o.names.end()) o.names.push_back(n);
  }
  return IssueCertificate(dir, o, PathIn(dir, kEngineCertFile), PathIn(dir, kEngineKeyFile));
}

}  // namespace ros2::control
