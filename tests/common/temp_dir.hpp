// A fresh directory for one test, removed with everything in it when the
// object goes away. It lives under /dev/shm: rings live on tmpfs in
// production, and the tools under test default to that directory.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace ringcast::test {

class TempDir {
 public:
  // Throws std::runtime_error if the directory cannot be made (the test fails).
  TempDir() {
    std::string tmpl = "/dev/shm/ringcast-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Never throws; an error leaves the directory behind.
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  [[nodiscard]] const std::string& path() const { return path_; }
  // path() + "/" + name.
  [[nodiscard]] std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// Each file directly in `dir`, by name, with its bytes: two of these compared
// show that something left a directory as it was.
inline std::map<std::string, std::string> file_contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    files[e.path().filename().string()] = ss.str();
  }
  return files;
}

}  // namespace ringcast::test
