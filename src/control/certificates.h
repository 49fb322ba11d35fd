// Cluster certificates for the control plane's TLS (OpenSSL's C API).
//
// A cluster has one certificate authority: a P-256 key and a self-signed CA
// certificate. Every engine with a TCP control listener gets a certificate
// signed by it, naming the engine's host names and addresses; engines that
// join it and clients that dial it trust the CA certificate (gRPC's
// SslCredentials with the CA as root). `ros2ctl cert ...` and `ros2ctl cluster
// up --listen` make them. Every file is written with mode 0600 (replaced
// atomically through a temporary file).
//
// Free functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::control {

// File names inside a certificate directory.
inline constexpr const char* kCaCertFile = "ca.crt";
inline constexpr const char* kCaKeyFile = "ca.key";
inline constexpr const char* kEngineCertFile = "engine.crt";
inline constexpr const char* kEngineKeyFile = "engine.key";

struct CertificateOptions {
  std::string common_name;         // the subject CN
  std::vector<std::string> names;  // subject alternative names: host names or IP addresses
  int days = 825;                  // validity
};

// Creates DIR/ca.crt and DIR/ca.key (DIR is created, mode 0700). AlreadyExists
// when DIR/ca.key exists (a CA is never replaced silently).
Status CreateCertificateAuthority(const std::string& dir, const CertificateOptions& options);

// Signs a new key's certificate with the CA in `ca_dir` and writes it to
// `cert_path` and `key_path`. `options.names` become the subject alternative
// names (an IP address as IP, anything else as DNS).
Status IssueCertificate(const std::string& ca_dir, const CertificateOptions& options, const std::string& cert_path,
                        const std::string& key_path);

// The certificates of a local cluster with a TCP listener, made when missing:
// DIR/ca.{crt,key} and DIR/engine.{crt,key} for `names` (plus localhost,
// 127.0.0.1 and ::1).
Status EnsureClusterCertificates(const std::string& dir, const std::vector<std::string>& names);

}  // namespace ros2::control
